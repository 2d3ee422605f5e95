// What scoped and store-restricted keys do over real HTTP: a write scope reads too and nothing
// else; a key restricted to stores reads only those on every /v1 read and manages only their
// webhook endpoints; issuing refuses what a key could not be; every write names its credential in
// the audit log, and a key's writes are listed by its id.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminOk, buildOutdoorCatalog, type OutdoorCatalog } from '../support/admin-http.js';
import { startTestService, type TestResponse, type TestService } from '../support/service.js';

let service: TestService;
let catalog: OutdoorCatalog;
let base: string;
let keyDe: { id: number; key: string; prefix: string };
let writer: { id: number; key: string; prefix: string; name: string };
let hooks: { id: number; key: string };

const issue = (body: Record<string, unknown>) => adminOk(service, 'POST', `${base}/api-keys`, body, 201);
const asKey = (key: string, method: string, path: string, body?: unknown) =>
  service.adminApi(method, path, body, { headers: { Authorization: `Bearer ${key}` } });

beforeAll(async () => {
  service = await startTestService();
  catalog = await buildOutdoorCatalog(service);
  base = catalog.merchant.base;
  keyDe = await issue({ name: 'shop de', scopes: ['catalog:read', 'webhooks:write'], stores: ['de'] });
  writer = await issue({ name: 'ERP sync', scopes: ['catalog:write'] });
  hooks = await issue({ name: 'hooks', scopes: ['webhooks:write'] });
});

afterAll(async () => {
  await service?.close();
});

/** The answer for an unknown store, with the slug asked for in place of `nope`. */
async function expectLikeUnknownStore(response: TestResponse, path: (store: string) => string, slug: string) {
  const unknown = await service.api(path('nope'), keyDe.key);
  expect(response.status, response.text).toBe(404);
  expect(response.body.code).toBe('store_not_found');
  expect(response.body.detail).toBe(unknown.body.detail.replace('nope', slug));
}

describe('scopes', () => {
  it('lets a catalog:write key read the public API too, and refuses /v1 to a webhooks-only key with 403 insufficient_scope', async () => {
    expect((await service.api('/v1/products', writer.key)).status).toBe(200);
    const refused = await service.api('/v1/products', hooks.key);
    expect(refused.status).toBe(403);
    expect(refused.body.code).toBe('insufficient_scope');
    expect(refused.headers.get('www-authenticate')).toBe('Bearer error="insufficient_scope", scope="catalog:read"');
    // webhooks:write reads endpoints (implied), but not the catalog's admin side.
    expect((await asKey(hooks.key, 'GET', `${base}/webhook-endpoints`)).status).toBe(200);
    expect((await asKey(hooks.key, 'GET', `${base}/stores`)).status).toBe(403);
  });

  it('keeps a key issued without scopes a catalog:read key, exactly as before', async () => {
    const plain = await issue({ name: 'plain' });
    expect(plain.scopes).toEqual(['catalog:read']);
    expect(plain.stores).toBeNull();
    expect((await service.api('/v1/stores', plain.key)).body.data.map((s: { slug: string }) => s.slug)).toEqual(['de', 'pl', 'jp']);
    expect((await asKey(plain.key, 'GET', `${base}/products/BP-40`)).status).toBe(403);
  });

  it('refuses to issue a key with an unknown scope, no scope, an unknown store, or stores with catalog:write', async () => {
    for (const body of [
      { name: 'x', scopes: ['catalog:admin'] },
      { name: 'x', scopes: [] },
      { name: 'x', stores: ['nope'] },
      { name: 'x', scopes: ['catalog:write'], stores: ['de'] },
    ]) {
      const response = await service.adminApi('POST', `${base}/api-keys`, body);
      expect(response.status, JSON.stringify(body)).toBe(400);
      expect(response.body.code).toBe('invalid_body');
    }
  });
});

describe('a key restricted to a store', () => {
  const backpack = () => catalog.products.backpack.id as number;

  it('lists only its stores on /v1/stores', async () => {
    const stores = await service.api('/v1/stores', keyDe.key);
    expect(stores.body.data.map((s: { slug: string }) => s.slug)).toEqual(['de']);
  });

  it('reads its store, with or without store, and answers every other store 404 exactly like a store that does not exist', async () => {
    expect((await service.api('/v1/products', keyDe.key)).body.store).toBe('de');
    expect((await service.api('/v1/products?store=de', keyDe.key)).status).toBe(200);
    const reads: ((store: string) => string)[] = [
      (store) => `/v1/products?store=${store}`,
      (store) => `/v1/products?store=${store}&ids=${backpack()}`,
      (store) => `/v1/products/${backpack()}?store=${store}`,
      (store) => `/v1/prices?store=${store}&ids=${backpack()}`,
      (store) => `/v1/products/export?store=${store}`,
      (store) => `/v1/changes?store=${store}`,
    ];
    for (const path of reads) {
      expect((await service.api(path('de'), keyDe.key)).status, path('de')).toBe(200);
      await expectLikeUnknownStore(await service.api(path('pl'), keyDe.key), path, 'pl');
    }
  });

  it('reads nothing without store once the default store is not one of its stores', async () => {
    await adminOk(service, 'PUT', `${base}/stores/pl`, { name: 'Alpine Polska', locale: 'pl-PL', currency: 'PLN', is_default: true });
    try {
      const response = await service.api('/v1/products', keyDe.key);
      expect(response.status).toBe(404);
      expect(response.body.code).toBe('store_not_found');
      expect((await service.api('/v1/changes', keyDe.key)).status).toBe(404);
      expect((await service.api('/v1/products?store=de', keyDe.key)).status).toBe(200);
    } finally {
      await adminOk(service, 'PUT', `${base}/stores/de`, {
        name: 'Alpine Deutschland',
        locale: 'de-DE',
        currency: 'EUR',
        exclude_out_of_stock: true,
        is_default: true,
      });
    }
  });

  it('manages only the webhook endpoints of its stores: others answer 404 like a missing one, and it cannot aim one elsewhere', async () => {
    const own = await asKey(keyDe.key, 'POST', `${base}/webhook-endpoints`, { url: 'https://hooks.alpine-shop.com/de', store: 'de' });
    expect(own.status, own.text).toBe(201);
    for (const store of ['pl', null]) {
      const elsewhere = await asKey(keyDe.key, 'POST', `${base}/webhook-endpoints`, { url: 'https://hooks.alpine-shop.com/x', store });
      expect(elsewhere.status).toBe(403);
      expect(elsewhere.body.code).toBe('forbidden');
    }
    const moved = await asKey(keyDe.key, 'PATCH', `${base}/webhook-endpoints/${own.body.id}`, { store: 'pl' });
    expect(moved.status).toBe(403);

    const pl = await adminOk(service, 'POST', `${base}/webhook-endpoints`, { url: 'https://hooks.alpine-shop.com/pl', store: 'pl' }, 201);
    const all = await adminOk(service, 'POST', `${base}/webhook-endpoints`, { url: 'https://hooks.alpine-shop.com/all' }, 201);
    const listed = await asKey(keyDe.key, 'GET', `${base}/webhook-endpoints`);
    expect(listed.body.data.map((e: { id: number }) => e.id)).toEqual([own.body.id]);
    for (const id of [pl.id, all.id]) {
      const missing = await asKey(keyDe.key, 'GET', `${base}/webhook-endpoints/999999`);
      for (const [method, path] of [
        ['GET', `${base}/webhook-endpoints/${id}`],
        ['DELETE', `${base}/webhook-endpoints/${id}`],
        ['POST', `${base}/webhook-endpoints/${id}/rotate-secret`],
        ['GET', `${base}/webhook-endpoints/${id}/deliveries`],
      ] as const) {
        const response = await asKey(keyDe.key, method, path);
        expect(response.status, `${method} ${path}`).toBe(404);
        expect(response.body.detail).toBe(missing.body.detail.replace('999999', String(id)));
      }
    }
    // Still there for the operator.
    expect((await service.adminApi('GET', `${base}/webhook-endpoints/${pl.id}`)).status).toBe(200);
    expect((await asKey(keyDe.key, 'DELETE', `${base}/webhook-endpoints/${own.body.id}`)).status).toBe(204);
  });
});

describe('the audit log by credential', () => {
  it("records a key's write with its id, name and prefix, the operator's as the operator, and lists one key's writes by api_key_id", async () => {
    const upserted = await asKey(writer.key, 'PUT', `${base}/suppliers/nordic`, { name: 'Nordic Supply' });
    expect(upserted.status, upserted.text).toBe(200);
    await adminOk(service, 'PUT', `${base}/suppliers/nordic`, { name: 'Nordic Supply AB' });

    const log = (await adminOk(service, 'GET', `${base}/audit-log?limit=5`)).data;
    expect(log[0]).toMatchObject({ actor: 'operator', credential: 'operator', api_key: null, action: 'supplier.update' });
    expect(log[1]).toMatchObject({
      actor: `key "ERP sync" (${writer.prefix}…)`,
      credential: 'key',
      api_key: { id: writer.id, name: 'ERP sync', prefix: writer.prefix },
      action: 'supplier.create',
    });

    const own = (await adminOk(service, 'GET', `${base}/audit-log?api_key_id=${writer.id}`)).data;
    expect(own.map((e: { action: string }) => e.action)).toEqual(['supplier.create']);
    // A catalog:write key reads the log of its own merchant.
    expect((await asKey(writer.key, 'GET', `${base}/audit-log?api_key_id=${writer.id}`)).body.data).toEqual(own);
  });

  it("records a key's import and webhook writes as the key", async () => {
    const imported = await service.adminApi('POST', `${base}/imports`, '{"op":"delete_product","ref":"LAMP-1"}\n', {
      headers: { Authorization: `Bearer ${writer.key}`, 'Content-Type': 'application/x-ndjson' },
    });
    expect(imported.status, imported.text).toBe(200);
    const endpoint = await asKey(hooks.key, 'POST', `${base}/webhook-endpoints`, { url: 'https://hooks.alpine-shop.com/erp' });
    expect(endpoint.status).toBe(201);
    const byWriter = (await adminOk(service, 'GET', `${base}/audit-log?api_key_id=${writer.id}`)).data;
    expect(byWriter[0].action).toBe('import.start');
    const byHooks = (await adminOk(service, 'GET', `${base}/audit-log?api_key_id=${hooks.id}`)).data;
    expect(byHooks.map((e: { action: string }) => e.action)).toEqual(['endpoint.create']);
    const jobs = (await adminOk(service, 'GET', `${base}/imports`)).data;
    expect(jobs[0].started_by).toBe(`key "ERP sync" (${writer.prefix}…)`);
  });
});
