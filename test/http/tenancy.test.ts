// docs/decisions.md#tenancy: a key of merchant A can never see, count or infer
// merchant B's data; missing, malformed, unknown and revoked keys answer 401 with a Bearer challenge.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminOk, createMerchant, importNdjson, simpleProduct, type MerchantHandle } from '../support/admin-http.js';
import { startTestService, type TestResponse, type TestService } from '../support/service.js';

let service: TestService;
let a: MerchantHandle;
let b: MerchantHandle;
let aIds: number[];
let bIds: number[];

async function merchantWithCatalog(name: string, stores: string[], refs: string[]): Promise<{ merchant: MerchantHandle; ids: number[] }> {
  const merchant = await createMerchant(service, name);
  for (const slug of stores) {
    await adminOk(service, 'PUT', `${merchant.base}/stores/${slug}`, { name: `${name} ${slug}`, locale: 'de-DE', currency: 'EUR' });
  }
  await adminOk(service, 'POST', `${merchant.base}/customer-groups`, { name: 'retail' }, 201);
  await adminOk(service, 'PUT', `${merchant.base}/suppliers/alpine`, { name: 'Alpine' });
  const imported = await importNdjson(
    service,
    merchant.id,
    refs.map((ref) => simpleProduct(ref)),
  );
  expect(imported.status, imported.text).toBe(200);
  const ids = [];
  for (const ref of refs) ids.push((await adminOk(service, 'GET', `${merchant.base}/products/${ref}`)).id);
  return { merchant, ids };
}

beforeAll(async () => {
  service = await startTestService();
  // Interleaved creation, so the two merchants' product ids interleave too.
  const first = await merchantWithCatalog('Merchant A', ['de', 'at'], ['A-1', 'A-2', 'A-3']);
  const second = await merchantWithCatalog('Merchant B', ['de', 'ch'], ['B-1', 'B-2']);
  await importNdjson(service, first.merchant.id, [simpleProduct('A-4')]);
  a = first.merchant;
  b = second.merchant;
  aIds = [...first.ids, (await adminOk(service, 'GET', `${a.base}/products/A-4`)).id];
  bIds = second.ids;
});
afterAll(() => service.close());

/** A 404 body with the product id taken out: what a client could compare across ids. */
function withoutId(response: TestResponse, id: number) {
  return JSON.parse(response.text.replace(new RegExp(`(?<![0-9])${id}(?![0-9])`, 'g'), 'ID'));
}

describe("one merchant never sees another merchant's catalog", () => {
  it('returns 404 for a product of another merchant, exactly like an id that does not exist', async () => {
    const foreign = bIds[0]!;
    const missing = 987654;
    const ofOther = await service.api(`/v1/products/${foreign}`, a.key);
    const nonexistent = await service.api(`/v1/products/${missing}`, a.key);
    expect(ofOther.status).toBe(404);
    expect(nonexistent.status).toBe(404);
    expect(ofOther.body.code).toBe('not_found');
    expect(withoutId(ofOther, foreign)).toEqual(withoutId(nonexistent, missing));
    expect([...ofOther.headers.keys()].sort()).toEqual([...nonexistent.headers.keys()].sort());
  });

  it('returns 404 for a product of another merchant in a store slug both merchants have', async () => {
    for (const id of bIds) {
      const response = await service.api(`/v1/products/${id}?store=de`, a.key);
      expect(response.status).toBe(404);
      expect(response.body.code).toBe('not_found');
    }
    // ...and the owner reads it.
    expect((await service.api(`/v1/products/${bIds[0]}?store=de`, b.key)).status).toBe(200);
  });

  it("lists and counts only the key's own products", async () => {
    const pageA = await service.api('/v1/products?per_page=200', a.key);
    expect(pageA.body.data.map((p: { id: number }) => p.id)).toEqual(aIds);
    expect(pageA.body.meta).toEqual({ current_page: 1, per_page: 200, last_page: 1, total: aIds.length });
    const pageB = await service.api('/v1/products?per_page=1&page=2', b.key);
    expect(pageB.body.data.map((p: { id: number }) => p.id)).toEqual([bIds[1]]);
    expect(pageB.body.meta).toEqual({ current_page: 2, per_page: 1, last_page: bIds.length, total: bIds.length });
  });

  it("lists only the key's own stores", async () => {
    const storesA = await service.api('/v1/stores', a.key);
    expect(storesA.body.data.map((s: { slug: string; name: string }) => [s.slug, s.name])).toEqual([
      ['de', 'Merchant A de'],
      ['at', 'Merchant A at'],
    ]);
    const storesB = await service.api('/v1/stores', b.key);
    expect(storesB.body.data.map((s: { slug: string }) => s.slug)).toEqual(['de', 'ch']);
    const idsOfA = storesA.body.data.map((s: { id: number }) => s.id);
    expect(storesB.body.data.some((s: { id: number }) => idsOfA.includes(s.id))).toBe(false);
  });

  it('answers 404 store_not_found for a store slug only another merchant has', async () => {
    const response = await service.api('/v1/products?store=ch', a.key);
    expect(response.status).toBe(404);
    expect(response.body.code).toBe('store_not_found');
    const unknown = await service.api('/v1/products?store=zz', a.key);
    expect(response.body).toEqual({ ...unknown.body, detail: unknown.body.detail.replace('zz', 'ch') });
  });

  it("does not let one merchant's admin path revoke another merchant's key", async () => {
    const keysOfB = await adminOk(service, 'GET', `${b.base}/api-keys`);
    const response = await service.adminApi('DELETE', `${a.base}/api-keys/${keysOfB.data[0].id}`);
    expect(response.status).toBe(404);
    expect((await service.api('/v1/stores', b.key)).status).toBe(200);
  });
});

describe('authentication (spec 5)', () => {
  it('returns 401 with WWW-Authenticate: Bearer realm="catalog" without an Authorization header', async () => {
    for (const path of ['/v1/products', '/v1/products/1', '/v1/stores']) {
      const response = await service.api(path, null);
      expect(response.status).toBe(401);
      expect(response.headers.get('www-authenticate')).toBe('Bearer realm="catalog"');
      expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(response.body).toMatchObject({ status: 401, code: 'unauthorized', type: 'urn:problem:catalog:unauthorized' });
    }
  });

  it.each([
    ['a Basic credential', `Basic ${Buffer.from('user:pass').toString('base64')}`],
    ['an empty Bearer', 'Bearer '],
    ['the key without the Bearer scheme', 'KEY'],
  ])('returns 401 with the bare Bearer challenge for a malformed Authorization header: %s', async (_, header) => {
    const response = await service.api('/v1/stores', null, { headers: { Authorization: header.replace('KEY', a.key) } });
    expect(response.status).toBe(401);
    expect(response.headers.get('www-authenticate')).toBe('Bearer realm="catalog"');
    expect(response.body.code).toBe('unauthorized');
  });

  it.each([
    ['a key of the wrong shape', () => 'not-a-key'],
    ['a well-formed unknown key', () => `cps_${'A'.repeat(43)}`],
    ['a known key with one character changed', () => `${a.key.slice(0, -1)}${a.key.endsWith('A') ? 'B' : 'A'}`],
    ['the admin token', () => 'adm_test_token_0123456789abcdef'],
  ])('returns 401 with error="invalid_token" for %s', async (_, presented) => {
    const response = await service.api('/v1/products', presented());
    expect(response.status).toBe(401);
    expect(response.headers.get('www-authenticate')).toBe('Bearer realm="catalog", error="invalid_token"');
    expect(response.body.code).toBe('unauthorized');
  });

  it("returns 401 for a revoked key while the merchant's other keys keep working", async () => {
    const spare = await adminOk(service, 'POST', `${a.base}/api-keys`, { name: 'spare' }, 201);
    expect((await service.api('/v1/stores', spare.key)).status).toBe(200);
    await adminOk(service, 'DELETE', `${a.base}/api-keys/${spare.id}`);
    for (const path of ['/v1/products', `/v1/products/${aIds[0]}`, '/v1/stores']) {
      const response = await service.api(path, spare.key);
      expect(response.status).toBe(401);
      expect(response.headers.get('www-authenticate')).toBe('Bearer realm="catalog", error="invalid_token"');
      expect(response.body.code).toBe('unauthorized');
    }
    expect((await service.api('/v1/stores', a.key)).status).toBe(200);
  });

  it("refuses a merchant API key on the operator's admin operations with 403 forbidden", async () => {
    const response = await service.adminApi('GET', '/admin/v1/merchants', undefined, { headers: { Authorization: `Bearer ${a.key}` } });
    expect(response.status).toBe(403);
    expect(response.body.code).toBe('forbidden');
  });
});

describe('what a merchant can infer about another, exactly as SECURITY.md states it', () => {
  it('learns nothing from the change feed: its positions are numbered per merchant, whatever the other merchant records', async () => {
    const a1 = aIds[0];
    const feed = (store: string, cursor?: { next_since: string; next_id: number }) =>
      service.api(`/v1/changes?store=${store}${cursor ? `&since=${cursor.next_since}&since_id=${cursor.next_id}` : ''}`, a.key);
    const first = { de: (await feed('de')).body, at: (await feed('at')).body };
    // Merchant B changes its whole catalog (a change per product and store: six at least).
    expect(
      (await importNdjson(service, b.id, [simpleProduct('B-1', '11.00'), simpleProduct('B-2', '12.00'), simpleProduct('B-3')])).status,
    ).toBe(200);
    for (const store of ['de', 'at'] as const) {
      expect((await feed(store, first[store])).body).toEqual({
        changes: [],
        next_since: first[store].next_since,
        next_id: first[store].next_id,
        store,
      });
    }
    // A's next price change (one in each of A's stores) takes the next positions of A's own numbering.
    expect((await importNdjson(service, a.id, [simpleProduct('A-1', '13.00')])).status).toBe(200);
    const top = Math.max(first.de.next_id, first.at.next_id);
    for (const store of ['de', 'at'] as const) {
      const next = (await feed(store, first[store])).body;
      expect(next.changes.map((c: { product_id: number }) => c.product_id)).toEqual([a1]);
      expect(next.next_id).toBeGreaterThan(top);
      expect(next.next_id).toBeLessThanOrEqual(top + 2);
    }
  });

  it("can infer only the deployment's number of product creations in between from the gap of its own product ids", async () => {
    const before = (await adminOk(service, 'GET', `${a.base}/products/A-4`)).id;
    expect((await importNdjson(service, b.id, [simpleProduct('B-10'), simpleProduct('B-11')])).status).toBe(200);
    expect((await importNdjson(service, a.id, [simpleProduct('A-10')])).status).toBe(200);
    const created = (await adminOk(service, 'GET', `${a.base}/products/A-10`)).id;
    const bCreated = (await adminOk(service, 'GET', `${b.base}/products/B-11`)).id;
    // The gap counts B's creations (B-3 above, B-10, B-11), and A reads none of them.
    expect(created - before - 1).toBe(3);
    expect((await service.api(`/v1/products/${bCreated}`, a.key)).status).toBe(404);
  });
});
