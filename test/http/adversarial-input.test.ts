// Findings of an adversarial review (exact money, UTF-8, free keys), end to end on either engine: what the
// admin API and the NDJSON import accept is stored and published exactly, and what they cannot
// honour is refused with 400 problem+json, nothing stored.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminOk, buildOutdoorCatalog, type OutdoorCatalog } from '../support/admin-http.js';
import { ADMIN_TOKEN, startTestService, type TestService } from '../support/service.js';

let service: TestService;
let catalog: OutdoorCatalog;

beforeAll(async () => {
  service = await startTestService();
  catalog = await buildOutdoorCatalog(service);
});
afterAll(() => service.close());

/** The amounts of each price entry as written in the response text (JSON.parse would round them). */
function writtenPrices(text: string): { group: string; base: string; price: string }[] {
  return [...text.matchAll(/"customer_group":"([^"]+)","base_cost":([0-9.]+),"computed_price":([0-9.]+),/g)].map(
    ([, group, base, price]) => ({ group: group!, base: base!, price: price! }),
  );
}

describe('money beyond double precision is published exactly', () => {
  it('a 40-digit cost is converted, marked up and given its price ending digit for digit in every store', async () => {
    const cost = '9999999999999999999999999999999999999999';
    const created = await adminOk(service, 'PUT', `${catalog.merchant.base}/products/HUGE-1`, {
      content: { de: { title: 'Teuer' }, pl: { title: 'Drogi' } },
      offers: [{ supplier_ref: 'alpine', quantity: 1, cost, currency: 'EUR' }],
    });
    const read = async (store: string) => (await service.api(`/v1/products/${created.id}?store=${store}`, catalog.merchant.key)).text;
    // Outdoor catalog: retail +40 % ending 99, wholesale +10 %; EUR->PLN 4.25, EUR->JPY 160.
    expect(writtenPrices(await read('de'))).toEqual([
      { group: 'retail', base: '9999999999999999999999999999999999999999.00', price: '13999999999999999999999999999999999999998.99' },
      { group: 'wholesale', base: '9999999999999999999999999999999999999999.00', price: '10999999999999999999999999999999999999998.90' },
    ]);
    expect(writtenPrices(await read('pl'))).toEqual([
      { group: 'retail', base: '42499999999999999999999999999999999999995.75', price: '59499999999999999999999999999999999999994.99' },
      { group: 'wholesale', base: '42499999999999999999999999999999999999995.75', price: '46749999999999999999999999999999999999995.33' },
    ]);
    expect(writtenPrices(await read('jp'))).toEqual([
      { group: 'retail', base: '1599999999999999999999999999999999999999840', price: '2239999999999999999999999999999999999999799' },
      { group: 'wholesale', base: '1599999999999999999999999999999999999999840', price: '1759999999999999999999999999999999999999824' },
    ]);
  });
});

/** Raw bytes to the admin API, as a client with a broken encoder would send them. */
async function sendBytes(method: string, path: string, bytes: Uint8Array, contentType = 'application/json') {
  const response = await service.fetch(`${service.url}${path}`, {
    method,
    body: bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer,
    headers: { Authorization: `Bearer ${ADMIN_TOKEN}`, 'Content-Type': contentType },
  });
  const text = await response.text();
  return { status: response.status, body: JSON.parse(text), text };
}

const bytesOf = (...parts: (string | number[])[]) =>
  Buffer.concat(parts.map((part) => (typeof part === 'string' ? Buffer.from(part, 'utf8') : Buffer.from(part))));

/** What a refused body could have changed: the merchants, and the products the tests write to. */
async function stored(): Promise<unknown> {
  const read = async (path: string) => {
    const response = await service.adminApi('GET', path);
    return [response.status, response.body];
  };
  return {
    merchants: await read('/admin/v1/merchants'),
    products: await Promise.all(['BP-40', 'UTF-1', 'UTF-2'].map((ref) => read(`${catalog.merchant.base}/products/${ref}`))),
    attributes: await read(`${catalog.merchant.base}/attributes`),
    imports: (await service.service.imports.recent(catalog.merchant.id, 100)).filter((job) => job.state === 'succeeded').length,
  };
}

function expectInvalidBody(response: { status: number; body: any }, params: { name: string; reason: RegExp }[]) {
  expect(response.status, JSON.stringify(response.body)).toBe(400);
  expect(response.body).toMatchObject({ code: 'invalid_body', type: 'urn:problem:catalog:invalid_body' });
  expect(response.body.invalid_params).toHaveLength(params.length);
  params.forEach((param, i) => {
    expect(response.body.invalid_params[i]).toMatchObject({ in: 'body', name: param.name });
    expect(response.body.invalid_params[i].reason).toMatch(param.reason);
  });
}

describe('JSON bodies that are not well-formed UTF-8 are refused, nothing stored', () => {
  it.each([
    { what: 'the bytes FF FE', bytes: [0xff, 0xfe], reason: /not valid UTF-8: an invalid byte sequence \(FF\) at byte 10/ },
    {
      what: 'an encoded surrogate ED A0 80',
      bytes: [0xed, 0xa0, 0x80],
      reason: /not valid UTF-8: an encoded UTF-16 surrogate \(ED A0 80\) at byte 10/,
    },
    { what: 'an overlong encoding C0 AF', bytes: [0xc0, 0xaf], reason: /not valid UTF-8: an invalid byte sequence \(C0\) at byte 10/ },
    {
      what: 'a sequence cut short E2 82 followed by a quote',
      bytes: [0xe2, 0x82],
      reason: /not valid UTF-8: an invalid byte sequence \(E2 82 22\) at byte 10/,
    },
  ])('a merchant name holding $what answers 400 invalid_body naming it', async ({ bytes, reason }) => {
    const before = await stored();
    const response = await sendBytes('POST', '/admin/v1/merchants', bytesOf('{"name": "', bytes, '"}'));
    expectInvalidBody(response, [{ name: '/', reason }]);
    expect(await stored()).toEqual(before);
  });

  it('a product title holding invalid bytes is refused and the stored product keeps its title', async () => {
    const before = await stored();
    const response = await sendBytes(
      'PUT',
      `${catalog.merchant.base}/products/BP-40`,
      bytesOf('{"content": {"de": {"title": "Rucksack ', [0xff, 0xfe], '"}}}'),
    );
    expectInvalidBody(response, [{ name: '/', reason: /not valid UTF-8/ }]);
    expect(await stored()).toEqual(before);
  });

  it('a lone \\ud800 escape answers 400 naming the member that holds it', async () => {
    const before = await stored();
    const title = await sendBytes('PUT', `${catalog.merchant.base}/products/UTF-1`, bytesOf('{"content": {"de": {"title": "a\\ud800b"}}}'));
    expectInvalidBody(title, [{ name: '/content/de/title', reason: /lone UTF-16 surrogate/ }]);
    const lowHalf = await sendBytes('POST', '/admin/v1/merchants', bytesOf('{"name": "x\\udc00"}'));
    expectInvalidBody(lowHalf, [{ name: '/name', reason: /lone UTF-16 surrogate/ }]);
    const reversed = await sendBytes('PUT', `${catalog.merchant.base}/attributes/weight`, bytesOf('{"labels": {"de": "\\udd93\\ud83e"}}'));
    expectInvalidBody(reversed, [{ name: '/labels/de', reason: /lone UTF-16 surrogate/ }]);
    const inAKey = await sendBytes('PUT', `${catalog.merchant.base}/products/UTF-1`, bytesOf('{"overrides": {"color\\ud800": "red"}}'));
    expectInvalidBody(inAKey, [{ name: '/overrides/color\ud800', reason: /lone UTF-16 surrogate/ }]);
    expect(await stored()).toEqual(before);
  });

  it('accepts well-formed text and surrogate pairs (escaped or not), and stores it exactly; refuses a leading byte order mark', async () => {
    const json = '{"content": {"de": {"title": "Zebra \\ud83e\\udd93 🦓 \\\\ud800 Grüße"}}}';
    // A JSON body never starts with a byte order mark (RFC 8259 section 8.1): one behaviour for every body (json-bom.test.ts).
    const marked = await sendBytes('PUT', `${catalog.merchant.base}/products/UTF-2`, bytesOf([0xef, 0xbb, 0xbf], json));
    expectInvalidBody(marked, [{ name: '/', reason: /must not start with a byte order mark/ }]);
    const response = await sendBytes('PUT', `${catalog.merchant.base}/products/UTF-2`, bytesOf(json));
    expect(response.status, response.text).toBe(200);
    expect(response.body.content.de.title).toBe('Zebra 🦓 🦓 \\ud800 Grüße');
  });

  it('an import lists every line that is not UTF-8 or holds a lone surrogate, and applies none', async () => {
    const before = await stored();
    const line = (ref: string, title: string | number[]) =>
      bytesOf(`{"op": "upsert_product", "product": {"ref": "${ref}", "content": {"de": {"title": "`, title, '"}}}}\n');
    const body = Buffer.concat([
      line('UTF-1', 'fine'),
      line('UTF-2', [0xff, 0xfe]),
      line('UTF-2', [0xed, 0xa0, 0x80]),
      line('UTF-2', 'a\\ud800'),
      line('UTF-2', 'ok \\ud83e\\udd93'),
    ]);
    const response = await sendBytes('POST', `/admin/v1/merchants/${catalog.merchant.id}/imports`, body, 'application/x-ndjson');
    expectInvalidBody(response, [
      { name: 'line 2', reason: /not valid UTF-8: an invalid byte sequence \(FF\) at byte 82/ },
      { name: 'line 3', reason: /not valid UTF-8: an encoded UTF-16 surrogate \(ED A0 80\) at byte 82/ },
      { name: 'line 4', reason: /^\/product\/content\/de\/title: holds a lone UTF-16 surrogate/ },
    ]);
    expect(await stored()).toEqual(before);
  });
});

/** A JSON text request: `__proto__` written in a JS object literal would set its prototype instead. */
const sendJson = (method: string, path: string, json: string) =>
  service.adminApi(method, path, json, { headers: { 'Content-Type': 'application/json' } });

describe('a free key named __proto__ is refused everywhere; constructor and prototype are honoured', () => {
  const m = () => catalog.merchant.base;

  it.each([
    {
      what: 'an attribute key in the path',
      method: 'PUT',
      path: () => `${m()}/attributes/__proto__`,
      json: '{"labels": {"de": "X"}}',
      code: 'invalid_parameter',
      name: 'key',
      at: 'path',
    },
    {
      what: 'an override key',
      method: 'PUT',
      path: () => `${m()}/products/BP-40`,
      json: '{"content": {"de": {"title": "R"}}, "overrides": {"__proto__": "OVR", "color": "Rot"}}',
      code: 'invalid_body',
      name: '/overrides/__proto__',
      at: 'body',
    },
    {
      what: 'a supplier attribute key',
      method: 'PUT',
      path: () => `${m()}/products/BP-40`,
      json: '{"supplier_attributes": [{"supplier_ref": "alpine", "key": "__proto__", "value": "1"}]}',
      code: 'invalid_body',
      name: '/supplier_attributes/0/key',
      at: 'body',
    },
    {
      what: 'a label locale',
      method: 'PUT',
      path: () => `${m()}/attributes/weight`,
      json: '{"labels": {"__proto__": "Evil", "de": "Gewicht"}}',
      code: 'invalid_body',
      name: '/labels/__proto__',
      at: 'body',
    },
    {
      what: 'a content locale',
      method: 'PUT',
      path: () => `${m()}/products/BP-40`,
      json: '{"content": {"__proto__": {"title": "x"}, "de": {"title": "y"}}}',
      code: 'invalid_body',
      name: '/content/__proto__',
      at: 'body',
    },
    {
      what: 'a member of a fixed object',
      method: 'POST',
      path: () => '/admin/v1/merchants',
      json: '{"name": "Proto", "__proto__": {"sku_pattern": "X"}}',
      code: 'invalid_body',
      name: '/__proto__',
      at: 'body',
    },
  ])('$what: 400 $code naming it, nothing stored', async ({ method, path, json, code, name, at }) => {
    const before = await stored();
    const response = await sendJson(method, path(), json);
    expect(response.status, response.text).toBe(400);
    expect(response.body).toMatchObject({ code });
    expect(response.body.invalid_params).toContainEqual(expect.objectContaining({ in: at, name }));
    expect(await stored()).toEqual(before);
  });

  it('an import refuses __proto__ keys line by line and applies nothing', async () => {
    const before = await stored();
    const lines = [
      '{"op": "upsert_product", "product": {"ref": "UTF-1", "content": {"de": {"title": "fine"}}}}',
      '{"op": "upsert_product", "product": {"ref": "UTF-2", "overrides": {"__proto__": "OVR"}}}',
      '{"op": "upsert_product", "product": {"ref": "UTF-2", "content": {"__proto__": {"title": "x"}}}}',
      '{"op": "upsert_product", "product": {"ref": "UTF-2", "supplier_attributes": [{"supplier_ref": "alpine", "key": "__proto__", "value": "1"}]}}',
      '{"op": "upsert_product", "product": {"ref": "UTF-2", "__proto__": {"ref": "BP-40"}}}',
      '{"op": "delete_product", "ref": "BP-40", "__proto__": {"op": "upsert_product"}}',
    ];
    const response = await service.adminApi('POST', `/admin/v1/merchants/${catalog.merchant.id}/imports`, `${lines.join('\n')}\n`, {
      headers: { 'Content-Type': 'application/x-ndjson' },
    });
    expect(response.status, response.text).toBe(400);
    const reasons = response.body.invalid_params.map((p: { name: string; reason: string }) => `${p.name}: ${p.reason}`);
    expect(reasons).toEqual([
      expect.stringMatching(/^line 2: \/product\/overrides\/__proto__: /),
      expect.stringMatching(/^line 3: \/product\/content\/__proto__: /),
      expect.stringMatching(/^line 4: \/product\/supplier_attributes\/0\/key: must not be __proto__/),
      expect.stringMatching(/^line 5: \/product: .*__proto__/),
      expect.stringMatching(/^line 6: .*__proto__/),
    ]);
    expect(await stored()).toEqual(before);
  });

  it('keys named constructor and prototype are stored and published exactly, over the admin API and an import', async () => {
    await adminOk(service, 'PUT', `${m()}/attributes/constructor`, { unit: null, labels: { de: 'Hersteller' } });
    await adminOk(service, 'PUT', `${m()}/attributes/prototype`, { labels: { de: 'Vorlage' } });
    const attributes = (await adminOk(service, 'GET', `${m()}/attributes`)).data.map((a: { key: string }) => a.key);
    expect(attributes).toEqual(expect.arrayContaining(['constructor', 'prototype']));

    // The supplier's "constructor" value is published (no override reads Object.prototype.constructor);
    // the merchant's "prototype" override wins over the supplier's.
    const source = await sendJson(
      'PUT',
      `${m()}/products/PROTO-1`,
      JSON.stringify({
        content: { de: { title: 'Modell' } },
        offers: [{ supplier_ref: 'alpine', quantity: 1, cost: '5.00', currency: 'EUR' }],
        supplier_attributes: [
          { supplier_ref: 'alpine', key: 'constructor', value: 'Werk A' },
          { supplier_ref: 'alpine', key: 'prototype', value: 'V1' },
        ],
        overrides: { prototype: 'V2', hasownproperty: 'ja' },
      }),
    );
    expect(source.status, source.text).toBe(200);
    expect(source.body.overrides).toEqual({ prototype: 'V2', hasownproperty: 'ja' });
    const published = await service.api(`/v1/products/${source.body.id}?store=de`, catalog.merchant.key);
    expect(published.body.data.attributes).toEqual([
      { key: 'constructor', label: 'Hersteller', value: 'Werk A' },
      { key: 'hasownproperty', label: 'hasownproperty', value: 'ja' },
      { key: 'prototype', label: 'Vorlage', value: 'V2' },
    ]);

    const imported = await service.adminApi(
      'POST',
      `/admin/v1/merchants/${catalog.merchant.id}/imports`,
      `${JSON.stringify({ op: 'upsert_product', product: { ref: 'PROTO-2', content: { de: { title: 'Zwei' } }, overrides: { constructor: 'Werk B' } } })}\n`,
      { headers: { 'Content-Type': 'application/x-ndjson' } },
    );
    expect(imported.status, imported.text).toBe(200);
    const second = await adminOk(service, 'GET', `${m()}/products/PROTO-2`);
    expect(second.overrides).toEqual({ constructor: 'Werk B' });
    const secondPublished = await service.api(`/v1/products/${second.id}?store=de`, catalog.merchant.key);
    expect(secondPublished.body.data.attributes).toEqual([{ key: 'constructor', label: 'Hersteller', value: 'Werk B' }]);
  });
});
