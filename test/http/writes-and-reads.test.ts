// Big writes do not stall reads (issue 10): while a merchant-wide re-pricing runs, reads are
// answered, and every one of them shows the catalog as it was before (the write is one
// transaction: nobody sees half of it). Ordering, not timing: how fast is measured by
// `npm run bench:writes`.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDemoCatalog } from '../../src/admin/demo.js';
import { ADMIN_TOKEN, startTestService, type TestService } from '../support/service.js';

let service: TestService;
let key: string;
let merchantId: number;

beforeAll(async () => {
  // Small steps, so the re-pricing spans many turns of the event loop.
  service = await startTestService({ config: { limits: { publishChunk: 100 } } });
  const demo = await buildDemoCatalog(service.admin, 5000);
  key = demo.api_key;
  merchantId = demo.merchant_id;
}, 120_000);
afterAll(() => service.close());

describe('a re-pricing of the whole catalog', () => {
  it('lets reads through while it runs, each showing the catalog as it was before it', async () => {
    const page = () => fetch(`${service.url}/v1/products?store=uk&per_page=5&page=30`, { headers: { Authorization: `Bearer ${key}` } })
      .then(async (response) => ({ status: response.status, body: await response.text() }));
    const before = await page();
    expect(before.status).toBe(200);

    let repricingDone = false;
    const repricing = fetch(`${service.url}/admin/v1/merchants/${merchantId}/exchange-rates/EUR/GBP`, {
      method: 'PUT',
      headers: { Authorization: `Bearer ${ADMIN_TOKEN}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ rate: '0.9123' }),
    }).then((response) => {
      repricingDone = true;
      return response.status;
    });

    // Reads one after another until the re-pricing answers. The first may be served before the
    // re-pricing's transaction opens; every later one started after the first had come back,
    // while the re-pricing was still to answer: it was served while the transaction was open.
    const during: { status: number; body: string }[] = [];
    while (!repricingDone) {
      const read = await page();
      if (!repricingDone) during.push(read);
    }
    expect(await repricing).toBe(200);
    expect(during.length).toBeGreaterThan(1);
    for (const read of during) {
      expect(read.status).toBe(200);
      expect(read.body).toBe(before.body);
    }

    const after = await page();
    expect(after.body).not.toBe(before.body);
  }, 60_000);
});
