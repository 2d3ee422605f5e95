// spec 4.1-4.3 over real HTTP: the catalog is built through the admin API, read through the
// public API, and every response is checked against the published contract.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminOk, buildOutdoorCatalog, importNdjson, simpleProduct, type OutdoorCatalog } from '../support/admin-http.js';
import { startTestService, type TestService } from '../support/service.js';

let service: TestService;
let catalog: OutdoorCatalog;
let key: string;
/** Every product id of the merchant, ascending. */
let allIds: number[];

const FILLERS = 120;
const TOTAL = 3 + FILLERS;

beforeAll(async () => {
  service = await startTestService();
  catalog = await buildOutdoorCatalog(service);
  key = catalog.merchant.key;
  // Refs in descending order, so ordering by ref and ordering by id disagree.
  const lines = Array.from({ length: FILLERS }, (_, i) => simpleProduct(`Z-${String(FILLERS - i).padStart(3, '0')}`));
  const imported = await importNdjson(service, catalog.merchant.id, lines);
  expect(imported.status, imported.text).toBe(200);
  const { backpack, tent, lamp } = catalog.products;
  const fillerIds = [];
  for (let i = 0; i < FILLERS; i++) {
    fillerIds.push((await adminOk(service, 'GET', `${catalog.merchant.base}/products/Z-${String(FILLERS - i).padStart(3, '0')}`)).id);
  }
  allIds = [backpack.id, tent.id, lamp.id, ...fillerIds];
});
afterAll(() => service.close());

const ids = (body: { data: { id: number }[] }) => body.data.map((p) => p.id);

describe('GET /v1/products (spec 4.1)', () => {
  it('returns the default store when store is omitted, ordered by product id', async () => {
    const page = await service.api('/v1/products', key);
    expect(page.status).toBe(200);
    expect(page.body.store).toBe('de');
    expect(page.body.data.every((p: { store: string }) => p.store === 'de')).toBe(true);
    expect(ids(page.body)).toEqual([...allIds].sort((a, b) => a - b).slice(0, 50));
  });

  it('defaults per_page to 50 and page to 1', async () => {
    const page = await service.api('/v1/products', key);
    expect(page.body.meta).toEqual({ current_page: 1, per_page: 50, last_page: 3, total: TOTAL });
    expect(page.body.data).toHaveLength(50);
  });

  it.each([
    ['0', 1],
    ['500', 200],
    ['-3', 1],
    ['1', 1],
    ['200', 200],
    ['17', 17],
  ])('clamps per_page=%s to %i and reports it in meta.per_page', async (perPage, used) => {
    const page = await service.api(`/v1/products?per_page=${perPage}`, key);
    expect(page.status).toBe(200);
    expect(page.body.meta).toEqual({
      current_page: 1,
      per_page: used,
      last_page: Math.ceil(TOTAL / used),
      total: TOTAL,
    });
    expect(page.body.data).toHaveLength(Math.min(used, TOTAL));
  });

  it('returns the requested page with correct meta', async () => {
    const page = await service.api('/v1/products?per_page=50&page=3', key);
    expect(page.body.meta).toEqual({ current_page: 3, per_page: 50, last_page: 3, total: TOTAL });
    expect(ids(page.body)).toEqual(allIds.slice(100));
  });

  it('returns data [] with correct meta for a page past last_page', async () => {
    const page = await service.api('/v1/products?per_page=50&page=4', key);
    expect(page.status).toBe(200);
    expect(page.body).toEqual({
      data: [],
      store: 'de',
      meta: { current_page: 4, per_page: 50, last_page: 3, total: TOTAL },
    });
    const far = await service.api('/v1/products?page=1000000', key);
    expect(far.body.data).toEqual([]);
    expect(far.body.meta).toEqual({ current_page: 1000000, per_page: 50, last_page: 3, total: TOTAL });
  });

  it('reads every product exactly once by following the paging rule', async () => {
    const seen: number[] = [];
    for (let page = 1; ; page++) {
      const response = await service.api(`/v1/products?store=pl&per_page=7&page=${page}`, key);
      seen.push(...ids(response.body));
      if (response.body.meta.current_page === response.body.meta.last_page) break;
    }
    expect(seen).toEqual(allIds);
  });

  it('resolves the products for the store named by store: its locale and its currency', async () => {
    const page = await service.api('/v1/products?store=pl&per_page=3', key);
    expect(page.body.store).toBe('pl');
    const [backpack] = page.body.data;
    expect(backpack.store).toBe('pl');
    expect(backpack.title).toBe('Plecak turystyczny 40 l');
    expect(backpack.prices.map((p: { currency: string }) => p.currency)).toEqual(['PLN', 'PLN']);
    expect(page.body.meta.total).toBe(TOTAL);
  });

  it('lists excluded products, counted in meta.total, with their exclusion reason', async () => {
    const page = await service.api('/v1/products?per_page=3', key);
    expect(page.body.data.map((p: { excluded: boolean; exclusion_reason: string | null }) => [p.excluded, p.exclusion_reason])).toEqual([
      [false, null],
      [true, 'out_of_stock'],
      [true, 'no_offers'],
    ]);
  });

  it('returns 404 store_not_found for an unknown store slug', async () => {
    const response = await service.api('/v1/products?store=fr', key);
    expect(response.status).toBe(404);
    expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(response.body).toMatchObject({ status: 404, code: 'store_not_found', type: 'urn:problem:catalog:store_not_found' });
  });

  it('returns 404 store_not_found for an inactive store', async () => {
    const response = await service.api('/v1/products?store=archive', key);
    expect(response.status).toBe(404);
    expect(response.body.code).toBe('store_not_found');
  });
});

describe('GET /v1/products with after_id (keyset paging)', () => {
  it('returns the products after the id, in id order, and continues from the last id read', async () => {
    const first = await service.api('/v1/products?after_id=0&per_page=50', key);
    expect(ids(first.body)).toEqual(allIds.slice(0, 50));
    expect(first.body.meta).toEqual({ current_page: 1, per_page: 50, last_page: 3, total: TOTAL });
    const second = await service.api(`/v1/products?after_id=${allIds[49]}&per_page=50`, key);
    expect(ids(second.body)).toEqual(allIds.slice(50, 100));
    expect(second.body.meta.current_page).toBe(2);
  });

  it('reports current_page equal to last_page exactly when the response reaches the end', async () => {
    // Starting mid-page: the 50 products end on page 3 but not at the end of the store.
    const midway = await service.api(`/v1/products?after_id=${allIds[59]}&per_page=50`, key);
    expect(ids(midway.body)).toEqual(allIds.slice(60, 110));
    expect(midway.body.meta.current_page).toBe(2);
    const end = await service.api(`/v1/products?after_id=${allIds[109]}&per_page=50`, key);
    expect(ids(end.body)).toEqual(allIds.slice(110));
    expect(end.body.meta.current_page).toBe(end.body.meta.last_page);
    const past = await service.api(`/v1/products?after_id=${allIds[TOTAL - 1]}`, key);
    expect(past.body.data).toEqual([]);
    expect(past.body.meta.current_page).toBe(past.body.meta.last_page);
  });

  it('answers 400 naming page when after_id and page are combined, and for a negative after_id', async () => {
    const combined = await service.api('/v1/products?after_id=0&page=2', key);
    expect(combined.status).toBe(400);
    expect(combined.body.invalid_params).toEqual([{ name: 'page', in: 'query', reason: 'cannot be combined with after_id' }]);
    const negative = await service.api('/v1/products?after_id=-1', key);
    expect(negative.status).toBe(400);
    expect(negative.body.invalid_params[0].name).toBe('after_id');
  });
});

describe('GET /v1/products/{id} (spec 4.2)', () => {
  it('resolves a product for the default store: prices per customer group, stock, locale, attribute labels', async () => {
    const { backpack } = catalog.products;
    const response = await service.api(`/v1/products/${backpack.id}`, key);
    expect(response.status).toBe(200);
    expect(response.body).toEqual({
      data: {
        id: backpack.id,
        sku: 'AO-BP-40',
        ean: '4006381333931',
        title: 'Wanderrucksack 40 l',
        description: 'Leicht und robust.',
        manufacturer: 'Alpenwerk',
        images: ['https://img.example.test/bp-40/1.jpg', 'https://img.example.test/bp-40/2.jpg'],
        store: 'de',
        excluded: false,
        exclusion_reason: null,
        // overrides win; the best supplier (baltic: cheaper, in stock) wins over alpine; sorted by key
        attributes: [
          { key: 'color', label: 'Farbe', value: 'Grün' },
          { key: 'material', label: 'material', value: 'polyester' },
          { key: 'weight', label: 'Gewicht (kg)', value: '1.1' },
        ],
        prices: [
          {
            customer_group_id: catalog.groups.retail.id,
            customer_group: 'retail',
            base_cost: 18.5,
            computed_price: 25.99,
            currency: 'EUR',
            applied_rule_id: catalog.rules.retail.id,
          },
          {
            customer_group_id: catalog.groups.wholesale.id,
            customer_group: 'wholesale',
            base_cost: 18.5,
            computed_price: 20.35,
            currency: 'EUR',
            applied_rule_id: catalog.rules.wholesale.id,
          },
        ],
        // own stock 2 + best supplier's 3
        stock: 5,
      },
    });
    // Amounts carry exactly the currency's precision.
    expect(response.text).toContain('"base_cost":18.50,');
  });

  it('resolves the same product in another store: its locale, its currency, converted costs', async () => {
    const { backpack } = catalog.products;
    const response = await service.api(`/v1/products/${backpack.id}?store=pl`, key);
    expect(response.body.data).toMatchObject({
      store: 'pl',
      title: 'Plecak turystyczny 40 l',
      description: 'Lekki i wytrzymały.',
      stock: 5,
      excluded: false,
      attributes: [
        { key: 'color', label: 'color', value: 'Grün' },
        { key: 'material', label: 'material', value: 'polyester' },
        { key: 'weight', label: 'Waga (kg)', value: '1.1' },
      ],
      // 18.50 EUR x 4.25 = 78.625 -> 78.63 PLN
      prices: [
        { customer_group: 'retail', base_cost: 78.63, computed_price: 110.99, currency: 'PLN', applied_rule_id: catalog.rules.retail.id },
        {
          customer_group: 'wholesale',
          base_cost: 78.63,
          computed_price: 86.49,
          currency: 'PLN',
          applied_rule_id: catalog.rules.wholesale.id,
        },
      ],
    });
  });

  it('resolves prices in a zero-decimal currency and excludes a product without a title in the store locale', async () => {
    const { backpack } = catalog.products;
    const response = await service.api(`/v1/products/${backpack.id}?store=jp`, key);
    expect(response.body.data).toMatchObject({
      store: 'jp',
      title: null,
      description: null,
      excluded: true,
      exclusion_reason: 'missing_title',
      prices: [
        { customer_group: 'retail', base_cost: 2960, computed_price: 4199, currency: 'JPY' },
        { customer_group: 'wholesale', base_cost: 2960, computed_price: 3256, currency: 'JPY' },
      ],
    });
    expect(response.text).toContain('"base_cost":2960,');
  });

  it('excludes an out-of-stock product from a store that excludes out-of-stock products', async () => {
    const { tent } = catalog.products;
    const response = await service.api(`/v1/products/${tent.id}`, key);
    expect(response.body.data).toMatchObject({
      title: 'Zelt für zwei',
      stock: 0,
      excluded: true,
      exclusion_reason: 'out_of_stock',
      // 100.00 USD x 0.9 = 90.00 EUR
      prices: [
        { customer_group: 'retail', base_cost: 90, computed_price: 126.99, currency: 'EUR' },
        { customer_group: 'wholesale', base_cost: 90, computed_price: 99, currency: 'EUR' },
      ],
    });
    expect(response.text).toContain('"base_cost":90.00,');
  });

  it('converts an offer through an intermediate currency when no rate joins the two: USD -> EUR -> PLN and USD -> EUR -> JPY', async () => {
    // The tent's only offer is 100.00 USD; the merchant has USD->EUR 0.9, EUR->PLN 4.25, EUR->JPY 160.
    const { tent } = catalog.products;
    const pl = await service.api(`/v1/products/${tent.id}?store=pl`, key);
    expect(pl.body.data).toMatchObject({
      stock: 0,
      excluded: true,
      exclusion_reason: 'missing_title',
      prices: [
        // 100 × 0.9 × 4.25 = 382.50 PLN; +40 % = 535.50, ending 99: 535.99.
        { customer_group: 'retail', base_cost: 382.5, computed_price: 535.99, currency: 'PLN', applied_rule_id: catalog.rules.retail.id },
        {
          customer_group: 'wholesale',
          base_cost: 382.5,
          computed_price: 420.75,
          currency: 'PLN',
          applied_rule_id: catalog.rules.wholesale.id,
        },
      ],
    });
    expect(pl.text).toContain('"base_cost":382.50');
    const jp = await service.api(`/v1/products/${tent.id}?store=jp`, key);
    expect(jp.body.data.prices).toMatchObject([
      // 100 × 0.9 × 160 = 14400 JPY; +40 % = 20160, ending 99: 20199.
      { customer_group: 'retail', base_cost: 14400, computed_price: 20199, currency: 'JPY' },
      { customer_group: 'wholesale', base_cost: 14400, computed_price: 15840, currency: 'JPY' },
    ]);
  });

  it('excludes a product without offers as no_offers, and one the merchant excluded as manual', async () => {
    const { lamp } = catalog.products;
    const de = await service.api(`/v1/products/${lamp.id}?store=de`, key);
    expect(de.body.data).toMatchObject({
      stock: 0,
      excluded: true,
      exclusion_reason: 'no_offers',
      sku: 'AO-LAMP-1',
      ean: null,
      manufacturer: null,
      images: [],
      attributes: [],
    });
    const pl = await service.api(`/v1/products/${lamp.id}?store=pl`, key);
    expect(pl.body.data).toMatchObject({ title: 'Latarka czołowa', excluded: true, exclusion_reason: 'manual' });
  });

  it('returns exactly the shape of the list item', async () => {
    const list = await service.api('/v1/products?store=pl&per_page=3', key);
    for (const item of list.body.data) {
      const one = await service.api(`/v1/products/${item.id}?store=pl`, key);
      expect(one.body).toEqual({ data: item });
    }
  });

  it.each([
    ['an id that never existed', () => 999999],
    ['an id just past the last product', () => Math.max(...allIds) + 1],
  ])('returns 404 not_found for %s', async (_, id) => {
    const response = await service.api(`/v1/products/${id()}`, key);
    expect(response.status).toBe(404);
    expect(response.body).toMatchObject({ status: 404, code: 'not_found', type: 'urn:problem:catalog:not_found' });
  });

  it('returns 404 for a product deleted from the catalog', async () => {
    const created = await adminOk(service, 'PUT', `${catalog.merchant.base}/products/GONE-1`, { content: { de: { title: 'Weg' } } });
    expect((await service.api(`/v1/products/${created.id}`, key)).status).toBe(200);
    await adminOk(service, 'DELETE', `${catalog.merchant.base}/products/GONE-1`);
    const response = await service.api(`/v1/products/${created.id}`, key);
    expect(response.status).toBe(404);
    expect(response.body.code).toBe('not_found');
    expect((await service.api('/v1/products', key)).body.meta.total).toBe(TOTAL);
  });

  it('returns 404 store_not_found for an unknown or inactive store', async () => {
    const { backpack } = catalog.products;
    for (const slug of ['fr', 'archive']) {
      const response = await service.api(`/v1/products/${backpack.id}?store=${slug}`, key);
      expect(response.status).toBe(404);
      expect(response.body.code).toBe('store_not_found');
    }
  });
});

describe('GET /v1/stores (spec 4.3)', () => {
  it('lists the active stores, default store first, with locale and currency', async () => {
    const response = await service.api('/v1/stores', key);
    expect(response.status).toBe(200);
    expect(response.body).toEqual({
      data: [
        { id: catalog.stores.de.id, slug: 'de', name: 'Alpine Deutschland', locale: 'de-DE', currency: 'EUR', is_default: true },
        { id: catalog.stores.pl.id, slug: 'pl', name: 'Alpine Polska', locale: 'pl-PL', currency: 'PLN', is_default: false },
        { id: catalog.stores.jp.id, slug: 'jp', name: 'Alpine Japan', locale: 'ja-JP', currency: 'JPY', is_default: false },
      ],
    });
  });

  it('lists no store, and answers 404 store_not_found for products, for a merchant without stores', async () => {
    const merchant = await service.admin.createMerchant({ name: 'No stores yet' });
    const newKey = await service.keyFor(merchant.id);
    expect((await service.api('/v1/stores', newKey)).body).toEqual({ data: [] });
    const products = await service.api('/v1/products', newKey);
    expect(products.status).toBe(404);
    expect(products.body.code).toBe('store_not_found');
  });

  it('does not list an inactive store', async () => {
    const response = await service.api('/v1/stores', key);
    expect(response.body.data.map((s: { slug: string }) => s.slug)).not.toContain('archive');
  });

  it('lists the new default store first, and uses it when store is omitted, after the default changes', async () => {
    const { base } = catalog.merchant;
    await adminOk(service, 'PUT', `${base}/stores/jp`, { name: 'Alpine Japan', locale: 'ja-JP', currency: 'JPY', is_default: true });
    try {
      const stores = await service.api('/v1/stores', key);
      expect(stores.body.data.map((s: { slug: string; is_default: boolean }) => [s.slug, s.is_default])).toEqual([
        ['jp', true],
        ['de', false],
        ['pl', false],
      ]);
      const page = await service.api('/v1/products?per_page=1', key);
      expect(page.body.store).toBe('jp');
      expect(page.body.data[0].prices[0].currency).toBe('JPY');
    } finally {
      await adminOk(service, 'PUT', `${base}/stores/de`, {
        name: 'Alpine Deutschland',
        locale: 'de-DE',
        currency: 'EUR',
        is_default: true,
        exclude_out_of_stock: true,
      });
    }
    expect((await service.api('/v1/products?per_page=1', key)).body.store).toBe('de');
  });

  it('lists a store once it is activated and stops listing it when deactivated', async () => {
    const { base } = catalog.merchant;
    const archive = { name: 'Old shop', locale: 'en-GB', currency: 'GBP' };
    await adminOk(service, 'PUT', `${base}/stores/archive`, { ...archive, active: true });
    const listed = await service.api('/v1/stores', key);
    expect(listed.body.data.map((s: { slug: string }) => s.slug)).toEqual(['de', 'pl', 'jp', 'archive']);
    // No GBP rate: the offers are ignored, and the English content falls back to nothing.
    const page = await service.api('/v1/products?store=archive&per_page=1', key);
    expect(page.body.meta.total).toBe(TOTAL);
    expect(page.body.data[0]).toMatchObject({ store: 'archive', stock: 2, exclusion_reason: 'missing_title' });
    await adminOk(service, 'PUT', `${base}/stores/archive`, { ...archive, active: false });
    expect((await service.api('/v1/stores', key)).body.data).toHaveLength(3);
    expect((await service.api('/v1/products?store=archive', key)).status).toBe(404);
  });
});
