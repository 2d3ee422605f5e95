// Published bytes served again from memory (src/catalog/read-cache.ts): a page or an
// `?ids=` list read once is answered from the cache while the merchant's published version has not
// moved, and read again from the database once it has, whichever process wrote. Over real HTTP, on
// the project's engine, against a second process on the same database that writes and a third that
// keeps no cache (the oracle: it reads every time).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { PublishedReadCache, READ_COUNTS_MAX, type HeldPublishedBytes } from '../../src/catalog/read-cache.js';
import { silentLogger } from '../../src/operations/log.js';
import { startServer } from '../../src/server.js';
import { createService } from '../../src/service.js';
import { adminOk, createMerchant, importNdjson, simpleProduct, type MerchantHandle } from '../support/admin-http.js';
import { ADMIN_TOKEN, startTestService, type TestService } from '../support/service.js';

/** Another process on the service's database: its own storage (connections or pool) and server. */
async function otherProcess(service: TestService, readCacheBytes: number) {
  const other = createService({ ...service.config, readCacheBytes }, { logger: silentLogger, storage: await service.database.open() });
  const server = await startServer(other, { docsDir: `${service.dir}/no-docs` });
  return {
    url: server.url,
    get: (pathAndQuery: string, key: string) =>
      fetch(`${server.url}${pathAndQuery}`, { headers: { Authorization: `Bearer ${key}`, 'Accept-Encoding': 'identity' } }),
    import: async (merchantId: number, lines: unknown[]) => {
      const response = await fetch(`${server.url}/admin/v1/merchants/${merchantId}/imports`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${ADMIN_TOKEN}`, 'Content-Type': 'application/x-ndjson' },
        body: `${lines.map((line) => JSON.stringify(line)).join('\n')}\n`,
      });
      expect(response.status, await response.clone().text()).toBe(200);
      return response.json();
    },
    close: async () => {
      await server.close();
      await other.close();
    },
  };
}

/** The value of a series in the service's Prometheus exposition (0 when absent). */
async function metric(service: TestService, series: string): Promise<number> {
  const text = await (await fetch(`${service.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line ? Number(line.slice(series.length + 1)) : 0;
}

const HIT = 'cps_read_cache_lookups_total{result="hit"}';
const MISS = 'cps_read_cache_lookups_total{result="miss"}';

let service: TestService;
let writer: Awaited<ReturnType<typeof otherProcess>>;
let oracle: Awaited<ReturnType<typeof otherProcess>>;
let merchant: MerchantHandle;
const identity = { 'Accept-Encoding': 'identity' };

beforeAll(async () => {
  service = await startTestService();
  merchant = await createMerchant(service, 'Read Cache');
  await adminOk(service, 'PUT', `${merchant.base}/stores/de`, { name: 'Deutschland', locale: 'de-DE', currency: 'EUR' });
  await adminOk(service, 'PUT', `${merchant.base}/stores/pl`, { name: 'Polska', locale: 'pl-PL', currency: 'PLN' });
  await adminOk(service, 'PUT', `${merchant.base}/exchange-rates/EUR/PLN`, { rate: '4.25' });
  await adminOk(service, 'POST', `${merchant.base}/customer-groups`, { name: 'retail' }, 201);
  await adminOk(service, 'PUT', `${merchant.base}/suppliers/alpine`, { name: 'Alpine' });
  writer = await otherProcess(service, 64 * 1024 * 1024);
  oracle = await otherProcess(service, 0);
  await writer.import(
    merchant.id,
    Array.from({ length: 12 }, (_, i) => simpleProduct(`P-${i}`, `${10 + i}.00`)),
  );
});
afterAll(async () => {
  await writer?.close();
  await oracle?.close();
  await service?.close();
});

describe('the read cache of published bytes', () => {
  it('keeps a page and an id list from their second read, and answers the next reads from memory with the same bytes and ETag', async () => {
    const ids = (await service.api('/v1/products?per_page=12', merchant.key, { headers: identity })).body.data.map(
      (p: { id: number }) => p.id,
    );
    for (const path of ['/v1/products?per_page=5&page=2', `/v1/products?ids=${ids[7]},${ids[2]},${ids[7]},${ids[4]}`]) {
      const entries = await metric(service, 'cps_read_cache_entries');
      const first = await service.api(path, merchant.key, { headers: identity });
      // Read once: only remembered. Read twice: kept.
      expect(await metric(service, 'cps_read_cache_entries'), path).toBe(entries);
      await service.api(path, merchant.key, { headers: identity });
      expect(await metric(service, 'cps_read_cache_entries'), path).toBe(entries + 1);
      const [hits, misses] = [await metric(service, HIT), await metric(service, MISS)];
      const again = await service.api(path, merchant.key, { headers: identity });
      expect([await metric(service, HIT), await metric(service, MISS)], path).toEqual([hits + 1, misses]);
      expect(again.text, path).toBe(first.text);
      expect(again.headers.get('etag'), path).toBe(first.headers.get('etag'));
    }
    // The same ids in another order (and without the repeat) are the same list: a hit.
    const hits = await metric(service, HIT);
    const reordered = await service.api(`/v1/products?ids=${ids[4]},${ids[2]},${ids[7]}`, merchant.key, { headers: identity });
    expect(reordered.body.data.map((p: { id: number }) => p.id)).toEqual([ids[2], ids[4], ids[7]]);
    expect(await metric(service, HIT)).toBe(hits + 1);
    expect(await metric(service, 'cps_read_cache_entries')).toBeGreaterThanOrEqual(2);
    expect(await metric(service, 'cps_read_cache_bytes')).toBeGreaterThan(0);
  });

  it('shares the cached rows of one range between a numbered and a keyset page, each answered as a process without the cache answers it', async () => {
    const first = await service.api('/v1/products?per_page=3', merchant.key, { headers: identity });
    const afterId = first.body.data[2].id;
    const numbered = '/v1/products?per_page=3&page=2';
    const keyset = `/v1/products?per_page=3&after_id=${afterId}`;
    const answers = new Map<string, { text: string; etag: string | null }>();
    // Read each three times, interleaved: the rows are kept from the second read and shared by both.
    for (let i = 0; i < 3; i++) {
      for (const path of [numbered, keyset]) {
        const response = await service.api(path, merchant.key, { headers: identity });
        const direct = await oracle.get(path, merchant.key);
        expect(response.text, path).toBe(await direct.text());
        expect(response.headers.get('etag'), path).toBe(direct.headers.get('etag'));
        answers.set(path, { text: response.text, etag: response.headers.get('etag') });
      }
    }
    expect(JSON.parse(answers.get(numbered)!.text).data).toEqual(JSON.parse(answers.get(keyset)!.text).data);
  });

  it('reads again once another process changed a payload, also of another store, and answers 200 with a new ETag', async () => {
    const path = '/v1/products?per_page=4';
    const before = await service.api(path, merchant.key, { headers: identity });
    await service.api(path, merchant.key, { headers: identity }); // kept now
    expect((await service.api(path, merchant.key, { headers: identity })).text).toBe(before.text);
    await writer.import(merchant.id, [simpleProduct('P-1', '99.00')]);
    const misses = await metric(service, MISS);
    const after = await service.api(path, merchant.key, { headers: { ...identity, 'If-None-Match': before.headers.get('etag')! } });
    expect(after.status).toBe(200);
    expect(await metric(service, MISS)).toBe(misses + 1);
    expect(after.headers.get('etag')).not.toBe(before.headers.get('etag'));
    expect(after.text).toBe(await (await oracle.get(path, merchant.key)).text());
    expect(after.text).not.toBe(before.text);
    // A write that changes only the other store's payloads moves the merchant's version too: read again, same bytes, same ETag.
    await service.api('/v1/products?per_page=4&store=pl', merchant.key, { headers: identity });
    await adminOk(service, 'PUT', `${merchant.base}/exchange-rates/EUR/PLN`, { rate: '4.30' });
    const unchanged = await service.api(path, merchant.key, { headers: identity });
    expect([unchanged.text, unchanged.headers.get('etag')]).toEqual([after.text, after.headers.get('etag')]);
    const pl = await service.api('/v1/products?per_page=4&store=pl', merchant.key, { headers: identity });
    expect(pl.text).toBe(await (await oracle.get('/v1/products?per_page=4&store=pl', merchant.key)).text());
  });

  it('serves exactly what a process without the cache serves, through any sequence of writes from either process', async () => {
    const refs = Array.from({ length: 12 }, (_, i) => `P-${i}`);
    const write = fc.oneof(
      fc.record({ kind: fc.constant('price' as const), ref: fc.constantFrom(...refs), cost: fc.integer({ min: 1, max: 500 }) }),
      fc.record({ kind: fc.constant('delete' as const), ref: fc.constantFrom(...refs) }),
      fc.record({ kind: fc.constant('rate' as const), rate: fc.constantFrom('4.10', '4.25', '4.40') }),
    );
    const read = fc.record({
      store: fc.constantFrom('de', 'pl'),
      query: fc.oneof(
        fc.record({ perPage: fc.integer({ min: 1, max: 6 }), page: fc.integer({ min: 1, max: 4 }) }),
        fc.uniqueArray(fc.integer({ min: 0, max: 11 }), { minLength: 1, maxLength: 5 }),
      ),
    });
    const idOf = new Map<string, number>();
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(fc.boolean(), write, fc.array(read, { minLength: 1, maxLength: 3 })), { minLength: 1, maxLength: 5 }),
        async (steps) => {
          for (const [fromWriter, change, reads] of steps) {
            if (change.kind === 'rate') {
              const response = await fetch(
                `${fromWriter ? writer.url : service.url}/admin/v1/merchants/${merchant.id}/exchange-rates/EUR/PLN`,
                {
                  method: 'PUT',
                  headers: { Authorization: `Bearer ${ADMIN_TOKEN}`, 'Content-Type': 'application/json' },
                  body: JSON.stringify({ rate: change.rate }),
                },
              );
              expect(response.status).toBe(200);
            } else {
              const line =
                change.kind === 'price' ? simpleProduct(change.ref, `${change.cost}.00`) : { op: 'delete_product', ref: change.ref };
              if (fromWriter) await writer.import(merchant.id, [line]);
              else expect((await importNdjson(service, merchant.id, [line])).status).toBe(200);
            }
            // Ids of refs (deleted refs keep their last id: a read of it finds nothing).
            for (const product of (await (await oracle.get('/v1/products?per_page=200', merchant.key)).json()).data as {
              id: number;
              sku: string | null;
            }[]) {
              idOf.set(String(product.sku), product.id);
            }
            const known = [...idOf.values()].sort((a, b) => a - b);
            for (const { store, query } of reads) {
              const path = Array.isArray(query)
                ? `/v1/products?store=${store}&ids=${query.map((i) => known[i % known.length] ?? 1).join(',')}`
                : `/v1/products?store=${store}&per_page=${query.perPage}&page=${query.page}`;
              // Twice: the second read comes from the cache when nothing moved.
              for (let i = 0; i < 2; i++) {
                const [cached, direct] = await Promise.all([
                  service.api(path, merchant.key, { headers: identity }),
                  oracle.get(path, merchant.key),
                ]);
                expect(cached.text, path).toBe(await direct.text());
                expect(cached.headers.get('etag'), path).toBe(direct.headers.get('etag'));
              }
            }
          }
        },
      ),
      { numRuns: 15 },
    );
  });
});

describe('PublishedReadCache', () => {
  const held = (publishedVersion: number, size: number): HeldPublishedBytes => ({
    publishedVersion,
    bytes: new Uint8Array(size),
    digests: new Uint8Array(10),
    count: 1,
  });

  /** What the domain does on a miss: look the page up (a read), then offer what it read. */
  const readPage = (cache: PublishedReadCache, from: number, version: number, size: number) => {
    cache.page(1, from, from);
    return cache.keepPage(1, from, from, held(version, size));
  };

  it('keeps what is read a second time, and when full only what is read more often than all it would evict', () => {
    const cache = new PublishedReadCache(3 * (2 * 100 + 10 + 256));
    expect(readPage(cache, 1, 1, 100)).toBe(false);
    expect(cache.page(1, 1, 1)).toBeUndefined();
    expect(readPage(cache, 1, 1, 100)).toBe(true);
    expect(cache.page(1, 1, 1)?.publishedVersion).toBe(1);
    // Kept, read again at a newer version: replaced at once.
    expect(readPage(cache, 1, 2, 100)).toBe(true);
    expect(cache.page(1, 1, 1)?.publishedVersion).toBe(2);
    for (const from of [2, 3]) for (let i = 0; i < 2; i++) readPage(cache, from, 1, 100);
    expect(cache.count).toBe(3);
    // Full: a page read twice (a second sync) does not push out pages read as often.
    expect(readPage(cache, 4, 1, 100)).toBe(false);
    expect(readPage(cache, 4, 1, 100)).toBe(false);
    expect([cache.page(1, 2, 2), cache.page(1, 3, 3)].every(Boolean)).toBe(true);
    // Read more often than the least recently used entry: it takes its place.
    for (let i = 0; i < 5; i++) cache.page(1, 4, 4);
    expect(readPage(cache, 4, 1, 100)).toBe(true);
    expect(cache.count).toBe(3);
  });

  it('forgets the read counts of the least recently read keys beyond READ_COUNTS_MAX', () => {
    const cache = new PublishedReadCache(1_000_000);
    cache.products(1, [1], 1);
    for (let i = 0; i < READ_COUNTS_MAX; i++) cache.page(2, i, i);
    // Its one read was forgotten: this is its first again.
    cache.products(1, [1], 1);
    expect(cache.keepProducts(1, [1], held(1, 10))).toBe(false);
    cache.products(1, [1], 1);
    expect(cache.keepProducts(1, [1], held(1, 10))).toBe(true);
  });

  it('gives an id list only at the version it was read at, a page at any (the database compares), within its budget', () => {
    const events: string[] = [];
    const cache = new PublishedReadCache(4000, { observePublishedReadCache: (event) => void events.push(event) });
    // Each is read twice (looked up, then offered) before it is kept.
    for (let i = 0; i < 2; i++) {
      cache.products(1, [1, 2], 5);
      cache.keepProducts(1, [1, 2], held(5, 500));
    }
    expect(cache.products(1, [1, 2], 5)?.publishedVersion).toBe(5);
    expect(cache.products(1, [1, 2], 6)).toBeUndefined();
    expect(cache.products(2, [1, 2], 5)).toBeUndefined();
    for (let i = 0; i < 2; i++) {
      cache.page(1, 10, 20);
      cache.keepPage(1, 10, 20, held(4, 500));
    }
    expect(cache.page(1, 10, 20)?.publishedVersion).toBe(4);
    expect(cache.page(1, 10, 21)).toBeUndefined();
    // An entry counts its bytes twice (as read and as answered), its digests and 256 of overhead:
    // 1,266 each so far; one of 1,200 bytes (2,666) read more often than the id list evicts it.
    expect(cache.bytes).toBe(2 * 1266);
    for (let i = 0; i < 6; i++) cache.page(1, 30, 40);
    cache.keepPage(1, 30, 40, held(4, 1200));
    expect(cache.products(1, [1, 2], 5)).toBeUndefined();
    expect(cache.page(1, 10, 20)).toBeDefined();
    expect([cache.count, cache.bytes]).toEqual([2, 1266 + 2666]);
    expect(events.filter((e) => e === 'evict').length).toBe(1);
    // Alone beyond the budget: not kept.
    for (let i = 0; i < 9; i++) cache.page(1, 50, 60);
    expect(cache.keepPage(1, 50, 60, held(4, 2000))).toBe(false);
  });
});
