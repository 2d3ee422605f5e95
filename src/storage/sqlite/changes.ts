// Changes (spec 2.6, 4.4), the change clock and retention horizons on SQLite.
import type { ChangeStore } from '../port.js';
import type { ChangeRow, FeedPosition, StoredChange } from '../records.js';
import type { SqliteConnection } from './connection.js';

export class SqliteChanges implements ChangeStore {
  static readonly writes = ['recordChanges', 'setLastChangeAt', 'pruneChangesBefore'] as const;

  constructor(private readonly c: SqliteConnection) {}

  async recordChanges(rows: ChangeRow[]): Promise<void> {
    const insert = this.c.stmt('INSERT INTO changes (store_id, product_id, change_type, created_at) VALUES (?, ?, ?, ?)');
    for (const row of rows) insert.run(row.storeId, row.productId, row.changeType, row.createdAt);
  }

  async lastChangeAt(): Promise<string | undefined> {
    return this.c.stmt('SELECT last_at FROM change_clock WHERE id = 1').pluck().get() as string | undefined;
  }

  async setLastChangeAt(at: string): Promise<void> {
    this.c.stmt('INSERT INTO change_clock (id, last_at) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET last_at = excluded.last_at').run(at);
  }

  async changesAfter(storeId: number, after: FeedPosition, limit: number): Promise<StoredChange[]> {
    return this.c.stmt(`SELECT id, product_id, change_type, created_at FROM changes
      WHERE store_id = ? AND (created_at, id) > (?, ?) ORDER BY created_at, id LIMIT ?`)
      .all(storeId, after.at, after.id, limit) as StoredChange[];
  }

  async changeHorizon(storeId: number): Promise<FeedPosition | undefined> {
    return this.c.stmt('SELECT created_at AS at, change_id AS id FROM change_horizons WHERE store_id = ?')
      .get(storeId) as FeedPosition | undefined;
  }

  async pruneChangesBefore(cutoff: string, limit: number): Promise<number> {
    const ids = this.c.stmt('SELECT id FROM changes WHERE created_at < ? ORDER BY created_at, id LIMIT ?')
      .pluck().all(cutoff, limit) as number[];
    if (ids.length === 0) return 0;
    const list = JSON.stringify(ids);
    this.c.stmt(`INSERT INTO change_horizons (store_id, created_at, change_id)
        SELECT store_id, created_at, max(id) FROM changes WHERE id IN (SELECT value FROM json_each(?)) GROUP BY store_id
      ON CONFLICT (store_id) DO UPDATE SET created_at = excluded.created_at, change_id = excluded.change_id
        WHERE (excluded.created_at, excluded.change_id) > (change_horizons.created_at, change_horizons.change_id)`).run(list);
    this.c.stmt('DELETE FROM changes WHERE id IN (SELECT value FROM json_each(?))').run(list);
    return ids.length;
  }
}
