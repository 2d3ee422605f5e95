// docs/decisions.md#errors-and-bad-input and #product-limits: admin request bodies are limited in size
// (413) and in nesting depth (400, checked on the raw text before parsing); an answer given before
// the body was read leaves the client's connection usable.
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { ADMIN_ROUTE_FACTS } from '../../src/generated/admin-route-facts.js';
import { nestsDeeperThan } from '../../src/shared/json-limits.js';
import { adminOk, buildOutdoorCatalog, importNdjson, type OutdoorCatalog } from '../support/admin-http.js';
import { ADMIN_TOKEN, startTestService, type TestService } from '../support/service.js';

describe('the nesting scan', () => {
  it('counts arrays and objects inside one another, not side by side', () => {
    expect(nestsDeeperThan('[[[]]]', 3)).toBe(false);
    expect(nestsDeeperThan('[[[[]]]]', 3)).toBe(true);
    expect(nestsDeeperThan('[[],[],{"a":1}]', 2)).toBe(false);
    expect(nestsDeeperThan('{"a":{"b":{"c":1}}}', 2)).toBe(true);
    expect(nestsDeeperThan('42', 0)).toBe(false);
  });

  it('skips brackets inside strings, escaped quotes included', () => {
    expect(nestsDeeperThan(`{"a":"${'['.repeat(100)}"}`, 1)).toBe(false);
    expect(nestsDeeperThan(`{"a":"\\"${'{'.repeat(100)}\\\\"}`, 1)).toBe(false);
    expect(nestsDeeperThan('{"a":"\\\\",  "b":[[1]]}', 2)).toBe(true);
  });

  it('leaves malformed text to the parser', () => {
    expect(nestsDeeperThan(']]]]][[[', 3)).toBe(false);
    expect(nestsDeeperThan('[[[[', 3)).toBe(true);
  });

  it('reads its limit from CPS_ADMIN_MAX_JSON_DEPTH, 32 by default', () => {
    expect(loadConfig({}).limits.maxJsonDepth).toBe(32);
    expect(loadConfig({ CPS_ADMIN_MAX_JSON_DEPTH: '8' }).limits.maxJsonDepth).toBe(8);
  });
});

describe('admin bodies nested too deep', () => {
  let service: TestService;
  let catalog: OutdoorCatalog;

  beforeAll(async () => {
    service = await startTestService({ config: { limits: { maxJsonDepth: 4 } } });
    catalog = await buildOutdoorCatalog(service);
  });
  afterAll(() => service.close());

  const nested = (depth: number) => `{"name":${'['.repeat(depth - 1)}"x"${']'.repeat(depth - 1)}}`;

  it('answers 400 invalid_body naming / with the limit, and creates nothing', async () => {
    for (const body of [nested(5), `${'['.repeat(100_000)}${']'.repeat(100_000)}`]) {
      const response = await service.adminApi('POST', `${catalog.merchant.base}/customer-groups`, body, {
        headers: { 'Content-Type': 'application/json' },
      });
      expect(response.status, response.text).toBe(400);
      expect(response.body).toMatchObject({
        code: 'invalid_body',
        invalid_params: [{ name: '/', in: 'body', reason: 'is nested deeper than 4 levels of arrays and objects' }],
      });
    }
    const groups = await adminOk(service, 'GET', `${catalog.merchant.base}/customer-groups`);
    expect(groups.data.map((g: { name: string }) => g.name)).toEqual(['retail', 'wholesale']);
  });

  it('lets a body at the limit through to validation', async () => {
    const response = await service.adminApi('POST', `${catalog.merchant.base}/customer-groups`, nested(4), {
      headers: { 'Content-Type': 'application/json' },
    });
    expect(response.status).toBe(400);
    expect(response.body.invalid_params).toEqual([expect.objectContaining({ name: '/name' })]);
    // A product document is four levels deep at most: content -> locale -> title sits at three.
    await adminOk(service, 'PUT', `${catalog.merchant.base}/products/DEEP-OK`, {
      content: { de: { title: 'Tief genug' } },
      offers: [{ supplier_ref: 'alpine', quantity: 1, cost: '1.00', currency: 'EUR' }],
    });
  });

  it('refuses a too-deep import line as that line, still listing every other bad line', async () => {
    const lines = [
      JSON.stringify({ op: 'delete_product', ref: 'LAMP-1' }),
      `{"op":"upsert_product","product":{"ref":"X","overrides":${'['.repeat(50)}${']'.repeat(50)}}}`,
      '{"op": "upsert_product", ',
    ].join('\n');
    const response = await importNdjson(service, catalog.merchant.id, lines);
    expect(response.status).toBe(400);
    expect(response.body.invalid_params).toEqual([
      { name: 'line 2', in: 'body', reason: 'is nested deeper than 4 levels of arrays and objects' },
      expect.objectContaining({ name: 'line 3' }),
    ]);
    expect((await service.adminApi('GET', `${catalog.merchant.base}/products/LAMP-1`)).status).toBe(200);
  });
});

describe('answers given before the body was read', () => {
  let service: TestService;
  let merchantBase: string;
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });

  beforeAll(async () => {
    service = await startTestService({ config: { limits: { adminBodyBytes: 1024 } } });
    merchantBase = (await adminOk(service, 'POST', '/admin/v1/merchants', { name: 'Limits' }, 201)).id;
    merchantBase = `/admin/v1/merchants/${merchantBase}`;
  });
  afterAll(async () => {
    agent.destroy();
    await service.close();
  });

  /** One request over the agent's single keep-alive connection. */
  function post(path: string, body: string, token = ADMIN_TOKEN): Promise<{ status: number; connection?: string }> {
    const url = new URL(service.url);
    return new Promise((resolve, reject) => {
      const request = http.request(
        {
          agent,
          host: url.hostname,
          port: url.port,
          method: 'POST',
          path,
          headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) },
        },
        (response) => {
          response.resume();
          response.on('end', () => resolve({ status: response.statusCode!, connection: response.headers.connection }));
        },
      );
      request.on('error', reject);
      request.end(body);
    });
  }

  it('closes the connection after a 413 or 401 that left a large body unread, so the next request succeeds', async () => {
    const large = `{"name":"${'x'.repeat(2_000_000)}"}`;
    expect(await post(`${merchantBase}/customer-groups`, large)).toEqual({ status: 413, connection: 'close' });
    expect((await post(`${merchantBase}/customer-groups`, '{"name":"after 413"}')).status).toBe(201);
    expect(await post(`${merchantBase}/customer-groups`, large, 'wrong')).toEqual({ status: 401, connection: 'close' });
    expect((await post(`${merchantBase}/customer-groups`, '{"name":"after 401"}')).status).toBe(201);
  });

  it('keeps the connection after an answer that read the whole body', async () => {
    expect(await post(`${merchantBase}/customer-groups`, '{"name":"kept"}')).toEqual({ status: 201, connection: 'keep-alive' });
  });

  it('ignores, rather than limits, a body sent to an operation that takes none', async () => {
    const response = await service.adminApi('POST', `${merchantBase}/images/retry-dead`, `{"pad":"${'x'.repeat(5000)}"}`, {
      headers: { 'Content-Type': 'application/json' },
    });
    expect(response.status).toBe(200);
  });
});

describe('every operation of admin.yaml, as its generated route facts say', () => {
  let service: TestService;
  let merchantBase: string;

  beforeAll(async () => {
    service = await startTestService({ config: { limits: { adminBodyBytes: 1024, importBodyBytes: 2048 } } });
    merchantBase = `/admin/v1/merchants/${(await adminOk(service, 'POST', '/admin/v1/merchants', { name: 'Facts' }, 201)).id}`;
  });
  afterAll(() => service.close());

  // The checks run before the handler, so any text in the other parameters reaches them.
  const urlOf = (path: string) => path.replace('/admin/v1/merchants/{merchant_id}', merchantBase).replace(/\{[^}]+\}/g, '1');
  const oversize = { pad: 'x'.repeat(4096) };
  const withBody = (body: string) => ADMIN_ROUTE_FACTS.filter((operation) => operation.body === body);

  it('lists a JSON, an NDJSON and a bodiless operation among them', () => {
    expect(withBody('json').length).toBeGreaterThan(10);
    expect(withBody('ndjson').map((operation) => operation.operationId)).toEqual(['importProducts']);
    expect(withBody('none').filter((operation) => operation.method !== 'GET').length).toBeGreaterThan(5);
  });

  it.each(withBody('json'))(
    '$operationId ($method): refuses a missing JSON body (where one is required), and one above the admin limit with 413',
    async ({ method, path, mediaTypes, bodyRequired }) => {
      // A merge patch is sent as one (its other media types answer 415 first).
      const init = mediaTypes.includes('application/json') ? undefined : { headers: { 'Content-Type': mediaTypes[0]! } };
      const missing = await service.adminApi(method, urlOf(path), undefined, init);
      // An optional body (rolling a key) may be left out: it gets as far as the operation (404 here).
      if (!bodyRequired) expect(missing.status, missing.text).toBe(404);
      else expect(missing.status, missing.text).toBe(400);
      // A merge patch names its media type, so its empty body is read, as JSON that is not valid.
      const reason = init ? 'is not valid JSON' : 'is required: send JSON with Content-Type: application/json';
      if (bodyRequired) expect(missing.body.invalid_params).toEqual([{ name: '/', in: 'body', reason }]);
      const large = await service.adminApi(method, urlOf(path), oversize, init);
      expect(large.status, large.text).toBe(413);
    },
  );

  it('holds the import to the import limit, not the admin one', async () => {
    const lines = (count: number) =>
      Array.from({ length: count }, (_, i) => JSON.stringify({ op: 'delete_product', ref: `GONE-${i}` })).join('\n');
    const id = merchantBase.split('/').pop()!;
    expect((await importNdjson(service, Number(id), lines(40))).status).toBe(200);
    expect((await importNdjson(service, Number(id), lines(100))).status).toBe(413);
  });

  it.each(withBody('none').filter((operation) => operation.method !== 'GET'))(
    '$operationId ($method): never reads, so never limits, a body sent to it',
    async ({ method, path }) => {
      const response = await service.adminApi(method, urlOf(path), oversize);
      expect(response.status, response.text).not.toBe(413);
      expect(response.body?.invalid_params ?? []).not.toContainEqual(expect.objectContaining({ in: 'body' }));
    },
  );
});
