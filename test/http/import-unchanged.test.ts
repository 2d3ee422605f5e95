// A line that sends a product's source again unchanged changes nothing: no change in the feed and
// the same payloads, with or without re-resolving it; a line that sends again what an earlier line
// of the same chunk changed still publishes that change.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { adminOk, createMerchant, importNdjson, simpleProduct, type MerchantHandle } from '../support/admin-http.js';
import { TEST_ENGINE } from '../support/engine.js';
import { sample } from '../support/metrics.js';
import { startTestService, type TestService } from '../support/service.js';

let service: TestService;
let merchant: MerchantHandle;
let storeId: number;

beforeAll(async () => {
  service = await startTestService();
  merchant = await createMerchant(service, 'Unchanged Outfitters');
  await adminOk(service, 'PUT', `${merchant.base}/stores/de`, { name: 'DE', locale: 'de-DE', currency: 'EUR' });
  await adminOk(service, 'PUT', `${merchant.base}/suppliers/alpine`, { name: 'Alpine' });
  await adminOk(service, 'PUT', `${merchant.base}/suppliers/baltic`, { name: 'Baltic' });
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

/** How many statements of the storage operation `statement` this process has run so far (/metrics). */
async function statementsRun(statement: string): Promise<number> {
  const response = await service.fetch(`${service.url}/metrics`);
  expect(response.status).toBe(200);
  return sample(await response.text(), 'cps_db_statement_duration_seconds_count', { engine: TEST_ENGINE, statement }) ?? 0;
}

it('re-importing unchanged lines reads nothing of publishing; on PostgreSQL a chunk of sources keeping their links is one statement', async () => {
  const file = ndjson(Array.from({ length: 30 }, (_, i) => simpleProduct(`QUIET-${i}`, `${10 + i}.00`)));
  expect((await importNdjson(service, merchant.id, file)).status).toBe(200);
  const watched = [
    'catalogSetup.listPricingRules',
    'published.publishedHashes',
    'productSources.upsertProductSources',
    'images.imageMirrors',
  ];
  const before = await Promise.all(watched.map(statementsRun));
  const again = await importNdjson(service, merchant.id, file);
  expect(again.status, again.text).toBe(200);
  expect(again.body).toMatchObject({ upserted: 30, deleted: 0 });
  const ran = (await Promise.all(watched.map(statementsRun))).map((after, i) => after - before[i]!);
  // No context, image state or published hash is read: nothing is resolved.
  expect(ran.slice(0, 2)).toEqual([0, 0]);
  expect(ran[3]).toBe(0);
  // PostgreSQL: the sources compared and their time moved in one statement, no links sent.
  if (TEST_ENGINE === 'postgres') expect(ran[2]).toBe(1);
  // A new cost keeps the product's links: on PostgreSQL none are sent (one statement); a new
  // supplier changes them: a second statement relinks the product.
  for (const [line, statements] of [
    [simpleProduct('QUIET-0', '99.00'), 1],
    [simpleProduct('QUIET-0', '99.00', 'baltic'), 2],
  ] as const) {
    const sources = await statementsRun('productSources.upsertProductSources');
    const response = await importNdjson(service, merchant.id, ndjson([line]));
    expect(response.status, response.text).toBe(200);
    if (TEST_ENGINE === 'postgres') expect((await statementsRun('productSources.upsertProductSources')) - sources).toBe(statements);
  }
  const id = await idOf('QUIET-0');
  expect(await service.storage.isSupplierReferenced(merchant.id, 'baltic')).toBe(true);
  expect(await service.storage.isSupplierReferenced(merchant.id, 'alpine')).toBe(true);
  expect(JSON.parse(await payload('QUIET-0')).id).toBe(id);
});
