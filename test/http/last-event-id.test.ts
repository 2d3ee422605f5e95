// A stream's Last-Event-ID is read by the parser that reads `since` and `since_id` (spec 4.4,
// cursor rule 1; openapi/components/parameters/LastEventIdParam.yaml): a date the calendar does
// not have (2025-02-30, 2025-02-29, 2025-04-31) or hour 24 is refused with the 400 `since` answers,
// never turned into another cursor; a real one (2024-02-29, a leap day) resumes as `since` does.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminOk, createMerchant, type MerchantHandle } from '../support/admin-http.js';
import { startTestService, type TestService } from '../support/service.js';

let service: TestService;
let merchant: MerchantHandle;

beforeAll(async () => {
  service = await startTestService();
  merchant = await createMerchant(service, 'Calendar Outfitters');
  await adminOk(service, 'PUT', `${merchant.base}/stores/de`, { name: 'DE', locale: 'de-DE', currency: 'EUR' });
  await adminOk(service, 'PUT', `${merchant.base}/suppliers/alpine`, { name: 'Alpine' });
  await adminOk(service, 'PUT', `${merchant.base}/products/TENT-1`, { content: { de: { title: 'Zelt' } } });
});
afterAll(() => service.close());

const withLastEventId = (lastEventId: string, accept = 'application/json') =>
  service.api('/v1/changes?store=de', merchant.key, { headers: { 'Last-Event-ID': lastEventId, Accept: accept } });

describe('Last-Event-ID is read as since is', () => {
  it.each(['2025-02-30T00:00:00Z', '2025-02-29T12:00:00Z', '2025-04-31T00:00:00Z', '2025-03-14T24:00:00Z', '2025-13-01T00:00:00Z'])(
    'refuses %s with the 400 since answers, as JSON and as a stream',
    async (instant) => {
      const since = await service.api(`/v1/changes?store=de&since=${encodeURIComponent(instant)}&since_id=3`, merchant.key);
      expect(since.status).toBe(400);
      expect(since.body).toMatchObject({ code: 'invalid_parameter', invalid_params: [{ name: 'since', in: 'query' }] });
      for (const accept of ['application/json', 'text/event-stream']) {
        const response = await withLastEventId(`${instant}/3`, accept);
        expect(response.status, `${accept}: ${response.text}`).toBe(400);
        expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
        expect(response.body).toMatchObject({
          code: 'invalid_parameter',
          invalid_params: [{ name: 'last-event-id', in: 'header', reason: expect.stringMatching(/date-time/) }],
        });
      }
    },
  );

  it('resumes from a real leap day and the last second of a day exactly as since and since_id do', async () => {
    for (const instant of ['2024-02-29T00:00:00Z', '2025-03-14T23:59:59Z', '2000-02-29T10:00:00Z']) {
      const since = await service.api(`/v1/changes?store=de&since=${instant}&since_id=3`, merchant.key);
      const header = await withLastEventId(`${instant}/3`);
      expect(header.status, header.text).toBe(200);
      expect(header.body).toEqual(since.body);
    }
  });
});
