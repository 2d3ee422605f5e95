// A store's kept counts (published_counts per exclusion reason, published_blocks per block of ids)
// after bulk writes: batches that insert, update and do both at once, deletes spanning blocks, a
// store deleted. SQLite's writes keep them, a delta per (store, reason) and (store, block) a call
// (migration 49); PostgreSQL keeps them once per statement from its transition tables (migration 22),
// so every batch's rows must be counted, each in its own (store, reason) and (store, block); on
// PostgreSQL also after plain UPDATE and DELETE statements of many rows, as any writer might run.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CatalogStorage, PublishedRow } from '../../src/storage/port.js';
import { PUBLISHED_BLOCK_BITS } from '../../src/storage/records.js';
import type { ExclusionReason } from '../../src/catalog/model.js';
import { createTestDatabase, onPglite, TEST_ENGINE, type TestDatabase } from '../support/engine.js';

const AT = '2026-11-26T08:00:00.000Z';
const REASONS: (ExclusionReason | null)[] = [null, 'manual', 'missing_title', 'no_offers', 'out_of_stock'];

let dir: string;
let database: TestDatabase;
let storage: CatalogStorage;
let de: number;
let at: number;

/** What each store publishes, as the test wrote it: product id -> exclusion reason. */
const published = new Map<number, Map<number, ExclusionReason | null>>();

const payload = (id: number, reason: ExclusionReason | null) =>
  JSON.stringify({ id, sku: `SKU-${id}`, ean: null, title: `T${id}`, excluded: reason !== null, exclusion_reason: reason });

/** Rows for these ids with these reasons; every other row leaves its reason for the storage to read from the payload. */
function rowsOf(ids: number[], reasonOf: (id: number) => ExclusionReason | null): PublishedRow[] {
  return ids.map((id, i) => ({
    productId: id,
    payload: payload(id, reasonOf(id)),
    priceHash: `p${id}`,
    contentHash: `c${id}`,
    ...(i % 2 === 0 ? { exclusionReason: reasonOf(id) } : {}),
  }));
}

async function upsert(storeId: number, rows: PublishedRow[]): Promise<void> {
  await storage.upsertPublished(storeId, rows);
  const kept = published.get(storeId) ?? new Map();
  for (const row of rows)
    kept.set(row.productId, (JSON.parse(row.payload) as { exclusion_reason: ExclusionReason | null }).exclusion_reason);
  published.set(storeId, kept);
}

async function remove(storeId: number, ids: number[]): Promise<void> {
  await storage.deletePublished(storeId, ids);
  for (const id of ids) published.get(storeId)?.delete(id);
}

/** The counts and blocks the store's rows make, counted here from what was written. */
function expected(storeId: number) {
  const rows = [...(published.get(storeId) ?? new Map<number, ExclusionReason | null>()).entries()];
  const excluded = { manual: 0, missing_title: 0, no_offers: 0, out_of_stock: 0 };
  const blocks = new Map<number, number>();
  for (const [id, reason] of rows) {
    if (reason !== null) excluded[reason]++;
    blocks.set(id >> PUBLISHED_BLOCK_BITS, (blocks.get(id >> PUBLISHED_BLOCK_BITS) ?? 0) + 1);
  }
  return {
    counts: { total: rows.length, excluded },
    blocks: [...blocks.entries()].sort(([a], [b]) => a - b).map(([block, count]) => ({ block, count })),
  };
}

async function expectCountsExact(storeId: number): Promise<void> {
  const { counts, blocks } = expected(storeId);
  expect(await storage.publishedCountsByExclusion(storeId)).toEqual(counts);
  expect(await storage.publishedBlocks(storeId)).toEqual(blocks);
}

const range = (from: number, count: number) => Array.from({ length: count }, (_, i) => from + i);

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-published-counts-'));
  database = await createTestDatabase(dir);
  storage = await database.open();
  const merchant = await storage.createMerchant({ name: 'Bulk', sku_pattern: null, owner_emails: [], created_at: AT });
  const store = (slug: string) => ({
    name: slug,
    locale: 'de-DE',
    currency: 'EUR',
    is_default: slug === 'de',
    active: true,
    exclude_out_of_stock: false,
  });
  de = (await storage.upsertStore(merchant.id, 'de', store('de'))).id;
  at = (await storage.upsertStore(merchant.id, 'at', store('at'))).id;
});

afterAll(async () => {
  await storage?.close();
  await database?.drop();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

describe('kept counts after bulk writes', () => {
  it('counts a batch of new rows across several blocks and reasons, per store', async () => {
    await upsert(
      de,
      rowsOf(range(1, 3000), (id) => REASONS[id % 5]!),
    );
    await upsert(
      at,
      rowsOf(range(500, 1200), (id) => REASONS[id % 3]!),
    );
    await expectCountsExact(de);
    await expectCountsExact(at);
  });

  it('counts a batch that updates rows (some changing reason, some not) and inserts others, in one statement', async () => {
    // 2,001-3,000 exist: every third changes reason; 3,001-4,500 are new, in blocks not seen before.
    await upsert(
      de,
      rowsOf(range(2001, 2500), (id) => (id % 3 === 0 ? REASONS[(id + 1) % 5]! : REASONS[id % 5]!)),
    );
    await expectCountsExact(de);
    await expectCountsExact(at);
  });

  it("counts a product listed twice in a batch once, under its last row's reason", async () => {
    await storage.upsertPublished(de, [
      { productId: 10_000, payload: payload(10_000, 'manual'), priceHash: 'p', contentHash: 'c', exclusionReason: 'manual' },
      { productId: 7, payload: payload(7, null), priceHash: 'p', contentHash: 'c' },
      { productId: 10_000, payload: payload(10_000, 'no_offers'), priceHash: 'p', contentHash: 'c', exclusionReason: 'no_offers' },
    ]);
    published.get(de)!.set(10_000, 'no_offers').set(7, null);
    await expectCountsExact(de);
  });

  it('counts a delete spanning blocks, ids not published among them', async () => {
    await remove(de, [...range(900, 1500), 99_999]);
    await expectCountsExact(de);
    await expectCountsExact(at);
    await remove(de, [...published.get(de)!.keys()]);
    await expectCountsExact(de);
  });

  it('counts the writes of a transaction together with the rows already there', async () => {
    await storage.transaction(async (tx) => {
      await tx.upsertPublished(
        de,
        rowsOf(range(1, 2048), (id) => REASONS[id % 4]!),
      );
      await tx.deletePublished(at, range(600, 100));
      await tx.upsertPublished(
        at,
        rowsOf(range(1500, 300), () => 'out_of_stock'),
      );
    });
    for (const id of range(1, 2048)) published.get(de)!.set(id, REASONS[id % 4]!);
    for (const id of range(600, 100)) published.get(at)!.delete(id);
    for (const id of range(1500, 300)) published.get(at)!.set(id, 'out_of_stock');
    await expectCountsExact(de);
    await expectCountsExact(at);
  });

  it('rewrites a price change alone (updatePublishedPrices): payload and price hash move; content hash, sku and counts stay', async () => {
    const ids = range(100, 400);
    const before = await storage.publishedHashes(de, ids);
    await storage.updatePublishedPrices(
      de,
      ids.map((id) => ({
        productId: id,
        payload: payload(id, published.get(de)!.get(id)!).replace('"title"', '"price":1,"title"'),
        priceHash: `p2-${id}`,
      })),
    );
    const after = await storage.publishedHashes(de, ids);
    for (const id of ids) expect(after.get(id)).toEqual({ priceHash: `p2-${id}`, contentHash: before.get(id)!.contentHash });
    expect(new TextDecoder().decode(await storage.publishedPayload(de, 100))).toContain('"price":1');
    expect((await storage.findPublishedProducts(de, { sku: 'SKU-100' }, 5)).map((p) => p.id)).toEqual([100]);
    await expectCountsExact(de);
  });

  it("counts nothing for a deleted store, and leaves the other store's counts as they were", async () => {
    await storage.deleteStore(at);
    published.delete(at);
    await expectCountsExact(at);
    await expectCountsExact(de);
  });

  it.skipIf(TEST_ENGINE !== 'postgres' || onPglite())(
    'PostgreSQL: counts plain UPDATE and DELETE statements of many rows, reasons and blocks moved',
    async () => {
      const client = new pg.Client(database.location);
      await client.connect();
      try {
        // Reasons changed, some to the same reason; then ids moved two blocks up (a block counted on both sides).
        await client.query(
          `UPDATE published_products SET exclusion_reason = CASE WHEN product_id % 2 = 0 THEN 'manual' ELSE exclusion_reason END
        WHERE store_id = $1 AND product_id <= 1500`,
          [de],
        );
        for (const id of range(1, 1500)) if (id % 2 === 0) published.get(de)!.set(id, 'manual');
        await expectCountsExact(de);
        await client.query(
          'UPDATE published_products SET product_id = product_id + 2048 WHERE store_id = $1 AND product_id BETWEEN 1 AND 1000',
          [de],
        );
        const moved = new Map([...published.get(de)!.entries()].map(([id, reason]) => [id <= 1000 ? id + 2048 : id, reason]));
        published.set(de, moved);
        await expectCountsExact(de);
        await client.query('DELETE FROM published_products WHERE store_id = $1 AND product_id % 3 = 0', [de]);
        for (const id of [...moved.keys()]) if (id % 3 === 0) moved.delete(id);
        await expectCountsExact(de);
      } finally {
        await client.end();
      }
    },
  );
});
