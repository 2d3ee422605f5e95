// docs/decisions.md#errors-and-bad-input: every malformed input answers 400 (or 413)
// problem+json with a stable `code` and `invalid_params` naming each offending parameter, and
// nothing is changed.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminOk, buildOutdoorCatalog, importNdjson, type OutdoorCatalog } from '../support/admin-http.js';
import { startTestService, type TestResponse, type TestService } from '../support/service.js';

let service: TestService;
let catalog: OutdoorCatalog;

beforeAll(async () => {
  service = await startTestService();
  catalog = await buildOutdoorCatalog(service);
});
afterAll(() => service.close());

/** Everything a bad request could have changed, read back over both APIs and from storage. */
async function snapshot(target: TestService, merchantBase: string, key: string): Promise<unknown> {
  const admin = async (path: string) => {
    const response = await target.adminApi('GET', path);
    return [response.status, response.body];
  };
  const state: Record<string, unknown> = { merchants: await admin('/admin/v1/merchants') };
  for (const part of ['', '/api-keys', '/stores', '/customer-groups', '/exchange-rates', '/pricing-rules', '/suppliers', '/attributes']) {
    state[part || 'merchant'] = await admin(`${merchantBase}${part}`);
  }
  // A key's last use is written by any request with it, the snapshot's own reads included.
  const [status, keys] = state['/api-keys'] as [number, { data: { last_used_at?: unknown }[] }];
  state['/api-keys'] = [status, { data: keys.data.map(({ last_used_at: _used, ...key }) => key) }];
  for (const ref of ['BP-40', 'TENT-2', 'LAMP-1', 'NEW-1']) state[ref] = await admin(`${merchantBase}/products/${ref}`);
  for (const store of ['de', 'pl', 'jp'])
    state[`public ${store}`] = (await target.api(`/v1/products?store=${store}&per_page=200`, key)).body;
  // Every row behind those reads, through the storage port (either engine).
  const rows = { products: 0, changes: 0, published: 0 };
  const { storage } = target;
  for (const merchant of await storage.listMerchants()) {
    rows.products += (await storage.productsAfter(merchant.id, 0, Number.MAX_SAFE_INTEGER)).length;
    for (const store of await storage.listStores(merchant.id)) {
      rows.changes += (await storage.changesAfter(store.id, { at: '', id: 0 }, Number.MAX_SAFE_INTEGER)).length;
      rows.published += (await storage.publishedProductIds(store.id)).length;
    }
  }
  state.rows = rows;
  return state;
}

interface Case {
  request: string;
  method?: string;
  path: string | (() => string);
  body?: unknown;
  headers?: Record<string, string>;
  code: 'invalid_parameter' | 'invalid_body';
  /** Every offending input, as `in:name`. */
  params: string[];
}

function expectProblem(response: TestResponse, c: Pick<Case, 'code' | 'params'>, status = 400) {
  expect(response.status, response.text).toBe(status);
  expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  expect(response.body).toMatchObject({ status, code: c.code, type: `urn:problem:catalog:${c.code}` });
  const named = response.body.invalid_params.map((p: { in: string; name: string }) => `${p.in}:${p.name}`);
  expect([...new Set(named)].sort()).toEqual([...c.params].sort());
}

const publicCases: Case[] = [
  { request: 'per_page=abc', path: '/v1/products?per_page=abc', code: 'invalid_parameter', params: ['query:per_page'] },
  { request: 'per_page=1.5', path: '/v1/products?per_page=1.5', code: 'invalid_parameter', params: ['query:per_page'] },
  { request: 'per_page= (empty)', path: '/v1/products?per_page=', code: 'invalid_parameter', params: ['query:per_page'] },
  { request: 'per_page=1e2', path: '/v1/products?per_page=1e2', code: 'invalid_parameter', params: ['query:per_page'] },
  { request: 'page=0', path: '/v1/products?page=0', code: 'invalid_parameter', params: ['query:page'] },
  { request: 'page=-1', path: '/v1/products?page=-1', code: 'invalid_parameter', params: ['query:page'] },
  { request: 'page=x', path: '/v1/products?page=x', code: 'invalid_parameter', params: ['query:page'] },
  { request: 'page=2.5', path: '/v1/products?page=2.5', code: 'invalid_parameter', params: ['query:page'] },
  {
    request: 'per_page=abc&page=0 (both named)',
    path: '/v1/products?per_page=abc&page=0',
    code: 'invalid_parameter',
    params: ['query:per_page', 'query:page'],
  },
  { request: 'store=UPPER on the list', path: '/v1/products?store=UPPER', code: 'invalid_parameter', params: ['query:store'] },
  { request: 'store=under_score', path: '/v1/products?store=under_score', code: 'invalid_parameter', params: ['query:store'] },
  { request: 'id=abc', path: '/v1/products/abc', code: 'invalid_parameter', params: ['path:id'] },
  { request: 'id=0', path: '/v1/products/0', code: 'invalid_parameter', params: ['path:id'] },
  { request: 'id=-1', path: '/v1/products/-1', code: 'invalid_parameter', params: ['path:id'] },
  { request: 'id=1.5', path: '/v1/products/1.5', code: 'invalid_parameter', params: ['path:id'] },
  { request: 'id=99999999999999999999', path: '/v1/products/99999999999999999999', code: 'invalid_parameter', params: ['path:id'] },
  {
    request: 'id=9007199254740993 (past the safe integer range)',
    path: '/v1/products/9007199254740993',
    code: 'invalid_parameter',
    params: ['path:id'],
  },
  { request: 'store=UPPER on one product', path: '/v1/products/1?store=UPPER', code: 'invalid_parameter', params: ['query:store'] },
];

describe('bad input on the public API', () => {
  it.each(publicCases)('answers 400 $code naming the parameter for $request', async (c) => {
    const before = await snapshot(service, catalog.merchant.base, catalog.merchant.key);
    const response = await service.api(c.path as string, catalog.merchant.key);
    expectProblem(response, c);
    expect(response.body.instance).toBe(new URL(c.path as string, 'http://x').pathname);
    expect(await snapshot(service, catalog.merchant.base, catalog.merchant.key)).toEqual(before);
  });

  it('checks authentication before parameters', async () => {
    const response = await service.api('/v1/products?per_page=abc', null);
    expect(response.status).toBe(401);
  });
});

const m = () => catalog.merchant.base;
const product = (body: Record<string, unknown>) => ({ content: { de: { title: 'Neu' } }, ...body });
const offer = (extra: Record<string, unknown> = {}) => ({ supplier_ref: 'alpine', quantity: 1, cost: '10.00', currency: 'EUR', ...extra });

const adminCases: Case[] = [
  // Wrong types
  {
    request: 'a merchant name that is a number',
    method: 'POST',
    path: '/admin/v1/merchants',
    body: { name: 42 },
    code: 'invalid_body',
    params: ['body:/name'],
  },
  {
    request: 'a merchant without its required name',
    method: 'POST',
    path: '/admin/v1/merchants',
    body: {},
    code: 'invalid_body',
    params: ['body:/name'],
  },
  {
    request: 'an owner email that is not an email',
    method: 'POST',
    path: '/admin/v1/merchants',
    body: { name: 'X', owner_emails: ['nope'] },
    code: 'invalid_body',
    params: ['body:/owner_emails/0'],
  },
  {
    request: 'a SKU pattern with an unknown token',
    method: 'PATCH',
    path: () => m(),
    body: { sku_pattern: 'X-{colour}' },
    code: 'invalid_body',
    params: ['body:/sku_pattern'],
  },
  {
    request: 'a merchant name set to null',
    method: 'PATCH',
    path: () => m(),
    body: { name: null },
    code: 'invalid_body',
    params: ['body:/name'],
  },
  {
    request: 'a store flag that is a string',
    method: 'PUT',
    path: () => `${m()}/stores/at`,
    body: { name: 'AT', locale: 'de-AT', currency: 'EUR', is_default: 'yes' },
    code: 'invalid_body',
    params: ['body:/is_default'],
  },
  {
    request: 'a store locale and currency in the wrong form',
    method: 'PUT',
    path: () => `${m()}/stores/at`,
    body: { name: 'AT', locale: 'de_AT', currency: 'eur' },
    code: 'invalid_body',
    params: ['body:/locale', 'body:/currency'],
  },
  {
    request: 'a pricing rule priority that is a string',
    method: 'POST',
    path: () => `${m()}/pricing-rules`,
    body: { priority: '10' },
    code: 'invalid_body',
    params: ['body:/priority'],
  },
  {
    request: 'an offer quantity that is negative',
    method: 'PUT',
    path: () => `${m()}/products/NEW-1`,
    body: product({ offers: [offer({ quantity: -1 })] }),
    code: 'invalid_body',
    params: ['body:/offers/0/quantity'],
  },
  {
    request: 'an offer quantity that is not an integer',
    method: 'PUT',
    path: () => `${m()}/products/NEW-1`,
    body: product({ offers: [offer({ quantity: 1.5 })] }),
    code: 'invalid_body',
    params: ['body:/offers/0/quantity'],
  },
  {
    request: 'an image URL that is not http(s)',
    method: 'PUT',
    path: () => `${m()}/products/NEW-1`,
    body: product({ images: [{ url: 'ftp://img.example.test/1.jpg' }] }),
    code: 'invalid_body',
    params: ['body:/images/0/url'],
  },
  {
    request: 'a customer group name that is empty',
    method: 'POST',
    path: () => `${m()}/customer-groups`,
    body: { name: '' },
    code: 'invalid_body',
    params: ['body:/name'],
  },
  {
    request: 'a JSON array instead of an object',
    method: 'POST',
    path: () => `${m()}/customer-groups`,
    body: [],
    code: 'invalid_body',
    params: ['body:/'],
  },
  // Unknown fields
  {
    request: 'an unknown top-level field',
    method: 'POST',
    path: '/admin/v1/merchants',
    body: { name: 'X', colour: 'red' },
    code: 'invalid_body',
    params: ['body:/colour'],
  },
  {
    request: 'an unknown field in a product',
    method: 'PUT',
    path: () => `${m()}/products/NEW-1`,
    body: product({ titel: 'Neu' }),
    code: 'invalid_body',
    params: ['body:/titel'],
  },
  {
    request: 'an unknown field in an offer',
    method: 'PUT',
    path: () => `${m()}/products/NEW-1`,
    body: product({ offers: [offer({ price: '1.00' })] }),
    code: 'invalid_body',
    params: ['body:/offers/0/price'],
  },
  {
    // is_catch_all is read-only (a rule as listed is accepted, the member ignored), but typed.
    request: 'an is_catch_all field on a pricing rule that is not a boolean',
    method: 'POST',
    path: () => `${m()}/pricing-rules`,
    body: { priority: 5, is_catch_all: 'yes' },
    code: 'invalid_body',
    params: ['body:/is_catch_all'],
  },
  // Bad decimals
  {
    request: 'an exchange rate with a decimal comma',
    method: 'PUT',
    path: () => `${m()}/exchange-rates/EUR/PLN`,
    body: { rate: '4,30' },
    code: 'invalid_body',
    params: ['body:/rate'],
  },
  {
    request: 'an exchange rate sent as a JSON number',
    method: 'PUT',
    path: () => `${m()}/exchange-rates/EUR/PLN`,
    body: { rate: 4.3 },
    code: 'invalid_body',
    params: ['body:/rate'],
  },
  {
    request: 'an exchange rate of zero',
    method: 'PUT',
    path: () => `${m()}/exchange-rates/EUR/PLN`,
    body: { rate: '0.000' },
    code: 'invalid_body',
    params: ['body:/rate'],
  },
  {
    request: 'a negative exchange rate',
    method: 'PUT',
    path: () => `${m()}/exchange-rates/EUR/PLN`,
    body: { rate: '-4.25' },
    code: 'invalid_body',
    params: ['body:/rate'],
  },
  {
    request: 'an offer cost with a decimal comma',
    method: 'PUT',
    path: () => `${m()}/products/BP-40`,
    body: product({ offers: [offer({ cost: '12,50' })] }),
    code: 'invalid_body',
    params: ['body:/offers/0/cost'],
  },
  {
    request: 'an offer cost sent as a JSON number',
    method: 'PUT',
    path: () => `${m()}/products/BP-40`,
    body: product({ offers: [offer({ cost: 12.5 })] }),
    code: 'invalid_body',
    params: ['body:/offers/0/cost'],
  },
  {
    request: 'an own stock cost in exponent notation',
    method: 'PUT',
    path: () => `${m()}/products/BP-40`,
    body: product({ own_stock: { quantity: 1, cost: '1e3', currency: 'EUR' } }),
    code: 'invalid_body',
    params: ['body:/own_stock/cost'],
  },
  {
    request: 'a markup percent with a percent sign',
    method: 'POST',
    path: () => `${m()}/pricing-rules`,
    body: { priority: 5, markup_percent: '10%' },
    code: 'invalid_body',
    params: ['body:/markup_percent'],
  },
  {
    request: 'a min_cost above max_cost',
    method: 'POST',
    path: () => `${m()}/pricing-rules`,
    body: { priority: 5, min_cost: '50.00', max_cost: '10.00' },
    code: 'invalid_body',
    params: ['body:/min_cost'],
  },
  // Referential rules
  {
    request: 'an unknown supplier_ref',
    method: 'PUT',
    path: () => `${m()}/products/NEW-1`,
    body: product({ offers: [offer({ supplier_ref: 'nobody' })] }),
    code: 'invalid_body',
    params: ['body:/offers/0/supplier_ref'],
  },
  {
    request: 'duplicate supplier offers',
    method: 'PUT',
    path: () => `${m()}/products/BP-40`,
    body: product({ offers: [offer(), offer({ cost: '9.00' })] }),
    code: 'invalid_body',
    params: ['body:/offers/1/supplier_ref'],
  },
  {
    request: 'an unknown supplier in supplier attributes',
    method: 'PUT',
    path: () => `${m()}/products/NEW-1`,
    body: product({ supplier_attributes: [{ supplier_ref: 'nobody', key: 'weight', value: '1' }] }),
    code: 'invalid_body',
    params: ['body:/supplier_attributes/0/supplier_ref'],
  },
  {
    request: 'a supplier attribute given twice',
    method: 'PUT',
    path: () => `${m()}/products/NEW-1`,
    body: product({
      supplier_attributes: [
        { supplier_ref: 'alpine', key: 'weight', value: '1' },
        { supplier_ref: 'alpine', key: 'weight', value: '2' },
      ],
    }),
    code: 'invalid_body',
    params: ['body:/supplier_attributes/1/key'],
  },
  {
    request: 'an EAN listed twice',
    method: 'PUT',
    path: () => `${m()}/products/NEW-1`,
    body: product({ eans: ['4006381333931', '4006381333931'] }),
    code: 'invalid_body',
    params: ['body:/eans/1'],
  },
  {
    request: 'an excluded store that does not exist',
    method: 'PUT',
    path: () => `${m()}/products/NEW-1`,
    body: product({ excluded_stores: ['fr'] }),
    code: 'invalid_body',
    params: ['body:/excluded_stores/0'],
  },
  {
    request: 'an own stock cost without a currency',
    method: 'PUT',
    path: () => `${m()}/products/NEW-1`,
    body: product({ own_stock: { quantity: 1, cost: '5.00' } }),
    code: 'invalid_body',
    params: ['body:/own_stock'],
  },
  {
    request: "a pricing rule for another merchant's or no customer group",
    method: 'POST',
    path: () => `${m()}/pricing-rules`,
    body: { priority: 5, customer_group_id: 999999 },
    code: 'invalid_body',
    params: ['body:/customer_group_id'],
  },
  {
    request: 'a pricing rule for an unknown store',
    method: 'POST',
    path: () => `${m()}/pricing-rules`,
    body: { priority: 5, store_id: 999999 },
    code: 'invalid_body',
    params: ['body:/store_id'],
  },
  {
    request: 'a pricing rule with the reserved catch-all priority',
    method: 'POST',
    path: () => `${m()}/pricing-rules`,
    body: { priority: 2147483647 },
    code: 'invalid_body',
    params: ['body:/priority'],
  },
  // Malformed JSON and bad path parameters
  {
    request: 'malformed JSON',
    method: 'PUT',
    path: () => `${m()}/products/NEW-1`,
    body: '{"content": {"de": ',
    headers: { 'Content-Type': 'application/json' },
    code: 'invalid_body',
    params: ['body:/'],
  },
  {
    request: 'malformed JSON on a merchant',
    method: 'POST',
    path: '/admin/v1/merchants',
    body: '{name: "X"}',
    headers: { 'Content-Type': 'application/json' },
    code: 'invalid_body',
    params: ['body:/'],
  },
  {
    request: 'a JSON product sent as a form',
    method: 'PUT',
    path: () => `${m()}/products/BP-40`,
    body: JSON.stringify(product({})),
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    code: 'invalid_body',
    params: ['body:/'],
  },
  {
    request: 'a JSON merchant patch sent as text/plain',
    method: 'PATCH',
    path: () => m(),
    body: JSON.stringify({ sku_pattern: null }),
    headers: { 'Content-Type': 'text/plain' },
    code: 'invalid_body',
    params: ['body:/'],
  },
  {
    request: 'a store sent with a JSON-like but different media type',
    method: 'PUT',
    path: () => `${m()}/stores/at`,
    body: JSON.stringify({ name: 'AT', locale: 'de-AT', currency: 'EUR' }),
    headers: { 'Content-Type': 'application/jsonp' },
    code: 'invalid_body',
    params: ['body:/'],
  },
  {
    request: 'a product PUT without any body',
    method: 'PUT',
    path: () => `${m()}/products/BP-40`,
    code: 'invalid_body',
    params: ['body:/'],
  },
  { request: 'a merchant PATCH without any body', method: 'PATCH', path: () => m(), code: 'invalid_body', params: ['body:/'] },
  {
    request: 'a merchant id that is not an integer',
    method: 'GET',
    path: '/admin/v1/merchants/abc',
    code: 'invalid_parameter',
    params: ['path:merchant_id'],
  },
  {
    request: 'a product ref with a space',
    method: 'PUT',
    path: () => `${m()}/products/BP%2040`,
    body: product({}),
    code: 'invalid_parameter',
    params: ['path:product_ref'],
  },
  {
    request: 'an exchange rate between one currency and itself',
    method: 'PUT',
    path: () => `${m()}/exchange-rates/EUR/EUR`,
    body: { rate: '1' },
    code: 'invalid_parameter',
    params: ['path:quote'],
  },
  {
    request: 'a lower-case currency in the path',
    method: 'PUT',
    path: () => `${m()}/exchange-rates/eur/PLN`,
    body: { rate: '4.30' },
    code: 'invalid_parameter',
    params: ['path:base'],
  },
  {
    request: 'a store slug in upper case',
    method: 'PUT',
    path: () => `${m()}/stores/AT`,
    body: { name: 'AT', locale: 'de-AT', currency: 'EUR' },
    code: 'invalid_parameter',
    params: ['path:slug'],
  },
  {
    request: 'a group id that is not an integer',
    method: 'DELETE',
    path: () => `${m()}/customer-groups/first`,
    code: 'invalid_parameter',
    params: ['path:group_id'],
  },
];

describe('bad input on the admin API', () => {
  it.each(adminCases)('answers 400 $code naming the offending input and changes nothing: $request', async (c) => {
    const before = await snapshot(service, catalog.merchant.base, catalog.merchant.key);
    const path = typeof c.path === 'function' ? c.path() : c.path;
    const response = await service.adminApi(c.method ?? 'GET', path, c.body, c.headers ? { headers: c.headers } : {});
    expectProblem(response, c);
    expect(await snapshot(service, catalog.merchant.base, catalog.merchant.key)).toEqual(before);
  });

  it('answers 400 listing every bad line of an import, applying nothing', async () => {
    const before = await snapshot(service, catalog.merchant.base, catalog.merchant.key);
    const lines = [
      JSON.stringify({ op: 'upsert_product', product: { ref: 'NEW-1', content: { de: { title: 'Neu' } } } }),
      '{"op": "upsert_product", ',
      JSON.stringify({ op: 'upsert_product', product: { ref: 'BP-40', offers: [offer({ supplier_ref: 'nobody' })] } }),
      JSON.stringify({ op: 'rename_product', ref: 'BP-40' }),
      JSON.stringify({ op: 'delete_product', ref: 'TENT-2' }),
    ];
    const response = await importNdjson(service, catalog.merchant.id, lines.join('\n'));
    expectProblem(response, { code: 'invalid_body', params: ['body:line 2', 'body:line 3', 'body:line 4'] });
    expect(await snapshot(service, catalog.merchant.base, catalog.merchant.key)).toEqual(before);
  });
});

describe('oversize bodies', () => {
  let small: TestService;
  let smallCatalog: OutdoorCatalog;

  beforeAll(async () => {
    small = await startTestService({ config: { limits: { adminBodyBytes: 1024, importBodyBytes: 2048, publishChunk: 2000 } } });
    smallCatalog = await buildOutdoorCatalog(small);
  });
  afterAll(() => small.close());

  it('answers 413 payload_too_large for an admin body above the limit, changing nothing', async () => {
    const before = await snapshot(small, smallCatalog.merchant.base, smallCatalog.merchant.key);
    const body = { content: { de: { title: 'Neu', description: 'x'.repeat(2000) } } };
    for (const ref of ['NEW-1', 'BP-40']) {
      const response = await small.adminApi('PUT', `${smallCatalog.merchant.base}/products/${ref}`, body);
      expect(response.status).toBe(413);
      expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(response.body).toMatchObject({ status: 413, code: 'payload_too_large', type: 'urn:problem:catalog:payload_too_large' });
    }
    expect(await snapshot(small, smallCatalog.merchant.base, smallCatalog.merchant.key)).toEqual(before);
  });

  it('accepts a body just under the limit', async () => {
    const body = { content: { de: { title: 'Neu', description: 'x'.repeat(900) } } };
    expect(JSON.stringify(body).length).toBeLessThan(1024);
    const response = await small.adminApi('PUT', `${smallCatalog.merchant.base}/products/FITS-1`, body);
    expect(response.status).toBe(200);
  });

  it('answers 413 for an import above the import limit, applying nothing', async () => {
    const before = await snapshot(small, smallCatalog.merchant.base, smallCatalog.merchant.key);
    const lines = Array.from({ length: 40 }, (_, i) => ({
      op: 'upsert_product',
      product: { ref: `BULK-${i}`, content: { de: { title: `Produkt ${i}` } } },
    }));
    const response = await importNdjson(small, smallCatalog.merchant.id, lines);
    expect(response.status).toBe(413);
    expect(response.body.code).toBe('payload_too_large');
    expect(await snapshot(small, smallCatalog.merchant.base, smallCatalog.merchant.key)).toEqual(before);
  });

  it('answers 401, not 413, to an oversize body without the admin token', async () => {
    const response = await small.adminApi('POST', '/admin/v1/merchants', { name: 'x'.repeat(5000) }, { headers: { Authorization: '' } });
    expect(response.status).toBe(401);
  });
});

it('leaves the catalog readable after all the bad input', async () => {
  const page = await service.api('/v1/products', catalog.merchant.key);
  expect(page.body.meta.total).toBe(3);
  const source = await adminOk(service, 'GET', `${catalog.merchant.base}/products/BP-40`);
  expect(source.offers).toHaveLength(2);
});
