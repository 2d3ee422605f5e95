// Changes (spec 2.6, 4.4), the per-merchant sequencer and retention horizons on PostgreSQL.
import type { ChangeStore, StoreChangeWindow } from '../port.js';
import type { FeedPosition, RecordedChange, StoredChange } from '../../changes/model.js';
import { wholeSecondIso } from '../../shared/time.js';
import { toStoreChangeWindow } from '../sql/change-windows.js';
import { STORE_COLUMNS } from '../sql/tenancy.js';
import type { PgConnection } from './connection.js';
import { integerArray, textArray } from './json-texts.js';
import { CHANGES_CHANNEL, changedStoresPayload } from './wakeups.js';

/**
 * The store, its horizon and the window after the cursor ($2, $3; after the horizon when null, or
 * after '' : every change) in one statement: one snapshot (feed_window is STABLE: it reads the
 * calling statement's), so no pruning can commit between the horizon and the window. Nothing is
 * read past the store's row when it is inactive or the cursor is before its horizon.
 */
const WINDOW_OF_STORE_SQL = (which: string) => `SELECT ${STORE_COLUMNS.map((column) => `s.${column}`).join(', ')},
    h.created_at AS horizon_at, h.change_id AS horizon_id,
    (SELECT json_agg(json_build_array(w.id, w.product_id, w.change_type, w.created_at) ORDER BY w.created_at, w.id)
      FROM feed_window(s.id, coalesce($2::text, h.created_at, ''), coalesce($3::bigint, h.change_id, 0),
        CASE WHEN s.active AND NOT coalesce(($2::text, $3::bigint) < (h.created_at, h.change_id), false) THEN $4::bigint ELSE 0 END) AS w
    ) AS changes
  FROM stores AS s LEFT JOIN change_horizons AS h ON h.store_id = s.id
  WHERE s.merchant_id = $1 AND ${which}`;

export class PgChanges implements ChangeStore {
  static readonly writes = ['recordChanges', 'pruneChangesBefore'] as const;

  constructor(private readonly c: PgConnection) {}

  async recordChanges(merchantId: number, changes: RecordedChange[], now: Date): Promise<void> {
    if (changes.length === 0) return;
    // One statement: advancing the merchant's sequencer row takes its row lock, held to COMMIT, so
    // another transaction of the merchant waits here and gets the positions after these: positions
    // follow commit order, and created_at never goes back (greatest) whatever the clocks say.
    // It wakes the live feed's waiting clients of these stores, in every process, at COMMIT
    // (pg_notify: no NOTIFY round trip after it).
    await this.c.run(
      `WITH sequence AS (
        INSERT INTO change_sequences AS s (merchant_id, last_id, last_at) VALUES ($1, $2, $3)
        ON CONFLICT (merchant_id) DO UPDATE SET last_id = s.last_id + excluded.last_id, last_at = greatest(s.last_at, excluded.last_at)
        RETURNING last_id, last_at),
      inserted AS (
        INSERT INTO changes (merchant_id, id, store_id, product_id, change_type, created_at)
          SELECT $1, sequence.last_id - $2 + change.ordinal, change.store_id, change.product_id, change.change_type, sequence.last_at
          FROM sequence, unnest($4::bigint[], $5::bigint[], $6::text[]) WITH ORDINALITY AS change (store_id, product_id, change_type, ordinal))
      SELECT pg_notify('${CHANGES_CHANNEL}', $7)`,
      [
        merchantId,
        changes.length,
        wholeSecondIso(now),
        integerArray(changes.map((c) => c.storeId)),
        integerArray(changes.map((c) => c.productId)),
        textArray(changes.map((c) => c.changeType)),
        changedStoresPayload(changes.map((c) => c.storeId)),
      ],
    );
  }

  async changesAfter(storeId: number, after: FeedPosition, limit: number): Promise<StoredChange[]> {
    // feed_window (migration 57): the window in changes_feed's order, never a sort of the store's tail.
    return this.c.rows<StoredChange & Record<string, unknown>>(
      'SELECT id, product_id, change_type, created_at FROM feed_window($1, $2, $3, $4)',
      [storeId, after.at, after.id, limit],
    );
  }

  async latestFeedPosition(merchantId: number): Promise<FeedPosition | undefined> {
    return this.c.one<FeedPosition & Record<string, unknown>>(
      'SELECT last_at AS at, last_id AS id FROM change_sequences WHERE merchant_id = $1',
      [merchantId],
    );
  }

  async changeHorizon(storeId: number): Promise<FeedPosition | undefined> {
    return this.c.one<FeedPosition & Record<string, unknown>>(
      'SELECT created_at AS at, change_id AS id FROM change_horizons WHERE store_id = $1',
      [storeId],
    );
  }

  async changeWindowOfStore(
    merchantId: number,
    slug: string | undefined,
    after: FeedPosition | undefined,
    limit: number,
  ): Promise<StoreChangeWindow> {
    // Prepared: the feed's poll is one of the hottest reads.
    const row = await this.c.prepared(
      slug === undefined ? 'changeWindowOfDefaultStore' : 'changeWindowOfStore',
      WINDOW_OF_STORE_SQL(slug === undefined ? 's.is_default' : 's.slug = $5'),
      [merchantId, after?.at ?? null, after?.id ?? null, limit, ...(slug === undefined ? [] : [slug])],
    );
    return toStoreChangeWindow(row, row?.changes);
  }

  async pruneChangesBefore(cutoff: string, limit: number): Promise<number> {
    // A store's changes all belong to one merchant, whose ids and times both grow: its newest pruned
    // position is (max(created_at), max(id)) of what is deleted.
    const row = await this.c.one<{ n: number }>(
      `WITH doomed AS (
        SELECT ctid AS row, store_id, created_at, id FROM changes WHERE created_at < $1 ORDER BY created_at, merchant_id, id LIMIT $2),
      horizon AS (
        INSERT INTO change_horizons AS h (store_id, created_at, change_id)
          SELECT store_id, max(created_at), max(id) FROM doomed GROUP BY store_id
        ON CONFLICT (store_id) DO UPDATE SET created_at = excluded.created_at, change_id = excluded.change_id
          WHERE (excluded.created_at, excluded.change_id) > (h.created_at, h.change_id)),
      deleted AS (
        -- By row address (a TID scan): the batch's rows, whatever the planner guesses of the table's size.
        DELETE FROM changes WHERE ctid = ANY(ARRAY(SELECT row FROM doomed)) RETURNING 1)
      SELECT count(*) AS n FROM deleted`,
      [cutoff, limit],
    );
    return row!.n;
  }
}
