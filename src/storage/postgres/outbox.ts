// The webhook outbox on PostgreSQL: sql/outbox.ts, its rows inserted in one statement that wakes
// the dispatchers of every process at COMMIT.
import type { OutboxRow } from '../records.js';
import { SqlOutbox } from '../sql/outbox.js';
import type { PgConnection } from './connection.js';
import { DELIVERY_WORK_CHANNEL } from './deliveries.js';

export class PgOutbox extends SqlOutbox<PgConnection> {
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
