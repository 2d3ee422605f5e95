// No statement of the image mirror, the images summary or the catalog's reference
// checks costs O(catalog). At a size CI affords (20,000 products listing 40,000 images from one
// origin, plus merchants with a few), every statement these operations run is read from an index:
// on SQLite its plan (EXPLAIN QUERY PLAN) searches an index and scans no table of the catalog; on
// PostgreSQL it runs (EXPLAIN ANALYZE, rolled back) reading at most a few hundred rows, where the
// statements before migration 16 parsed every source or walked every pending image.
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { CatalogReads } from '../../src/catalog/reads.js';
import type { CatalogStorage } from '../../src/storage/port.js';
import type { ProductSourceDocument } from '../../src/catalog/model.js';
import { postgresNestedPlans, postgresRowsRead, recordStatements, sqlitePlan, statementsOf, type Ran } from '../support/statement-plans.js';
import { createTestDatabase, onPglite, TEST_ENGINE, type TestDatabase } from '../support/engine.js';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const AT = '2026-11-26T08:00:00.000Z';
const NOW = '2026-11-26T09:00:00.000Z';
const LEASE = '2026-11-26T09:01:00.000Z';
// PostgreSQL builds its catalog a round trip at a time: half the size there, still 100 times what a bounded statement may read.
const PRODUCTS = TEST_ENGINE === 'sqlite' ? 20_000 : 10_000;
const ORIGIN = 'https://cdn.supplier.example';
/** Rows a bounded statement may read (PostgreSQL) or return (SQLite) here: a claim's window, a page of a list. */
const ROWS_READ_MAX = 300;

const source = (n: number, patch: Partial<ProductSourceDocument> = {}): ProductSourceDocument => ({
  eans: [],
  manufacturer: null,
  content: { de: { title: `Zelt ${n}`, description: null } },
  images: [{ url: `${ORIGIN}/p/${n}/1.jpg` }, { url: `${ORIGIN}/p/${n}/2.jpg` }],
  offers: [{ supplier_ref: 'alpine', quantity: 1, cost: '10.00', currency: 'EUR' }],
  own_stock: null,
  supplier_attributes: [],
  overrides: {},
  excluded_stores: n % 1000 === 0 ? ['uk'] : [],
  ...patch,
});

let dir: string;
let database: TestDatabase;
let storage: CatalogStorage;
let big: number;
let small: number;
let storeId: number;

/** PostgreSQL: VACUUM ANALYZE of a table (its visibility map set and its statistics current, as autovacuum leaves a table only ever inserted into). */
async function vacuum(table: string): Promise<void> {
  if (TEST_ENGINE !== 'postgres') return;
  const client = new pg.Client(database.location);
  await client.connect();
  await client.query(`VACUUM ANALYZE ${table}`);
  await client.end();
}

/** Thrown to roll a transaction back once its statements have run. */
class RolledBack extends Error {}

/** Statistics as a database of this size has them (the planners choose by them). */
async function analyze(): Promise<void> {
  if (TEST_ENGINE === 'postgres') {
    const client = new pg.Client(database.location);
    await client.connect();
    // At catalog scale ANALYZE's sample (30,000 rows) misses an origin with a few images among
    // hundreds of thousands: it sees one origin (n_distinct 1, as a 100k catalog's statistics had it).
    await client.query('ALTER TABLE image_mirrors ALTER COLUMN origin SET (n_distinct = 1)');
    await client.query('ANALYZE');
    await client.end();
  } else {
    const db = new Database(database.location);
    db.exec('ANALYZE');
    db.close();
  }
}

/** The merchant's hint of due image work (image_work_merchants.due_at), read directly. */
async function hintOf(merchantId: number): Promise<string | null> {
  if (TEST_ENGINE === 'sqlite') {
    const db = new Database(database.location, { readonly: true });
    try {
      return (
        (db.prepare('SELECT due_at FROM image_work_merchants WHERE merchant_id = ?').pluck().get(merchantId) as string | undefined) ?? null
      );
    } finally {
      db.close();
    }
  }
  const client = new pg.Client(database.location);
  await client.connect();
  try {
    const { rows } = await client.query('SELECT due_at FROM image_work_merchants WHERE merchant_id = $1', [merchantId]);
    return (rows[0]?.due_at as string | undefined) ?? null;
  } finally {
    await client.end();
  }
}

/** Every statement the operation runs reads from an index, never a table of the catalog whole. */
async function expectBounded(operation: () => Promise<unknown>, rowsMax = ROWS_READ_MAX): Promise<Ran[]> {
  const ran = await statementsOf(operation);
  expect(ran.length).toBeGreaterThan(0);
  for (const statement of ran) {
    if (TEST_ENGINE === 'sqlite') {
      const plan = sqlitePlan(database.location, statement).join('\n');
      // A SCAN is allowed only of a JSON parameter (json_each, a virtual table, under whatever
      // alias), an intermediate result (a subquery's or a CTE's bounded rows), a constant row, or the
      // tenancy's small tables (stores, endpoints: a row or two here, where the planner scans rather
      // than use their merchant index), and each store's change horizon (change_horizons, h: a row per
      // store, keyed by it; scanned beside the stores where the planner finds both a few rows long).
      // The image counts kept per merchant (three rows each) are read whole for the service's totals,
      // and so are the failing image origins (a row per origin whose last fetch failed), counted up to a bound.
      const allowed =
        /^SCAN (json_each|\w+ VIRTUAL TABLE\b|\(subquery-\d+\)|w\b|page\b|origins\b|o\b|CONSTANT ROW|\d+ CONSTANT ROWS|v\b|stores\b|s\b|h\b|webhook_endpoints\b|e\b|image_state_counts\b|image_origins\b)/;
      // And a table read in primary-key order under a LIMIT (the outbox's oldest rows): bounded by it.
      // Or anything under a count's LIMIT (a backlog counted up to a bound: the outbox's changes in its first rows).
      const oldestFirst = (line: string) =>
        (/^SCAN (webhook_outbox|oldest)$/.test(line) && /FROM webhook_outbox ORDER BY id LIMIT \?\) AS oldest/.test(statement.sql)) ||
        (/^SCAN webhook_outbox\b/.test(line) &&
          /^SELECT min\(coalesce\(sum\(product_count\), 0\), \?\) FROM \(SELECT product_count FROM webhook_outbox LIMIT \?\)$/.test(
            statement.sql,
          ));
      expect
        .soft(
          plan.split('\n').filter((line) => /^SCAN /.test(line) && !allowed.test(line) && !oldestFirst(line)),
          `${statement.sql}\n${plan}`,
        )
        .toEqual([]);
    } else {
      expect.soft(await postgresRowsRead(database.location, statement), statement.sql).toBeLessThanOrEqual(rowsMax);
    }
  }
  return ran;
}

describe.skipIf(onPglite())(`bounded statements at ${PRODUCTS.toLocaleString('en')} products (${TEST_ENGINE})`, () => {
  beforeAll(async () => {
    recordStatements();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-bounded-'));
    database = await createTestDatabase(dir);
    storage = await database.open();
    big = (await storage.createMerchant({ name: 'Big', sku_pattern: null, owner_emails: [], created_at: AT })).id;
    small = (await storage.createMerchant({ name: 'Small', sku_pattern: null, owner_emails: [], created_at: AT })).id;
    for (const merchantId of [big, small]) await storage.upsertSupplier(merchantId, 'alpine', 'Alpine');
    // In chunks of 1,000 products, several transactions at once (PostgreSQL's pool: round trips overlap).
    const chunks = Array.from({ length: PRODUCTS / 1000 }, (_, i) => i * 1000);
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        for (let from = chunks.shift(); from !== undefined; from = chunks.shift()) {
          const first = from;
          await storage.transaction(async (tx) => {
            for (let n = first; n < first + 1000; n++) await tx.upsertProductSource(big, `P-${n}`, source(n), AT);
          });
        }
      }),
    );
    await storage.transaction(async (tx) => {
      for (let n = 0; n < 3; n++)
        await tx.upsertProductSource(small, `S-${n}`, source(n, { images: [{ url: `https://small.example/${n}.jpg` }] }), AT);
    });
    // The big merchant's store publishes every product; one in 500 is excluded (no offers).
    storeId = (
      await storage.upsertStore(big, 'de', {
        name: 'DE',
        locale: 'de-DE',
        currency: 'EUR',
        is_default: true,
        active: true,
        exclude_out_of_stock: false,
      })
    ).id;
    // As large as a real payload (the demo's are ~650 bytes): the planner weighs a scan by the pages it reads.
    const payload = (id: number) =>
      JSON.stringify({
        id,
        sku: null,
        ean: null,
        title: `T${id}`,
        description: `Zelt ${id} `.repeat(60),
        excluded: id % 500 === 0,
        exclusion_reason: id % 500 === 0 ? 'no_offers' : null,
      });
    for (let from = 1; from <= PRODUCTS; from += 5000) {
      await storage.upsertPublished(
        storeId,
        Array.from({ length: 5000 }, (_, i) => ({ productId: from + i, payload: payload(from + i), priceHash: 'p', contentHash: 'c' })),
      );
    }
    // One product of the big merchant has its second image on another host, due later than the rest:
    // a claim finds that origin's few images without walking the big origin's (PostgreSQL's planner did).
    await storage.transaction((tx) =>
      tx.upsertProductSource(
        big,
        'P-1',
        source(1, {
          images: [{ url: `${ORIGIN}/p/1/1.jpg` }, { url: 'https://second.example/p/1/2.jpg' }],
        }),
        '2026-11-26T08:30:00.000Z',
      ),
    );
    // A few dead images of the big merchant, for the dead list.
    for (const n of [5, 6, 7])
      await storage.updateImageMirror(big, `${ORIGIN}/p/${n}/1.jpg`, {
        state: 'dead',
        last_error: 'http_404',
        next_attempt_at: null,
        updated_at: NOW,
      });
  }, 300_000);

  afterAll(async () => {
    vi.restoreAllMocks();
    await storage?.close();
    await database?.drop();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  // Right after a large import PostgreSQL has no statistics of the new rows yet (autovacuum's
  // ANALYZE comes a minute later at best): the mirror's commit must not read the merchant's
  // links or images whole then (it did: 21 ms for a commit of 30 images at 20,000 products).
  describe('as a large import leaves the tables, before any statistics', () => {
    it("commits a batch of mirrored images and finds their products' ids from an index per image", async () => {
      const urls = Array.from({ length: 30 }, (_, i) => `${ORIGIN}/p/${100 + i}/${1 + (i % 2)}.jpg`);
      const changes = urls.map((url) => ({
        url,
        patch: { state: 'mirrored' as const, mirrored_url: `/media/${encodeURIComponent(url)}`, updated_at: NOW },
      }));
      let ids: number[] = [];
      await expectBounded(() =>
        storage
          .transaction(async (tx) => {
            ids = await tx.updateImageMirrors(big, changes);
            throw new RolledBack();
          })
          .catch((error: unknown) => {
            if (!(error instanceof RolledBack)) throw error;
          }),
      );
      const expected = await Promise.all(urls.map(async (_, i) => (await storage.findProductByRef(big, `P-${100 + i}`))!.id));
      expect(ids).toEqual(expected.sort((a, b) => a - b));
    });
    it('reads the mirroring state of a chunk of images from an index probe per image', async () => {
      const urls = Array.from({ length: 100 }, (_, i) => `${ORIGIN}/p/${200 + i}/1.jpg`);
      let mirrors = new Map<string, unknown>();
      await expectBounded(async () => {
        mirrors = await storage.imageMirrors(big, urls);
      });
      expect([...mirrors.keys()].sort()).toEqual([...urls].sort());
    });

    // A chunk of an import's re-publishing (500 products): as `product_id = ANY($2)` the planner read
    // every row of the store and filtered them (35 ms a chunk at 22,000 products a store).
    it("reads, re-prices and deletes a chunk's published rows of a store with a probe of the primary key per product", async () => {
      const ids = Array.from({ length: 500 }, (_, i) => 101 + i);
      const rowsMax = 2 * ids.length;
      let hashes = new Map<number, unknown>();
      let payloads: Awaited<ReturnType<CatalogStorage['publishedPayloadsByIds']>> | undefined;
      let prices: Uint8Array = new Uint8Array();
      await expectBounded(async () => {
        hashes = await storage.publishedHashes(storeId, [...ids, ids[0]!]);
        payloads = await storage.publishedPayloadsByIds(storeId, [...ids, ids[0]!]);
        prices = await storage.publishedPricesByIds(storeId, ids);
      }, rowsMax);
      expect([...hashes.keys()].sort((a, b) => a - b)).toEqual(ids);
      expect(payloads!.count).toBe(ids.length);
      expect((JSON.parse(`[${Buffer.from(payloads!.bytes).toString('utf8')}]`) as { id: number }[]).map((p) => p.id)).toEqual(ids);
      expect((JSON.parse(`[${Buffer.from(prices).toString('utf8')}]`) as { id: number }[]).map((p) => p.id)).toEqual(ids);
      await expectBounded(
        () =>
          storage
            .transaction(async (tx) => {
              await tx.updatePublishedPrices(
                storeId,
                ids.map((productId) => ({ productId, payload: JSON.stringify({ id: productId, prices: [] }), priceHash: 'p2' })),
              );
              await tx.deletePublished(storeId, ids);
              throw new RolledBack();
            })
            .catch((error: unknown) => {
              if (!(error instanceof RolledBack)) throw error;
            }),
        rowsMax,
      );
    });
  });

  describe('with statistics as a catalog of this size has them', () => {
    beforeAll(analyze, 120_000);

    it("claims the other merchant's image while 40,000 pending images of one origin are at their cap, reading only the due work", async () => {
      let claimed: Awaited<ReturnType<CatalogStorage['claimDueImageMirrors']>> = [];
      const ran = await expectBounded(async () => {
        claimed = await storage.claimDueImageMirrors(NOW, 2, LEASE, {
          perMerchant: 3,
          perOrigin: 2,
          busy: [{ merchant_id: big, origin: ORIGIN, fetching: 2 }],
        });
      });
      expect(claimed.map((i) => [i.merchant_id, i.url])).toEqual([
        [small, 'https://small.example/0.jpg'],
        [small, 'https://small.example/1.jpg'],
      ]);
      if (TEST_ENGINE === 'sqlite') {
        // The origin's due work comes from the (merchant, origin, next attempt) index, not by parsing URLs.
        const plans = ran.map((statement) => sqlitePlan(database.location, statement).join('\n')).join('\n');
        expect(plans).toMatch(
          /USING (COVERING )?INDEX image_mirrors_pending_origin \(merchant_id=\? AND origin=\? AND next_attempt_at<\?\)/,
        );
        expect(plans).toMatch(/USING (COVERING )?INDEX image_work_merchants_due/);
      }
    });

    it("claims the big merchant's oldest due images when its origin has room, in bounded statements", async () => {
      let claimed: Awaited<ReturnType<CatalogStorage['claimDueImageMirrors']>> = [];
      await expectBounded(async () => {
        claimed = await storage.claimDueImageMirrors(NOW, 2, LEASE, { perMerchant: 3, perOrigin: 2, busy: [] });
      });
      expect(claimed).toHaveLength(2);
      expect(claimed.map((i) => i.merchant_id)).toEqual([big, small]);
      expect(claimed.map((i) => i.origin)).toEqual([ORIGIN, 'https://small.example']);
    });

    it("skips a merchant whose only due images are on down origins until its next probe, and takes a down origin's images whose own time is up from an index range", async () => {
      const probeAt = '2026-11-26T09:05:00.000Z';
      const downOrigins = [ORIGIN, 'https://second.example'];
      for (const origin of downOrigins) {
        await storage.putImageOrigin(big, {
          origin,
          failures: 20,
          down_since: '2026-11-26T08:59:00.000Z',
          next_probe_at: probeAt,
          probe_ms: 300_000,
          last_error: 'blocked_address',
        });
      }
      const fairness = { perMerchant: 3, perOrigin: 2, busy: [], deadAfterMs: 72 * 3600_000 };
      try {
        let claimed: Awaited<ReturnType<CatalogStorage['claimDueImageMirrors']>> = [];
        await expectBounded(async () => {
          claimed = await storage.claimDueImageMirrors(NOW, 2, LEASE, fairness);
        });
        expect(claimed.map((i) => i.merchant_id)).not.toContain(big);
        // Its hint now says its next probe: no claim before then looks at its 40,000 waiting images.
        expect(await hintOf(big)).toBe(probeAt);
        const before = await statementsOf(() => storage.claimDueImageMirrors('2026-11-26T09:04:59.000Z', 2, LEASE, fairness));
        const ofBig = (ran: Ran) => {
          // Named parameters (SQLite) and arrays (PostgreSQL: a page of merchants in one statement) looked into.
          const values = ran.params.flatMap((p) => (Array.isArray(p) ? p : p !== null && typeof p === 'object' ? Object.values(p) : [p]));
          return /image_mirrors|image_origins/.test(ran.sql) && values.includes(big);
        };
        expect(before.filter(ofBig).map((ran) => ran.sql)).toEqual([]);

        // 72 h after the origin went down: its images are expired, a window of them read from the index.
        const later = '2026-11-29T09:00:00.000Z';
        await expectBounded(async () => {
          claimed = await storage.claimDueImageMirrors(later, 2, '2026-11-29T09:01:00.000Z', fairness);
        });
        const expired = claimed.filter((i) => i.expired !== undefined);
        expect(expired.length).toBeGreaterThan(0);
        expect(expired[0]).toMatchObject({
          merchant_id: big,
          expired: { first_failure_at: '2026-11-26T08:59:00.000Z', last_error: 'blocked_address' },
        });
      } finally {
        for (const origin of downOrigins) await storage.clearImageOrigin(big, origin, NOW);
      }
    });

    it('finds the products that list an image from the links, not by parsing every source', async () => {
      let ids: number[] = [];
      await expectBounded(async () => {
        ids = await storage.productIdsWithImage(big, `${ORIGIN}/p/1234/2.jpg`);
      });
      expect(ids).toEqual([(await storage.findProductByRef(big, 'P-1234'))!.id]);
    });

    it('counts the images per state and lists the dead ones from kept counts and an index', async () => {
      let counts = {};
      let dead: { url: string }[] = [];
      await expectBounded(async () => {
        counts = await storage.imageStateCounts(big);
        dead = await storage.deadImages(big, 10);
      });
      expect(counts).toEqual({ pending: 2 * PRODUCTS - 3, mirrored: 0, dead: 3 });
      expect(dead.map((d) => d.url).sort()).toEqual([5, 6, 7].map((n) => `${ORIGIN}/p/${n}/1.jpg`));
    });

    it('answers whether a supplier is referenced, and which products exclude a store, from the links', async () => {
      let referenced = false;
      let unused = true;
      let excluded: { id: number; ref: string }[] = [];
      await expectBounded(async () => {
        referenced = await storage.isSupplierReferenced(big, 'alpine');
        unused = await storage.isSupplierReferenced(big, 'nobody');
        excluded = await storage.productsExcludedFrom(big, 'uk');
      });
      expect(referenced).toBe(true);
      expect(unused).toBe(false);
      expect(excluded.map((p) => p.ref).sort()).toEqual(Array.from({ length: PRODUCTS / 1000 }, (_, i) => `P-${i * 1000}`).sort());
      expect(excluded.map((p) => p.id)).toEqual(excluded.map((p) => p.id).sort((a, b) => a - b));
    });

    it("keeps a product's links and its images' counts in step with its source, in bounded statements", async () => {
      await expectBounded(() =>
        storage.transaction(async (tx) => {
          // P-5 lists a dead image (1.jpg) and 2.jpg: replace 1.jpg with a new one.
          await tx.upsertProductSource(
            big,
            'P-5',
            source(5, { images: [{ url: `${ORIGIN}/p/5/2.jpg` }, { url: `${ORIGIN}/p/5/3.jpg` }] }),
            NOW,
          );
        }),
      );
      expect(await storage.imageStateCounts(big)).toEqual({ pending: 2 * PRODUCTS - 3 + 1, mirrored: 0, dead: 2 });
      const p5 = (await storage.findProductByRef(big, 'P-5'))!.id;
      expect(await storage.productIdsWithImage(big, `${ORIGIN}/p/5/1.jpg`)).toEqual([]);
      expect(await storage.productIdsWithImage(big, `${ORIGIN}/p/5/3.jpg`)).toEqual([p5]);
      await expectBounded(() => storage.deleteProduct(big, p5));
      expect(await storage.imageStateCounts(big)).toEqual({ pending: 2 * PRODUCTS - 3 - 1, mirrored: 0, dead: 2 });
    });

    it("lists a page of the merchant's products by ref, filtered, looking at no more than its window", async () => {
      let pages: { products: { ref: string }[]; nextAfter: string | null }[] = [];
      const query = { afterRef: null, refPrefix: null, updatedSince: null, excludedFromStore: null, limit: 50, scan: 200 };
      await expectBounded(
        async () => {
          pages = [
            await storage.productList(big, query),
            await storage.productList(big, { ...query, refPrefix: 'P-1999' }),
            await storage.productList(big, { ...query, excludedFromStore: storeId }),
            await storage.productList(big, { ...query, afterRef: 'P-5', updatedSince: '2026-11-26T08:45:00.000Z' }),
          ];
          // The window's products and, for the exclusion filter, each one's published row by its key.
        },
        2 * query.scan + query.limit,
      );
      expect(pages[0]!.products).toHaveLength(50);
      expect(pages[0]!.nextAfter).toBe(pages[0]!.products[49]!.ref);
      const prefixed = Array.from({ length: PRODUCTS }, (_, n) => `P-${n}`)
        .filter((ref) => ref.startsWith('P-1999'))
        .sort();
      expect(pages[1]).toEqual({ products: prefixed.map((ref) => expect.objectContaining({ ref })), nextAfter: null });
      // One in 500 excluded: none among the first 200 refs looked at (P-0, P-1, P-10, P-100, ...) but P-1000's.
      expect(pages[2]!.nextAfter).not.toBeNull();
      expect(pages[3]!.products.map((p) => p.ref)).toEqual([]);
    });

    it("counts a store's products by exclusion reason from kept counts, and lists the excluded ones from their index", async () => {
      let counts = {};
      let excluded: { id: number }[] = [];
      await expectBounded(async () => {
        counts = await storage.publishedCountsByExclusion(storeId);
        excluded = await storage.publishedSummaries(storeId, { afterId: 0, limit: 5, excludedOnly: true });
      });
      expect(counts).toEqual({ total: PRODUCTS, excluded: { manual: 0, missing_title: 0, no_offers: PRODUCTS / 500, out_of_stock: 0 } });
      expect(excluded.map((p) => p.id)).toEqual([500, 1000, 1500, 2000, 2500]);
      // The counts follow an exclusion that changes and a product that goes.
      await storage.upsertPublished(storeId, [
        {
          productId: 500,
          payload: JSON.stringify({ id: 500, title: 'T', excluded: true, exclusion_reason: 'manual' }),
          priceHash: 'p',
          contentHash: 'c2',
        },
      ]);
      await storage.upsertPublished(storeId, [
        {
          productId: 501,
          payload: JSON.stringify({ id: 501, title: 'T', excluded: false, exclusion_reason: null }),
          priceHash: 'p2',
          contentHash: 'c',
        },
      ]);
      await storage.deletePublished(storeId, [1000, 1001]);
      expect(await storage.publishedCountsByExclusion(storeId)).toEqual({
        total: PRODUCTS - 2,
        excluded: { manual: 1, missing_title: 0, no_offers: PRODUCTS / 500 - 2, out_of_stock: 0 },
      });
    });

    it("finds the currencies the merchant's costs are in with one probe of the links per currency, not by reading every product", async () => {
      let billed: string[] = [];
      await expectBounded(async () => {
        billed = await storage.currenciesInUse(big, ['EUR', 'GBP', 'USD']);
      });
      expect(billed).toEqual(['EUR']);
    });

    it("walks a store's published hashes a chunk at a time from the primary key (a publish run comparing its products, finding payloads whose product is gone)", async () => {
      let hashes = new Map<number, unknown>();
      await expectBounded(async () => {
        hashes = await storage.publishedHashesAfter(storeId, 5000, 200);
      });
      const ids = Array.from({ length: 200 }, (_, i) => 5001 + i);
      expect([...hashes.keys()]).toEqual(ids);
      // The same hashes a probe per product reads.
      expect(hashes).toEqual(await storage.publishedHashes(storeId, ids));
    });

    it('prunes expired changes a bounded batch at a time, oldest first from an index, even when a whole re-pricing shares one second', async () => {
      const changes = Array.from({ length: PRODUCTS }, (_, i) => ({ storeId, productId: i + 1, changeType: 'price' as const }));
      await storage.transaction((tx) => tx.recordChanges(big, changes, new Date('2026-10-01T08:00:00Z')));
      let pruned = 0;
      const ran = await expectBounded(async () => {
        pruned = await storage.pruneChangesBefore('2026-10-02T00:00:00Z', 100);
      });
      expect(pruned).toBe(100);
      expect(await storage.changeHorizon(storeId)).toEqual({ at: '2026-10-01T08:00:00Z', id: 100 });
      if (TEST_ENGINE === 'sqlite') {
        // Bounded groupings of the batch's rows may sort; the batch itself comes in index order.
        for (const statement of ran)
          expect(sqlitePlan(database.location, statement).join('\n'), statement.sql).not.toMatch(
            /TEMP B-TREE FOR (RIGHT PART OF )?ORDER BY/,
          );
      }
    });

    it("pages an endpoint's deliveries of a rare status, and finds the oldest waiting change, without reading its whole log or backlog", async () => {
      const endpoint = await storage.createWebhookEndpoint({
        merchant_id: big,
        url: 'https://hooks.example/catalog',
        store_id: null,
        events: ['price', 'content'],
        secret: 'whsec_x',
        created_at: AT,
      });
      const delivery = (status: 'succeeded' | 'given_up' | 'pending', at: string) => ({
        endpoint_id: endpoint.id,
        event: 'price' as const,
        store_id: storeId,
        product_ids: [1],
        occurred_at: at,
        status,
        attempts: status === 'pending' ? 0 : 1,
        next_attempt_at: status === 'pending' ? at : null,
        created_at: at,
      });
      const givenUp: number[] = [];
      await storage.transaction(async (tx) => {
        for (let i = 0; i < PRODUCTS; i++) {
          const id = (await tx.insertDelivery(delivery(i % 5000 === 7 ? 'given_up' : i % 2 ? 'pending' : 'succeeded', AT), AT)).id;
          if (i % 5000 === 7) givenUp.push(id);
        }
        await tx.insertOutbox(
          Array.from({ length: PRODUCTS }, (_, i) => ({
            endpointId: endpoint.id,
            event: 'price' as const,
            storeId,
            productIds: [i + 1],
            createdAt: NOW,
          })),
        );
      });
      await analyze();
      let page: { id: number }[] = [];
      let oldest: string | null = null;
      await expectBounded(async () => {
        page = await storage.listDeliveries(endpoint.id, { status: 'given_up', limit: 2 });
        oldest = await storage.oldestWaitingChangeAt(big);
      });
      expect(page.map((d) => d.id)).toEqual(givenUp.reverse().slice(0, 2));
      expect(oldest).toBe(AT);
      // The service-wide counts of /metrics: the backlogs counted up to a bound, the oldest change per endpoint.
      let counts: Awaited<ReturnType<CatalogStorage['operationalCounts']>> | undefined;
      await expectBounded(
        async () => {
          counts = await storage.operationalCounts(100);
        },
        2 * 100 + 50,
      );
      expect(counts).toMatchObject({ outboxDepth: 100, waitingDeliveries: { pending: 100, failed: 0 }, oldestWaitingAt: AT });
      // A coalescing pass groups the oldest rows of the outbox only, however long the backlog.
      let groups: { count: number }[] = [];
      await expectBounded(async () => {
        groups = await storage.outboxGroups(200);
      }, 2 * 200);
      expect(groups).toEqual([expect.objectContaining({ endpointId: endpoint.id, event: 'price', storeId, count: 200 })]);
    });

    it("reads a coalescing pass's window from the outbox rows that carry its changes, not as many rows as it has changes", async () => {
      const endpoint = await storage.createWebhookEndpoint({
        merchant_id: big,
        url: 'https://hooks.example/window',
        store_id: null,
        events: ['price'],
        secret: 'whsec_w',
        created_at: AT,
      });
      const before = Math.max(0, ...(await storage.outboxWindow(Number.MAX_SAFE_INTEGER)).flatMap((g) => g.rows.map((r) => r.id)));
      // An import's rows: each carries a chunk's hundred products.
      await storage.transaction((tx) =>
        tx.insertOutbox(
          Array.from({ length: 300 }, (_, row) => ({
            endpointId: endpoint.id,
            event: 'price' as const,
            storeId,
            productIds: Array.from({ length: 100 }, (_, i) => row * 100 + i + 1),
            createdAt: NOW,
          })),
        ),
      );
      await analyze();
      let groups: Awaited<ReturnType<CatalogStorage['outboxWindow']>> = [];
      // PostgreSQL walks a page of rows at a time: two pages at most here, where reading 2,000 rows read all 300.
      await expectBounded(async () => {
        groups = await storage.outboxWindow(2000, before);
      }, 100);
      expect(groups.map((g) => [g.endpointId, g.count, g.rows.length])).toEqual([[endpoint.id, 2000, 20]]);
    });

    it('finds a numbered page and a keyset page of the store from its blocks and one read within a block, never from every id', async () => {
      const ids = await storage.publishedProductIds(storeId);
      const reads = new CatalogReads(storage);
      const pages: Awaited<ReturnType<CatalogReads['productPage']>>['page'][] = [];
      await expectBounded(
        async () => {
          pages.push((await reads.productPage(big, undefined, { page: 77, perPage: 50 })).page);
          pages.push((await reads.productPage(big, undefined, { page: 1, afterId: ids[3000]!, perPage: 200 })).page);
          pages.push((await reads.productPage(big, undefined, { page: 1, afterId: ids[ids.length - 2]!, perPage: 200 })).page);
          // Within a block: its ids up to a position (< 1,024) and a page past them (<= 200), then a count in a block.
        },
        2 * 1024 + 200,
      );
      const idsOf = (page: (typeof pages)[number]) =>
        (JSON.parse(`[${Buffer.from(page.data).toString('utf8')}]`) as { id: number }[]).map((p) => p.id);
      const lastPage = Math.ceil(ids.length / 50);
      expect(pages[0]!.meta).toEqual({ current_page: 77, per_page: 50, last_page: lastPage, total: ids.length });
      expect(idsOf(pages[0]!)).toEqual(ids.slice(76 * 50, 77 * 50));
      expect(idsOf(pages[1]!)).toEqual(ids.slice(3001, 3201));
      expect(pages[1]!.meta).toEqual({
        current_page: Math.floor(3200 / 200) + 1,
        per_page: 200,
        last_page: Math.ceil(ids.length / 200),
        total: ids.length,
      });
      expect(idsOf(pages[2]!)).toEqual(ids.slice(-1));
      expect(pages[2]!.meta.current_page).toBe(Math.ceil(ids.length / 200));
    });

    it("reads a snapshot export a bounded step at a time from the primary key, and its cursor from the merchant's sequencer", async () => {
      const ids = await storage.publishedProductIds(storeId);
      let step: Awaited<ReturnType<CatalogStorage['publishedLinesAfter']>> | undefined;
      let cursor: Awaited<ReturnType<CatalogStorage['latestFeedPosition']>>;
      await expectBounded(async () => {
        step = await storage.publishedLinesAfter(storeId, ids[9000]!, 200);
        cursor = await storage.latestFeedPosition(big);
      });
      const lines = Buffer.from(step!.bytes).toString('utf8').split('\n');
      expect(lines.pop()).toBe('');
      expect(lines.map((line) => (JSON.parse(line) as { id: number }).id)).toEqual(ids.slice(9001, 9201));
      expect(step).toMatchObject({ count: 200, lastId: ids[9200] });
      expect(cursor).toEqual({ at: expect.stringMatching(/Z$/), id: expect.any(Number) });
    });

    it("reads a window of a store's feed from its index alone, however the stores' changes interleave in the table", async () => {
      const other = (
        await storage.upsertStore(big, 'ch', {
          name: 'CH',
          locale: 'de-CH',
          currency: 'CHF',
          is_default: false,
          active: true,
          exclude_out_of_stock: false,
        })
      ).id;
      // 100 writes of 20 changes each, the two stores' alternating: each store's rows spread over the table.
      const start = Date.parse('2026-11-20T00:00:00Z');
      for (let t = 0; t < 100; t++) {
        const changes = Array.from({ length: 20 }, (_, i) => ({
          storeId: i % 2 === 0 ? storeId : other,
          productId: t * 10 + Math.floor(i / 2) + 1,
          changeType: 'content' as const,
        }));
        await storage.transaction((tx) => tx.recordChanges(big, changes, new Date(start + t * 1000)));
      }
      // And the other store's changes after them: the window is a small part of the table.
      for (let t = 100; t < 110; t++) {
        const changes = Array.from({ length: 1000 }, (_, i) => ({ storeId: other, productId: i + 1, changeType: 'price' as const }));
        await storage.transaction((tx) => tx.recordChanges(big, changes, new Date(start + t * 1000)));
      }
      await vacuum('changes');
      let window: Awaited<ReturnType<CatalogStorage['changesAfter']>> = [];
      const ran = await expectBounded(async () => {
        window = await storage.changesAfter(storeId, { at: '2026-11-19T00:00:00Z', id: 0 }, 1000);
      }, 1000);
      expect(window).toHaveLength(1000);
      expect(window[0]).toMatchObject({ product_id: 1, change_type: 'content', created_at: '2026-11-20T00:00:00Z' });
      expect(window.every((change, i) => i === 0 || change.id > window[i - 1]!.id)).toBe(true);
      const [statement] = ran;
      if (TEST_ENGINE === 'postgres') {
        // An index-only scan: a row on a page the visibility map vouches for (most, once vacuumed) is
        // not visited; an index scan fetches each of the 1,000 from the table. The window's statement
        // runs inside feed_window (migration 57): its plan is the nested one.
        const plan = (await postgresNestedPlans(database.location, statement!)).find((p) => /FROM changes/.test(p)) ?? '';
        expect(plan).toMatch(/Index Only Scan using changes_feed on changes/);
        expect(Number(/Heap Fetches: (\d+)/.exec(plan)?.[1])).toBeLessThan(500);
      } else {
        expect(sqlitePlan(database.location, statement!).join('\n')).toMatch(/SEARCH changes USING INDEX changes_feed \(store_id=\? AND/);
      }
      // The feed's poll reads the same window with the store and its horizon, in one statement, as bounded.
      let poll: Awaited<ReturnType<CatalogStorage['changeWindowOfStore']>> | undefined;
      const [polled] = await expectBounded(async () => {
        poll = await storage.changeWindowOfStore(big, 'de', { at: '2026-11-19T00:00:00Z', id: 0 }, 1000);
      }, 1000);
      expect(poll!.store?.id).toBe(storeId);
      expect(poll!.changes).toEqual(window);
      if (TEST_ENGINE === 'postgres') {
        const plan = (await postgresNestedPlans(database.location, polled!)).find((p) => /FROM changes/.test(p)) ?? '';
        expect(plan).toMatch(/Index Only Scan using changes_feed on changes/);
      } else {
        expect(sqlitePlan(database.location, polled!).join('\n')).toMatch(/SEARCH changes USING INDEX changes_feed \(store_id=\? AND/);
      }
    });
  });
});
