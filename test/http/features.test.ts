// The HTTP features integrators expect, over real HTTP: per-key rate limits with 429 and
// the RateLimit fields, ETag and 304 on catalog reads, gzip/brotli by Accept-Encoding, and
// X-Request-Id. Raw responses (compressed bytes) are read with node:http and still go through
// the contract harness, decoded.
import { createHash } from 'node:crypto';
import http from 'node:http';
import zlib from 'node:zlib';
import { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { negotiateCoding } from '../../src/http/compression.js';
import { accessLog } from '../../src/http/access-log.js';
import { renderError } from '../../src/http/errors.js';
import { TokenBucketLimiter } from '../../src/http/rate-limit.js';
import { requestId } from '../../src/http/request-id.js';
import { answerHeader, answerHeaders } from '../../src/http/direct-answer.js';
import { LocalFolderMediaStore } from '../../src/images/media-store.js';
import { adminOk, buildOutdoorCatalog, importNdjson, simpleProduct, type OutdoorCatalog } from '../support/admin-http.js';
import { publicContract } from '../support/contract.js';
import { LogCapture } from '../support/logs.js';
import { startTestService, type TestService } from '../support/service.js';

const T0 = Date.parse('2026-11-25T10:00:00Z');
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

interface RawResponse {
  status: number;
  headers: Headers;
  /** The bytes on the wire, before any content decoding. */
  raw: Buffer;
  /** The body after content decoding. */
  text: string;
}

/** A GET through node:http, which neither adds Accept-Encoding nor decodes; checked against the contract. */
function rawGet(base: string, pathAndQuery: string, headers: Record<string, string> = {}): Promise<RawResponse> {
  const url = `${base}${pathAndQuery}`;
  return new Promise((resolve, reject) => {
    http
      .get(url, { headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('error', reject);
        res.on('end', () => {
          try {
            const raw = Buffer.concat(chunks);
            const responseHeaders = new Headers();
            for (const [name, value] of Object.entries(res.headers)) {
              if (value !== undefined) responseHeaders.set(name, Array.isArray(value) ? value.join(', ') : value);
            }
            const coding = responseHeaders.get('content-encoding');
            const decoded = coding === 'gzip' ? zlib.gunzipSync(raw) : coding === 'br' ? zlib.brotliDecompressSync(raw) : raw;
            const text = decoded.toString('utf8');
            if (!pathAndQuery.startsWith('/openapi.json'))
              publicContract.validateResponse('GET', url, res.statusCode!, responseHeaders, text);
            resolve({ status: res.statusCode!, headers: responseHeaders, raw, text });
          } catch (error) {
            reject(error instanceof Error ? error : new Error(String(error)));
          }
        });
      })
      .on('error', reject);
  });
}

describe('per-key rate limiting (docs/decisions.md#rate-limits)', () => {
  let service: TestService;
  let catalog: OutdoorCatalog;
  let clock = T0;

  beforeAll(async () => {
    service = await startTestService({ now: () => new Date(clock), config: { rateLimit: { burst: 3, perSecond: 1 } } });
    catalog = await buildOutdoorCatalog(service);
  });
  afterAll(() => service.close());

  /** A fresh key of the catalog's merchant: a full bucket of its own. */
  const freshKey = () => service.keyFor(catalog.merchant.id);

  it("answers 429 rate_limited with Retry-After, RateLimit-Policy and RateLimit once the key's bucket is empty", async () => {
    const key = await freshKey();
    const seen = [];
    for (let i = 0; i < 3; i++) {
      const response = await service.api('/v1/stores', key);
      expect(response.status).toBe(200);
      expect(response.headers.get('RateLimit-Policy')).toBe('"default";q=3;w=3');
      seen.push(response.headers.get('RateLimit'));
    }
    // The clock stands still: each request takes one, and the bucket is full again 1 s per request later.
    expect(seen).toEqual(['"default";r=2;t=1', '"default";r=1;t=2', '"default";r=0;t=3']);

    const throttled = await service.api('/v1/products', key);
    expect(throttled.status).toBe(429);
    expect(throttled.headers.get('Content-Type')).toBe('application/problem+json');
    expect(throttled.body).toMatchObject({
      code: 'rate_limited',
      status: 429,
      type: 'urn:problem:catalog:rate_limited',
      instance: '/v1/products',
    });
    expect(throttled.headers.get('Retry-After')).toBe('1');
    expect(throttled.headers.get('RateLimit-Policy')).toBe('"default";q=3;w=3');
    expect(throttled.headers.get('RateLimit')).toBe('"default";r=0;t=3');
  });

  it('throttles every /v1 operation alike', async () => {
    const key = await freshKey();
    for (let i = 0; i < 3; i++) expect((await service.api('/v1/stores', key)).status).toBe(200);
    const { backpack } = catalog.products;
    for (const path of ['/v1/products', `/v1/products/${backpack.id}`, `/v1/prices?ids=${backpack.id}`, '/v1/stores', '/v1/changes']) {
      const response = await service.api(path, key);
      expect(response.status, path).toBe(429);
      expect(response.body.code).toBe('rate_limited');
    }
  });

  it('refills at the sustained rate as time passes, up to the burst, and a throttled request takes nothing', async () => {
    const key = await freshKey();
    for (let i = 0; i < 3; i++) expect((await service.api('/v1/stores', key)).status).toBe(200);
    for (let i = 0; i < 5; i++) expect((await service.api('/v1/stores', key)).status).toBe(429);

    clock += 999;
    const early = await service.api('/v1/stores', key);
    expect(early.status).toBe(429);
    expect(early.headers.get('Retry-After')).toBe('1');
    clock += 1;
    const refilled = await service.api('/v1/stores', key);
    expect(refilled.status).toBe(200);
    expect(refilled.headers.get('RateLimit')).toBe('"default";r=0;t=3');
    expect((await service.api('/v1/stores', key)).status).toBe(429);

    // Ten seconds refill ten requests' worth, but the bucket holds three.
    clock += 10_000;
    const statuses = [];
    for (let i = 0; i < 4; i++) statuses.push((await service.api('/v1/stores', key)).status);
    expect(statuses).toEqual([200, 200, 200, 429]);
  });

  it('limits keys independently, even two keys of one merchant', async () => {
    const [first, second] = [await freshKey(), await freshKey()];
    for (let i = 0; i < 3; i++) await service.api('/v1/stores', first);
    expect((await service.api('/v1/stores', first)).status).toBe(429);
    const other = await service.api('/v1/stores', second);
    expect(other.status).toBe(200);
    expect(other.headers.get('RateLimit')).toBe('"default";r=2;t=1');
  });

  it('counts every authenticated request, errors included, with the headers on each', async () => {
    const key = await freshKey();
    const notFound = await service.api('/v1/products/999999', key);
    expect(notFound.status).toBe(404);
    expect(notFound.headers.get('RateLimit')).toBe('"default";r=2;t=1');
    const invalid = await service.api('/v1/products?page=0', key);
    expect(invalid.status).toBe(400);
    expect(invalid.headers.get('RateLimit')).toBe('"default";r=1;t=2');
    expect(invalid.headers.get('RateLimit-Policy')).toBe('"default";q=3;w=3');
  });

  it('does not count requests without a valid key, and states no limits on them', async () => {
    for (let i = 0; i < 5; i++) {
      const response = await service.api('/v1/stores', `cps_${'x'.repeat(43)}`);
      expect(response.status).toBe(401);
      expect(response.headers.get('RateLimit')).toBeNull();
    }
  });

  it('does not limit media URLs', async () => {
    for (let i = 0; i < 5; i++) {
      const response = await service.api(`/media/${'0'.repeat(64)}.png`, null);
      expect(response.status).toBe(404);
      expect(response.headers.get('RateLimit')).toBeNull();
    }
  });
});

describe('the default rate limits', () => {
  it('are 600 requests at once and 50 per second, configurable, and at least 1', () => {
    expect(loadConfig({}).rateLimit).toEqual({ burst: 600, perSecond: 50 });
    expect(loadConfig({ CPS_RATE_LIMIT_BURST: '1200', CPS_RATE_LIMIT_PER_SECOND: '100' }).rateLimit).toEqual({
      burst: 1200,
      perSecond: 100,
    });
    expect(() => loadConfig({ CPS_RATE_LIMIT_PER_SECOND: '0' })).toThrow(/CPS_RATE_LIMIT_PER_SECOND/);
  });

  it('never throttle a full sync of a 120,000-product store at 200 per page, however fast the client', () => {
    const limiter = new TokenBucketLimiter(loadConfig({}).rateLimit, () => new Date(T0));
    // 600 pages plus the store list and a first feed window, all within the same millisecond.
    const refused = Array.from({ length: 600 }, () => limiter.take(1)).filter((d) => !d.allowed);
    expect(refused).toEqual([]);
    expect(limiter.policyHeader).toBe('"default";q=600;w=12');
  });

  it('never throttle a sync of any size that reads at most 50 pages per second', () => {
    let now = T0;
    const limiter = new TokenBucketLimiter(loadConfig({}).rateLimit, () => new Date(now));
    // 1,000,000 products in 5000 pages, one every 20 ms, after a first burst of 600 at once.
    const decisions = [];
    for (let page = 0; page < 5600; page++) {
      if (page >= 600) now += 20;
      decisions.push(limiter.take(1));
    }
    expect(decisions.filter((d) => !d.allowed)).toEqual([]);
  });
});

describe('ETag and 304 Not Modified on catalog reads', () => {
  let service: TestService;
  let catalog: OutdoorCatalog;
  let key: string;

  beforeAll(async () => {
    service = await startTestService();
    catalog = await buildOutdoorCatalog(service);
    key = catalog.merchant.key;
    const imported = await importNdjson(
      service,
      catalog.merchant.id,
      Array.from({ length: 12 }, (_, i) => simpleProduct(`E-${i}`)),
    );
    expect(imported.status, imported.text).toBe(200);
  });
  afterAll(() => service.close());

  // Pages and id lists are tagged over their rows' stored hashes and their envelope (not their
  // ~155 KB of bytes); the other reads over their bytes.
  const READS: [string, (c: OutdoorCatalog) => string, 'page' | 'bytes'][] = [
    ['a page', () => '/v1/products?per_page=5', 'page'],
    ['a page of another store', () => '/v1/products?store=pl&per_page=5&page=2', 'page'],
    ['a page past the last one', () => '/v1/products?page=99', 'page'],
    ['a keyset page', (c) => `/v1/products?after_id=${c.products.backpack.id}&per_page=2`, 'page'],
    ['some products by id', (c) => `/v1/products?ids=${c.products.lamp.id},${c.products.tent.id}`, 'page'],
    ['a product', (c) => `/v1/products/${c.products.backpack.id}?store=pl`, 'bytes'],
    ['the store list', () => '/v1/stores', 'bytes'],
  ];

  it.each(READS)('answers %s with a strong ETag, and 304 when If-None-Match matches it', async (_label, pathOf, taggedOver) => {
    const path = pathOf(catalog);
    const identity = { 'Accept-Encoding': 'identity' };
    const first = await service.api(path, key, { headers: identity });
    expect(first.status).toBe(200);
    const etag = first.headers.get('ETag')!;
    if (taggedOver === 'bytes') {
      expect(etag).toBe(`"${createHash('sha256').update(first.text).digest('base64url')}"`);
    } else {
      // The same bytes read again carry the same tag.
      expect((await service.api(path, key, { headers: identity })).headers.get('ETag')).toBe(etag);
    }

    const again = await service.api(path, key, { headers: { ...identity, 'If-None-Match': etag } });
    expect(again.status).toBe(304);
    expect(again.text).toBe('');
    expect(again.headers.get('ETag')).toBe(etag);
    expect(again.headers.get('Content-Type')).toBeNull();
    expect(again.headers.get('Vary')).toBe('Accept-Encoding, Origin');
    expect(again.headers.get('RateLimit')).toMatch(/^"default";r=\d+;t=\d+$/);
    expect(again.headers.get('X-Request-Id')).toMatch(UUID);
  });

  it('tags two pages alike exactly when their bytes are alike', async () => {
    const identity = { 'Accept-Encoding': 'identity' };
    const paths = [
      '/v1/products?per_page=5',
      '/v1/products?per_page=5&page=1',
      '/v1/products?per_page=6',
      '/v1/products?per_page=5&page=2',
      '/v1/products?store=pl&per_page=5',
      `/v1/products?after_id=0&per_page=5`,
      '/v1/products?page=98',
      '/v1/products?page=99',
    ];
    const reads = await Promise.all(paths.map((p) => service.api(p, key, { headers: identity })));
    for (const [i, a] of reads.entries()) {
      for (const [j, b] of reads.entries()) {
        expect(a.headers.get('ETag') === b.headers.get('ETag'), `${paths[i]} vs ${paths[j]}`).toBe(a.text === b.text);
      }
    }
    // Some of them are alike (the same page asked two ways), and most are not.
    expect(new Set(reads.map((r) => r.text)).size).toBeLessThan(paths.length);
    expect(new Set(reads.map((r) => r.text)).size).toBeGreaterThan(4);
  });

  it('compares weakly and accepts a list of tags or *', async () => {
    const identity = { 'Accept-Encoding': 'identity' };
    const etag = (await service.api('/v1/stores', key, { headers: identity })).headers.get('ETag')!;
    for (const header of [`W/${etag}`, `"nope", ${etag}`, `W/"nope",W/${etag}`, '*']) {
      expect((await service.api('/v1/stores', key, { headers: { ...identity, 'If-None-Match': header } })).status, header).toBe(304);
    }
    for (const header of ['"nope"', etag.slice(0, -2) + '"', `"${etag}"`]) {
      expect((await service.api('/v1/stores', key, { headers: { ...identity, 'If-None-Match': header } })).status, header).toBe(200);
    }
  });

  it('changes the ETag of the product and of its pages after an admin write, and answers 200 to the old one', async () => {
    const { id } = await adminOk(service, 'GET', `${catalog.merchant.base}/products/E-0`);
    const identity = { 'Accept-Encoding': 'identity' };
    const paths = [`/v1/products/${id}`, '/v1/products?per_page=5', `/v1/products?ids=${id}`, `/v1/products?after_id=${id - 1}&per_page=1`];
    const before = await Promise.all(paths.map((p) => service.api(p, key, { headers: identity })));
    expect(before.map((r) => r.text.includes('Produkt E-0'))).toEqual([true, true, true, true]);
    const stores = await service.api('/v1/stores', key, { headers: identity });

    const renamed = simpleProduct('E-0').product;
    await adminOk(service, 'PUT', `${catalog.merchant.base}/products/E-0`, {
      ...renamed,
      ref: undefined,
      content: { de: { title: 'Produkt E-0 (neu)', description: null } },
    });

    for (const [i, path] of paths.entries()) {
      const after = await service.api(path, key, { headers: { ...identity, 'If-None-Match': before[i]!.headers.get('ETag')! } });
      expect(after.status, path).toBe(200);
      expect(after.text).toContain('Produkt E-0 (neu)');
      expect(after.headers.get('ETag')).not.toBe(before[i]!.headers.get('ETag'));
    }
    // What the write did not touch keeps its tag.
    const untouched = await service.api('/v1/stores', key, { headers: { ...identity, 'If-None-Match': stores.headers.get('ETag')! } });
    expect(untouched.status).toBe(304);

    await adminOk(service, 'PUT', `${catalog.merchant.base}/stores/pl`, {
      name: 'Alpine Polska Sp. z o.o.',
      locale: 'pl-PL',
      currency: 'PLN',
    });
    const storeRenamed = await service.api('/v1/stores', key, { headers: { ...identity, 'If-None-Match': stores.headers.get('ETag')! } });
    expect(storeRenamed.status).toBe(200);
    expect(storeRenamed.headers.get('ETag')).not.toBe(stores.headers.get('ETag'));
  });

  it('gives each content coding its own tag, and revalidates within one coding', async () => {
    const path = '/v1/products?per_page=20';
    const plain = await rawGet(service.url, path, { Authorization: `Bearer ${key}` });
    const gzip = await rawGet(service.url, path, { Authorization: `Bearer ${key}`, 'Accept-Encoding': 'gzip' });
    const br = await rawGet(service.url, path, { Authorization: `Bearer ${key}`, 'Accept-Encoding': 'br' });
    const tag = plain.headers.get('ETag')!;
    expect(gzip.headers.get('ETag')).toBe(`${tag.slice(0, -1)}-gzip"`);
    expect(br.headers.get('ETag')).toBe(`${tag.slice(0, -1)}-br"`);

    const revalidated = await rawGet(service.url, path, {
      Authorization: `Bearer ${key}`,
      'Accept-Encoding': 'gzip',
      'If-None-Match': gzip.headers.get('ETag')!,
    });
    expect(revalidated.status).toBe(304);
    expect(revalidated.raw.length).toBe(0);
    expect(revalidated.headers.get('Content-Encoding')).toBeNull();
    // The identity copy's tag does not validate a gzip-coded copy: the bytes would differ.
    const otherCoding = await rawGet(service.url, path, {
      Authorization: `Bearer ${key}`,
      'Accept-Encoding': 'gzip',
      'If-None-Match': tag,
    });
    expect(otherCoding.status).toBe(200);
    expect(otherCoding.headers.get('Content-Encoding')).toBe('gzip');
  });

  it('sends no ETag on the change feed and the prices (not conditional reads)', async () => {
    expect((await service.api('/v1/changes', key)).headers.get('ETag')).toBeNull();
    expect((await service.api(`/v1/prices?ids=${catalog.products.backpack.id}`, key)).headers.get('ETag')).toBeNull();
  });
});

describe('gzip and brotli by Accept-Encoding', () => {
  let service: TestService;
  let key: string;
  let auth: Record<string, string>;
  const PAGE = '/v1/products?per_page=50';

  beforeAll(async () => {
    service = await startTestService();
    const catalog = await buildOutdoorCatalog(service);
    key = catalog.merchant.key;
    auth = { Authorization: `Bearer ${key}` };
    const imported = await importNdjson(
      service,
      catalog.merchant.id,
      Array.from({ length: 60 }, (_, i) => simpleProduct(`C-${i}`)),
    );
    expect(imported.status, imported.text).toBe(200);
  });
  afterAll(() => service.close());

  it('sends the bytes as they are, with Vary: Accept-Encoding, to a client that does not ask', async () => {
    const plain = await rawGet(service.url, PAGE, auth);
    expect(plain.status).toBe(200);
    expect(plain.headers.get('Content-Encoding')).toBeNull();
    expect(plain.headers.get('Vary')).toBe('Accept-Encoding, Origin');
    expect(plain.raw.length).toBeGreaterThan(10_000);
    expect(JSON.parse(plain.raw.toString('utf8')).data).toHaveLength(50);
    const identity = await rawGet(service.url, PAGE, { ...auth, 'Accept-Encoding': 'identity' });
    expect(identity.headers.get('Content-Encoding')).toBeNull();
    expect(identity.raw.equals(plain.raw)).toBe(true);
  });

  it.each([
    ['gzip', 'gzip', zlib.gunzipSync],
    ['br', 'br', zlib.brotliDecompressSync],
    ['gzip, deflate, br', 'br', zlib.brotliDecompressSync],
    ['gzip;q=1.0, br;q=0.5', 'gzip', zlib.gunzipSync],
    ['br;q=0, *', 'gzip', zlib.gunzipSync],
  ] as const)(
    'with Accept-Encoding "%s" codes as %s, and the body decodes to exactly the uncompressed JSON',
    async (accept, coding, decode) => {
      const plain = await rawGet(service.url, PAGE, auth);
      const coded = await rawGet(service.url, PAGE, { ...auth, 'Accept-Encoding': accept });
      expect(coded.status).toBe(200);
      expect(coded.headers.get('Content-Encoding')).toBe(coding);
      expect(coded.headers.get('Vary')).toBe('Accept-Encoding, Origin');
      expect(coded.headers.get('Content-Type')).toBe('application/json');
      expect(Number(coded.headers.get('Content-Length') ?? coded.raw.length)).toBe(coded.raw.length);
      expect(coded.raw.length).toBeLessThan(plain.raw.length / 4);
      expect(decode(coded.raw).equals(plain.raw)).toBe(true);
    },
  );

  it('codes the published document too', async () => {
    const plain = await rawGet(service.url, '/openapi.json');
    const coded = await rawGet(service.url, '/openapi.json', { 'Accept-Encoding': 'gzip' });
    expect(coded.headers.get('Content-Encoding')).toBe('gzip');
    expect(zlib.gunzipSync(coded.raw).equals(plain.raw)).toBe(true);
  });

  it('leaves bodies under 1 KiB as they are, whatever is accepted', async () => {
    const stores = await rawGet(service.url, '/v1/stores', { ...auth, 'Accept-Encoding': 'gzip, br' });
    expect(stores.raw.length).toBeLessThan(1024);
    expect(stores.headers.get('Content-Encoding')).toBeNull();
    expect(JSON.parse(stores.raw.toString('utf8')).data.length).toBeGreaterThan(0);
    const problem = await rawGet(service.url, '/v1/products/999999', { ...auth, 'Accept-Encoding': 'gzip' });
    expect(problem.status).toBe(404);
    expect(problem.headers.get('Content-Encoding')).toBeNull();
    expect(JSON.parse(problem.raw.toString('utf8')).code).toBe('not_found');
  });

  it('leaves codings the client refuses or the service does not offer alone', async () => {
    for (const accept of ['identity', 'deflate', 'gzip;q=0, br;q=0', 'compress, *;q=0']) {
      const response = await rawGet(service.url, PAGE, { ...auth, 'Accept-Encoding': accept });
      expect(response.headers.get('Content-Encoding'), accept).toBeNull();
    }
  });

  it('never codes media', async () => {
    // A PNG signature, then compressible bytes far above 1 KiB (the copy is served only as what its bytes are).
    const bytes = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.alloc(64 * 1024, 7)]);
    const sha = createHash('sha256').update(bytes).digest('hex');
    await new LocalFolderMediaStore(service.config.images.mediaDir).put(`${sha}.png`, bytes);
    const image = await rawGet(service.url, `/media/${sha}.png`, { 'Accept-Encoding': 'gzip, br' });
    expect(image.status).toBe(200);
    expect(image.headers.get('Content-Encoding')).toBeNull();
    expect(image.headers.get('Content-Type')).toBe('image/png');
    expect(image.raw.equals(bytes)).toBe(true);
  });

  it('negotiates by q-value, preferring br on a tie (RFC 9110 12.5.3)', () => {
    expect(negotiateCoding(undefined)).toBeUndefined();
    expect(negotiateCoding('')).toBeUndefined();
    expect(negotiateCoding('gzip')).toBe('gzip');
    expect(negotiateCoding('GZIP, BR')).toBe('br');
    expect(negotiateCoding('br;q=0.4, gzip;q=0.5')).toBe('gzip');
    expect(negotiateCoding('*')).toBe('br');
    expect(negotiateCoding('*;q=0.1, gzip;q=0')).toBe('br');
    expect(negotiateCoding('identity, deflate')).toBeUndefined();
    expect(negotiateCoding('gzip;q=0')).toBeUndefined();
    expect(negotiateCoding('gzip;q=nonsense')).toBeUndefined();
  });
});

describe('headers of every answer', () => {
  it("reach every answer from the one place that names them: a handler's, an error's, with Vary appended", async () => {
    const app = new Hono();
    app.onError(renderError);
    app.use('*', answerHeaders());
    app.use('*', async (c, next) => {
      answerHeader(c, 'X-Answer', 'named once');
      answerHeader(c, 'Vary', 'Accept-Encoding');
      await next();
    });
    app.get('/ok', (c) => c.json({ ok: true }, 200, { Vary: 'Authorization' }));
    app.get('/boom', () => {
      throw new Error('disk on fire');
    });
    const ok = await app.request('/ok');
    expect(ok.headers.get('X-Answer')).toBe('named once');
    expect(ok.headers.get('Vary')).toBe('Authorization, Accept-Encoding');
    const boom = await app.request('/boom');
    expect(boom.status).toBe(500);
    expect(boom.headers.get('X-Answer')).toBe('named once');
    expect(boom.headers.get('Vary')).toBe('Accept-Encoding');
  });
});

describe('X-Request-Id', () => {
  let service: TestService;
  let key: string;

  beforeAll(async () => {
    service = await startTestService();
    key = (await buildOutdoorCatalog(service)).merchant.key;
  });
  afterAll(() => service.close());

  it('echoes a sane incoming id on every kind of response', async () => {
    const id = 'shop-sync.2026-11-25_0001';
    const responses = [
      await service.api('/v1/stores', key, { headers: { 'X-Request-Id': id } }),
      await service.api('/v1/stores', null, { headers: { 'X-Request-Id': id } }),
      await service.api('/v1/products?page=0', key, { headers: { 'X-Request-Id': id } }),
      await service.api(`/media/${'a'.repeat(64)}.jpg`, null, { headers: { 'X-Request-Id': id } }),
      await service.adminApi('GET', '/admin/v1/merchants', undefined, { headers: { 'X-Request-Id': id } }),
    ];
    expect(responses.map((r) => r.status)).toEqual([200, 401, 400, 404, 200]);
    for (const response of responses) expect(response.headers.get('X-Request-Id')).toBe(id);
    const longest = 'x'.repeat(128);
    expect((await service.api('/v1/stores', key, { headers: { 'X-Request-Id': longest } })).headers.get('X-Request-Id')).toBe(longest);
  });

  it('generates a random id when none is sent, or the one sent is not sane', async () => {
    const ids = new Set<string>();
    for (const sent of [undefined, '', 'x'.repeat(129), 'has space', 'quote"d', 'ünïcode', 'a,b']) {
      const response = await service.api('/v1/stores', key, { headers: sent === undefined ? {} : { 'X-Request-Id': sent } });
      const id = response.headers.get('X-Request-Id')!;
      expect(id, String(sent)).toMatch(UUID);
      ids.add(id);
    }
    expect(ids.size).toBe(7);
  });

  it('names the request in the log line of an unexpected error, and tells the caller nothing of it', async () => {
    const logs = new LogCapture();
    const app = new Hono();
    app.onError(renderError);
    app.use('*', answerHeaders());
    app.use('*', requestId());
    app.use('*', accessLog(logs.logger, { observeRequest: () => {} }, true));
    app.get('/boom', () => {
      throw new Error('disk on fire');
    });
    const response = await app.request('/boom', { headers: { 'X-Request-Id': 'trace-42' } });
    expect(response.status).toBe(500);
    expect(response.headers.get('X-Request-Id')).toBe('trace-42');
    expect((await response.json()).detail).not.toContain('disk on fire');
    const [error] = logs.find('unhandled error');
    expect(error).toMatchObject({ level: 'error', request_id: 'trace-42', method: 'GET', path: '/boom' });
    expect((error!.err as { message: string }).message).toBe('disk on fire');
    expect(logs.find('request')).toEqual([
      expect.objectContaining({ level: 'error', request_id: 'trace-42', status: 500, route: '/boom' }),
    ]);
  });
});
