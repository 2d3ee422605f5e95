// Fetching what changed in one request: GET /v1/products?ids=… (openapi/paths/v1_products.yaml,
// components/parameters/IdsParam.yaml) and GET /v1/prices?ids=…&store=… (openapi/paths/v1_prices.yaml),
// over real HTTP, with every response checked against the contract.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminOk, buildOutdoorCatalog, importNdjson, simpleProduct, type OutdoorCatalog } from '../support/admin-http.js';
import { startTestService, type TestService } from '../support/service.js';

let service: TestService;
let catalog: OutdoorCatalog;
let other: OutdoorCatalog;
let key: string;
/** Every product id of merchant A's catalog, ascending. */
let catalogIds: number[];
let removedId: number;
let precise: number;
let otherId: number;

const FILLERS = 12;

beforeAll(async () => {
  service = await startTestService();
  catalog = await buildOutdoorCatalog(service);
  other = await buildOutdoorCatalog(service, 'Other Outfitters');
  key = catalog.merchant.key;
  const base = catalog.merchant.base;
  // A group whose name needs escaping in JSON: the raw bytes must survive the prices endpoint.
  await adminOk(service, 'POST', `${base}/customer-groups`, { name: 'Stammkunde "VIP" \\ ✓' }, 201);
  const imported = await importNdjson(service, catalog.merchant.id, [
    ...Array.from({ length: FILLERS }, (_, i) => simpleProduct(`F-${String(i).padStart(2, '0')}`, `${10 + i}.00`)),
    // 12.30 EUR: amounts with a trailing zero (12.30, not 12.3).
    {
      op: 'upsert_product',
      product: {
        ref: 'PREC-1',
        content: { de: { title: 'Karabiner', description: null }, pl: { title: 'Karabińczyk', description: null } },
        offers: [{ supplier_ref: 'alpine', quantity: 3, cost: '12.30', currency: 'EUR' }],
      },
    },
    simpleProduct('GONE-1'),
  ]);
  expect(imported.status, imported.text).toBe(200);
  precise = (await adminOk(service, 'GET', `${base}/products/PREC-1`)).id;
  removedId = (await adminOk(service, 'GET', `${base}/products/GONE-1`)).id;
  await adminOk(service, 'DELETE', `${base}/products/GONE-1`);
  const page = await service.api('/v1/products?per_page=200', key);
  catalogIds = page.body.data.map((p: { id: number }) => p.id);
  otherId = other.products.backpack.id;
});
afterAll(() => service.close());

/** The raw `data` of GET /v1/products/{id}: the exact bytes of the stored payload. */
async function rawProduct(id: number, store: string): Promise<string> {
  const response = await service.api(`/v1/products/${id}?store=${store}`, key);
  expect(response.status, response.text).toBe(200);
  return response.text.slice('{"data":'.length, -1);
}

const rawPrices = (productText: string) => /"prices":(\[[^\]]*\])/.exec(productText)![1]!;

async function expectInvalid(path: string, names: string[]) {
  const response = await service.api(path, key);
  expect(response.status, response.text).toBe(400);
  expect(response.headers.get('content-type')).toContain('application/problem+json');
  expect(response.body.code).toBe('invalid_parameter');
  expect(response.body.invalid_params.map((p: { name: string }) => p.name).sort()).toEqual([...names].sort());
}

describe('GET /v1/products?ids=', () => {
  it('returns only those products, in id order, in the same page shape', async () => {
    const { backpack, tent, lamp } = catalog.products;
    const response = await service.api(`/v1/products?ids=${lamp.id},${backpack.id},${tent.id}`, key);
    expect(response.status).toBe(200);
    expect(Object.keys(response.body)).toEqual(['data', 'store', 'meta']);
    const ids = [backpack.id, tent.id, lamp.id].sort((a, b) => a - b);
    expect(response.body.data.map((p: { id: number }) => p.id)).toEqual(ids);
    expect(response.body.store).toBe('de');
    // Byte for byte the payloads GET /v1/products/{id} serves.
    const singles = await Promise.all(ids.map((id) => rawProduct(id, 'de')));
    expect(response.text).toBe(
      `{"data":[${singles.join(',')}],"store":"de","meta":{"current_page":1,"per_page":3,"last_page":1,"total":3}}`,
    );
  });

  it('resolves the products for the store asked for', async () => {
    const { backpack, lamp } = catalog.products;
    const response = await service.api(`/v1/products?store=pl&ids=${backpack.id},${lamp.id}`, key);
    expect(response.body.store).toBe('pl');
    expect(response.body.data.map((p: { store: string }) => p.store)).toEqual(['pl', 'pl']);
    // Excluded products are in the catalog: LAMP-1 is listed, excluded (manual) in pl.
    expect(response.body.data.find((p: { id: number }) => p.id === lamp.id)).toMatchObject({ excluded: true, exclusion_reason: 'manual' });
    const singles = await Promise.all([backpack.id, lamp.id].sort((a, b) => a - b).map((id) => rawProduct(id, 'pl')));
    expect(response.body.data).toEqual(singles.map((s) => JSON.parse(s)));
  });

  it("leaves out ids outside the catalog: removed, never there, another merchant's", async () => {
    const { backpack } = catalog.products;
    const response = await service.api(`/v1/products?ids=${removedId},${backpack.id},99999999,${otherId}`, key);
    expect(response.status).toBe(200);
    expect(response.body.data.map((p: { id: number }) => p.id)).toEqual([backpack.id]);
    // meta: the single page returned; per_page the distinct ids asked for, total those found.
    expect(response.body.meta).toEqual({ current_page: 1, per_page: 4, last_page: 1, total: 1 });
    const none = await service.api(`/v1/products?ids=${removedId},${otherId}`, key);
    expect(none.body).toEqual({ data: [], store: 'de', meta: { current_page: 1, per_page: 2, last_page: 1, total: 0 } });
    // And the other way round: A's products are not in B's catalog.
    const fromOther = await service.api(`/v1/products?ids=${backpack.id},${otherId}`, other.merchant.key);
    expect(fromOther.body.data.map((p: { id: number }) => p.id)).toEqual([otherId]);
  });

  it('collapses duplicate ids', async () => {
    const { backpack, tent } = catalog.products;
    const response = await service.api(`/v1/products?ids=${tent.id},${backpack.id},${tent.id},${tent.id}`, key);
    expect(response.body.data.map((p: { id: number }) => p.id)).toEqual([backpack.id, tent.id].sort((a, b) => a - b));
    expect(response.body.meta).toEqual({ current_page: 1, per_page: 2, last_page: 1, total: 2 });
  });

  it('accepts 200 ids', async () => {
    const unknown = Array.from({ length: 200 - catalogIds.length }, (_, i) => 50_000_000 + i);
    const response = await service.api(`/v1/products?ids=${[...unknown, ...catalogIds].join(',')}`, key);
    expect(response.status).toBe(200);
    expect(response.body.data.map((p: { id: number }) => p.id)).toEqual(catalogIds);
    expect(response.body.meta).toEqual({ current_page: 1, per_page: 200, last_page: 1, total: catalogIds.length });
  });

  it('answers 400 naming ids for 201 ids', async () => {
    const ids = Array.from({ length: 201 }, (_, i) => i + 1);
    await expectInvalid(`/v1/products?ids=${ids.join(',')}`, ['ids']);
  });

  it.each(['abc', '1,,2', '0', '-1', '1.5', ',1', '1,', ''])('answers 400 invalid_parameter naming ids for ids=%s', async (ids) => {
    await expectInvalid(`/v1/products?ids=${ids}`, ['ids']);
  });

  it.each([
    ['page=1', ['page']],
    ['per_page=50', ['per_page']],
    ['page=2&per_page=10', ['page', 'per_page']],
  ])('answers 400 naming them when ids comes with %s', async (paging, names) => {
    await expectInvalid(`/v1/products?ids=${catalog.products.backpack.id}&${paging}`, names);
  });

  it.each([['nope'], ['archive']])('answers 404 store_not_found for store=%s', async (slug) => {
    const response = await service.api(`/v1/products?store=${slug}&ids=${catalog.products.backpack.id}`, key);
    expect(response.status).toBe(404);
    expect(response.body.code).toBe('store_not_found');
  });

  it('turns one change-feed window into one request', async () => {
    const start = await service.api('/v1/changes?store=pl', key);
    let cursor = { since: start.body.next_since as string, id: start.body.next_id as number };
    for (;;) {
      const page = await service.api(`/v1/changes?store=pl&since=${cursor.since}&since_id=${cursor.id}`, key);
      cursor = { since: page.body.next_since, id: page.body.next_id };
      if (page.body.changes.length === 0) break;
    }
    await adminOk(service, 'PUT', `${catalog.merchant.base}/exchange-rates/EUR/PLN`, { rate: '4.31' });
    const window = await service.api(`/v1/changes?store=pl&since=${cursor.since}&since_id=${cursor.id}`, key);
    const changed = window.body.changes.map((c: { product_id: number }) => c.product_id);
    expect(changed.length).toBeGreaterThan(FILLERS);
    const products = await service.api(`/v1/products?store=pl&ids=${changed.join(',')}`, key);
    expect(products.body.data.map((p: { id: number }) => p.id)).toEqual([...changed].sort((a, b) => a - b));
    const prices = await service.api(`/v1/prices?store=pl&ids=${changed.join(',')}`, key);
    expect(prices.body.data).toEqual(
      products.body.data.map((p: { id: number; sku: unknown; ean: unknown; prices: unknown }) => ({
        id: p.id,
        sku: p.sku,
        ean: p.ean,
        prices: p.prices,
      })),
    );
  });
});

describe('GET /v1/prices?ids=&store=', () => {
  it('returns only id, sku, ean and prices of the listed products, in id order', async () => {
    const { backpack, tent, lamp } = catalog.products;
    const response = await service.api(`/v1/prices?store=pl&ids=${lamp.id},${precise},${backpack.id},${tent.id}`, key);
    expect(response.status).toBe(200);
    expect(Object.keys(response.body)).toEqual(['data', 'store']);
    expect(response.body.store).toBe('pl');
    expect(response.body.data.map((p: { id: number }) => p.id)).toEqual([backpack.id, tent.id, lamp.id, precise].sort((a, b) => a - b));
    for (const entry of response.body.data) expect(Object.keys(entry)).toEqual(['id', 'sku', 'ean', 'prices']);
  });

  it.each([['de'], ['pl'], ['jp']])('answers exactly the prices of GET /v1/products/{id} in store %s, to the byte', async (store) => {
    const ids = [...catalogIds].sort((a, b) => a - b);
    const response = await service.api(`/v1/prices?store=${store}&ids=${ids.join(',')}`, key);
    expect(response.status).toBe(200);
    const entries = [...response.text.matchAll(/"prices":(\[[^\]]*\])\}/g)].map((m) => m[1]);
    const products = await Promise.all(ids.map((id) => rawProduct(id, store)));
    expect(entries).toEqual(products.map(rawPrices));
    // The product's own sku and ean beside them: what a look-up by either maps back by.
    const keys = (text: string) =>
      JSON.stringify((({ sku, ean }) => ({ sku, ean }))(JSON.parse(text) as { sku: unknown; ean: unknown })).slice(1, -1);
    expect(response.text).toBe(
      `{"data":[${ids.map((id, i) => `{"id":${id},${keys(products[i]!)},"prices":${rawPrices(products[i]!)}}`).join(',')}],"store":"${store}"}`,
    );
    expect(response.text).toContain('"customer_group":"Stammkunde \\"VIP\\" \\\\ ✓"');
  });

  it("keeps the currency's exact precision in the raw text (12.30, 1968)", async () => {
    const de = await service.api(`/v1/prices?store=de&ids=${precise}`, key);
    expect(de.text).toContain('"base_cost":12.30,');
    // The VIP group falls to the catch-all rule (no markup): computed_price is the cost itself.
    expect(de.text).toContain('"computed_price":12.30,');
    const jp = await service.api(`/v1/prices?store=jp&ids=${precise}`, key);
    expect(jp.text).toContain('"base_cost":1968,');
    expect(jp.text).not.toMatch(/"(base_cost|computed_price)":[0-9]+\./);
  });

  it('reads the default store when store is omitted', async () => {
    const response = await service.api(`/v1/prices?ids=${catalog.products.backpack.id}`, key);
    expect(response.status).toBe(200);
    expect(response.body.store).toBe('de');
    expect(response.body.data[0].prices[0].currency).toBe('EUR');
  });

  it('leaves out ids outside the catalog and collapses duplicates', async () => {
    const { backpack } = catalog.products;
    const response = await service.api(`/v1/prices?ids=${removedId},${backpack.id},${otherId},99999999,${backpack.id}`, key);
    expect(response.body.data.map((p: { id: number }) => p.id)).toEqual([backpack.id]);
    const none = await service.api(`/v1/prices?ids=${otherId}`, key);
    expect(none.body).toEqual({ data: [], store: 'de' });
  });

  it('answers 400 naming ids when ids is missing', async () => {
    await expectInvalid('/v1/prices', ['ids']);
    await expectInvalid('/v1/prices?store=pl', ['ids']);
  });

  it.each([
    ['abc', 'abc'],
    ['1,,2', '1,,2'],
    ['0', '0'],
    ['empty', ''],
    ['201 ids', Array.from({ length: 201 }, (_, i) => i + 1).join(',')],
  ])('answers 400 invalid_parameter naming ids for ids=%s', async (_label, ids) => {
    await expectInvalid(`/v1/prices?ids=${ids}`, ['ids']);
  });

  it('accepts 200 ids', async () => {
    const ids = [...catalogIds, ...Array.from({ length: 200 - catalogIds.length }, (_, i) => 70_000_000 + i)];
    const response = await service.api(`/v1/prices?ids=${ids.join(',')}`, key);
    expect(response.status).toBe(200);
    expect(response.body.data).toHaveLength(catalogIds.length);
  });

  it.each([['nope'], ['archive']])('answers 404 store_not_found for store=%s', async (slug) => {
    const response = await service.api(`/v1/prices?store=${slug}&ids=${catalog.products.backpack.id}`, key);
    expect(response.status).toBe(404);
    expect(response.headers.get('content-type')).toContain('application/problem+json');
    expect(response.body.code).toBe('store_not_found');
  });
});
