// spec 4.1: a page is read on one consistent view of its store. After the first page of a store,
// this process reads the store and the page together, in one read that holds only while the store
// is the one it knew at the catalog version it knew (src/catalog/reads.ts); these tests change the
// store and its products between two reads and expect every page to show the catalog as it is now.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminOk, createMerchant, importNdjson, simpleProduct, type MerchantHandle } from '../support/admin-http.js';
import { startTestService, type TestService } from '../support/service.js';

let service: TestService;
let merchant: MerchantHandle;

const GERMANY = { name: 'Deutschland', locale: 'de-DE', currency: 'EUR' };
const refsOf = (body: { data: { sku: string | null; id: number }[] }) => body.data.map((p) => p.id);
const identity = { 'Accept-Encoding': 'identity' };

async function idOf(ref: string): Promise<number> {
  return (await adminOk(service, 'GET', `${merchant.base}/products/${ref}`)).id;
}

async function imported(lines: unknown[]): Promise<void> {
  const response = await importNdjson(service, merchant.id, lines);
  expect(response.status, response.text).toBe(200);
}

beforeAll(async () => {
  service = await startTestService();
  merchant = await createMerchant(service, 'Page Reads');
  await adminOk(service, 'PUT', `${merchant.base}/stores/de`, GERMANY);
  await adminOk(service, 'POST', `${merchant.base}/customer-groups`, { name: 'retail' }, 201);
  await adminOk(service, 'PUT', `${merchant.base}/suppliers/alpine`, { name: 'Alpine' });
  await imported(['P-1', 'P-2', 'P-3', 'P-4', 'P-5'].map((ref) => simpleProduct(ref)));
});
afterAll(() => service.close());

describe('a page read after the store or its products changed (spec 4.1)', () => {
  it('shows products added and deleted since the previous read, in pages and meta', async () => {
    const before = await service.api('/v1/products?per_page=2&page=2', merchant.key);
    expect([refsOf(before.body), before.body.meta.total]).toEqual([[await idOf('P-3'), await idOf('P-4')], 5]);
    await imported([simpleProduct('P-6'), { op: 'delete_product', ref: 'P-2' }]);
    const after = await service.api('/v1/products?per_page=2&page=2', merchant.key);
    expect([refsOf(after.body), after.body.meta]).toEqual([
      [await idOf('P-4'), await idOf('P-5')],
      { current_page: 2, per_page: 2, last_page: 3, total: 5 },
    ]);
    const last = await service.api('/v1/products?per_page=2&page=3', merchant.key);
    expect(refsOf(last.body)).toEqual([await idOf('P-6')]);
    const pastEnd = await service.api('/v1/products?per_page=2&page=4', merchant.key);
    expect([pastEnd.status, pastEnd.body.data, pastEnd.body.meta.total]).toEqual([200, [], 5]);
  });

  it('answers 304 while the page is unchanged and 200 with a new ETag once a product on it changes', async () => {
    const first = await service.api('/v1/products?per_page=2', merchant.key, { headers: identity });
    const etag = first.headers.get('etag')!;
    const again = await service.api('/v1/products?per_page=2', merchant.key, { headers: { ...identity, 'If-None-Match': etag } });
    expect(again.status).toBe(304);
    await imported([
      { ...simpleProduct('P-1'), product: { ...simpleProduct('P-1').product, content: { de: { title: 'Neu', description: null } } } },
    ]);
    const changed = await service.api('/v1/products?per_page=2', merchant.key, { headers: { ...identity, 'If-None-Match': etag } });
    expect(changed.status).toBe(200);
    expect(changed.headers.get('etag')).not.toBe(etag);
    expect(changed.body.data[0].title).toBe('Neu');
  });

  it('answers 404 store_not_found once the store it served is deactivated, and serves it again once active', async () => {
    const switzerland = { name: 'Schweiz', locale: 'de-CH', currency: 'EUR' };
    await adminOk(service, 'PUT', `${merchant.base}/stores/ch`, switzerland);
    expect((await service.api('/v1/products?store=ch', merchant.key)).status).toBe(200);
    await adminOk(service, 'PUT', `${merchant.base}/stores/ch`, { ...switzerland, active: false });
    const inactive = await service.api('/v1/products?store=ch', merchant.key);
    expect([inactive.status, inactive.body.code]).toEqual([404, 'store_not_found']);
    await adminOk(service, 'PUT', `${merchant.base}/stores/ch`, { ...switzerland, active: true });
    expect((await service.api('/v1/products?store=ch', merchant.key)).body.meta.total).toBe(5);
  });

  it('serves the new store after a store is deleted and another is created under its slug', async () => {
    await adminOk(service, 'PUT', `${merchant.base}/stores/at`, { name: 'Österreich', locale: 'de-AT', currency: 'EUR' });
    await adminOk(service, 'PUT', `${merchant.base}/suppliers/alpine`, { name: 'Alpine' });
    const old = await service.api('/v1/products?store=at&per_page=1', merchant.key);
    expect(old.body.meta.total).toBe(5);
    await adminOk(service, 'DELETE', `${merchant.base}/stores/at`);
    expect((await service.api('/v1/products?store=at', merchant.key)).status).toBe(404);
    await adminOk(service, 'PUT', `${merchant.base}/stores/at`, {
      name: 'Österreich neu',
      locale: 'de-AT',
      currency: 'EUR',
      exclude_out_of_stock: true,
    });
    const renewed = await service.api('/v1/products?store=at&per_page=1', merchant.key);
    expect(renewed.status, renewed.text).toBe(200);
    expect(renewed.body.meta.total).toBe(5);
    expect(renewed.body.data[0].store).toBe('at');
  });
});
