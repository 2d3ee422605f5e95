// A line that sends a product's source again unchanged changes nothing: no change in the feed and
// the same payloads, with or without re-resolving it; a line that sends again what an earlier line
// of the same chunk changed still publishes that change.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { adminOk, createMerchant, importNdjson, simpleProduct, type MerchantHandle } from '../support/admin-http.js';
import { startTestService, type TestService } from '../support/service.js';

let service: TestService;
let merchant: MerchantHandle;
let storeId: number;

beforeAll(async () => {
  service = await startTestService();
  merchant = await createMerchant(service, 'Unchanged Outfitters');
  await adminOk(service, 'PUT', `${merchant.base}/stores/de`, { name: 'DE', locale: 'de-DE', currency: 'EUR' });
  await adminOk(service, 'PUT', `${merchant.base}/suppliers/alpine`, { name: 'Alpine' });
  storeId = (await service.storage.listStores(merchant.id))[0]!.id;
});
afterAll(() => service.close());

const ndjson = (lines: object[]) => `${lines.map((line) => JSON.stringify(line)).join('\n')}\n`;
const idOf = async (ref: string) => (await service.storage.productsAfter(merchant.id, 0, 1000)).find((p) => p.ref === ref)!.id;
const payload = async (ref: string) => Buffer.from((await service.storage.publishedPayload(storeId, await idOf(ref)))!).toString('utf8');

it('re-importing the same file records no change and keeps every payload as it was', async () => {
  const file = ndjson([simpleProduct('SAME-1', '10.00'), simpleProduct('SAME-2', '20.00')]);
  const first = await importNdjson(service, merchant.id, file);
  expect(first.status, first.text).toBe(200);
  const position = await service.storage.latestFeedPosition(merchant.id);
  const before = [await payload('SAME-1'), await payload('SAME-2')];
  const again = await importNdjson(service, merchant.id, file);
  expect(again.status, again.text).toBe(200);
  expect(again.body).toMatchObject({ upserted: 2, deleted: 0 });
  expect(await service.storage.latestFeedPosition(merchant.id)).toEqual(position);
  expect([await payload('SAME-1'), await payload('SAME-2')]).toEqual(before);
});

it('a line sending again what an earlier line of its chunk changed still publishes the change', async () => {
  const retitled = (title: string) => {
    const line = simpleProduct('TWICE-1');
    return { ...line, product: { ...line.product, content: { de: { title, description: null } } } };
  };
  await importNdjson(service, merchant.id, ndjson([retitled('Zelt')]));
  const position = await service.storage.latestFeedPosition(merchant.id);
  const id = await idOf('TWICE-1');
  const before = (await service.storage.publishedHashes(storeId, [id])).get(id);
  const response = await importNdjson(service, merchant.id, ndjson([retitled('Zelt neu'), retitled('Zelt neu')]));
  expect(response.status, response.text).toBe(200);
  expect(JSON.parse(await payload('TWICE-1')).title).toBe('Zelt neu');
  expect((await service.storage.publishedHashes(storeId, [id])).get(id)!.contentHash).not.toBe(before!.contentHash);
  const latest = await service.storage.latestFeedPosition(merchant.id);
  expect(latest!.id).toBeGreaterThan(position!.id);
});
