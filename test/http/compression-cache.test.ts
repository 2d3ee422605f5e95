// Compressed pages coded once: the cache of coded bytes by strong ETag and coding, its
// byte budget and its counters in /metrics, over real HTTP; the bytes a client decodes are exactly
// the uncompressed page, and conditional reads and Vary behave as without the cache.
import http from 'node:http';
import zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CodedBodyCache } from '../../src/http/coded-body-cache.js';
import type { CodedBodyCacheEvent } from '../../src/operations/metrics.js';
import { buildOutdoorCatalog, importNdjson, simpleProduct } from '../support/admin-http.js';
import { startTestService, type TestService } from '../support/service.js';

interface RawResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  raw: Buffer;
  decoded: Buffer;
}

/** node:http neither adds Accept-Encoding nor decodes: the bytes on the wire, and decoded by their Content-Encoding. */
function rawGet(url: string, headers: Record<string, string>): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          const raw = Buffer.concat(chunks);
          const coding = res.headers['content-encoding'];
          const decoded = coding === 'gzip' ? zlib.gunzipSync(raw) : coding === 'br' ? zlib.brotliDecompressSync(raw) : raw;
          resolve({ status: res.statusCode!, headers: res.headers, raw, decoded });
        });
        res.on('error', reject);
      })
      .on('error', reject);
  });
}

/** The value of a series in the Prometheus exposition (0 when absent). */
async function metric(service: TestService, series: string): Promise<number> {
  const text = await (await fetch(`${service.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line ? Number(line.slice(series.length + 1)) : 0;
}

const bytes = (n: number) => new Uint8Array(n).fill(1);

describe('the cache of coded bodies', () => {
  it('keeps coded bytes by ETag and coding, and never holds more than its budget, least recently used leaving first', () => {
    const events: [CodedBodyCacheEvent, number, number][] = [];
    const cache = new CodedBodyCache(1000, { observeCodedBodyCache: (...e) => void events.push(e) });
    cache.set('"a-gzip"', 'gzip', bytes(400));
    cache.set('"a-br"', 'br', bytes(300));
    expect(cache.get('"a-gzip"', 'br')).toBeUndefined();
    expect(cache.get('"a-gzip"', 'gzip')?.length).toBe(400); // now the most recently used
    cache.set('"b-gzip"', 'gzip', bytes(500)); // evicts "a-br", the least recently used
    expect(cache.bytes).toBe(900);
    expect(cache.get('"a-br"', 'br')).toBeUndefined();
    expect(cache.get('"a-gzip"', 'gzip')).toBeDefined();
    cache.set('"c-gzip"', 'gzip', bytes(1001)); // alone beyond the budget: not kept, nothing evicted
    expect(cache.get('"c-gzip"', 'gzip')).toBeUndefined();
    expect([cache.bytes, cache.count]).toEqual([900, 2]);
    expect(events.filter(([e]) => e === 'evict')).toEqual([['evict', 400, 1]]);
    expect(events.filter(([e]) => e === 'hit').length).toBe(2);
    expect(events.filter(([e]) => e === 'miss').length).toBe(3);
    expect(events.at(-1)).toEqual(['miss', 900, 2]);
  });
});

describe('compressed pages through the cache', () => {
  let service: TestService;
  let merchantId: number;
  let auth: Record<string, string>;
  const page = () => `${service.url}/v1/products?per_page=50`;

  beforeAll(async () => {
    // Room for two or three coded pages of 50 (alike, very compressible) products, not for six.
    service = await startTestService({ config: { compressionCacheBytes: 2500 } });
    const catalog = await buildOutdoorCatalog(service);
    merchantId = catalog.merchant.id;
    auth = { Authorization: `Bearer ${catalog.merchant.key}` };
    const imported = await importNdjson(
      service,
      merchantId,
      Array.from({ length: 120 }, (_, i) => simpleProduct(`Z-${i}`)),
    );
    expect(imported.status, imported.text).toBe(200);
  });
  afterAll(() => service.close());

  it.each(['gzip', 'br'] as const)(
    'codes a page once in %s: the next read is a hit with the same bytes, decoding to the uncompressed page',
    async (coding) => {
      const identity = await rawGet(page(), auth);
      const hits = await metric(service, 'cps_compression_cache_lookups_total{result="hit"}');
      const misses = await metric(service, 'cps_compression_cache_lookups_total{result="miss"}');
      const first = await rawGet(page(), { ...auth, 'Accept-Encoding': coding });
      const second = await rawGet(page(), { ...auth, 'Accept-Encoding': coding });
      for (const coded of [first, second]) {
        expect(coded.status).toBe(200);
        expect(coded.headers['content-encoding']).toBe(coding);
        expect(coded.headers.vary).toBe('Accept-Encoding, Origin');
        expect(coded.headers.etag).toBe(`${identity.headers.etag!.slice(0, -1)}-${coding}"`);
        expect(coded.headers['content-type']).toBe('application/json');
        expect(coded.decoded.equals(identity.raw)).toBe(true);
        expect(coded.raw.length).toBeLessThan(identity.raw.length / 4);
      }
      expect(second.raw.equals(first.raw)).toBe(true);
      expect(await metric(service, 'cps_compression_cache_lookups_total{result="miss"}')).toBe(misses + 1);
      expect(await metric(service, 'cps_compression_cache_lookups_total{result="hit"}')).toBe(hits + 1);
    },
  );

  it('answers 304 without a body to the coded tag, cached or not, and a changed page with its new bytes', async () => {
    const coded = await rawGet(page(), { ...auth, 'Accept-Encoding': 'gzip' });
    const notModified = await rawGet(page(), { ...auth, 'Accept-Encoding': 'gzip', 'If-None-Match': coded.headers.etag! });
    expect(notModified.status).toBe(304);
    expect(notModified.raw.length).toBe(0);
    expect(notModified.headers['content-encoding']).toBeUndefined();
    expect(notModified.headers.etag).toBe(coded.headers.etag);

    // A new title on the first page: a new ETag, so the cached bytes of the old page are never sent.
    const changed = await importNdjson(service, merchantId, [
      { ...simpleProduct('Z-0'), product: { ...simpleProduct('Z-0').product, content: { de: { title: 'Neu', description: null } } } },
    ]);
    expect(changed.status, changed.text).toBe(200);
    const identity = await rawGet(page(), auth);
    const fresh = await rawGet(page(), { ...auth, 'Accept-Encoding': 'gzip', 'If-None-Match': coded.headers.etag! });
    expect(fresh.status).toBe(200);
    expect(fresh.headers.etag).not.toBe(coded.headers.etag);
    expect(fresh.decoded.equals(identity.raw)).toBe(true);
  });

  it('stays within its budget as pages are read, counting evictions and its bytes in /metrics', async () => {
    for (const n of [1, 2, 3]) {
      for (const coding of ['gzip', 'br']) {
        const coded = await rawGet(`${service.url}/v1/products?per_page=50&page=${n}`, { ...auth, 'Accept-Encoding': coding });
        expect(coded.status).toBe(200);
      }
    }
    const held = await metric(service, 'cps_compression_cache_bytes');
    expect(held).toBeGreaterThan(0);
    expect(held).toBeLessThanOrEqual(2500);
    expect(await metric(service, 'cps_compression_cache_entries')).toBeGreaterThan(0);
    expect(await metric(service, 'cps_compression_cache_evictions_total')).toBeGreaterThan(0);
  });
});
