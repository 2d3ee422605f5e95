// PostgreSQL keeps a published payload's sku and ean beside it (migration 23), as
// `payload::json ->> field` reads them, and findPublishedProducts reads their indexes: the lookups
// answer as they did over the payload (values that are not JSON strings included), from an index
// range of the store in id order (EXPLAIN of the statement the lookup runs), never a scan or a sort.
// Rows published before migrations 22 and 23 keep their counts and get their columns.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { CatalogStorage } from '../../src/storage/port.js';
import { PgConnection } from '../../src/storage/postgres/connection.js';
import { openPostgresStorage, type PostgresStorage } from '../../src/storage/postgres/index.js';
import { migrations, statementsOf } from '../../src/storage/postgres/migrations.js';
import { createTestDatabase, onPglite, TEST_ENGINE, type TestDatabase } from '../support/engine.js';
import { testPostgres } from '../support/postgres.js';

const AT = '2026-11-26T08:00:00.000Z';
const PRODUCTS = 5000;

let dir: string;
let database: TestDatabase;
let storage: CatalogStorage;
let client: pg.Client;
let storeId: number;

const payload = (id: number, fields: Record<string, unknown>) =>
  JSON.stringify({ id, title: `T${id}`, ...fields, excluded: false, exclusion_reason: null });

describe.skipIf(TEST_ENGINE !== 'postgres' || onPglite())('PostgreSQL: SKU and EAN kept as columns (migration 23)', () => {
  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-sku-ean-'));
    database = await createTestDatabase(dir);
    storage = await database.open();
    const merchant = await storage.createMerchant({ name: 'Columns', sku_pattern: null, owner_emails: [], created_at: AT });
    const store = (slug: string) => ({
      name: slug,
      locale: 'de-DE',
      currency: 'EUR',
      is_default: slug === 'de',
      active: true,
      exclude_out_of_stock: false,
    });
    storeId = (await storage.upsertStore(merchant.id, 'de', store('de'))).id;
    const other = (await storage.upsertStore(merchant.id, 'at', store('at'))).id;
    for (const id of [storeId, other]) {
      await storage.upsertPublished(
        id,
        Array.from({ length: PRODUCTS }, (_, i) => ({
          productId: i + 1,
          payload: payload(i + 1, { sku: `SKU-${i % 2500}`, ean: `400${String(i % 1000).padStart(10, '0')}` }),
          priceHash: 'p',
          contentHash: 'c',
        })),
      );
    }
    client = new pg.Client(database.location);
    await client.connect();
    await client.query('ANALYZE published_products');
  }, 60_000);

  afterAll(async () => {
    vi.restoreAllMocks();
    await client?.end();
    await storage?.close();
    await database?.drop();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  /** The plan of the statement findPublishedProducts runs for this match, with its parameters. */
  async function planOf(match: { sku?: string; ean?: string }): Promise<string> {
    const ran: { sql: string; values: unknown[] }[] = [];
    // eslint-disable-next-line @typescript-eslint/unbound-method -- called with its connection as `this` below (real.call(this, …))
    const real = PgConnection.prototype.rows;
    const spy = vi.spyOn(PgConnection.prototype, 'rows').mockImplementation(function (
      this: PgConnection,
      sql: string,
      values: unknown[] = [],
    ) {
      if (/FROM published_products/.test(sql)) ran.push({ sql, values });
      return real.call(this, sql, values);
    });
    try {
      expect((await storage.findPublishedProducts(storeId, match, 10)).length).toBeGreaterThan(0);
    } finally {
      spy.mockRestore();
    }
    expect(ran).toHaveLength(1);
    const { rows } = await client.query(`EXPLAIN ${ran[0]!.sql}`, ran[0]!.values);
    return rows.map((row: { 'QUERY PLAN': string }) => row['QUERY PLAN']).join('\n');
  }

  it("finds by SKU from the store's SKU index range, in id order without a sort", async () => {
    const plan = await planOf({ sku: 'SKU-7' });
    expect(plan).toMatch(/Index Scan using published_products_sku on published_products/);
    expect(plan).toMatch(/Index Cond: \(\(store_id = .*\) AND \(sku = /);
    expect(plan).not.toMatch(/Seq Scan|Sort|Bitmap/);
  });

  it("finds by EAN from the store's EAN index range, and by both from one of the two indexes", async () => {
    expect(await planOf({ ean: '4000000000007' })).toMatch(/Index Scan using published_products_ean on published_products/);
    const both = await planOf({ sku: 'SKU-7', ean: '4000000000007' });
    expect(both).toMatch(/Index Scan using published_products_(sku|ean) on published_products/);
    expect(both).not.toMatch(/Seq Scan|Sort/);
  });

  it('answers as the payload reads: escaped strings, values that are not strings, fields absent, rows rewritten; refuses a payload that is not JSON', async () => {
    const other = 'Zażółć "gęślą"\n☕';
    await storage.upsertPublished(storeId, [
      { productId: 9001, payload: payload(9001, { sku: other, ean: null }), priceHash: 'p', contentHash: 'c' },
      // Not JSON strings: found by the text of the value as the payload has it (json's ->>).
      { productId: 9002, payload: payload(9002, { sku: 'NUM', ean: 12.5 }).replace('12.5', '12.50'), priceHash: 'p', contentHash: 'c' },
      { productId: 9003, payload: payload(9003, { sku: { nested: true }, ean: '4000000000007' }), priceHash: 'p', contentHash: 'c' },
      { productId: 9004, payload: payload(9004, {}), priceHash: 'p', contentHash: 'c' },
    ]);
    const ids = async (match: { sku?: string; ean?: string }) => (await storage.findPublishedProducts(storeId, match, 10)).map((p) => p.id);
    expect(await ids({ sku: other })).toEqual([9001]);
    expect(await ids({ ean: '12.50' })).toEqual([9002]);
    expect(await ids({ sku: '{"nested":true}' })).toEqual([9003]);
    expect(await ids({ ean: '4000000000007', sku: '{"nested":true}' })).toEqual([9003]);
    const { rows } = await client.query(
      "SELECT product_id::integer AS product_id, sku, ean, sku IS NOT DISTINCT FROM payload::json ->> 'sku' AND ean IS NOT DISTINCT FROM payload::json ->> 'ean' AS same FROM published_products WHERE store_id = $1 AND product_id > 9000 ORDER BY product_id",
      [storeId],
    );
    expect(rows).toEqual([
      { product_id: 9001, sku: other, ean: null, same: true },
      { product_id: 9002, sku: 'NUM', ean: '12.50', same: true },
      { product_id: 9003, sku: '{"nested":true}', ean: '4000000000007', same: true },
      { product_id: 9004, sku: null, ean: null, same: true },
    ]);
    // A payload that is not JSON is refused, as the indexes over the payload refused it.
    await expect(
      storage.upsertPublished(storeId, [
        { productId: 9005, payload: '{"id":9005,"sku":"X",', priceHash: 'p', contentHash: 'c', exclusionReason: null },
      ]),
    ).rejects.toThrow(/json/i);
    // A rewritten row's columns follow its new payload.
    await storage.upsertPublished(storeId, [
      { productId: 9001, payload: payload(9001, { sku: 'RENAMED', ean: '1' }), priceHash: 'p', contentHash: 'c' },
    ]);
    expect(await ids({ sku: other })).toEqual([]);
    expect(await ids({ sku: 'RENAMED', ean: '1' })).toEqual([9001]);
  });
});

describe.skipIf(TEST_ENGINE !== 'postgres' || onPglite())('PostgreSQL: migrations 22 and 23 on a catalog published before them', () => {
  it("keep the counts the per-row triggers kept, and fill every row's SKU and EAN from its payload", async () => {
    const server = testPostgres();
    if (server.kind !== 'server') throw new Error('needs a server');
    const name = `cps_before_23_${process.pid}`;
    const admin = new pg.Client(server.url);
    await admin.connect();
    await admin.query(`DROP DATABASE IF EXISTS ${name}`);
    await admin.query(`CREATE DATABASE ${name}`);
    const url = server.url.replace(/\/[^/]*$/, `/${name}`);
    const before = new pg.Client(url);
    await before.connect();
    let opened: PostgresStorage | undefined;
    try {
      // The schema as of migration 21, and a store published under its per-row triggers.
      await before.query(
        'CREATE TABLE schema_migrations (id integer PRIMARY KEY, name text NOT NULL, applied_at text COLLATE "C" NOT NULL)',
      );
      for (const migration of migrations.filter((m) => m.id <= 21)) {
        for (const statement of statementsOf(migration.sql)) await before.query(statement);
        await before.query('INSERT INTO schema_migrations VALUES ($1, $2, $3)', [migration.id, migration.name, AT]);
      }
      await before.query(`INSERT INTO merchants (name, created_at) VALUES ('Before', $1)`, [AT]);
      await before.query(
        `INSERT INTO stores (merchant_id, slug, name, locale, currency, is_default) VALUES (1, 'de', 'DE', 'de-DE', 'EUR', true)`,
      );
      await before.query(`INSERT INTO published_products (store_id, product_id, payload, price_hash, content_hash, exclusion_reason)
        SELECT 1, i, json_build_object('id', i, 'sku', 'OLD-' || i, 'ean', CASE WHEN i % 2 = 0 THEN '400' || i END,
          'exclusion_reason', CASE WHEN i % 10 = 0 THEN 'no_offers' END)::text, 'p', 'c', CASE WHEN i % 10 = 0 THEN 'no_offers' END
        FROM generate_series(1, 3000) AS i`);
      await before.query('DELETE FROM published_products WHERE product_id BETWEEN 1001 AND 1100');

      opened = openPostgresStorage(url);
      await opened.ready;
      expect(await opened.missingMigrations()).toEqual([]);
      expect(await opened.publishedCountsByExclusion(1)).toEqual({
        total: 2900,
        excluded: { manual: 0, missing_title: 0, no_offers: 290, out_of_stock: 0 },
      });
      expect(await opened.publishedBlocks(1)).toEqual([
        { block: 0, count: 1023 - 23 },
        { block: 1, count: 1024 - 77 },
        { block: 2, count: 3000 - 2047 },
      ]);
      const { rows } = await before.query(`SELECT count(*)::integer AS n FROM published_products
        WHERE sku IS NOT DISTINCT FROM payload::json ->> 'sku' AND ean IS NOT DISTINCT FROM payload::json ->> 'ean' AND sku IS NOT NULL`);
      expect(rows).toEqual([{ n: 2900 }]);
      expect((await opened.findPublishedProducts(1, { sku: 'OLD-2000', ean: '4002000' }, 10)).map((p) => p.id)).toEqual([2000]);
      // And counted once per statement from then on.
      await opened.deletePublished(1, [1, 2, 3, 10]);
      expect((await opened.publishedCountsByExclusion(1)).excluded.no_offers).toBe(289);
      expect((await opened.publishedBlocks(1))[0]).toEqual({ block: 0, count: 1023 - 23 - 4 });
    } finally {
      await opened?.close();
      await before.end();
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await admin.end();
    }
  }, 60_000);
});
