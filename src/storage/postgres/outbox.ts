// The webhook outbox on PostgreSQL: sql/outbox.ts, its rows inserted in one statement that wakes
// the dispatchers of every process at COMMIT.
import type { OutboxRow, OutboxWindowGroup } from '../records.js';
import { groupWindowRecords, SqlOutbox, type OutboxWindowRecord } from '../sql/outbox.js';
import type { PgConnection } from './connection.js';
import { DELIVERY_WORK_CHANNEL } from './deliveries.js';

/** Outbox rows a step of the window's walk reads (PgOutbox.outboxWindow). */
const WINDOW_PAGE_ROWS = 32;

export class PgOutbox extends SqlOutbox<PgConnection> {
  /**
   * sql/outbox.ts's window, walked a page of rows at a time until the pages carry `window` changes:
   * a row carries an import chunk's products (a hundred or so), so reading `window` rows, as the
   * shared statement does, read the whole outbox of a large import on every pass (3.5 ms for 19 rows).
   */
  override async outboxWindow(window: number, afterId = 0): Promise<OutboxWindowGroup[]> {
    const rows = await this.c.preparedRows<OutboxWindowRecord>(
      'outbox.window',
      `WITH RECURSIVE page (last_id, total) AS (
          SELECT $2::bigint, 0::bigint
        UNION ALL
          SELECT p.last_id, page.total + p.total FROM page CROSS JOIN LATERAL (
            SELECT max(id) AS last_id, sum(product_count) AS total
            FROM (SELECT id, product_count FROM webhook_outbox WHERE id > page.last_id ORDER BY id LIMIT ${WINDOW_PAGE_ROWS}) AS rows) AS p
          WHERE page.total < $1 AND p.last_id IS NOT NULL)
      SELECT id, "endpointId", event, "storeId", "productIds", "createdAt" FROM (
        SELECT id, endpoint_id AS "endpointId", event, store_id AS "storeId", product_ids AS "productIds", created_at AS "createdAt",
          sum(product_count) OVER (ORDER BY id) - product_count AS before
        FROM webhook_outbox WHERE id > $2 AND id <= (SELECT max(last_id) FROM page) ORDER BY id) AS counted
      WHERE before < $1 ORDER BY id`,
      [window, afterId],
    );
    return groupWindowRecords(rows);
  }

  async insertOutbox(rows: OutboxRow[]): Promise<void> {
    if (rows.length === 0) return;
    // One statement; unnest keeps the rows' order, so ids follow arrival order. It wakes the
    // dispatchers at commit itself (pg_notify: no NOTIFY round trip after it).
    await this.c.preparedRun(
      'outbox.insert',
      `WITH inserted AS (
        INSERT INTO webhook_outbox (endpoint_id, event, store_id, product_ids, product_count, created_at)
        SELECT * FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::text[], $5::integer[], $6::text[]) RETURNING 1)
      SELECT pg_notify('${DELIVERY_WORK_CHANNEL}', '') WHERE EXISTS (SELECT 1 FROM inserted)`,
      [
        rows.map((r) => r.endpointId),
        rows.map((r) => r.event),
        rows.map((r) => r.storeId),
        rows.map((r) => JSON.stringify(r.productIds)),
        rows.map((r) => r.productIds.length),
        rows.map((r) => r.createdAt),
      ],
    );
  }
}
