// A window of a store's feed walks the feed index from the cursor on PostgreSQL whatever the
// table's statistics say: on a table never analyzed (a new database's first import, read before
// autovacuum reaches it) the planner's guess for any store was fewer rows than a window, and it
// sorted every change of the store after the cursor for each window.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CatalogStorage } from '../../src/storage/port.js';
import { createTestDatabase, type TestDatabase } from '../support/engine.js';
import { postgresNestedPlans, recordStatements, statementsOf } from '../support/statement-plans.js';

const AT = '2026-11-29T08:00:00.000Z';
const STORES = ['de', 'pl', 'uk'];
/** Products of the import: a change per product in each store, a store's changes beside the others'. */
const PRODUCTS = 20_000;
const WINDOW = 1000;

let dir: string;
let database: TestDatabase;
let storage: CatalogStorage;
let storeIds: number[];

async function sql<T extends pg.QueryResultRow>(text: string): Promise<T[]> {
  const client = new pg.Client(database.location);
  await client.connect();
  try {
    return (await client.query<T>(text)).rows;
  } finally {
    await client.end();
  }
}

describe('the feed window on a table never analyzed (postgres)', () => {
  beforeAll(async () => {
    recordStatements();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-feed-window-'));
    database = await createTestDatabase(dir);
    storage = await database.open();
    // The state a new database's first import leaves until autovacuum analyzes the table.
    await sql('ALTER TABLE changes SET (autovacuum_enabled = off)');
    const merchantId = (await storage.createMerchant({ name: 'Onboarding', sku_pattern: null, owner_emails: [], created_at: AT })).id;
    storeIds = [];
    for (const slug of STORES) {
      const store = await storage.upsertStore(merchantId, slug, {
        name: slug.toUpperCase(),
        locale: 'de-DE',
        currency: 'EUR',
        is_default: slug === 'de',
        active: true,
        exclude_out_of_stock: false,
      });
      storeIds.push(store.id);
    }
    // As an import records them: a chunk of 500 products at a time, each product's change in every store.
    for (let first = 1; first <= PRODUCTS; first += 500) {
      const changes = Array.from({ length: 500 }, (_, i) =>
        storeIds.map((storeId) => ({ storeId, productId: first + i, changeType: 'content' as const })),
      ).flat();
      await storage.transaction((tx) => tx.recordChanges(merchantId, changes, new Date(Date.parse(AT) + first * 10)));
    }
  });

  afterAll(async () => {
    await storage?.close();
    await database?.drop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("reads each window in the feed index's order, a window's rows and no more, before the table has statistics", async () => {
    const [table] = await sql<{ reltuples: number }>("SELECT reltuples FROM pg_class WHERE relname = 'changes'");
    expect(table!.reltuples).toBe(-1);
    const storeId = storeIds[1]!;
    for (const from of [
      { at: '1970-01-01T00:00:00Z', id: 0 },
      { at: new Date(Date.parse(AT) + PRODUCTS * 5).toISOString().replace(/\.\d+Z$/, 'Z'), id: 0 },
    ]) {
      let window: Awaited<ReturnType<CatalogStorage['changesAfter']>> = [];
      const [statement] = await statementsOf(async () => {
        window = await storage.changesAfter(storeId, from, WINDOW);
      });
      expect(window).toHaveLength(WINDOW);
      expect(window.every((change, i) => i === 0 || change.id > window[i - 1]!.id)).toBe(true);
      const plans = await postgresNestedPlans(database.location, statement!);
      const plan = plans.find((p) => /FROM changes/.test(p));
      expect(plan, plans.join('\n---\n')).toMatch(/Index (Only )?Scan using changes_feed on changes/);
      expect(plan).not.toMatch(/Sort|Bitmap/);
      // The index walk stops at the window: its scan returns the window's rows, not the store's tail.
      expect(Number(/Scan using changes_feed on changes.*?actual time=\S+ rows=(\d+)/.exec(plan!)?.[1])).toBe(WINDOW);
    }
  });
});
