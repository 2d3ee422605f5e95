// GET /v1/products/export (openapi exportProducts) over real HTTP on 127.0.0.1, on
// either engine: every product of the store from one snapshot, then a trailer line with the feed
// cursor of exactly that snapshot; compression, ETag and 304; the per-key cap; and a slow client
// that holds no snapshot open. Every response a test reads in full passes the contract harness
// (each NDJSON line against the document's line schema).
import http from 'node:http';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ProductSourceInput } from '../../src/catalog/product-sources.js';
import { importNdjson } from '../../src/admin/import.js';
import type { PostgresStorage } from '../../src/storage/postgres/index.js';
import type { StoreInputRecord } from '../../src/catalog/model.js';
import { severalConnections, TEST_ENGINE } from '../support/engine.js';
import { startTestService, type TestService } from '../support/service.js';

interface Product {
  id: number;
  title: string | null;
  excluded: boolean;
  prices: { computed_price: number }[];
}
interface Trailer {
  store: string;
  count: number;
  next_since: string;
  next_id: number;
}
interface ChangeEntry {
  product_id: number;
  change_type: 'price' | 'content' | 'removed';
  created_at: string;
}
interface Cursor {
  since: string;
  since_id: number;
}
interface Merchant {
  id: number;
  key: string;
  refs: string[];
}

const DE: StoreInputRecord = {
  name: 'Deutschland',
  locale: 'de-DE',
  currency: 'EUR',
  is_default: true,
  active: true,
  exclude_out_of_stock: false,
};
const PL: StoreInputRecord = {
  name: 'Polska',
  locale: 'pl-PL',
  currency: 'PLN',
  is_default: false,
  active: true,
  exclude_out_of_stock: false,
};
const ARCHIVE: StoreInputRecord = {
  name: 'Alt',
  locale: 'en-GB',
  currency: 'EUR',
  is_default: false,
  active: false,
  exclude_out_of_stock: false,
};
/** Steps of 7 products: a store of 23 is read in four statements. */
const STEP_ROWS = 7;
const PER_KEY = 2;
const BIG = 400;
/** A product description of 48 KB (the most is 50,000 characters): the big store's `de` export (400 of them, 19 MB) outgrows every buffer between server and client. */
const LONG_TEXT = 'Leichtes Trekkingzelt mit zwei Apsiden. '.repeat(1200);

function source(
  ref: string,
  cost: string,
  options: { title?: string; plTitle?: string | null; description?: string } = {},
): ProductSourceInput & { ref: string } {
  return {
    ref,
    content: {
      de: { title: options.title ?? `Produkt ${ref}`, description: options.description ?? null },
      // No Polish title: excluded from `pl` (missing_title), and still exported there, flagged.
      ...(options.plTitle === null ? {} : { pl: { title: options.plTitle ?? `Produkt ${ref} PL`, description: null } }),
    },
    offers: [{ supplier_ref: 'alpine', quantity: 4, cost, currency: 'EUR' }],
  };
}

async function buildMerchant(service: TestService, name: string, count: number, options: { description?: string } = {}): Promise<Merchant> {
  const admin = service.admin;
  const id = (await admin.createMerchant({ name })).id;
  for (const [slug, store] of Object.entries({ de: DE, pl: PL, archive: ARCHIVE })) await admin.upsertStore(id, slug, store);
  const group = await admin.createCustomerGroup(id, 'retail');
  await admin.upsertExchangeRate(id, { base: 'EUR', quote: 'PLN', rate: '4.25' });
  await admin.upsertSupplier(id, 'alpine', 'Alpine AG');
  await admin.createPricingRule(id, {
    priority: 10,
    customer_group_id: group.id,
    store_id: null,
    manufacturer: null,
    min_cost: null,
    max_cost: null,
    markup_percent: '10',
    markup_amount: '0',
    price_ending: null,
  });
  const refs = Array.from({ length: count }, (_, i) => `P-${String(i + 1).padStart(4, '0')}`);
  const lines = refs.map((ref, i) =>
    JSON.stringify({
      op: 'upsert_product',
      product: source(ref, `${10 + i}.00`, { plTitle: i === 2 ? null : undefined, description: options.description }),
    }),
  );
  await importNdjson(admin, id, `${lines.join('\n')}\n`);
  return { id, key: await service.keyFor(id), refs };
}

/** An export read whole through the contract harness: its product lines, its trailer, its headers. */
interface ReadExport {
  status: number;
  headers: Headers;
  text: string;
  products: Product[];
  trailer: Trailer | undefined;
}

describe('GET /v1/products/export', () => {
  let service: TestService;
  let shop: Merchant;
  let big: Merchant;

  async function exportOf(key: string, query = '', headers: Record<string, string> = {}): Promise<ReadExport> {
    const response = await service.api(`/v1/products/export${query ? `?${query}` : ''}`, key, { headers });
    const lines =
      response.status === 200
        ? response.text
            .split('\n')
            .slice(0, -1)
            .map((line) => JSON.parse(line) as Product | Trailer)
        : [];
    const last = lines.at(-1);
    const trailer = last && 'next_id' in last ? last : undefined;
    return {
      status: response.status,
      headers: response.headers,
      text: response.text,
      products: (trailer ? lines.slice(0, -1) : lines) as Product[],
      trailer,
    };
  }

  /** The store as GET /v1/products lists it now, by keyset paging. */
  async function pagedRead(key: string, store: string): Promise<Product[]> {
    const products: Product[] = [];
    for (let afterId = 0; ; ) {
      const page = await service.api(`/v1/products?store=${store}&per_page=200&after_id=${afterId}`, key);
      expect(page.status, page.text).toBe(200);
      products.push(...page.body.data);
      if (page.body.data.length < 200) return products;
      afterId = products.at(-1)!.id;
    }
  }

  /** The changes of the store's feed after the cursor, polled until caught up (cursor rule 4). */
  async function feedAfter(key: string, store: string, cursor: Cursor): Promise<{ changes: ChangeEntry[]; end: Cursor }> {
    const changes: ChangeEntry[] = [];
    for (;;) {
      const page = await service.api(
        `/v1/changes?store=${store}&since=${encodeURIComponent(cursor.since)}&since_id=${cursor.since_id}`,
        key,
      );
      expect(page.status, page.text).toBe(200);
      cursor = { since: page.body.next_since, since_id: page.body.next_id };
      if (page.body.changes.length === 0) return { changes, end: cursor };
      changes.push(...page.body.changes);
    }
  }

  const cursorOf = (trailer: Trailer): Cursor => ({ since: trailer.next_since, since_id: trailer.next_id });

  beforeAll(async () => {
    service = await startTestService({ config: { exports: { stepRows: STEP_ROWS, memoryBytes: 64 * 1024, perKey: PER_KEY } } });
    shop = await buildMerchant(service, 'Snapshot Outdoor', 23);
    big = await buildMerchant(service, 'Snapshot Big', BIG, { description: LONG_TEXT });
  }, 120_000);
  afterAll(() => service.close());

  it('streams every product of the store exactly as GET /v1/products lists it, in id order, then the trailer with the feed cursor of the snapshot', async () => {
    const exported = await exportOf(shop.key, 'store=pl');
    expect(exported.status).toBe(200);
    expect(exported.headers.get('content-type')).toBe('application/x-ndjson');
    const paged = await pagedRead(shop.key, 'pl');
    expect(paged).toHaveLength(23);
    expect(exported.products).toEqual(paged);
    // The excluded product is exported too, flagged, as the list has it.
    expect(exported.products.filter((p) => p.excluded).map((p) => p.title)).toEqual([null]);

    // The cursor of the snapshot: the merchant's latest feed position, also sent up front.
    const position = await service.storage.latestFeedPosition(shop.id);
    expect(exported.trailer).toEqual({ store: 'pl', count: 23, next_since: position!.at, next_id: position!.id });
    expect([exported.headers.get('x-next-since'), exported.headers.get('x-next-id')]).toEqual([position!.at, String(position!.id)]);
    // It is the end of the feed: nothing after it yet, so nothing the snapshot shows comes again.
    expect(await feedAfter(shop.key, 'pl', cursorOf(exported.trailer!))).toEqual({ changes: [], end: cursorOf(exported.trailer!) });
    const fromTheStart = await service.api('/v1/changes?store=pl', shop.key);
    expect(fromTheStart.body.changes.length).toBeGreaterThan(0);
  });

  it('following the feed from its cursor yields exactly the changes made after the snapshot, and the two make the store as it is now', async () => {
    const exported = await exportOf(shop.key, 'store=de');
    const snapshot = new Map(exported.products.map((p) => [p.id, p]));
    const ids = exported.products.map((p) => p.id);
    const [priced, renamed, removed] = [shop.refs[0]!, shop.refs[1]!, shop.refs[4]!];
    await service.admin.upsertProduct(shop.id, priced, source(priced, '99.00'));
    await service.admin.upsertProduct(shop.id, renamed, source(renamed, '11.00', { title: 'Neuer Name' }));
    await service.admin.deleteProduct(shop.id, removed);
    const added = (await service.admin.upsertProduct(shop.id, 'P-NEW', source('P-NEW', '5.00'))).id;

    const { changes } = await feedAfter(shop.key, 'de', cursorOf(exported.trailer!));
    expect(changes.map((c) => [c.product_id, c.change_type])).toEqual([
      [ids[0], 'price'],
      [ids[1], 'content'],
      [ids[4], 'removed'],
      [added, 'content'],
    ]);
    // Applying them to the snapshot (spec 4.4 rule 5) gives what a fresh read gives.
    for (const change of changes) {
      if (change.change_type === 'removed') snapshot.delete(change.product_id);
      else snapshot.set(change.product_id, (await service.api(`/v1/products/${change.product_id}?store=de`, shop.key)).body.data);
    }
    expect([...snapshot.values()].sort((a, b) => a.id - b.id)).toEqual(await pagedRead(shop.key, 'de'));
  });

  it("exports the default store when store is omitted, only ever the key's merchant's; 404 store_not_found for an unknown or inactive store, 400 for a malformed slug, 401 without a key", async () => {
    const exported = await exportOf(shop.key);
    expect(exported.trailer?.store).toBe('de');
    expect(exported.products).toEqual(await pagedRead(shop.key, 'de'));
    for (const slug of ['zz', 'archive']) {
      const missing = await exportOf(shop.key, `store=${slug}`);
      expect(missing.status).toBe(404);
      expect(JSON.parse(missing.text)).toMatchObject({ code: 'store_not_found' });
    }
    expect((await exportOf(shop.key, 'store=Not_A_Slug')).status).toBe(400);
    // Another merchant's key with the same slug exports its own store, nothing of this one.
    const shopIds = new Set(exported.products.map((p) => p.id));
    const others = await exportOf(big.key, 'store=de');
    expect(others.products.length).toBe(BIG);
    expect(others.products.filter((p) => shopIds.has(p.id))).toEqual([]);
    const anonymous = await service.api('/v1/products/export', null);
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get('www-authenticate')).toBe('Bearer realm="catalog"');
  });

  // Node's fetch asks for gzip unless told otherwise.
  const IDENTITY = { 'Accept-Encoding': 'identity' };

  it("is gzip- or brotli-coded as asked, with the same lines; its ETag names the snapshot: 304 while the merchant's catalog is unchanged, a new one after a change", async () => {
    const plain = await exportOf(shop.key, 'store=de', IDENTITY);
    const etag = plain.headers.get('etag')!;
    expect(etag).toMatch(/^"[A-Za-z0-9_-]{43}"$/);
    expect(plain.headers.get('content-encoding')).toBeNull();
    expect(plain.headers.get('vary')).toBe('Accept-Encoding, Origin');
    for (const coding of ['gzip', 'br']) {
      const coded = await exportOf(shop.key, 'store=de', { 'Accept-Encoding': coding });
      expect(coded.headers.get('content-encoding')).toBe(coding);
      expect(coded.headers.get('etag')).toBe(`${etag.slice(0, -1)}-${coding}"`);
      expect(coded.text).toBe(plain.text);
    }

    // The same snapshot again: the same bytes under the same tag, and 304 for a client that holds it.
    expect((await exportOf(shop.key, 'store=de', IDENTITY)).text).toBe(plain.text);
    const notModified = await exportOf(shop.key, 'store=de', { ...IDENTITY, 'If-None-Match': etag });
    expect([notModified.status, notModified.text, notModified.headers.get('etag')]).toEqual([304, '', etag]);
    // Another merchant's writes do not move this merchant's feed, nor the tag.
    await service.admin.upsertProduct(big.id, big.refs[0]!, source(big.refs[0]!, '12.34'));
    expect((await exportOf(shop.key, 'store=de', { ...IDENTITY, 'If-None-Match': etag })).status).toBe(304);

    await service.admin.upsertProduct(shop.id, shop.refs[2]!, source(shop.refs[2]!, '77.00'));
    const changed = await exportOf(shop.key, 'store=de', { ...IDENTITY, 'If-None-Match': etag });
    expect(changed.status).toBe(200);
    expect(changed.headers.get('etag')).not.toBe(etag);
    expect(changed.trailer!.next_id).toBeGreaterThan(plain.trailer!.next_id);
  });

  /** An export whose client reads its headers and then nothing until `resume` (or `destroy`). */
  function heldExport(
    key: string,
    query: string,
  ): Promise<{ status: number; headers: http.IncomingHttpHeaders; resume(): Promise<string>; destroy(): void }> {
    return new Promise((resolve, reject) => {
      const request = http.get(
        `${service.url}/v1/products/export?${query}`,
        { headers: { Authorization: `Bearer ${key}` } },
        (response) => {
          response.pause();
          resolve({
            status: response.statusCode!,
            headers: response.headers,
            resume: () =>
              new Promise((done, failed) => {
                const chunks: Buffer[] = [];
                response.on('data', (chunk: Buffer) => chunks.push(chunk));
                response.on('end', () => done(Buffer.concat(chunks).toString('utf8')));
                response.on('error', failed);
                response.resume();
              }),
            destroy: () => request.destroy(),
          });
        },
      );
      request.on('error', reject);
    });
  }

  it(`lets an API key have ${PER_KEY} exports in flight at once: the next answers 429 with Retry-After until one ends, and other keys are not held back`, async () => {
    const held = [await heldExport(big.key, 'store=de'), await heldExport(big.key, 'store=de')];
    expect(held.map((h) => h.status)).toEqual([200, 200]);
    const refused = await service.api('/v1/products/export?store=de', big.key);
    expect(refused.status).toBe(429);
    expect(refused.body).toMatchObject({ code: 'rate_limited' });
    expect(['1', '2']).toContain(refused.headers.get('retry-after'));
    // Another key of the same merchant exports meanwhile.
    const otherKey = await service.keyFor(big.id);
    const other = await exportOf(otherKey, 'store=de');
    expect([other.status, other.trailer?.count]).toEqual([200, BIG]);

    // A client that leaves frees its slot; one that reads to the end frees the other.
    held[0]!.destroy();
    await expect.poll(async () => (await exportOf(big.key, 'store=de')).status, { timeout: 5000, interval: 50 }).toBe(200);
    const rest = await held[1]!.resume();
    expect(JSON.parse(rest.trimEnd().split('\n').at(-1)!)).toMatchObject({ store: 'de', count: BIG });
    expect((await exportOf(big.key, 'store=de')).status).toBe(200);
  });

  it("answers HEAD with the snapshot's headers alone, reading no product and holding no export slot", async () => {
    const exported = await exportOf(big.key, 'store=de', IDENTITY);
    for (let i = 0; i < PER_KEY + 1; i++) {
      // Not through the contract harness: the document describes GET (HEAD is HTTP's, for any GET).
      const head = await fetch(`${service.url}/v1/products/export?store=de`, {
        method: 'HEAD',
        headers: { Authorization: `Bearer ${big.key}`, ...IDENTITY },
      });
      expect(head.status).toBe(200);
      expect([head.headers.get('etag'), head.headers.get('x-next-id'), head.headers.get('content-type')]).toEqual([
        exported.headers.get('etag'),
        String(exported.trailer!.next_id),
        'application/x-ndjson',
      ]);
      expect(await head.text()).toBe('');
    }
    expect((await exportOf(big.key, 'store=de', IDENTITY)).status).toBe(200);
  });

  /** Whether a read transaction begun before `since` is still open (SQLite: its WAL mark holds the checkpoint back). */
  async function snapshotStillOpen(since: Date): Promise<boolean> {
    if (TEST_ENGINE === 'sqlite') {
      const db = new Database(service.config.databasePath);
      try {
        // A PASSIVE checkpoint copies every frame unless a reader still needs an older one.
        const [result] = db.pragma('wal_checkpoint(PASSIVE)') as { log: number; checkpointed: number }[];
        return result!.checkpointed < result!.log;
      } finally {
        db.close();
      }
    }
    const { rows } = await (service.storage as PostgresStorage).pool.query<{ n: number }>(
      `SELECT count(*)::integer AS n FROM pg_stat_activity
      WHERE datname = current_database() AND pid <> pg_backend_pid() AND xact_start < $1`,
      [since],
    );
    return rows[0]!.n > 0;
  }

  severalConnections.it(
    'reads the snapshot to its end at once for a client that does not read: no snapshot stays open, writers commit, and the client still gets that snapshot',
    async () => {
      const before = await pagedRead(big.key, 'de');
      const held = await heldExport(big.key, 'store=de');
      expect(held.status).toBe(200);
      const begun = new Date();
      // Written after the snapshot was taken, while its client reads nothing.
      const changedRef = big.refs[1]!;
      const write = service.admin.upsertProduct(big.id, changedRef, source(changedRef, '55.55', { description: LONG_TEXT }));
      await expect(write).resolves.toMatchObject({ id: before[1]!.id });
      // The snapshot ends at the database's pace: what the client has not read waits outside it.
      await expect.poll(() => snapshotStillOpen(begun), { timeout: 10_000, interval: 50 }).toBe(false);

      const lines = (await held.resume())
        .trimEnd()
        .split('\n')
        .map((line) => JSON.parse(line) as Product | Trailer);
      const trailer = lines.pop() as Trailer;
      expect(trailer.count).toBe(BIG);
      expect(lines).toEqual(before);
      const { changes } = await feedAfter(big.key, 'de', cursorOf(trailer));
      expect(changes.map((c) => [c.product_id, c.change_type])).toEqual([[before[1]!.id, 'price']]);
    },
  );
});
