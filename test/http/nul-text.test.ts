// Text never holds U+0000. A NUL in any string
// or member name of an admin JSON body, an NDJSON import line or a panel form is refused with 400
// invalid_body where the input is parsed, on either engine (PostgreSQL's text cannot hold it, so
// it used to answer 500 there, and an import applied its first chunks before failing), and
// nothing is written.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminOk, createMerchant, importNdjson, simpleProduct, type MerchantHandle } from '../support/admin-http.js';
import { startTestService, type TestResponse, type TestService } from '../support/service.js';
import { operatorCookie } from '../panel/sign-in.js';

let service: TestService;
let merchant: MerchantHandle;

beforeAll(async () => {
  service = await startTestService();
  merchant = await createMerchant(service, 'Nul Outfitters');
  await adminOk(service, 'PUT', `${merchant.base}/stores/de`, { name: 'DE', locale: 'de-DE', currency: 'EUR' });
  await adminOk(service, 'PUT', `${merchant.base}/suppliers/alpine`, { name: 'Alpine' });
  await adminOk(service, 'PUT', `${merchant.base}/products/KEEP-1`, { content: { de: { title: 'Zelt' } }, overrides: { color: 'Rot' } });
});
afterAll(() => service.close());

/** Everything a refused request could have written, read back over the admin API and from storage. */
async function stored(): Promise<unknown> {
  const read = async (path: string) => {
    const response = await service.adminApi('GET', path);
    return [response.status, response.body];
  };
  const state: Record<string, unknown> = { merchants: await read('/admin/v1/merchants') };
  for (const part of [
    '',
    '/api-keys',
    '/stores',
    '/customer-groups',
    '/pricing-rules',
    '/suppliers',
    '/attributes',
    '/users',
    '/webhook-endpoints',
    '/audit-log',
  ]) {
    state[part || 'merchant'] = await read(`${merchant.base}${part}`);
  }
  state.products = (await service.storage.productsAfter(merchant.id, 0, 10_000)).map((p) => [p.ref, p.source]);
  state.appliedImports = (await service.service.imports.recent(merchant.id, 100)).filter((job) => job.products_applied > 0).length;
  return state;
}

/** stored() but the audit log: an import is audited when it starts (import.start), whatever it applies. */
async function storedBesidesAudit(): Promise<unknown> {
  const { '/audit-log': _audit, ...rest } = (await stored()) as Record<string, unknown>;
  return rest;
}

/** A JSON body sent as written (`\u0000` escapes stay escapes, as a client would send them). */
const sendJson = (method: string, path: string, json: string) =>
  service.adminApi(method, path, json, { headers: { 'Content-Type': 'application/json' } });

function expectNulRefused(response: TestResponse, name: string) {
  expect(response.status, response.text).toBe(400);
  expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  expect(response.body).toMatchObject({ code: 'invalid_body', type: 'urn:problem:catalog:invalid_body' });
  expect(response.body.invalid_params).toEqual([{ name, in: 'body', reason: expect.stringMatching(/U\+0000/) }]);
}

describe('the admin API refuses U+0000 in every kind of text, nothing written', () => {
  const m = () => merchant.base;
  it.each([
    { what: 'a merchant name', method: 'POST', path: () => '/admin/v1/merchants', json: '{"name": "Evil\\u0000 Corp"}', name: '/name' },
    {
      what: 'an owner e-mail',
      method: 'POST',
      path: () => '/admin/v1/merchants',
      json: '{"name": "Evil", "owner_emails": ["a\\u0000@b.test"]}',
      name: '/owner_emails/0',
    },
    { what: "a merchant's SKU pattern", method: 'PATCH', path: () => m(), json: '{"sku_pattern": "NO-\\u0000{id}"}', name: '/sku_pattern' },
    {
      what: 'a store name',
      method: 'PUT',
      path: () => `${m()}/stores/at`,
      json: '{"name": "AT\\u0000", "locale": "de-AT", "currency": "EUR"}',
      name: '/name',
    },
    { what: 'an API key name', method: 'POST', path: () => `${m()}/api-keys`, json: '{"name": "ci\\u0000"}', name: '/name' },
    { what: 'a supplier name', method: 'PUT', path: () => `${m()}/suppliers/baltic`, json: '{"name": "Baltic\\u0000"}', name: '/name' },
    {
      what: 'a customer group name',
      method: 'POST',
      path: () => `${m()}/customer-groups`,
      json: '{"name": "retail\\u0000"}',
      name: '/name',
    },
    {
      what: 'an invitation e-mail',
      method: 'POST',
      path: () => `${m()}/invitations`,
      json: '{"email": "new\\u0000@nul.test", "role": "member"}',
      name: '/email',
    },
    {
      what: 'an attribute label',
      method: 'PUT',
      path: () => `${m()}/attributes/weight`,
      json: '{"unit": "kg", "labels": {"de": "Gew\\u0000icht"}}',
      name: '/labels/de',
    },
    {
      what: "a pricing rule's manufacturer",
      method: 'POST',
      path: () => `${m()}/pricing-rules`,
      json: '{"priority": 5, "manufacturer": "A\\u0000", "markup_percent": "10"}',
      name: '/manufacturer',
    },
    {
      what: 'a product title',
      method: 'PUT',
      path: () => `${m()}/products/NUL-1`,
      json: '{"content": {"de": {"title": "Zelt\\u0000"}}}',
      name: '/content/de/title',
    },
    {
      what: 'a product description',
      method: 'PUT',
      path: () => `${m()}/products/KEEP-1`,
      json: '{"content": {"de": {"title": "Zelt", "description": "\\u0000"}}}',
      name: '/content/de/description',
    },
    {
      what: 'a manufacturer',
      method: 'PUT',
      path: () => `${m()}/products/KEEP-1`,
      json: '{"manufacturer": "Nord\\u0000kamm"}',
      name: '/manufacturer',
    },
    {
      what: 'an override value',
      method: 'PUT',
      path: () => `${m()}/products/KEEP-1`,
      json: '{"overrides": {"color": "Gr\\u0000n"}}',
      name: '/overrides/color',
    },
    {
      what: 'an override key',
      method: 'PUT',
      path: () => `${m()}/products/KEEP-1`,
      json: '{"overrides": {"col\\u0000or": "Grün"}}',
      name: '/overrides/col\u0000or',
    },
    {
      what: 'a supplier attribute value',
      method: 'PUT',
      path: () => `${m()}/products/KEEP-1`,
      json: '{"supplier_attributes": [{"supplier_ref": "alpine", "key": "weight", "value": "1\\u0000"}]}',
      name: '/supplier_attributes/0/value',
    },
    {
      what: 'a member of a fixed object',
      method: 'POST',
      path: () => '/admin/v1/merchants',
      json: '{"name": "Evil", "x\\u0000": 1}',
      name: '/x\u0000',
    },
  ])('$what: 400 invalid_body naming it', async ({ method, path, json, name }) => {
    const before = await stored();
    expectNulRefused(await sendJson(method, path(), json), name);
    expect(await stored()).toEqual(before);
  });

  it('an escaped backslash before u0000 is text, not a NUL, and is stored exactly', async () => {
    const response = await sendJson('PUT', `${merchant.base}/products/SLASH-1`, '{"content": {"de": {"title": "C:\\\\u0000 path"}}}');
    expect(response.status, response.text).toBe(200);
    expect(response.body.content.de.title).toBe('C:\\u0000 path');
    await adminOk(service, 'DELETE', `${merchant.base}/products/SLASH-1`);
  });
});

describe('an import with U+0000 applies nothing', () => {
  it('a 700-line import with a NUL on line 700 answers 400 naming that line, and applies none of the 699 good lines', async () => {
    const before = await storedBesidesAudit();
    const lines = Array.from({ length: 699 }, (_, i) => JSON.stringify(simpleProduct(`NUL-${i + 1}`)));
    lines.push('{"op": "upsert_product", "product": {"ref": "NUL-700", "content": {"de": {"title": "Zelt\\u0000"}}}}');
    const response = await importNdjson(service, merchant.id, `${lines.join('\n')}\n`);
    expect(response.status, response.text).toBe(400);
    expect(response.body).toMatchObject({ code: 'invalid_body', detail: expect.stringContaining('nothing was applied') });
    expect(response.body.invalid_params).toEqual([
      { name: 'line 700', in: 'body', reason: expect.stringMatching(/^\/product\/content\/de\/title: holds U\+0000/) },
    ]);
    expect(await storedBesidesAudit()).toEqual(before);
    const [job] = await service.service.imports.recent(merchant.id, 1);
    expect(job).toMatchObject({ state: 'failed', products_applied: 0, operations: null, problems: [{ name: 'line 700' }] });
  });

  it('a NUL in a member name, a ref or a delete line is named too', async () => {
    const before = await storedBesidesAudit();
    const response = await importNdjson(
      service,
      merchant.id,
      [
        '{"op": "upsert_product", "product": {"ref": "NUL-1", "overrides": {"a\\u0000": "x"}}}',
        '{"op": "delete_product", "ref": "KEEP\\u0000"}',
        JSON.stringify(simpleProduct('NUL-3')),
      ].join('\n'),
    );
    expect(response.status, response.text).toBe(400);
    expect(response.body.invalid_params.map((p: { name: string; reason: string }) => `${p.name}: ${p.reason}`)).toEqual([
      // eslint-disable-next-line no-control-regex -- the U+0000 in the member's name is what the test is about
      expect.stringMatching(/^line 1: \/product\/overrides\/a\u0000: holds U\+0000/),
      expect.stringMatching(/^line 2: \/ref: holds U\+0000/),
    ]);
    expect(await storedBesidesAudit()).toEqual(before);
  });
});

describe('the panel refuses U+0000 in its forms and its search', () => {
  let cookie: string;
  let csrf: string;
  beforeAll(async () => {
    cookie = await operatorCookie(service.url);
    const html = await (await fetch(`${service.url}/panel/merchants/${merchant.id}/keys`, { headers: { Cookie: cookie } })).text();
    csrf = /name="_csrf" value="([^"]+)"/.exec(html)![1]!;
  });
  const post = (path: string, fields: Record<string, string>) =>
    fetch(`${service.url}${path}`, {
      method: 'POST',
      redirect: 'manual',
      body: new URLSearchParams({ _csrf: csrf, ...fields }),
      headers: { Cookie: cookie, Origin: service.url, 'Content-Type': 'application/x-www-form-urlencoded' },
    });

  it.each<{ what: string; path: () => string; fields: Record<string, string> }>([
    { what: 'an API key name', path: () => `/panel/merchants/${merchant.id}/keys`, fields: { name: 'ci\u0000' } },
    {
      what: 'an invitation e-mail',
      path: () => `/panel/merchants/${merchant.id}/users`,
      fields: { email: 'new\u0000@nul.test', role: 'member' },
    },
    { what: 'a sign-in e-mail', path: () => '/panel/login', fields: { email: 'owner\u0000@nul.test', password: 'secret-secret' } },
  ])('$what: 400 naming U+0000, nothing written', async ({ path, fields }) => {
    const before = await stored();
    const response = await post(path(), fields);
    expect(response.status).toBe(400);
    expect(await response.text()).toMatch(/U\+0000/);
    expect(await stored()).toEqual(before);
  });

  it('a catalog search for a NUL answers 400, not a server error', async () => {
    const response = await fetch(`${service.url}/panel/merchants/${merchant.id}/catalog?store=de&q=KEEP%00`, {
      headers: { Cookie: cookie },
    });
    expect(response.status).toBe(400);
    expect(await response.text()).toMatch(/U\+0000/);
  });

  it('an uploaded import file with a NUL fails naming its line, applying nothing', async () => {
    const before = await stored();
    const form = new FormData();
    form.set('_csrf', csrf);
    const file = `${JSON.stringify(simpleProduct('NUL-1'))}\n{"op": "upsert_product", "product": {"ref": "NUL-2", "manufacturer": "\\u0000"}}\n`;
    form.set('file', new Blob([file], { type: 'application/x-ndjson' }), 'nul.ndjson');
    const response = await fetch(`${service.url}/panel/merchants/${merchant.id}/import`, {
      method: 'POST',
      body: form,
      redirect: 'manual',
      headers: { Cookie: cookie, Origin: service.url },
    });
    expect(response.status).toBe(303);
    await service.service.imports.drain();
    const [job] = await service.service.imports.recent(merchant.id, 1);
    expect(job).toMatchObject({ state: 'failed', file_name: 'nul.ndjson', products_applied: 0 });
    expect(job!.problems).toEqual([{ name: 'line 2', reason: expect.stringMatching(/^\/product\/manufacturer: holds U\+0000/) }]);
    // The upload itself is audited (import.start); nothing else is written.
    const { '/audit-log': _audit, ...after } = (await stored()) as Record<string, unknown>;
    const { '/audit-log': _before, ...rest } = before as Record<string, unknown>;
    expect(after).toEqual(rest);
  });

  it('an uploaded file named with a NUL is refused before any import starts', async () => {
    const jobs = (await service.service.imports.recent(merchant.id, 100)).length;
    const form = new FormData();
    form.set('_csrf', csrf);
    form.set('file', new Blob([`${JSON.stringify(simpleProduct('NUL-1'))}\n`], { type: 'application/x-ndjson' }), 'a\u0000.ndjson');
    const response = await fetch(`${service.url}/panel/merchants/${merchant.id}/import`, {
      method: 'POST',
      body: form,
      redirect: 'manual',
      headers: { Cookie: cookie, Origin: service.url },
    });
    expect(response.status).toBe(400);
    expect(await response.text()).toMatch(/U\+0000/);
    expect((await service.service.imports.recent(merchant.id, 100)).length).toBe(jobs);
  });
});
