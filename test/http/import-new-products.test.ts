// A chunk's products created by the import have no payloads yet: none is looked for (no published
// hashes read for them, their payloads inserted without a conflict check on PostgreSQL), and the
// chunk reads the merchant's webhook endpoints once for all of its stores. What they publish is what
// publishing them one at a time gives: a payload, a price and a content change in every store,
// the store's counts, an outbox row per store and event.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { adminOk, createMerchant, importNdjson, simpleProduct, type MerchantHandle } from '../support/admin-http.js';
import { TEST_ENGINE } from '../support/engine.js';
import { sample } from '../support/metrics.js';
import { startTestService, type TestService } from '../support/service.js';

let service: TestService;
let merchant: MerchantHandle;
let storeIds: number[];

beforeAll(async () => {
  service = await startTestService();
  merchant = await createMerchant(service, 'Fresh Outfitters');
  await adminOk(service, 'PUT', `${merchant.base}/stores/de`, { name: 'DE', locale: 'de-DE', currency: 'EUR' });
  await adminOk(service, 'PUT', `${merchant.base}/stores/at`, { name: 'AT', locale: 'de-AT', currency: 'EUR' });
  await adminOk(service, 'PUT', `${merchant.base}/suppliers/alpine`, { name: 'Alpine' });
  await adminOk(service, 'POST', `${merchant.base}/webhook-endpoints`, { url: 'https://hooks.fresh-outfitters.com/catalog' }, 201);
  storeIds = (await service.storage.listStores(merchant.id)).map((s) => s.id);
});
afterAll(() => service?.close());

const retitled = (line: ReturnType<typeof simpleProduct>, title: string) => ({
  ...line,
  product: { ...line.product, content: { de: { title, description: null } } },
});
const withImage = (line: ReturnType<typeof simpleProduct>, url: string) => ({ ...line, product: { ...line.product, images: [{ url }] } });
const ndjson = (lines: object[]) => `${lines.map((line) => JSON.stringify(line)).join('\n')}\n`;
const idOf = async (ref: string) => (await service.storage.productsAfter(merchant.id, 0, 1000)).find((p) => p.ref === ref)?.id;

/** How many statements of the storage operation `statement` this process has run so far (/metrics). */
async function statementsRun(statement: string): Promise<number> {
  const response = await service.fetch(`${service.url}/metrics`);
  expect(response.status).toBe(200);
  return sample(await response.text(), 'cps_db_statement_duration_seconds_count', { engine: TEST_ENGINE, statement }) ?? 0;
}

async function statementsOf(watched: string[], fn: () => Promise<void>): Promise<number[]> {
  const before = await Promise.all(watched.map(statementsRun));
  await fn();
  return (await Promise.all(watched.map(statementsRun))).map((after, i) => after - before[i]!);
}

const WATCHED = ['published.publishedHashes', 'webhookEndpoints.listWebhookEndpoints'];
const OLD_IMAGE = 'https://images.fresh-outfitters.com/old.jpg';
const NEW_IMAGE = 'https://images.fresh-outfitters.com/new.jpg';

it('publishes a chunk of new products in every store without looking for their payloads', async () => {
  const position = await service.storage.latestFeedPosition(merchant.id);
  const ran = await statementsOf(WATCHED, async () => {
    const response = await importNdjson(
      service,
      merchant.id,
      ndjson([withImage(simpleProduct('NEW-1', '10.00'), OLD_IMAGE), simpleProduct('NEW-2', '12.00')]),
    );
    expect(response.status, response.text).toBe(200);
  });
  expect(ran).toEqual([0, 1]);
  const ids = [(await idOf('NEW-1'))!, (await idOf('NEW-2'))!];
  for (const storeId of storeIds) {
    expect([...(await service.storage.publishedHashes(storeId, ids)).keys()].sort()).toEqual([...ids].sort());
    expect((await service.storage.publishedCountsByExclusion(storeId)).total).toBe(2);
    const payload = JSON.parse(Buffer.from((await service.storage.publishedPayload(storeId, ids[0]!))!).toString('utf8'));
    expect(payload).toMatchObject({ id: ids[0], title: 'Produkt NEW-1' });
  }
  // A price and a content change per product and store.
  const latest = await service.storage.latestFeedPosition(merchant.id);
  expect(latest!.id - (position?.id ?? 0)).toBe(2 * 2 * storeIds.length);
});

it('a chunk mixing new products, changed ones and a ref deleted and sent again publishes each as one at a time would', async () => {
  const oldId = (await idOf('NEW-1'))!;
  const position = await service.storage.latestFeedPosition(merchant.id);
  const ran = await statementsOf(WATCHED, async () => {
    const response = await importNdjson(
      service,
      merchant.id,
      ndjson([
        retitled(simpleProduct('NEW-2', '12.00'), 'Zelt NEW-2'),
        withImage(simpleProduct('NEW-3', '9.00'), NEW_IMAGE),
        { op: 'delete_product', ref: 'NEW-1' },
        withImage(simpleProduct('NEW-1', '11.00'), NEW_IMAGE),
      ]),
    );
    expect(response.status, response.text).toBe(200);
  });
  // The changed product's hashes are read (a statement per store), and so are the deleted one's
  // (to remove it); the new ones' are not looked for. The endpoints: once for the payloads, once
  // for the removal.
  expect(ran).toEqual([2 * storeIds.length, 2]);
  const newId = (await idOf('NEW-1'))!;
  expect(newId).not.toBe(oldId);
  const ids = [newId, (await idOf('NEW-2'))!, (await idOf('NEW-3'))!];
  // The links the lines before the delete wrote were in place for it; the deleted product's are gone.
  expect(await service.storage.productIdsWithImage(merchant.id, OLD_IMAGE)).toEqual([]);
  expect(await service.storage.productIdsWithImage(merchant.id, NEW_IMAGE)).toEqual([ids[2]!, newId].sort((a, b) => a - b));
  for (const storeId of storeIds) {
    expect((await service.storage.publishedHashes(storeId, [oldId])).size).toBe(0);
    expect((await service.storage.publishedHashes(storeId, ids)).size).toBe(3);
    expect((await service.storage.publishedCountsByExclusion(storeId)).total).toBe(3);
    const payload = JSON.parse(Buffer.from((await service.storage.publishedPayload(storeId, ids[1]!))!).toString('utf8'));
    expect(payload).toMatchObject({ id: ids[1], title: 'Zelt NEW-2' });
  }
  // Per store: NEW-2's content, NEW-3's and the new NEW-1's price and content, the old NEW-1 removed.
  const latest = await service.storage.latestFeedPosition(merchant.id);
  expect(latest!.id - position!.id).toBe((1 + 2 + 2 + 1) * storeIds.length);
});
