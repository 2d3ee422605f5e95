// Changes (spec 2.6, 4.4), the change clock and retention horizons on SQLite.
import type { ChangeStore, StoreChangeWindow } from '../port.js';
import type { FeedPosition, RecordedChange, StoredChange } from '../../changes/model.js';
import { monotonicSecond } from '../../shared/time.js';
import { toStoreChangeWindow } from '../sql/change-windows.js';
import { STORE_COLUMNS } from '../sql/tenancy.js';
import type { Row } from '../rows.js';
import type { SqliteConnection } from './connection.js';
import { inBatches, valueRows } from './batches.js';

/**
 * The store, its horizon and the window after the cursor (after the horizon when none, or after '':
 * every change) in one statement, so one read transaction: no pruning commits between the horizon
 * and the window. Nothing is read past the store's row when it is inactive or the cursor is before
 * its horizon.
 */
const WINDOW_OF_STORE_SQL = (which: string) => `SELECT ${STORE_COLUMNS.map((column) => `s.${column}`).join(', ')},
    h.created_at AS horizon_at, h.change_id AS horizon_id,
    (SELECT json_group_array(json_array(w.id, w.product_id, w.change_type, w.created_at) ORDER BY w.created_at, w.id)
      FROM (SELECT id, product_id, change_type, created_at FROM changes
        WHERE store_id = s.id AND (created_at, id) > (coalesce(@afterAt, h.created_at, ''), coalesce(@afterId, h.change_id, 0))
          AND s.active AND NOT coalesce((@afterAt, @afterId) < (h.created_at, h.change_id), 0)
        ORDER BY created_at, id LIMIT @limit) AS w
    ) AS changes
  FROM stores AS s LEFT JOIN change_horizons AS h ON h.store_id = s.id
  WHERE s.merchant_id = @merchantId AND ${which}`;

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

  async changeWindowOfStore(
    merchantId: number,
    slug: string | undefined,
    after: FeedPosition | undefined,
    limit: number,
  ): Promise<StoreChangeWindow> {
    const row = this.c.stmt(WINDOW_OF_STORE_SQL(slug === undefined ? 's.is_default' : 's.slug = @slug')).get({
      merchantId,
      afterAt: after?.at ?? null,
      afterId: after?.id ?? null,
      limit,
      ...(slug === undefined ? {} : { slug }),
    }) as Row | undefined;
    return toStoreChangeWindow(row, row?.changes);
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
