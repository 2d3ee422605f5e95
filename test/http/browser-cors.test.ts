// Browsers on the public API over real HTTP, on either engine (openapi.yaml "Browsers"): a key
// lists the origins whose pages may read with it (none by default); a preflight, which carries no
// key, is answered for an origin some active key lists; the actual answer lets the page read only
// when the calling key lists its origin; every /v1 answer varies on Origin. The feed's stream opens
// with `retry:`. A real browser does all of this in test/http/browser-feed.test.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminOk, buildOutdoorCatalog, type OutdoorCatalog } from '../support/admin-http.js';
import { startTestService, type TestService } from '../support/service.js';

const SHOP = 'https://shop.example.com';
const OTHER = 'http://localhost:5173';

let service: TestService;
let catalog: OutdoorCatalog;
let base: string;
let shopKey: { id: number; key: string; allowed_origins: string[] };
let otherKey: { id: number; key: string };

const preflight = (origin: string | undefined, path = '/v1/products?store=de') =>
  fetch(`${service.url}${path}`, {
    method: 'OPTIONS',
    headers: {
      ...(origin ? { Origin: origin } : {}),
      'Access-Control-Request-Method': 'GET',
      'Access-Control-Request-Headers': 'authorization',
    },
  });
const read = (key: string | null, origin: string | undefined, path = '/v1/stores') =>
  service.api(path, key, { headers: origin ? { Origin: origin } : {} });

beforeAll(async () => {
  service = await startTestService();
  catalog = await buildOutdoorCatalog(service);
  base = catalog.merchant.base;
  otherKey = await adminOk(service, 'POST', `${base}/api-keys`, { name: 'server' }, 201);
});

afterAll(async () => {
  await service?.close();
});

describe('a key with no origins (the default)', () => {
  it('answers a preflight without Access-Control-Allow-Origin while no key of the deployment lists the origin', async () => {
    const answer = await preflight(SHOP);
    expect(answer.status).toBe(204);
    expect(answer.headers.get('access-control-allow-origin')).toBeNull();
    expect(answer.headers.get('vary')).toContain('Origin');
  });

  it('lets no page read its answers, and varies every answer on Origin', async () => {
    const answer = await read(otherKey.key, SHOP);
    expect(answer.status).toBe(200);
    expect(answer.headers.get('access-control-allow-origin')).toBeNull();
    expect(answer.headers.get('vary')).toContain('Origin');
    expect(answer.headers.get('vary')).toContain('Accept-Encoding');
    // Without Origin too: a cache must not hand one page's answer to another.
    expect((await read(otherKey.key, undefined)).headers.get('vary')).toContain('Origin');
  });
});

describe("issuing and changing a key's origins", () => {
  it('issues a key with origins, listed as given', async () => {
    shopKey = await adminOk(service, 'POST', `${base}/api-keys`, { name: 'shop pages', stores: ['de'], allowed_origins: [SHOP] }, 201);
    expect(shopKey.allowed_origins).toEqual([SHOP]);
    const listed = await adminOk(service, 'GET', `${base}/api-keys`);
    expect(listed.data.find((k: { id: number }) => k.id === shopKey.id).allowed_origins).toEqual([SHOP]);
    expect(listed.data.find((k: { id: number }) => k.id === otherKey.id).allowed_origins).toEqual([]);
  });

  it('refuses an origin that is not exactly what a browser sends (a path, a default port, upper case, a wildcard)', async () => {
    for (const origin of [
      `${SHOP}/`,
      'https://shop.example.com:443',
      'https://Shop.example.com',
      'https://*.example.com',
      'shop.example.com',
    ]) {
      const answer = await service.adminApi('POST', `${base}/api-keys`, { name: 'x', allowed_origins: [origin] });
      expect(answer.status, origin).toBe(400);
      expect(answer.body.code).toBe('invalid_body');
      expect(answer.text).toContain('allowed_origins/0');
    }
  });

  it("changes a key's origins and name with PATCH, audited, and keeps its secret, scopes and stores", async () => {
    const updated = await adminOk(service, 'PATCH', `${base}/api-keys/${shopKey.id}`, { allowed_origins: [SHOP, OTHER] });
    expect(updated).toMatchObject({
      id: shopKey.id,
      allowed_origins: [SHOP, OTHER],
      stores: ['de'],
      scopes: ['catalog:read'],
      name: 'shop pages',
    });
    expect(updated.key).toBeUndefined();
    const renamed = await adminOk(service, 'PATCH', `${base}/api-keys/${shopKey.id}`, { name: 'shop' });
    expect(renamed.allowed_origins).toEqual([SHOP, OTHER]);
    expect((await read(shopKey.key, undefined)).status).toBe(200);
    const log = await adminOk(service, 'GET', `${base}/audit-log`);
    const actions = log.data.filter((e: { action: string }) => e.action === 'api_key.update').map((e: { detail: string }) => e.detail);
    expect(actions).toContain(`key ${shopKey.id} (${updated.prefix}): origins ${SHOP}, ${OTHER}`);
    expect(actions).toContain(`key ${shopKey.id} (${updated.prefix}): name "shop"`);
    expect((await service.adminApi('PATCH', `${base}/api-keys/999999`, { name: 'x' })).status).toBe(404);
  });
});

describe('a key that lists the origin', () => {
  it('answers the preflight for it: GET, the key, a validator and Last-Event-ID, cached 10 minutes', async () => {
    const answer = await preflight(SHOP);
    expect(answer.status).toBe(204);
    expect(answer.headers.get('access-control-allow-origin')).toBe(SHOP);
    expect(answer.headers.get('access-control-allow-methods')).toBe('GET, HEAD');
    expect(answer.headers.get('access-control-allow-headers')).toBe('Authorization, If-None-Match, Last-Event-ID');
    expect(answer.headers.get('access-control-max-age')).toBe('600');
    expect(answer.headers.get('vary')).toContain('Origin');
    expect((await preflight('https://evil.example')).headers.get('access-control-allow-origin')).toBeNull();
  });

  it('lets a page of that origin read the answer and its headers (Date, ETag, rate limits)', async () => {
    const answer = await read(shopKey.key, SHOP);
    expect(answer.status).toBe(200);
    expect(answer.headers.get('access-control-allow-origin')).toBe(SHOP);
    const exposed = answer.headers.get('access-control-expose-headers')!.split(', ');
    expect(exposed).toEqual(expect.arrayContaining(['Date', 'ETag', 'RateLimit', 'RateLimit-Policy', 'Retry-After', 'X-Request-Id']));
    expect(answer.headers.get('vary')).toContain('Origin');
    // The key lists the origin, not the deployment: another key's answer stays closed to that page.
    expect((await read(otherKey.key, SHOP)).headers.get('access-control-allow-origin')).toBeNull();
    expect((await read(shopKey.key, 'https://evil.example')).headers.get('access-control-allow-origin')).toBeNull();
  });

  it("lets the page read the key's refusals too (a store it may not read) and a 401 when some key lists the origin", async () => {
    const refused = await read(shopKey.key, SHOP, '/v1/products?store=pl');
    expect(refused.status).toBe(404);
    expect(refused.headers.get('access-control-allow-origin')).toBe(SHOP);
    const unknown = await read('cps_' + 'x'.repeat(43), SHOP);
    expect(unknown.status).toBe(401);
    expect(unknown.headers.get('access-control-allow-origin')).toBe(SHOP);
    expect((await read(null, 'https://evil.example')).headers.get('access-control-allow-origin')).toBeNull();
  });

  it('lets it read a long-poll (written to the connection directly) and a stream, which opens with retry:', async () => {
    const poll = await read(shopKey.key, SHOP, '/v1/changes?store=de&wait=1');
    expect(poll.status).toBe(200);
    expect(poll.headers.get('access-control-allow-origin')).toBe(SHOP);
    expect(poll.headers.get('vary')).toContain('Origin');
    const controller = new AbortController();
    const stream = await fetch(`${service.url}/v1/changes?store=de`, {
      headers: { Authorization: `Bearer ${shopKey.key}`, Accept: 'text/event-stream', Origin: SHOP },
      signal: controller.signal,
    });
    expect(stream.headers.get('access-control-allow-origin')).toBe(SHOP);
    const reader = stream.body!.getReader();
    let text = '';
    while (!text.includes('\n\n')) text += new TextDecoder().decode((await reader.read()).value);
    expect(text.slice(0, text.indexOf('\n\n'))).toBe(': connected\nretry: 5000');
    controller.abort();
  });

  it('rolls a key into one with the same origins', async () => {
    const rolled = await adminOk(service, 'POST', `${base}/api-keys/${shopKey.id}/roll`, {}, 201);
    expect(rolled.allowed_origins).toEqual([SHOP, OTHER]);
    expect((await read(rolled.key, OTHER)).headers.get('access-control-allow-origin')).toBe(OTHER);
    shopKey = rolled;
  });

  it('stops allowing an origin once the key no longer lists it, at once in the process that changed it', async () => {
    await adminOk(service, 'PATCH', `${base}/api-keys/${shopKey.id}`, { allowed_origins: [OTHER] });
    expect((await read(shopKey.key, SHOP)).headers.get('access-control-allow-origin')).toBeNull();
    expect((await preflight(SHOP)).headers.get('access-control-allow-origin')).toBeNull();
    expect((await preflight(OTHER)).headers.get('access-control-allow-origin')).toBe(OTHER);
    await adminOk(service, 'DELETE', `${base}/api-keys/${shopKey.id}`);
    // A revoked key allows nothing, not even the preflight.
    expect((await preflight(OTHER)).headers.get('access-control-allow-origin')).toBeNull();
  });
});

describe("the stream's retry:", () => {
  it('is CPS_FEED_STREAM_RETRY_MS', async () => {
    const other = await startTestService({ config: { changes: { streamRetryMs: 1234 } } });
    try {
      const merchant = await buildOutdoorCatalog(other);
      const controller = new AbortController();
      const stream = await fetch(`${other.url}/v1/changes?store=de`, {
        headers: { Authorization: `Bearer ${merchant.merchant.key}`, Accept: 'text/event-stream' },
        signal: controller.signal,
      });
      const reader = stream.body!.getReader();
      let text = '';
      while (!text.includes('\n\n')) text += new TextDecoder().decode((await reader.read()).value);
      expect(text).toContain('retry: 1234\n');
      controller.abort();
    } finally {
      await other.close();
    }
  });
});
