// The change feed's positions come from a per-merchant sequencer: ids are the
// merchant's own (a cursor reveals nothing of other merchants), and positions follow commit order,
// so a poller following the feed while several connections write sees every change exactly once,
// in order, however many windows one second holds.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { readChangeFeed } from '../../src/changes/feed.js';
import type { CatalogStorage } from '../../src/storage/port.js';
import type { RecordedChange } from '../../src/changes/model.js';
import { migrations } from '../../src/storage/sqlite/migrations.js';
import { openSqliteStorage } from '../../src/storage/sqlite/index.js';

const dirs: string[] = [];
const freshFile = () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-sequencer-'));
  dirs.push(dir);
  return path.join(dir, 'catalog.db');
};
afterEach(() => {
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

const AT = '2026-11-26T08:00:00Z';
const STORE = { name: 'Store', locale: 'en-GB', currency: 'GBP', is_default: true, active: true, exclude_out_of_stock: false };

async function merchantWithStore(storage: CatalogStorage, name: string) {
  const merchant = await storage.createMerchant({ name, sku_pattern: null, owner_emails: [], created_at: AT });
  const store = await storage.upsertStore(merchant.id, 'main', STORE);
  return { merchantId: merchant.id, storeId: store.id };
}

const changesFor = (storeId: number, productIds: number[]): RecordedChange[] =>
  productIds.map((productId) => ({ storeId, productId, changeType: 'content' as const }));

describe('the per-merchant change sequencer', () => {
  it("numbers each merchant's changes from 1, whatever other merchants recorded", async () => {
    const storage = openSqliteStorage(freshFile());
    try {
      const busy = await merchantWithStore(storage, 'Busy');
      const quiet = await merchantWithStore(storage, 'New');
      await storage.transaction((tx) => tx.recordChanges(busy.merchantId, changesFor(busy.storeId, [1, 2, 3, 4, 5]), new Date(AT)));
      await storage.transaction((tx) => tx.recordChanges(quiet.merchantId, changesFor(quiet.storeId, [7]), new Date(AT)));
      const window = await readChangeFeed(storage, quiet.merchantId, 'main', {}, 100);
      expect(window.changes).toEqual([{ product_id: 7, change_type: 'content', created_at: AT }]);
      expect(window.next_id).toBe(1);
      expect((await readChangeFeed(storage, busy.merchantId, 'main', {}, 100)).next_id).toBe(5);
    } finally {
      await storage.close();
    }
  });

  it("keeps a merchant's created_at monotonic when the clock steps back", async () => {
    const storage = openSqliteStorage(freshFile());
    try {
      const m = await merchantWithStore(storage, 'M');
      await storage.transaction((tx) => tx.recordChanges(m.merchantId, changesFor(m.storeId, [1]), new Date('2026-11-26T08:00:09.900Z')));
      await storage.transaction((tx) => tx.recordChanges(m.merchantId, changesFor(m.storeId, [2]), new Date('2026-11-26T08:00:03Z')));
      const rows = await storage.changesAfter(m.storeId, { at: '1970-01-01T00:00:00Z', id: 0 }, 10);
      expect(rows.map((r) => [r.id, r.created_at])).toEqual([
        [1, '2026-11-26T08:00:09Z'],
        [2, '2026-11-26T08:00:09Z'],
      ]);
    } finally {
      await storage.close();
    }
  });

  it('gives a poller every change exactly once, in order, while several connections write inside one second', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.array(fc.integer({ min: 1, max: 4 }), { minLength: 1, maxLength: 6 }), { minLength: 2, maxLength: 3 }),
        fc.integer({ min: 1, max: 5 }),
        async (writerBatches, window) => {
          const file = freshFile();
          const storages = [openSqliteStorage(file)];
          try {
            const m = await merchantWithStore(storages[0]!, 'M');
            const other = await merchantWithStore(storages[0]!, 'Other');
            // One connection per writer (each storage has its own write connection on the file).
            for (let i = 1; i < writerBatches.length; i++) storages.push(openSqliteStorage(file));
            let nextProduct = 1;
            const written: number[] = [];
            let writing = true;
            const writers = writerBatches.map(async (batches, w) => {
              for (const size of batches) {
                const ids = Array.from({ length: size }, () => nextProduct++);
                await storages[w]!.transaction(async (tx) => {
                  await tx.recordChanges(other.merchantId, changesFor(other.storeId, ids), new Date(AT));
                  await new Promise((resolve) => setImmediate(resolve));
                  await tx.recordChanges(m.merchantId, changesFor(m.storeId, ids), new Date(AT));
                  await new Promise((resolve) => setImmediate(resolve));
                });
                written.push(...ids);
              }
            });
            const seen: number[] = [];
            const positions: number[] = [];
            let cursor: { since?: string; sinceId?: number } = {};
            const poll = async () => {
              const page = await readChangeFeed(storages[0]!, m.merchantId, 'main', cursor, window);
              seen.push(...page.changes.map((c) => c.product_id));
              if (page.changes.length > 0) positions.push(page.next_id);
              expect(page.changes.every((c) => c.created_at === AT)).toBe(true);
              cursor = { since: page.next_since, sinceId: page.next_id };
              return page.changes.length;
            };
            const poller = (async () => {
              while (writing) {
                await poll();
                await new Promise((resolve) => setImmediate(resolve));
              }
              while ((await poll()) > 0);
            })();
            await Promise.all(writers);
            writing = false;
            await poller;
            expect([...seen].sort((a, b) => a - b)).toEqual([...written].sort((a, b) => a - b));
            expect(new Set(seen).size).toBe(seen.length);
            expect(positions).toEqual([...positions].sort((a, b) => a - b));
            expect(positions.at(-1)).toBe(written.length);
          } finally {
            for (const storage of storages.reverse()) await storage.close();
          }
        },
      ),
      { numRuns: 15 },
    );
  });
});

describe('migration 10 (change sequences) on a database that has changes', () => {
  it("keeps recorded ids, so cursors integrators hold stay exact, and goes on from each merchant's largest", async () => {
    const file = freshFile();
    const db = new Database(file);
    db.exec('CREATE TABLE schema_migrations (id INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)');
    for (const migration of migrations.filter((m) => m.id < 10)) {
      db.exec(migration.sql);
      db.prepare('INSERT INTO schema_migrations VALUES (?, ?, ?)').run(migration.id, migration.name, AT);
    }
    db.exec(`INSERT INTO merchants (id, name, created_at) VALUES (1, 'A', '${AT}'), (2, 'B', '${AT}'), (3, 'C', '${AT}');
      INSERT INTO stores (id, merchant_id, slug, name, locale, currency, is_default, active) VALUES
        (1, 1, 'a', 'A', 'en-GB', 'GBP', 1, 1), (2, 2, 'b', 'B', 'en-GB', 'GBP', 1, 1);
      INSERT INTO changes (id, store_id, product_id, change_type, created_at) VALUES
        (10, 1, 1, 'price', '2026-11-26T07:00:00Z'), (11, 2, 5, 'content', '2026-11-26T07:00:01Z'),
        (12, 1, 2, 'price', '2026-11-26T07:00:02Z');
      INSERT INTO change_horizons (store_id, created_at, change_id) VALUES (2, '2026-11-26T07:00:05Z', 40);
      INSERT INTO change_clock (id, last_at) VALUES (1, '2026-11-26T07:00:05Z');
      UPDATE store_id_sequence SET last_id = 2;`);
    db.close();
    const storage = openSqliteStorage(file);
    try {
      expect(await storage.missingMigrations()).toEqual([]);
      expect((await storage.changesAfter(1, { at: '2026-11-26T07:00:00Z', id: 10 }, 10)).map((c) => c.id)).toEqual([12]);
      await storage.transaction(async (tx) => {
        await tx.recordChanges(1, changesFor(1, [3]), new Date(AT));
        await tx.recordChanges(2, changesFor(2, [6]), new Date(AT));
      });
      const c = await storage.upsertStore(3, 'c', STORE);
      await storage.transaction((tx) => tx.recordChanges(3, changesFor(c.id, [9]), new Date(AT)));
      const after = { at: '1970-01-01T00:00:00Z', id: 0 };
      expect((await storage.changesAfter(1, after, 10)).map((x) => x.id)).toEqual([10, 12, 13]);
      expect((await storage.changesAfter(2, after, 10)).map((x) => x.id)).toEqual([11, 41]);
      expect((await storage.changesAfter(c.id, after, 10)).map((x) => x.id)).toEqual([1]);
    } finally {
      await storage.close();
    }
  });
});
