// Look-ups by SKU and EAN (GET /v1/products?sku=|ean=, GET /v1/prices?sku=|ean=) are index-bounded
// on both engines: at a catalog large enough that a scan would show (two stores of 20,000 products
// on SQLite, 10,000 on PostgreSQL), each statement reads the store's SKU or EAN index range per value
// and then at most the answer's rows, never a table of the catalog whole; a value that hundreds of
// products share reads no more payloads than one answer holds.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CatalogStorage } from '../../src/storage/port.js';
import type { PublishedKeys } from '../../src/storage/records.js';
import { createTestDatabase, onPglite, TEST_ENGINE, type TestDatabase } from '../support/engine.js';
import { postgresPlan, postgresRowsRead, recordStatements, sqlitePlan, statementsOf } from '../support/statement-plans.js';

const AT = '2026-11-30T08:00:00.000Z';
const PRODUCTS = TEST_ENGINE === 'sqlite' ? 20_000 : 10_000;
/** Products of the store that share one EAN: more than one answer may hold (201). */
const CROWD = 1000;
const CROWDED_EAN = '4099999000005';
const LIMIT = 201;

let dir: string;
let database: TestDatabase;
let storage: CatalogStorage;
let storeId: number;

const sku = (id: number) => `SKU-${id}`;
const ean = (id: number) => (id <= CROWD ? CROWDED_EAN : `40${String(id).padStart(11, '0')}`);
const payload = (id: number) =>
  JSON.stringify({ id, sku: sku(id), ean: ean(id), title: `Produkt ${id}`, excluded: false, exclusion_reason: null, prices: [] });

describe.skipIf(onPglite())('look-ups by SKU and EAN at catalog size', () => {
  beforeAll(async () => {
    recordStatements();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-key-lookups-'));
    database = await createTestDatabase(dir);
    storage = await database.open();
    const merchant = await storage.createMerchant({ name: 'Keys', sku_pattern: null, owner_emails: [], created_at: AT });
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
      for (let from = 1; from <= PRODUCTS; from += 2000) {
        await storage.upsertPublished(
          id,
          Array.from({ length: 2000 }, (_, i) => ({ productId: from + i, payload: payload(from + i), priceHash: 'p', contentHash: 'c' })),
        );
      }
    }
    // Statistics as a catalog of this size has them (the planners choose by them).
    if (TEST_ENGINE === 'postgres') {
      const client = new pg.Client(database.location);
      await client.connect();
      await client.query('VACUUM ANALYZE published_products');
      await client.end();
    } else {
      const db = new Database(database.location);
      db.exec('ANALYZE');
      db.close();
    }
  }, 300_000);

  afterAll(async () => {
    await storage?.close();
    await database?.drop();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  /** The one statement `read` runs, its plan, and (PostgreSQL) the rows it reads. */
  async function planOf(read: () => Promise<unknown>): Promise<{ plan: string; rowsRead?: number }> {
    const ran = await statementsOf(read);
    expect(ran.map((r) => r.sql.replace(/\s+/g, ' ').slice(0, 80))).toHaveLength(1);
    if (TEST_ENGINE === 'sqlite') return { plan: sqlitePlan(database.location, ran[0]!).join('\n') };
    return { plan: await postgresPlan(database.location, ran[0]!), rowsRead: await postgresRowsRead(database.location, ran[0]!) };
  }

  const lookups: [string, PublishedKeys][] = [
    ['SKUs', { field: 'sku', values: [sku(PRODUCTS - 7), sku(PRODUCTS / 2), sku(1500), 'NONE'] }],
    ['EANs', { field: 'ean', values: [ean(PRODUCTS - 7), ean(PRODUCTS / 2), ean(1500), '4000000000000'] }],
  ];

  it.each(lookups)('reads products by %s from their index range per value, never a scan of the store', async (_label, keys) => {
    const read = await storage.publishedPayloadsByKeys(storeId, keys, LIMIT);
    expect(read.count).toBe(3);
    expect(JSON.parse(`[${Buffer.from(read.bytes).toString('utf8')}]`).map((p: { id: number }) => p.id)).toEqual([
      1500,
      PRODUCTS / 2,
      PRODUCTS - 7,
    ]);
    for (const lookup of [
      () => storage.publishedPayloadsByKeys(storeId, keys, LIMIT),
      () => storage.publishedPricesByKeys(storeId, keys, LIMIT),
    ]) {
      const { plan, rowsRead } = await planOf(lookup);
      expectIndexBounded(plan, keys.field);
      if (rowsRead !== undefined) expect(rowsRead, plan).toBeLessThanOrEqual(20);
    }
  });

  it('reads no more payloads than one answer holds for a value a thousand products share', async () => {
    const keys: PublishedKeys = { field: 'ean', values: [CROWDED_EAN, ean(PRODUCTS - 7)] };
    const read = await storage.publishedPayloadsByKeys(storeId, keys, LIMIT);
    expect(read.count).toBe(LIMIT);
    const { plan, rowsRead } = await planOf(() => storage.publishedPayloadsByKeys(storeId, keys, LIMIT));
    expectIndexBounded(plan, 'ean');
    // PostgreSQL: each value's range is cut at the limit, so at most twice the answer is read.
    if (rowsRead !== undefined) expect(rowsRead, plan).toBeLessThanOrEqual(2 * LIMIT + 2);
    // SQLite: the matches' ids come from the index alone (covering), the payloads by primary key.
    if (TEST_ENGINE === 'sqlite') expect(plan).toMatch(/SEARCH published_products USING COVERING INDEX published_products_ean/);
  });

  function expectIndexBounded(plan: string, field: PublishedKeys['field']): void {
    if (TEST_ENGINE === 'sqlite') {
      expect(plan).toMatch(
        new RegExp(`SEARCH published_products USING (COVERING )?INDEX published_products_${field} \\(store_id=\\? AND ${field}=\\?\\)`),
      );
      // The payloads by primary key; nothing of the catalog scanned.
      expect(plan).toMatch(
        /SEARCH published_products USING (PRIMARY KEY|INDEX sqlite_autoindex_published_products_1) \(store_id=\? AND product_id=\?\)/,
      );
      expect(plan.split('\n').filter((line) => /SCAN published_products/.test(line))).toEqual([]);
    } else {
      expect(plan).toMatch(new RegExp(`Index (Only )?Scan using published_products_${field} on published_products`));
      expect(plan).not.toMatch(/Seq Scan on published_products|Bitmap Heap Scan on published_products/);
    }
  }
});
