// Look-ups by the integrator's own keys: GET /v1/products?sku=…|ean=… and GET /v1/prices?sku=…|ean=…
// (openapi/components/parameters/SkuParam.yaml, EanParam.yaml), over real HTTP on the test's engine:
// exact values, every product that carries one (EANs repeat), values no product carries left out,
// the page shape and ETag of ?ids=, one of ids/sku/ean at a time, at most 200 products an answer.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminOk, buildOutdoorCatalog, importNdjson, type OutdoorCatalog } from '../support/admin-http.js';
import { startTestService, type TestService } from '../support/service.js';
import { CatalogApiError, createCatalogClient, fetchProductsByKeys } from '../../src/client/index.js';

let service: TestService;
let catalog: OutdoorCatalog;
let other: OutdoorCatalog;
let key: string;
/** Two products of merchant A that share one EAN (ids ascending), and one of merchant B with it too. */
let twins: number[];
let otherTwin: number;

const SHARED_EAN = '4012345000016';
/** An EAN 201 products of merchant A carry: more than one look-up answers. */
const CROWDED_EAN = '4099999000005';

const product = (ref: string, eans: string[]) => ({
  op: 'upsert_product',
  product: {
    ref,
    eans,
    content: { de: { title: `Produkt ${ref}`, description: null } },
    offers: [{ supplier_ref: 'alpine', quantity: 4, cost: '10.00', currency: 'EUR' }],
  },
});

beforeAll(async () => {
  service = await startTestService();
  catalog = await buildOutdoorCatalog(service);
  other = await buildOutdoorCatalog(service, 'Other Outfitters');
  key = catalog.merchant.key;
  const imported = await importNdjson(service, catalog.merchant.id, [
    product('TWIN-A', [SHARED_EAN]),
    product('TWIN-B', [SHARED_EAN, '4012345000023']),
    ...Array.from({ length: 201 }, (_, i) => product(`CROWD-${i}`, [CROWDED_EAN])),
  ]);
  expect(imported.status, imported.text).toBe(200);
  twins = [
    (await adminOk(service, 'GET', `${catalog.merchant.base}/products/TWIN-A`)).id,
    (await adminOk(service, 'GET', `${catalog.merchant.base}/products/TWIN-B`)).id,
  ].sort((a, b) => a - b);
  expect((await importNdjson(service, other.merchant.id, [product('TWIN-C', [SHARED_EAN])])).status).toBe(200);
  otherTwin = (await adminOk(service, 'GET', `${other.merchant.base}/products/TWIN-C`)).id;
}, 120_000);
afterAll(() => service.close());

const idsOf = (body: { data: { id: number }[] }) => body.data.map((p) => p.id);

async function expectInvalid(path: string, names: string[]) {
  const response = await service.api(path, key);
  expect(response.status, response.text).toBe(400);
  expect(response.headers.get('content-type')).toContain('application/problem+json');
  expect(response.body.code).toBe('invalid_parameter');
  expect(response.body.invalid_params.map((p: { name: string }) => p.name).sort()).toEqual([...names].sort());
  return response.body as { detail: string; invalid_params: { name: string; reason: string }[] };
}

describe('GET /v1/products?sku= and ?ean=', () => {
  it('answers the products whose SKU is one of the values, in id order, byte for byte as ?ids= does', async () => {
    const { backpack, tent, lamp } = catalog.products;
    const response = await service.api('/v1/products?sku=AO-LAMP-1,AO-BP-40,AO-TENT-2', key);
    expect(response.status, response.text).toBe(200);
    const ids = [backpack.id, tent.id, lamp.id].sort((a, b) => a - b);
    expect(idsOf(response.body)).toEqual(ids);
    expect(response.body.data.map((p: { sku: string }) => p.sku)).toEqual(
      ids.map((id) => ({ [backpack.id]: 'AO-BP-40', [tent.id]: 'AO-TENT-2', [lamp.id]: 'AO-LAMP-1' })[id]),
    );
    const byIds = await service.api(`/v1/products?ids=${ids.join(',')}`, key);
    // The same payloads; meta.per_page is the most a look-up answers.
    expect(response.text).toBe(byIds.text.replace('"per_page":3', '"per_page":200'));
    expect(response.body.meta).toEqual({ current_page: 1, per_page: 200, last_page: 1, total: 3 });
  });

  it('answers every product that carries an EAN (EANs are not unique), and only the primary EAN', async () => {
    const response = await service.api(`/v1/products?ean=${SHARED_EAN}`, key);
    expect(response.status, response.text).toBe(200);
    expect(idsOf(response.body)).toEqual(twins);
    expect(response.body.data.map((p: { ean: string }) => p.ean)).toEqual([SHARED_EAN, SHARED_EAN]);
    // TWIN-B's second EAN is not published: no product's `ean` is it.
    expect(idsOf((await service.api('/v1/products?ean=4012345000023', key)).body)).toEqual([]);
    // The backpack's primary EAN, with the twins': all three, in id order.
    const both = await service.api(`/v1/products?ean=${SHARED_EAN},4006381333931`, key);
    expect(idsOf(both.body)).toEqual([catalog.products.backpack.id, ...twins].sort((a, b) => a - b));
  });

  it("leaves out values no product carries, matches exactly, and never answers another merchant's products", async () => {
    const response = await service.api(`/v1/products?sku=AO-BP-40,ao-bp-40,AO-BP-40%20,NOPE,AO-BP-40`, key);
    expect(response.status, response.text).toBe(200);
    expect(idsOf(response.body)).toEqual([catalog.products.backpack.id]);
    expect(response.body.meta).toEqual({ current_page: 1, per_page: 200, last_page: 1, total: 1 });
    const none = await service.api('/v1/products?ean=00000000', key);
    expect(none.body).toEqual({ data: [], store: 'de', meta: { current_page: 1, per_page: 200, last_page: 1, total: 0 } });
    // Merchant B's twin shares the EAN: each merchant reads only its own.
    expect(idsOf((await service.api(`/v1/products?ean=${SHARED_EAN}`, other.merchant.key)).body)).toEqual([otherTwin]);
    expect(idsOf((await service.api(`/v1/products?ean=${SHARED_EAN}`, key)).body)).not.toContain(otherTwin);
  });

  it('resolves the products for the store asked for', async () => {
    const response = await service.api('/v1/products?store=pl&sku=AO-BP-40,AO-LAMP-1', key);
    expect(response.body.store).toBe('pl');
    expect(response.body.data.map((p: { store: string }) => p.store)).toEqual(['pl', 'pl']);
    const byIds = await service.api(`/v1/products?store=pl&ids=${idsOf(response.body).join(',')}`, key);
    expect(response.body.data).toEqual(byIds.body.data);
    const gone = await service.api('/v1/products?store=archive&sku=AO-BP-40', key);
    expect([gone.status, gone.body.code]).toEqual([404, 'store_not_found']);
  });

  it('carries a strong ETag and answers 304 while the products are unchanged, 200 once one changes', async () => {
    const first = await service.api(`/v1/products?ean=${SHARED_EAN}`, key);
    const etag = first.headers.get('etag')!;
    expect(etag).toMatch(/^"[^"]+"$/);
    const again = await service.api(`/v1/products?ean=${SHARED_EAN}`, key, { headers: { 'If-None-Match': etag } });
    expect(again.status).toBe(304);
    // The tag names the bytes: the same products through their SKUs are the same answer...
    const sku = await service.api('/v1/products?sku=AO-TWIN-A,AO-TWIN-B', key, { headers: { 'If-None-Match': etag } });
    expect(sku.status).toBe(304);
    // ... and one product more is another.
    const more = await service.api(`/v1/products?ean=${SHARED_EAN},4006381333931`, key, { headers: { 'If-None-Match': etag } });
    expect(more.status).toBe(200);
    await adminOk(service, 'PUT', `${catalog.merchant.base}/products/TWIN-A`, {
      ...product('TWIN-A', [SHARED_EAN]).product,
      manufacturer: 'Neu',
    });
    const changed = await service.api(`/v1/products?ean=${SHARED_EAN}`, key, { headers: { 'If-None-Match': etag } });
    expect(changed.status).toBe(200);
    expect(changed.headers.get('etag')).not.toBe(etag);
  });

  it('answers 400 naming the parameter when the values match more than 200 products', async () => {
    const body = await expectInvalid(`/v1/products?ean=${CROWDED_EAN}`, ['ean']);
    expect(body.invalid_params[0]!.reason).toMatch(/more than 200 products/);
    await expectInvalid(`/v1/prices?ean=${CROWDED_EAN}`, ['ean']);
    // 200 of them through their SKUs answer.
    const skus = Array.from({ length: 200 }, (_, i) => `AO-CROWD-${i}`);
    const response = await service.api(`/v1/products?sku=${skus.join(',')}`, key);
    expect(response.status, response.text.slice(0, 300)).toBe(200);
    expect(response.body.meta.total).toBe(200);
  });

  it.each([
    ['ids and sku', `ids=1&sku=AO-BP-40`, ['ids', 'sku']],
    ['sku and ean', `sku=AO-BP-40&ean=${SHARED_EAN}`, ['sku', 'ean']],
    ['all three', `ids=1&sku=AO-BP-40&ean=${SHARED_EAN}`, ['ids', 'sku', 'ean']],
    ['sku and page', 'sku=AO-BP-40&page=1', ['page']],
    ['ean and per_page, after_id', `ean=${SHARED_EAN}&per_page=5&after_id=0`, ['per_page', 'after_id']],
  ])('answers 400 naming them for %s together', async (_label, query, names) => {
    const body = await expectInvalid(`/v1/products?${query}`, names);
    expect(body.detail).toMatch(/cannot be combined with/);
  });

  it.each([
    ['an EAN that is not 8 to 14 digits', 'ean=ABC', ['ean']],
    ['an empty EAN among others', `ean=${SHARED_EAN},,4006381333931`, ['ean']],
    ['an empty SKU', 'sku=', ['sku']],
    ['201 SKUs', `sku=${Array.from({ length: 201 }, (_, i) => `S${i}`).join(',')}`, ['sku']],
    ['a SKU of 513 characters', `sku=${'X'.repeat(513)}`, ['sku']],
  ])('answers 400 invalid_parameter for %s', async (_label, query, names) => {
    await expectInvalid(`/v1/products?${query}`, names);
  });
});

describe('GET /v1/prices?sku= and ?ean=', () => {
  it('answers id, sku, ean and prices of every product carrying a value, as the products read them', async () => {
    const prices = await service.api(`/v1/prices?store=pl&ean=${SHARED_EAN},4006381333931,99999999`, key);
    expect(prices.status, prices.text).toBe(200);
    const products = await service.api(`/v1/products?store=pl&ean=${SHARED_EAN},4006381333931`, key);
    expect(prices.body).toEqual({
      data: products.body.data.map((p: { id: number; sku: string; ean: string; prices: unknown }) => ({
        id: p.id,
        sku: p.sku,
        ean: p.ean,
        prices: p.prices,
      })),
      store: 'pl',
    });
    const bySku = await service.api('/v1/prices?sku=AO-TENT-2', key);
    expect(bySku.body.data.map((p: { id: number; sku: string }) => [p.id, p.sku])).toEqual([[catalog.products.tent.id, 'AO-TENT-2']]);
  });

  it('answers 400 naming ids when none of ids, sku and ean is given, and naming each when two are', async () => {
    const none = await expectInvalid('/v1/prices?store=pl', ['ids']);
    expect(none.detail).toMatch(/sku.*ean/);
    await expectInvalid(`/v1/prices?sku=AO-BP-40&ean=${SHARED_EAN}`, ['sku', 'ean']);
    await expectInvalid('/v1/prices?ids=1&ean=ABC', ['ean']);
  });
});

describe('the typed client: fetchProductsByKeys', () => {
  it('looks products up by SKU in batches of 200, and by EAN; a batch matching more than 200 throws', async () => {
    const client = createCatalogClient({ baseUrl: service.url, apiKey: key, fetch: service.fetch });
    const skus = [...Array.from({ length: 201 }, (_, i) => `AO-CROWD-${i}`), 'AO-BP-40', 'NOPE', 'AO-BP-40'];
    const found = await fetchProductsByKeys(client, { sku: skus }, { store: 'pl' });
    expect(found).toHaveLength(202);
    expect(new Set(found.map((p) => p.sku))).toEqual(new Set(skus.filter((s) => s !== 'NOPE')));
    expect(found.every((p) => p.store === 'pl')).toBe(true);
    expect((await fetchProductsByKeys(client, { ean: [SHARED_EAN] })).map((p) => p.id)).toEqual(twins);
    expect(await fetchProductsByKeys(client, { ean: [] })).toEqual([]);
    const crowded = await fetchProductsByKeys(client, { ean: [CROWDED_EAN] }).catch((error: unknown) => error);
    expect(crowded).toBeInstanceOf(CatalogApiError);
    expect((crowded as CatalogApiError).problem.code).toBe('invalid_parameter');
  });
});
