// Changes (spec 2.6, 4.4), the change clock and retention horizons on SQLite.
import type { ChangeStore } from '../port.js';
import type { FeedPosition, RecordedChange, StoredChange } from '../../changes/model.js';
import { monotonicSecond } from '../../shared/time.js';
import type { SqliteConnection } from './connection.js';
import { inBatches, valueRows } from './batches.js';

export class SqliteChanges implements ChangeStore {
  static readonly writes = ['recordChanges', 'pruneChangesBefore'] as const;

  constructor(private readonly c: SqliteConnection) {}

  async recordChanges(merchantId: number, changes: RecordedChange[], now: Date): Promise<void> {
    if (changes.length === 0) return;
    // Transactions run one at a time on the write connection, so reading the merchant's sequence
    // and advancing it here hands out positions in commit order.
    const sequence = this.c.stmt('SELECT last_id, last_at FROM change_sequences WHERE merchant_id = ?').get(merchantId) as
      | { last_id: number; last_at: string }
      | undefined;
    const createdAt = monotonicSecond(now, sequence?.last_at);
    const firstId = (sequence?.last_id ?? 0) + 1;
    this.c
      .stmt(`INSERT INTO change_sequences (merchant_id, last_id, last_at) VALUES (?, ?, ?)
      ON CONFLICT (merchant_id) DO UPDATE SET last_id = excluded.last_id, last_at = excluded.last_at`)
      .run(merchantId, firstId + changes.length - 1, createdAt);
    // Up to ROWS_PER_STATEMENT rows a statement (batches.ts), each change numbered in its order.
    await inBatches(changes.length, (from, count) => {
      const values: unknown[] = [];
      for (let i = from; i < from + count; i++) {
        const change = changes[i]!;
        values.push(merchantId, firstId + i, change.storeId, change.productId, change.changeType, createdAt);
        this.c.changedStores.add(change.storeId);
      }
      this.c
        .stmt(`INSERT INTO changes (merchant_id, id, store_id, product_id, change_type, created_at) VALUES ${valueRows(count, 6)}`)
        .run(values);
    });
  }

  async changesAfter(storeId: number, after: FeedPosition, limit: number): Promise<StoredChange[]> {
    return this.c
      .stmt(`SELECT id, product_id, change_type, created_at FROM changes
      WHERE store_id = ? AND (created_at, id) > (?, ?) ORDER BY created_at, id LIMIT ?`)
      .all(storeId, after.at, after.id, limit) as StoredChange[];
  }

  async latestFeedPosition(merchantId: number): Promise<FeedPosition | undefined> {
    return this.c.stmt('SELECT last_at AS at, last_id AS id FROM change_sequences WHERE merchant_id = ?').get(merchantId) as
      | FeedPosition
      | undefined;
  }

  async changeHorizon(storeId: number): Promise<FeedPosition | undefined> {
    return this.c.stmt('SELECT created_at AS at, change_id AS id FROM change_horizons WHERE store_id = ?').get(storeId) as
      | FeedPosition
      | undefined;
  }

  async pruneChangesBefore(cutoff: string, limit: number): Promise<number> {
    // Change ids are per merchant: rows are picked by rowid.
    const rowids = this.c
      .stmt('SELECT rowid FROM changes WHERE created_at < ? ORDER BY created_at, merchant_id, id LIMIT ?')
      .pluck()
      .all(cutoff, limit) as number[];
    if (rowids.length === 0) return 0;
    const list = JSON.stringify(rowids);
    // A store's changes all belong to one merchant, so its newest pruned position is its max(created_at, id).
    this.c
      .stmt(`INSERT INTO change_horizons (store_id, created_at, change_id)
        SELECT store_id, max(created_at), max(id) FROM changes WHERE rowid IN (SELECT value FROM json_each(?)) GROUP BY store_id
      ON CONFLICT (store_id) DO UPDATE SET created_at = excluded.created_at, change_id = excluded.change_id
        WHERE (excluded.created_at, excluded.change_id) > (change_horizons.created_at, change_horizons.change_id)`)
      .run(list);
    this.c.stmt('DELETE FROM changes WHERE rowid IN (SELECT value FROM json_each(?))').run(list);
    return rowids.length;
  }
}
