// Every operation of openapi/admin.yaml over real HTTP, with its effect on the public API.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminOk, buildOutdoorCatalog, createMerchant, importNdjson, simpleProduct, type OutdoorCatalog } from '../support/admin-http.js';
import { ADMIN_TOKEN, startTestService, type TestService } from '../support/service.js';

let service: TestService;

beforeAll(async () => {
  service = await startTestService();
});
afterAll(() => service.close());

const CATCH_ALL_PRIORITY = 2147483647;

/** The public payload of a product in a store. */
async function published(key: string, id: number, store = 'de') {
  const response = await service.api(`/v1/products/${id}?store=${store}`, key);
  expect(response.status, response.text).toBe(200);
  return response.body.data;
}

const priceOf = (product: { prices: { customer_group: string; computed_price: number; base_cost: number }[] }, group: string) =>
  product.prices.find((p) => p.customer_group === group);

describe('admin authentication', () => {
  it('answers 401 with WWW-Authenticate: Bearer realm="admin" without the admin token', async () => {
    const response = await service.adminApi('GET', '/admin/v1/merchants', undefined, { headers: { Authorization: '' } });
    expect(response.status).toBe(401);
    expect(response.headers.get('www-authenticate')).toBe('Bearer realm="admin"');
    expect(response.body).toMatchObject({ status: 401, code: 'unauthorized' });
  });

  it('answers 401 with exactly the documented challenge to a wrong admin token', async () => {
    for (const token of [`${ADMIN_TOKEN}x`, 'cps_not_the_admin_token']) {
      const response = await service.adminApi(
        'POST',
        '/admin/v1/merchants',
        { name: 'Intruder' },
        { headers: { Authorization: `Bearer ${token}` } },
      );
      expect(response.status).toBe(401);
      expect(response.headers.get('www-authenticate')).toBe('Bearer realm="admin", error="invalid_token"');
      expect(response.body.code).toBe('unauthorized');
    }
    const merchants = await adminOk(service, 'GET', '/admin/v1/merchants');
    expect(merchants.data.map((m: { name: string }) => m.name)).not.toContain('Intruder');
  });

  it('answers 401 on every admin operation without the token, before anything else', async () => {
    for (const [method, path] of [
      ['GET', '/admin/v1/merchants/1'],
      ['PUT', '/admin/v1/merchants/1/stores/de'],
      ['DELETE', '/admin/v1/merchants/1/products/X'],
      ['POST', '/admin/v1/merchants/1/imports'],
      ['GET', '/admin/v1/merchants/abc'],
    ] as const) {
      const response = await service.adminApi(method, path, method === 'GET' || method === 'DELETE' ? undefined : {}, {
        headers: { Authorization: '' },
      });
      expect(response.status, `${method} ${path}`).toBe(401);
    }
  });
});

describe('merchants', () => {
  it('creates a merchant with defaults and its catch-all pricing rule', async () => {
    const created = await service.adminApi('POST', '/admin/v1/merchants', { name: 'Fresh Merchant' });
    expect(created.status).toBe(201);
    expect(created.body).toEqual({
      id: expect.any(Number),
      name: 'Fresh Merchant',
      sku_pattern: null,
      owner_emails: [],
      created_at: expect.any(String),
    });
    const rules = await adminOk(service, 'GET', `/admin/v1/merchants/${created.body.id}/pricing-rules`);
    expect(rules.data).toEqual([
      {
        id: expect.any(Number),
        priority: CATCH_ALL_PRIORITY,
        customer_group_id: null,
        store_id: null,
        manufacturer: null,
        min_cost: null,
        max_cost: null,
        markup_percent: '0',
        markup_amount: '0',
        price_ending: null,
        is_catch_all: true,
      },
    ]);
    for (const part of ['stores', 'customer-groups', 'suppliers', 'api-keys', 'exchange-rates', 'attributes']) {
      expect((await adminOk(service, 'GET', `/admin/v1/merchants/${created.body.id}/${part}`)).data, part).toEqual([]);
    }
  });

  it('lists merchants ordered by id and reads one', async () => {
    const a = await adminOk(service, 'POST', '/admin/v1/merchants', { name: 'Listed A', owner_emails: ['owner@a.test'] }, 201);
    const b = await adminOk(service, 'POST', '/admin/v1/merchants', { name: 'Listed B', sku_pattern: 'B-{id}' }, 201);
    const list = await adminOk(service, 'GET', '/admin/v1/merchants');
    const ids = list.data.map((m: { id: number }) => m.id);
    expect(ids).toEqual([...ids].sort((x, y) => x - y));
    expect(list.data).toEqual(expect.arrayContaining([a, b]));
    expect(await adminOk(service, 'GET', `/admin/v1/merchants/${b.id}`)).toEqual(b);
  });

  it('changes only the fields present in a PATCH', async () => {
    const merchant = await adminOk(
      service,
      'POST',
      '/admin/v1/merchants',
      { name: 'Patchable', sku_pattern: 'P-{id}', owner_emails: ['a@p.test'] },
      201,
    );
    const patched = await adminOk(service, 'PATCH', `/admin/v1/merchants/${merchant.id}`, { owner_emails: ['b@p.test', 'c@p.test'] });
    expect(patched).toEqual({ ...merchant, owner_emails: ['b@p.test', 'c@p.test'] });
    const renamed = await adminOk(service, 'PATCH', `/admin/v1/merchants/${merchant.id}`, { name: 'Renamed' });
    expect(renamed).toEqual({ ...merchant, name: 'Renamed', owner_emails: ['b@p.test', 'c@p.test'] });
  });

  it('re-resolves every product when the SKU pattern changes', async () => {
    const catalog = await buildOutdoorCatalog(service, 'SKU Merchant');
    const { backpack, lamp } = catalog.products;
    const key = catalog.merchant.key;
    expect((await published(key, backpack.id)).sku).toBe('AO-BP-40');
    await adminOk(service, 'PATCH', catalog.merchant.base, { sku_pattern: '{ean}' });
    expect((await published(key, backpack.id)).sku).toBe('4006381333931');
    expect((await published(key, backpack.id, 'pl')).sku).toBe('4006381333931');
    // a token without a value gives no SKU
    expect((await published(key, lamp.id)).sku).toBeNull();
    await adminOk(service, 'PATCH', catalog.merchant.base, { sku_pattern: null });
    expect((await published(key, backpack.id)).sku).toBeNull();
  });

  it('answers 404 not_found for an unknown merchant', async () => {
    for (const [method, path, body] of [
      ['GET', '/admin/v1/merchants/999999', undefined],
      ['PATCH', '/admin/v1/merchants/999999', { name: 'Ghost' }],
      ['GET', '/admin/v1/merchants/999999/stores', undefined],
      ['PUT', '/admin/v1/merchants/999999/stores/de', { name: 'DE', locale: 'de-DE', currency: 'EUR' }],
      ['POST', '/admin/v1/merchants/999999/api-keys', { name: 'k' }],
      ['POST', '/admin/v1/merchants/999999/imports', ''],
    ] as const) {
      const response = await service.adminApi(method, path, body);
      expect(response.status, `${method} ${path}`).toBe(404);
      expect(response.body.code).toBe('not_found');
    }
  });
});

describe('API keys', () => {
  let merchant: { id: number; base: string };

  beforeAll(async () => {
    const created = await adminOk(service, 'POST', '/admin/v1/merchants', { name: 'Key Merchant' }, 201);
    merchant = { id: created.id, base: `/admin/v1/merchants/${created.id}` };
    await adminOk(service, 'PUT', `${merchant.base}/stores/de`, { name: 'DE', locale: 'de-DE', currency: 'EUR' });
  });

  it('shows a created key once, and the key works on the public API at once', async () => {
    const response = await service.adminApi('POST', `${merchant.base}/api-keys`, { name: 'shop integration' });
    expect(response.status).toBe(201);
    const { key, prefix, revoked_at, name } = response.body;
    expect(key).toMatch(/^cps_[A-Za-z0-9_-]{43}$/);
    expect(prefix).toBe(key.slice(0, 12));
    expect([name, revoked_at]).toEqual(['shop integration', null]);
    const stores = await service.api('/v1/stores', key);
    expect(stores.status).toBe(200);
    expect(stores.body.data.map((s: { slug: string }) => s.slug)).toEqual(['de']);
  });

  it('never shows the key in the list, only its prefix', async () => {
    const created = await adminOk(service, 'POST', `${merchant.base}/api-keys`, { name: 'listed' }, 201);
    const list = await service.adminApi('GET', `${merchant.base}/api-keys`);
    expect(list.status).toBe(200);
    expect(list.text).not.toContain(created.key);
    const entry = list.body.data.find((k: { id: number }) => k.id === created.id);
    expect(entry).toEqual({
      id: created.id,
      name: 'listed',
      prefix: created.prefix,
      scopes: ['catalog:read'],
      stores: null,
      allowed_origins: [],
      created_at: created.created_at,
      revoked_at: null,
      expires_at: null,
      rolled_from: null,
      last_used_at: null,
    });
    expect(list.body.data.every((k: Record<string, unknown>) => !('key' in k))).toBe(true);
    const ids = list.body.data.map((k: { id: number }) => k.id);
    expect(ids).toEqual([...ids].sort((x, y) => x - y));
  });

  it('revokes a key: 401 on the public API from then on, listed with revoked_at, revoking again keeps it', async () => {
    const created = await adminOk(service, 'POST', `${merchant.base}/api-keys`, { name: 'to revoke' }, 201);
    expect((await service.api('/v1/stores', created.key)).status).toBe(200);
    const revoke = await service.adminApi('DELETE', `${merchant.base}/api-keys/${created.id}`);
    expect(revoke.status).toBe(204);
    expect(revoke.text).toBe('');
    const rejected = await service.api('/v1/products', created.key);
    expect(rejected.status).toBe(401);
    expect(rejected.body.code).toBe('unauthorized');
    const listed = (await adminOk(service, 'GET', `${merchant.base}/api-keys`)).data.find((k: { id: number }) => k.id === created.id);
    expect(listed.revoked_at).toEqual(expect.any(String));
    await adminOk(service, 'DELETE', `${merchant.base}/api-keys/${created.id}`);
    const again = (await adminOk(service, 'GET', `${merchant.base}/api-keys`)).data.find((k: { id: number }) => k.id === created.id);
    expect(again.revoked_at).toBe(listed.revoked_at);
  });

  it('answers 404 to revoking an unknown key', async () => {
    const response = await service.adminApi('DELETE', `${merchant.base}/api-keys/999999`);
    expect(response.status).toBe(404);
    expect(response.body.code).toBe('not_found');
  });
});

describe('stores', () => {
  async function freshMerchant(name: string) {
    const merchant = await createMerchant(service, name);
    return merchant;
  }
  const storeBody = (name: string, extra: Record<string, unknown> = {}) => ({ name, locale: 'de-DE', currency: 'EUR', ...extra });

  it('makes the first store the default whatever is_default says, with the documented defaults', async () => {
    const { base } = await freshMerchant('First Store');
    const first = await adminOk(service, 'PUT', `${base}/stores/main`, storeBody('Main', { is_default: false }));
    expect(first).toEqual({
      id: expect.any(Number),
      slug: 'main',
      name: 'Main',
      locale: 'de-DE',
      currency: 'EUR',
      is_default: true,
      active: true,
      exclude_out_of_stock: false,
    });
    const second = await adminOk(service, 'PUT', `${base}/stores/second`, storeBody('Second'));
    expect(second.is_default).toBe(false);
  });

  it('answers 409 to a first store that is inactive, creating nothing', async () => {
    const { base } = await freshMerchant('Inactive First');
    const response = await service.adminApi('PUT', `${base}/stores/main`, storeBody('Main', { active: false }));
    expect(response.status).toBe(409);
    expect(response.body.code).toBe('conflict');
    expect((await adminOk(service, 'GET', `${base}/stores`)).data).toEqual([]);
  });

  it('switches the default store: the previous default loses the flag, the new one is listed first', async () => {
    const merchant = await freshMerchant('Switching');
    const { base } = merchant;
    const a = await adminOk(service, 'PUT', `${base}/stores/a`, storeBody('A'));
    const b = await adminOk(service, 'PUT', `${base}/stores/b`, storeBody('B'));
    const c = await adminOk(service, 'PUT', `${base}/stores/c`, storeBody('C'));
    const switched = await adminOk(service, 'PUT', `${base}/stores/c`, storeBody('C', { is_default: true }));
    expect({ ...switched, is_default: false }).toEqual(c);
    expect(switched.is_default).toBe(true);
    const list = await adminOk(service, 'GET', `${base}/stores`);
    expect(list.data.map((s: { slug: string; is_default: boolean }) => [s.slug, s.is_default])).toEqual([
      ['c', true],
      ['a', false],
      ['b', false],
    ]);
    expect(list.data.map((s: { id: number }) => s.id)).toEqual([c.id, a.id, b.id]);
    const publicStores = await service.api('/v1/stores', merchant.key);
    expect(publicStores.body.data.map((s: { slug: string }) => s.slug)).toEqual(['c', 'a', 'b']);
  });

  it('answers 409 to making the default store inactive or not default, changing nothing', async () => {
    const { base } = await freshMerchant('Guarded Default');
    await adminOk(service, 'PUT', `${base}/stores/a`, storeBody('A'));
    await adminOk(service, 'PUT', `${base}/stores/b`, storeBody('B'));
    const before = await adminOk(service, 'GET', `${base}/stores`);
    for (const body of [
      storeBody('A', { is_default: true, active: false }),
      storeBody('A', { is_default: false }),
      storeBody('A renamed'),
    ]) {
      const response = await service.adminApi('PUT', `${base}/stores/a`, body);
      expect(response.status).toBe(409);
      expect(response.body.code).toBe('conflict');
    }
    // A new store cannot become the default while inactive either.
    expect((await service.adminApi('PUT', `${base}/stores/c`, storeBody('C', { is_default: true, active: false }))).status).toBe(409);
    expect(await adminOk(service, 'GET', `${base}/stores`)).toEqual(before);
  });

  it('answers 409 to deleting the default store', async () => {
    const { base } = await freshMerchant('Undeletable Default');
    await adminOk(service, 'PUT', `${base}/stores/a`, storeBody('A'));
    const response = await service.adminApi('DELETE', `${base}/stores/a`);
    expect(response.status).toBe(409);
    expect(response.body.code).toBe('conflict');
    expect((await adminOk(service, 'GET', `${base}/stores`)).data).toHaveLength(1);
  });

  it("deletes a store: it answers 404 store_not_found and its slug leaves every product's excluded_stores", async () => {
    const catalog = await buildOutdoorCatalog(service, 'Deleting Stores');
    const { base, key } = catalog.merchant;
    expect((await adminOk(service, 'GET', `${base}/products/LAMP-1`)).excluded_stores).toEqual(['pl']);
    await adminOk(service, 'DELETE', `${base}/stores/pl`);
    const response = await service.api('/v1/products?store=pl', key);
    expect(response.status).toBe(404);
    expect(response.body.code).toBe('store_not_found');
    expect((await adminOk(service, 'GET', `${base}/products/LAMP-1`)).excluded_stores).toEqual([]);
    expect((await service.api('/v1/stores', key)).body.data.map((s: { slug: string }) => s.slug)).toEqual(['de', 'jp']);
    expect((await service.adminApi('DELETE', `${base}/stores/pl`)).status).toBe(404);
  });

  it('answers 409 to deleting a store a pricing rule refers to', async () => {
    const catalog = await buildOutdoorCatalog(service, 'Rule On Store');
    const { base } = catalog.merchant;
    const rule = await adminOk(
      service,
      'POST',
      `${base}/pricing-rules`,
      { priority: 1, store_id: catalog.stores.jp.id, markup_percent: '5' },
      201,
    );
    const refused = await service.adminApi('DELETE', `${base}/stores/jp`);
    expect(refused.status).toBe(409);
    expect(refused.body.code).toBe('conflict');
    await adminOk(service, 'DELETE', `${base}/pricing-rules/${rule.id}`);
    await adminOk(service, 'DELETE', `${base}/stores/jp`);
  });

  it("re-resolves a store's products when its locale or currency changes", async () => {
    const catalog = await buildOutdoorCatalog(service, 'Relocalized');
    const { base, key } = catalog.merchant;
    const { backpack } = catalog.products;
    await adminOk(service, 'PUT', `${base}/stores/jp`, { name: 'Now Polish', locale: 'pl-PL', currency: 'PLN' });
    const product = await published(key, backpack.id, 'jp');
    expect(product).toMatchObject({ title: 'Plecak turystyczny 40 l', excluded: false, exclusion_reason: null });
    expect(priceOf(product, 'wholesale')).toMatchObject({ base_cost: 78.63, computed_price: 86.49, currency: 'PLN' });
    expect(product.attributes.find((a: { key: string }) => a.key === 'weight').label).toBe('Waga (kg)');
  });

  it('gives a store created after the newest store was deleted a new id, and lists all its products', async () => {
    const merchant = await freshMerchant('Store Churn');
    const { base, key } = merchant;
    await adminOk(service, 'PUT', `${base}/stores/de`, storeBody('DE'));
    await adminOk(service, 'PUT', `${base}/suppliers/alpine`, { name: 'Alpine' });
    const old = await adminOk(service, 'PUT', `${base}/stores/old`, storeBody('Old'));
    await importNdjson(service, merchant.id, [simpleProduct('P-1')]);
    expect((await service.api('/v1/products?store=old', key)).body.meta.total).toBe(1);
    await importNdjson(service, merchant.id, [simpleProduct('P-2')]);
    await adminOk(service, 'DELETE', `${base}/stores/old`);
    const fresh = await adminOk(service, 'PUT', `${base}/stores/new`, storeBody('New'));
    // Store ids are never reused: webhook payloads carry them as store_id.
    expect(fresh.id).toBeGreaterThan(old.id);
    const page = await service.api('/v1/products?store=new', key);
    expect(page.body.meta.total).toBe(2);
    expect(page.body.data).toHaveLength(2);
    const stores = await service.api('/v1/stores', key);
    expect(stores.body.data.map((s: { id: number; slug: string }) => [s.slug, s.id])).toEqual([
      ['de', expect.any(Number)],
      ['new', fresh.id],
    ]);
  });
});

describe('customer groups', () => {
  let catalog: OutdoorCatalog;

  beforeAll(async () => {
    catalog = await buildOutdoorCatalog(service, 'Group Merchant');
  });

  it('adds a price entry for a new group to every product, priced by the catch-all rule', async () => {
    const { base, key } = catalog.merchant;
    const vip = await service.adminApi('POST', `${base}/customer-groups`, { name: 'vip' });
    expect(vip.status).toBe(201);
    expect(vip.body).toEqual({ id: expect.any(Number), name: 'vip' });
    const list = await adminOk(service, 'GET', `${base}/customer-groups`);
    expect(list.data.map((g: { name: string }) => g.name)).toEqual(['retail', 'wholesale', 'vip']);
    const product = await published(key, catalog.products.backpack.id);
    expect(product.prices.map((p: { customer_group: string }) => p.customer_group)).toEqual(['retail', 'wholesale', 'vip']);
    expect(priceOf(product, 'vip')).toEqual({
      customer_group_id: vip.body.id,
      customer_group: 'vip',
      base_cost: 18.5,
      computed_price: 18.5,
      currency: 'EUR',
      applied_rule_id: catalog.rules.catchAll.id,
    });
  });

  it('renames a group in every price entry', async () => {
    const { base, key } = catalog.merchant;
    const renamed = await adminOk(service, 'PUT', `${base}/customer-groups/${catalog.groups.wholesale.id}`, { name: 'trade' });
    expect(renamed).toEqual({ id: catalog.groups.wholesale.id, name: 'trade' });
    const product = await published(key, catalog.products.tent.id);
    expect(product.prices.map((p: { customer_group: string }) => p.customer_group)).toContain('trade');
    expect(priceOf(product, 'trade')).toMatchObject({ customer_group_id: catalog.groups.wholesale.id, computed_price: 99 });
  });

  it('answers 409 to deleting a group a pricing rule refers to, and deletes it once the rule is gone', async () => {
    const { base, key } = catalog.merchant;
    const refused = await service.adminApi('DELETE', `${base}/customer-groups/${catalog.groups.retail.id}`);
    expect(refused.status).toBe(409);
    expect(refused.body.code).toBe('conflict');
    expect(priceOf(await published(key, catalog.products.backpack.id), 'retail')).toBeDefined();
    await adminOk(service, 'DELETE', `${base}/pricing-rules/${catalog.rules.retail.id}`);
    await adminOk(service, 'DELETE', `${base}/customer-groups/${catalog.groups.retail.id}`);
    const product = await published(key, catalog.products.backpack.id, 'pl');
    expect(product.prices.map((p: { customer_group: string }) => p.customer_group)).not.toContain('retail');
  });

  it('answers 409 to a name another group already has, on create and on rename', async () => {
    const { base } = catalog.merchant;
    const before = await adminOk(service, 'GET', `${base}/customer-groups`);
    const duplicate = await service.adminApi('POST', `${base}/customer-groups`, { name: before.data[0].name });
    expect(duplicate.status).toBe(409);
    expect(duplicate.body.code).toBe('conflict');
    const rename = await service.adminApi('PUT', `${base}/customer-groups/${before.data[1].id}`, { name: before.data[0].name });
    expect(rename.status).toBe(409);
    expect(await adminOk(service, 'GET', `${base}/customer-groups`)).toEqual(before);
  });

  it('answers 404 for an unknown group', async () => {
    const { base } = catalog.merchant;
    expect((await service.adminApi('PUT', `${base}/customer-groups/999999`, { name: 'x' })).status).toBe(404);
    expect((await service.adminApi('DELETE', `${base}/customer-groups/999999`)).status).toBe(404);
  });
});

describe('exchange rates', () => {
  let catalog: OutdoorCatalog;

  beforeAll(async () => {
    catalog = await buildOutdoorCatalog(service, 'Rate Merchant');
  });

  it('lists the rates by base, then quote', async () => {
    const list = await adminOk(service, 'GET', `${catalog.merchant.base}/exchange-rates`);
    expect(list.data).toEqual([
      { base: 'EUR', quote: 'JPY', rate: '160' },
      { base: 'EUR', quote: 'PLN', rate: '4.25' },
      { base: 'USD', quote: 'EUR', rate: '0.9' },
    ]);
  });

  it('re-prices the products when a rate changes', async () => {
    const { base, key } = catalog.merchant;
    const { backpack } = catalog.products;
    expect(priceOf(await published(key, backpack.id, 'pl'), 'wholesale')).toMatchObject({ base_cost: 78.63, computed_price: 86.49 });
    const stored = await adminOk(service, 'PUT', `${base}/exchange-rates/EUR/PLN`, { rate: '4.00' });
    expect(stored).toEqual({ base: 'EUR', quote: 'PLN', rate: '4.00' });
    const repriced = await published(key, backpack.id, 'pl');
    expect(priceOf(repriced, 'wholesale')).toMatchObject({ base_cost: 74, computed_price: 81.4 });
    expect(priceOf(repriced, 'retail')).toMatchObject({ base_cost: 74, computed_price: 103.99 });
    // The EUR store is untouched.
    expect(priceOf(await published(key, backpack.id, 'de'), 'wholesale')).toMatchObject({ base_cost: 18.5, computed_price: 20.35 });
  });

  it('converts with the inverse pair when the direct pair is missing', async () => {
    const { base, key } = catalog.merchant;
    await adminOk(service, 'DELETE', `${base}/exchange-rates/EUR/PLN`);
    await adminOk(service, 'PUT', `${base}/exchange-rates/PLN/EUR`, { rate: '0.25' });
    expect(priceOf(await published(key, catalog.products.backpack.id, 'pl'), 'wholesale')).toMatchObject({ base_cost: 74 });
  });

  it('ignores offers that can no longer be converted once the rate is deleted', async () => {
    const { base, key } = catalog.merchant;
    await adminOk(service, 'DELETE', `${base}/exchange-rates/PLN/EUR`);
    const product = await published(key, catalog.products.backpack.id, 'pl');
    // Only the own stock is left; its EUR cost cannot be converted either.
    expect(product.stock).toBe(2);
    expect(priceOf(product, 'wholesale')).toMatchObject({ base_cost: 0, computed_price: 0 });
  });

  it('answers 404 to deleting an unknown pair', async () => {
    const response = await service.adminApi('DELETE', `${catalog.merchant.base}/exchange-rates/EUR/CHF`);
    expect(response.status).toBe(404);
    expect(response.body.code).toBe('not_found');
  });
});

describe('pricing rules', () => {
  let catalog: OutdoorCatalog;

  beforeAll(async () => {
    catalog = await buildOutdoorCatalog(service, 'Rule Merchant');
  });

  it('lists the rules in evaluation order, the catch-all rule last', async () => {
    const rules = await adminOk(service, 'GET', `${catalog.merchant.base}/pricing-rules`);
    expect(rules.data.map((r: { id: number }) => r.id)).toEqual([
      catalog.rules.wholesale.id,
      catalog.rules.retail.id,
      catalog.rules.catchAll.id,
    ]);
    expect(rules.data.at(-1)).toMatchObject({ is_catch_all: true, priority: CATCH_ALL_PRIORITY });
  });

  it('answers 409 to deleting the catch-all rule', async () => {
    const response = await service.adminApi('DELETE', `${catalog.merchant.base}/pricing-rules/${catalog.rules.catchAll.id}`);
    expect(response.status).toBe(409);
    expect(response.body.code).toBe('conflict');
    expect((await adminOk(service, 'GET', `${catalog.merchant.base}/pricing-rules`)).data).toHaveLength(3);
  });

  it('re-prices the products that fall through to the catch-all rule when its markup is edited', async () => {
    const { base, key } = catalog.merchant;
    await adminOk(service, 'POST', `${base}/customer-groups`, { name: 'vip' }, 201);
    expect(priceOf(await published(key, catalog.products.backpack.id), 'vip')).toMatchObject({ computed_price: 18.5 });
    const edited = await adminOk(service, 'PUT', `${base}/pricing-rules/${catalog.rules.catchAll.id}`, {
      priority: CATCH_ALL_PRIORITY,
      markup_percent: '20',
      markup_amount: '0.50',
    });
    expect(edited).toMatchObject({ id: catalog.rules.catchAll.id, is_catch_all: true, markup_percent: '20', markup_amount: '0.50' });
    // 18.50 x 1.2 + 0.50
    expect(priceOf(await published(key, catalog.products.backpack.id), 'vip')).toMatchObject({
      computed_price: 22.7,
      applied_rule_id: catalog.rules.catchAll.id,
    });
    // 2960 JPY x 1.2 + round(0.50 JPY) = 3552 + 1
    expect(priceOf(await published(key, catalog.products.backpack.id, 'jp'), 'vip')).toMatchObject({ computed_price: 3553 });
  });

  it('answers 409 to giving the catch-all rule conditions or another priority', async () => {
    const { base } = catalog.merchant;
    for (const body of [
      { priority: 100, markup_percent: '5' },
      { priority: CATCH_ALL_PRIORITY, manufacturer: 'Alpenwerk' },
      { priority: CATCH_ALL_PRIORITY, customer_group_id: catalog.groups.retail.id },
    ]) {
      const response = await service.adminApi('PUT', `${base}/pricing-rules/${catalog.rules.catchAll.id}`, body);
      expect(response.status).toBe(409);
      expect(response.body.code).toBe('conflict');
    }
  });

  it('creates, updates and deletes a rule; prices fall through to the next matching rule', async () => {
    const { base, key } = catalog.merchant;
    const { backpack } = catalog.products;
    const created = await service.adminApi('POST', `${base}/pricing-rules`, {
      priority: 5,
      store_id: catalog.stores.pl.id,
      manufacturer: 'Alpenwerk',
      markup_percent: '50',
    });
    expect(created.status).toBe(201);
    expect(created.body).toEqual({
      id: expect.any(Number),
      priority: 5,
      customer_group_id: null,
      store_id: catalog.stores.pl.id,
      manufacturer: 'Alpenwerk',
      min_cost: null,
      max_cost: null,
      markup_percent: '50',
      markup_amount: '0',
      price_ending: null,
      is_catch_all: false,
    });
    const rule = created.body;
    // 7863 x 1.5 = 11794.5 -> 11795
    expect(priceOf(await published(key, backpack.id, 'pl'), 'retail')).toMatchObject({ computed_price: 117.95, applied_rule_id: rule.id });
    expect(priceOf(await published(key, backpack.id, 'de'), 'retail')).toMatchObject({ applied_rule_id: catalog.rules.retail.id });
    // The tent's manufacturer does not match.
    expect(priceOf(await published(key, catalog.products.tent.id, 'pl'), 'retail')).toMatchObject({
      applied_rule_id: catalog.rules.retail.id,
    });

    const updated = await adminOk(service, 'PUT', `${base}/pricing-rules/${rule.id}`, {
      priority: 5,
      store_id: catalog.stores.pl.id,
      min_cost: '100.00',
      markup_percent: '50',
    });
    expect(updated).toMatchObject({ id: rule.id, manufacturer: null, min_cost: '100.00' });
    // base 78.63 is below min_cost: the retail rule applies again
    expect(priceOf(await published(key, backpack.id, 'pl'), 'retail')).toMatchObject({
      computed_price: 110.99,
      applied_rule_id: catalog.rules.retail.id,
    });

    await adminOk(service, 'PUT', `${base}/pricing-rules/${rule.id}`, { priority: 5, max_cost: '78.63', markup_percent: '50' });
    expect(priceOf(await published(key, backpack.id, 'pl'), 'retail')).toMatchObject({ applied_rule_id: rule.id });
    await adminOk(service, 'DELETE', `${base}/pricing-rules/${rule.id}`);
    expect(priceOf(await published(key, backpack.id, 'pl'), 'retail')).toMatchObject({
      computed_price: 110.99,
      applied_rule_id: catalog.rules.retail.id,
    });
    expect((await service.adminApi('DELETE', `${base}/pricing-rules/${rule.id}`)).status).toBe(404);
    expect((await service.adminApi('PUT', `${base}/pricing-rules/${rule.id}`, { priority: 5 })).status).toBe(404);
  });
});

describe('suppliers', () => {
  let catalog: OutdoorCatalog;

  beforeAll(async () => {
    catalog = await buildOutdoorCatalog(service, 'Supplier Merchant');
  });

  it("keeps a supplier's id when its name changes, and lists suppliers by id", async () => {
    const { base } = catalog.merchant;
    const before = await adminOk(service, 'GET', `${base}/suppliers`);
    expect(before.data.map((s: { ref: string }) => s.ref)).toEqual(['alpine', 'baltic']);
    const renamed = await adminOk(service, 'PUT', `${base}/suppliers/baltic`, { name: 'Baltic Outdoor Sp. z o.o.' });
    expect(renamed).toEqual({ id: before.data[1].id, ref: 'baltic', name: 'Baltic Outdoor Sp. z o.o.' });
  });

  it('answers 409 to deleting a supplier that offers or attributes refer to', async () => {
    const { base } = catalog.merchant;
    const refused = await service.adminApi('DELETE', `${base}/suppliers/baltic`);
    expect(refused.status).toBe(409);
    expect(refused.body.code).toBe('conflict');
    // Only an attribute left: still referenced.
    const source = await adminOk(service, 'GET', `${base}/products/BP-40`);
    const { id: _id, ref: _ref, images, ...rest } = source;
    await adminOk(service, 'PUT', `${base}/products/BP-40`, {
      ...rest,
      images: images.map(({ url }: { url: string }) => ({ url })),
      offers: rest.offers.filter((o: { supplier_ref: string }) => o.supplier_ref !== 'baltic'),
    });
    expect((await service.adminApi('DELETE', `${base}/suppliers/baltic`)).status).toBe(409);
  });

  it('deletes a supplier nothing refers to', async () => {
    const { base } = catalog.merchant;
    await adminOk(service, 'PUT', `${base}/suppliers/spare`, { name: 'Spare' });
    await adminOk(service, 'DELETE', `${base}/suppliers/spare`);
    expect((await adminOk(service, 'GET', `${base}/suppliers`)).data.map((s: { ref: string }) => s.ref)).toEqual(['alpine', 'baltic']);
    expect((await service.adminApi('DELETE', `${base}/suppliers/spare`)).status).toBe(404);
  });
});

describe('attribute definitions', () => {
  let catalog: OutdoorCatalog;

  beforeAll(async () => {
    catalog = await buildOutdoorCatalog(service, 'Attribute Merchant');
  });

  it('lists the definitions by key', async () => {
    expect(await adminOk(service, 'GET', `${catalog.merchant.base}/attributes`)).toEqual({
      data: [
        { key: 'color', unit: null, labels: { de: 'Farbe' } },
        { key: 'weight', unit: 'kg', labels: { de: 'Gewicht', pl: 'Waga' } },
      ],
    });
  });

  it('shows a changed label and unit in the public payload', async () => {
    const { base, key } = catalog.merchant;
    const stored = await adminOk(service, 'PUT', `${base}/attributes/weight`, { unit: 'g', labels: { 'de-DE': 'Masse', pl: 'Waga' } });
    expect(stored).toEqual({ key: 'weight', unit: 'g', labels: { 'de-DE': 'Masse', pl: 'Waga' } });
    const product = await published(key, catalog.products.backpack.id);
    expect(product.attributes.find((a: { key: string }) => a.key === 'weight')).toEqual({
      key: 'weight',
      label: 'Masse (g)',
      value: '1.1',
    });
    await adminOk(service, 'PUT', `${base}/attributes/material`, { labels: { de: 'Material' } });
    expect((await published(key, catalog.products.backpack.id)).attributes.find((a: { key: string }) => a.key === 'material').label).toBe(
      'Material',
    );
  });

  it('labels an attribute with its bare key once its definition is deleted', async () => {
    const { base, key } = catalog.merchant;
    await adminOk(service, 'DELETE', `${base}/attributes/weight`);
    const product = await published(key, catalog.products.backpack.id, 'pl');
    expect(product.attributes.find((a: { key: string }) => a.key === 'weight')).toEqual({ key: 'weight', label: 'weight', value: '1.1' });
    expect((await service.adminApi('DELETE', `${base}/attributes/weight`)).status).toBe(404);
  });
});

describe('products', () => {
  let catalog: OutdoorCatalog;

  beforeAll(async () => {
    catalog = await buildOutdoorCatalog(service, 'Product Merchant');
  });

  it('creates a product with PUT and returns its source with images pending', async () => {
    const { base, key } = catalog.merchant;
    const body = {
      eans: ['4006381333955'],
      manufacturer: 'Fjellsport',
      content: { de: { title: 'Trinkflasche', description: 'Edelstahl' } },
      images: [{ url: 'https://img.example.test/bottle/1.jpg' }],
      offers: [{ supplier_ref: 'alpine', quantity: 7, cost: '5.00', currency: 'EUR' }],
      own_stock: null,
      supplier_attributes: [{ supplier_ref: 'alpine', key: 'weight', value: '0.3' }],
      overrides: {},
      excluded_stores: [],
    };
    const created = await adminOk(service, 'PUT', `${base}/products/BOTTLE-1`, body);
    expect(created.id).toBeGreaterThan(catalog.products.lamp.id);
    const expected = {
      id: created.id,
      ref: 'BOTTLE-1',
      ...body,
      images: [{ url: 'https://img.example.test/bottle/1.jpg', state: 'pending', mirrored_url: null }],
    };
    expect(created).toEqual(expected);
    expect(await adminOk(service, 'GET', `${base}/products/BOTTLE-1`)).toEqual(expected);
    expect(await published(key, created.id)).toMatchObject({
      id: created.id,
      title: 'Trinkflasche',
      stock: 7,
      images: ['https://img.example.test/bottle/1.jpg'],
      attributes: [{ key: 'weight', label: 'Gewicht (kg)', value: '0.3' }],
    });
  });

  it('replaces the whole source with PUT: the id stays, omitted fields take their defaults', async () => {
    const { base, key } = catalog.merchant;
    const replaced = await adminOk(service, 'PUT', `${base}/products/BP-40`, { content: { de: { title: 'Rucksack neu' } } });
    expect(replaced).toEqual({
      id: catalog.products.backpack.id,
      ref: 'BP-40',
      eans: [],
      manufacturer: null,
      content: { de: { title: 'Rucksack neu', description: null } },
      images: [],
      offers: [],
      own_stock: null,
      supplier_attributes: [],
      overrides: {},
      excluded_stores: [],
    });
    expect(await published(key, catalog.products.backpack.id)).toMatchObject({
      title: 'Rucksack neu',
      description: null,
      ean: null,
      images: [],
      attributes: [],
      stock: 0,
      excluded: true,
      exclusion_reason: 'no_offers',
    });
  });

  it('deletes a product: the public API answers 404 for its id, and the ref comes back with a new id', async () => {
    const { base, key } = catalog.merchant;
    const { tent } = catalog.products;
    const before = (await service.api('/v1/products', key)).body.meta.total;
    const deleted = await service.adminApi('DELETE', `${base}/products/TENT-2`);
    expect(deleted.status).toBe(204);
    for (const store of ['de', 'pl', 'jp']) {
      const response = await service.api(`/v1/products/${tent.id}?store=${store}`, key);
      expect(response.status).toBe(404);
      expect(response.body.code).toBe('not_found');
    }
    expect((await service.api('/v1/products', key)).body.meta.total).toBe(before - 1);
    expect((await service.adminApi('GET', `${base}/products/TENT-2`)).status).toBe(404);
    expect((await service.adminApi('DELETE', `${base}/products/TENT-2`)).status).toBe(404);
    const again = await adminOk(service, 'PUT', `${base}/products/TENT-2`, { content: { de: { title: 'Zelt' } } });
    expect(again.id).not.toBe(tent.id);
    expect(again.id).toBeGreaterThan(tent.id);
    expect((await service.api(`/v1/products/${tent.id}`, key)).status).toBe(404);
  });
});

describe('NDJSON import', () => {
  let catalog: OutdoorCatalog;
  const refsOf = async (key: string) => (await service.api('/v1/products?per_page=200', key)).body.data.map((p: { sku: string }) => p.sku);

  beforeAll(async () => {
    catalog = await buildOutdoorCatalog(service, 'Import Merchant');
  });

  it('applies every line of a valid file', async () => {
    const { id, key } = catalog.merchant;
    const response = await importNdjson(service, id, [
      simpleProduct('IMP-1'),
      simpleProduct('IMP-2', '20.00'),
      simpleProduct('IMP-3', '30.00', 'baltic'),
    ]);
    expect(response.status).toBe(200);
    expect(response.body).toEqual({ lines: 3, upserted: 3, deleted: 0 });
    expect(await refsOf(key)).toEqual(['AO-BP-40', 'AO-TENT-2', 'AO-LAMP-1', 'AO-IMP-1', 'AO-IMP-2', 'AO-IMP-3']);
    const imported = await adminOk(service, 'GET', `${catalog.merchant.base}/products/IMP-2`);
    expect(priceOf(await published(key, imported.id), 'wholesale')).toMatchObject({ base_cost: 20, computed_price: 22 });
  });

  it('rejects a file with one bad line, naming line N, and applies nothing', async () => {
    const { id, key, base } = catalog.merchant;
    const before = await refsOf(key);
    const lines = [
      JSON.stringify(simpleProduct('BAD-1')),
      JSON.stringify(simpleProduct('BAD-2')),
      JSON.stringify({ op: 'delete_product', ref: 'IMP-1' }),
      JSON.stringify(simpleProduct('BAD-4', '12,00')),
      JSON.stringify(simpleProduct('BAD-5')),
    ].join('\n');
    const response = await importNdjson(service, id, lines);
    expect(response.status).toBe(400);
    expect(response.body.code).toBe('invalid_body');
    expect(response.body.invalid_params).toEqual([
      { name: 'line 4', in: 'body', reason: expect.stringContaining('/product/offers/0/cost') },
    ]);
    expect(await refsOf(key)).toEqual(before);
    for (const ref of ['BAD-1', 'BAD-2', 'BAD-5']) expect((await service.adminApi('GET', `${base}/products/${ref}`)).status).toBe(404);
  });

  it('counts blank lines in line numbers and lists every bad line', async () => {
    const lines = `${JSON.stringify(simpleProduct('OK-1'))}\n\nnot json\n${JSON.stringify(simpleProduct('BAD', '1.00', 'nobody'))}\n`;
    const response = await importNdjson(service, catalog.merchant.id, lines);
    expect(response.status).toBe(400);
    expect(response.body.invalid_params.map((p: { name: string }) => p.name)).toEqual(['line 3', 'line 4']);
    expect(response.body.invalid_params[1].reason).toContain('/product/offers/0/supplier_ref');
    expect((await service.adminApi('GET', `${catalog.merchant.base}/products/OK-1`)).status).toBe(404);
  });

  it('deletes products with delete_product lines; deleting a missing ref is a no-op', async () => {
    const { id, key, base } = catalog.merchant;
    const lamp = catalog.products.lamp;
    const response = await importNdjson(service, id, [
      { op: 'delete_product', ref: 'LAMP-1' },
      { op: 'delete_product', ref: 'NEVER-EXISTED' },
      simpleProduct('IMP-4'),
    ]);
    expect(response.status).toBe(200);
    expect(response.body).toEqual({ lines: 3, upserted: 1, deleted: 1 });
    expect((await service.api(`/v1/products/${lamp.id}`, key)).status).toBe(404);
    expect((await service.adminApi('GET', `${base}/products/LAMP-1`)).status).toBe(404);
    expect(await refsOf(key)).not.toContain('AO-LAMP-1');
    expect(await refsOf(key)).toContain('AO-IMP-4');
  });

  it('applies lines in file order: a later line for the same ref wins', async () => {
    const { id, key, base } = catalog.merchant;
    const response = await importNdjson(service, id, [
      simpleProduct('ORDER-1', '10.00'),
      simpleProduct('ORDER-1', '40.00'),
      simpleProduct('ORDER-2'),
      { op: 'delete_product', ref: 'ORDER-2' },
    ]);
    expect(response.status).toBe(200);
    const source = await adminOk(service, 'GET', `${base}/products/ORDER-1`);
    expect(source.offers[0].cost).toBe('40.00');
    expect(priceOf(await published(key, source.id), 'wholesale')).toMatchObject({ base_cost: 40 });
    expect((await service.adminApi('GET', `${base}/products/ORDER-2`)).status).toBe(404);
  });
});
