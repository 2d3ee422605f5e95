// One product's source is bounded (counts of
// overrides, supplier attributes, images, offers and content locales; bytes of the document as
// JSON), each limit configurable with a documented default. Above one, the admin API's PUT and an
// import line answer 400 invalid_body naming the member and the limit, and nothing is stored.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { adminOk, createMerchant, importNdjson, type MerchantHandle } from '../support/admin-http.js';
import { startTestService, type TestResponse, type TestService } from '../support/service.js';

/** Small limits, so each is reached with a few items. */
const LIMITS = {
  maxProductLocales: 2,
  maxProductImages: 3,
  maxProductOffers: 2,
  maxProductSupplierAttributes: 4,
  maxProductOverrides: 5,
  maxProductBytes: 4096,
};

let service: TestService;
let merchant: MerchantHandle;

beforeAll(async () => {
  service = await startTestService({ config: { limits: LIMITS } });
  merchant = await createMerchant(service, 'Limit Outfitters');
  await adminOk(service, 'PUT', `${merchant.base}/stores/de`, { name: 'DE', locale: 'de-DE', currency: 'EUR' });
  for (const ref of ['s1', 's2', 's3']) await adminOk(service, 'PUT', `${merchant.base}/suppliers/${ref}`, { name: ref });
  await adminOk(service, 'PUT', `${merchant.base}/products/KEEP-1`, { content: { de: { title: 'Zelt' } } });
});
afterAll(() => service.close());

const range = (n: number) => Array.from({ length: n }, (_, i) => i + 1);
const locales = (n: number) => Object.fromEntries(['de', 'pl', 'fr', 'it'].slice(0, n).map((l) => [l, { title: `T ${l}` }]));
const images = (n: number) => range(n).map((i) => ({ url: `https://img.example.test/${i}.jpg` }));
const offers = (n: number) => range(n).map((i) => ({ supplier_ref: `s${i}`, quantity: 1, cost: '1.00', currency: 'EUR' }));
const attributes = (n: number) => range(n).map((i) => ({ supplier_ref: 's1', key: `k${i}`, value: 'v' }));
const overrides = (n: number) => Object.fromEntries(range(n).map((i) => [`k${i}`, 'v']));

/** One source per counted limit: at the limit, and one above it. */
const COUNTED = [
  {
    member: 'content',
    setting: 'CPS_MAX_PRODUCT_LOCALES',
    limit: LIMITS.maxProductLocales,
    what: 'locales',
    of: (n: number) => ({ content: locales(n) }),
  },
  {
    member: 'images',
    setting: 'CPS_MAX_PRODUCT_IMAGES',
    limit: LIMITS.maxProductImages,
    what: 'images',
    of: (n: number) => ({ images: images(n) }),
  },
  {
    member: 'offers',
    setting: 'CPS_MAX_PRODUCT_OFFERS',
    limit: LIMITS.maxProductOffers,
    what: 'offers',
    of: (n: number) => ({ offers: offers(n) }),
  },
  {
    member: 'supplier_attributes',
    setting: 'CPS_MAX_PRODUCT_SUPPLIER_ATTRIBUTES',
    limit: LIMITS.maxProductSupplierAttributes,
    what: 'supplier attributes',
    of: (n: number) => ({ supplier_attributes: attributes(n) }),
  },
  {
    member: 'overrides',
    setting: 'CPS_MAX_PRODUCT_OVERRIDES',
    limit: LIMITS.maxProductOverrides,
    what: 'overrides',
    of: (n: number) => ({ overrides: overrides(n) }),
  },
];

/** What a refused write could have changed: the merchant's product sources and its applied imports. */
async function stored(): Promise<unknown> {
  return {
    products: (await service.storage.productsAfter(merchant.id, 0, 1000)).map((p) => [p.ref, p.source]),
    applied: (await service.service.imports.recent(merchant.id, 100)).filter((job) => job.products_applied > 0).length,
  };
}

function expectLimit(response: TestResponse, name: string, reason: RegExp) {
  expect(response.status, response.text).toBe(400);
  expect(response.body).toMatchObject({ code: 'invalid_body', type: 'urn:problem:catalog:invalid_body' });
  expect(response.body.invalid_params).toEqual([{ name, in: 'body', reason: expect.stringMatching(reason) }]);
}

describe('the admin API refuses a product above a limit, naming it', () => {
  it.each(COUNTED)('$member: $limit are stored, one more answers 400 naming $setting', async ({ member, setting, limit, what, of }) => {
    const atLimit = await adminOk(service, 'PUT', `${merchant.base}/products/AT-LIMIT`, of(limit));
    expect(Object.keys(atLimit[member])).toHaveLength(limit);
    const before = await stored();
    const response = await service.adminApi('PUT', `${merchant.base}/products/KEEP-1`, of(limit + 1));
    expectLimit(response, `/${member}`, new RegExp(`^has ${limit + 1} ${what}: a product has at most ${limit} \\(${setting}\\)$`));
    expect(await stored()).toEqual(before);
  });

  it('a source above CPS_MAX_PRODUCT_BYTES as JSON answers 400 naming its size and the limit', async () => {
    // The document as stored, with a description of n characters: sized to be exactly at the limit.
    const empty = JSON.stringify({
      eans: [],
      manufacturer: null,
      content: { de: { title: 'T', description: '' } },
      images: [],
      offers: [],
      own_stock: null,
      supplier_attributes: [],
      overrides: {},
      excluded_stores: [],
    });
    const fits = LIMITS.maxProductBytes - Buffer.byteLength(empty);
    await adminOk(service, 'PUT', `${merchant.base}/products/AT-LIMIT`, { content: { de: { title: 'T', description: 'x'.repeat(fits) } } });
    expect(Buffer.byteLength(JSON.stringify((await service.storage.findProductByRef(merchant.id, 'AT-LIMIT'))!.source))).toBe(
      LIMITS.maxProductBytes,
    );
    const before = await stored();
    // Counted in UTF-8 bytes: one "é" (2 bytes) in place of an "x" is one byte too many.
    const response = await service.adminApi('PUT', `${merchant.base}/products/KEEP-1`, {
      content: { de: { title: 'T', description: `${'x'.repeat(fits - 1)}é` } },
    });
    expectLimit(
      response,
      '/',
      new RegExp(
        `^is ${LIMITS.maxProductBytes + 1} bytes as JSON: a product's source is at most ${LIMITS.maxProductBytes} bytes \\(CPS_MAX_PRODUCT_BYTES\\)$`,
      ),
    );
    expect(await stored()).toEqual(before);
  });

  it('names every limit a source exceeds at once', async () => {
    const response = await service.adminApi('PUT', `${merchant.base}/products/KEEP-1`, { images: images(4), overrides: overrides(6) });
    expect(response.status, response.text).toBe(400);
    expect(response.body.invalid_params.map((p: { name: string }) => p.name)).toEqual(['/images', '/overrides']);
  });
});

describe('an import refuses a line above a limit, naming it, and applies nothing', () => {
  it('lists each line above a limit with the member and the limit; the good lines are not applied', async () => {
    const before = await stored();
    const line = (ref: string, source: object) => ({ op: 'upsert_product', product: { ref, ...source } });
    const response = await importNdjson(service, merchant.id, [
      line('IMP-1', { content: locales(1) }),
      line('IMP-2', { overrides: overrides(6) }),
      line('IMP-3', { offers: offers(3) }),
      line('IMP-4', { content: { de: { title: 'T', description: 'x'.repeat(LIMITS.maxProductBytes) } } }),
    ]);
    expect(response.status, response.text).toBe(400);
    expect(response.body).toMatchObject({ code: 'invalid_body', detail: expect.stringContaining('nothing was applied') });
    expect(response.body.invalid_params.map((p: { name: string; reason: string }) => `${p.name}: ${p.reason}`)).toEqual([
      'line 2: /product/overrides: has 6 overrides: a product has at most 5 (CPS_MAX_PRODUCT_OVERRIDES)',
      'line 3: /product/offers: has 3 offers: a product has at most 2 (CPS_MAX_PRODUCT_OFFERS)',
      expect.stringMatching(
        /^line 4: \/product: is \d+ bytes as JSON: a product's source is at most 4096 bytes \(CPS_MAX_PRODUCT_BYTES\)$/,
      ),
    ]);
    expect(await stored()).toEqual(before);
  });
});

describe('the default limits', () => {
  let defaults: TestService;
  let base: string;
  let id: number;
  beforeAll(async () => {
    defaults = await startTestService();
    ({ base, id } = await createMerchant(defaults, 'Default Outfitters'));
    await adminOk(defaults, 'PUT', `${base}/stores/de`, { name: 'DE', locale: 'de-DE', currency: 'EUR' });
  });
  afterAll(() => defaults.close());

  it('are the documented ones, each read from its CPS_ setting, and at least 1', () => {
    expect(loadConfig({}).limits).toMatchObject({
      maxProductLocales: 100,
      maxProductImages: 100,
      maxProductOffers: 100,
      maxProductSupplierAttributes: 2000,
      maxProductOverrides: 1000,
      maxProductBytes: 512 * 1024,
    });
    expect(loadConfig({ CPS_MAX_PRODUCT_OVERRIDES: '20000', CPS_MAX_PRODUCT_BYTES: '2097152' }).limits).toMatchObject({
      maxProductOverrides: 20000,
      maxProductBytes: 2097152,
    });
    expect(() => loadConfig({ CPS_MAX_PRODUCT_IMAGES: '0' })).toThrow(/CPS_MAX_PRODUCT_IMAGES must be at least 1/);
  });

  it('keep a rich real product: 24 locales of 10 KB descriptions, 1,000 overrides, 100 images', async () => {
    const languages = [
      'bg',
      'cs',
      'da',
      'de',
      'el',
      'en',
      'es',
      'et',
      'fi',
      'fr',
      'ga',
      'hr',
      'hu',
      'it',
      'lt',
      'lv',
      'mt',
      'nl',
      'pl',
      'pt',
      'ro',
      'sk',
      'sl',
      'sv',
    ];
    const response = await defaults.adminApi('PUT', `${base}/products/RICH-1`, {
      content: Object.fromEntries(
        languages.map((l) => [l, { title: `Wanderrucksack ${l}`, description: `<p>${'Leicht und robust. '.repeat(520)}</p>` }]),
      ),
      overrides: Object.fromEntries(range(1000).map((i) => [`attribute_${i}`, `value ${i}`])),
      images: range(100).map((i) => ({ url: `https://cdn.example.test/products/rich-1/${i}.jpg` })),
    });
    expect(response.status, response.text).toBe(200);
    expect(Object.keys(response.body.overrides)).toHaveLength(1000);
    // About half the default limit (docs/configuration.md#product-limits).
    expect(Buffer.byteLength(JSON.stringify((await defaults.storage.findProductByRef(id, 'RICH-1'))!.source))).toBe(272_257);
  });

  it("refuse the issue's payload: 15,000 overrides in an import line, naming the count and the bytes", async () => {
    const line = {
      op: 'upsert_product',
      product: { ref: 'HUGE-1', overrides: Object.fromEntries(range(15_000).map((i) => [`k${i}`, 'x'.repeat(100)])) },
    };
    const response = await importNdjson(defaults, id, [line]);
    expect(response.status, response.text).toBe(400);
    expect(response.body.invalid_params.map((p: { name: string; reason: string }) => `${p.name}: ${p.reason}`)).toEqual([
      'line 1: /product/overrides: has 15000 overrides: a product has at most 1000 (CPS_MAX_PRODUCT_OVERRIDES)',
      expect.stringMatching(
        /^line 1: \/product: is \d+ bytes as JSON: a product's source is at most 524288 bytes \(CPS_MAX_PRODUCT_BYTES\)$/,
      ),
    ]);
    await expect(defaults.storage.findProductByRef(id, 'HUGE-1')).resolves.toBeUndefined();
  });

  it('refuse a source above 512 KiB sent in one admin body (12 locales of 50,000 characters)', async () => {
    const content = Object.fromEntries(
      ['de', 'en', 'fr', 'it', 'es', 'pl', 'nl', 'sv', 'da', 'fi', 'cs', 'pt'].map((l) => [
        l,
        { title: 'T', description: 'd'.repeat(50_000) },
      ]),
    );
    const response = await defaults.adminApi('PUT', `${base}/products/BIG-1`, { content });
    expectLimit(response, '/', /^is \d{6} bytes as JSON: a product's source is at most 524288 bytes \(CPS_MAX_PRODUCT_BYTES\)$/);
    await expect(defaults.storage.findProductByRef(id, 'BIG-1')).resolves.toBeUndefined();
  });
});
