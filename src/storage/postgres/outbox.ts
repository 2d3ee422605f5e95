// The webhook outbox on PostgreSQL: one row per (subscribed endpoint, change), written with the change.
import type { OutboxStore } from '../port.js';
import type { OutboxGroup, OutboxRow } from '../records.js';
import type { PgConnection } from './connection.js';
import { DELIVERY_WORK_CHANNEL } from './deliveries.js';

export class PgOutbox implements OutboxStore {
  static readonly writes = ['insertOutbox', 'deleteOutboxRows'] as const;

  constructor(private readonly c: PgConnection) {}

  async insertOutbox(rows: OutboxRow[]): Promise<void> {
    if (rows.length === 0) return;
    // One statement; unnest keeps the rows' order, so ids follow arrival order. It wakes the
    // dispatchers at commit itself (pg_notify: no NOTIFY round trip after it).
    await this.c.run(`WITH inserted AS (
        INSERT INTO webhook_outbox (endpoint_id, event, store_id, product_id, created_at)
        SELECT * FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::bigint[], $5::text[]) RETURNING 1)
      SELECT pg_notify('${DELIVERY_WORK_CHANNEL}', '') WHERE EXISTS (SELECT 1 FROM inserted)`, [
      rows.map((r) => r.endpointId), rows.map((r) => r.event), rows.map((r) => r.storeId), rows.map((r) => r.productId),
      rows.map((r) => r.createdAt),
    ]);
  }

  async outboxGroups(window?: number): Promise<OutboxGroup[]> {
    // The oldest `window` rows from the primary key (all without it: LIMIT NULL), grouped.
    return this.c.rows<OutboxGroup & Record<string, unknown>>(`SELECT endpoint_id AS "endpointId", event, store_id AS "storeId",
        count(*)::integer AS count, min(created_at) AS "oldestAt"
      FROM (SELECT id, endpoint_id, event, store_id, created_at FROM webhook_outbox ORDER BY id LIMIT $1) AS oldest
      GROUP BY endpoint_id, event, store_id ORDER BY endpoint_id, min(id)`, [window ?? null]);
  }

  async outboxRows(group: Pick<OutboxGroup, 'endpointId' | 'event' | 'storeId'>, limit: number): Promise<{ id: number; productId: number; createdAt: string }[]> {
    // A coalescer locks the rows it batches, and another one skips them: no outbox row goes into
    // two deliveries however many dispatchers coalesce at once.
    return this.c.rows(`SELECT id, product_id AS "productId", created_at AS "createdAt" FROM webhook_outbox
      WHERE endpoint_id = $1 AND event = $2 AND store_id IS NOT DISTINCT FROM $3::bigint ORDER BY id LIMIT $4
      ${this.c.inWriteTransaction ? 'FOR UPDATE SKIP LOCKED' : ''}`, [group.endpointId, group.event, group.storeId, limit]);
  }

  async deleteOutboxRows(ids: number[]): Promise<void> {
    if (ids.length === 0) return;
    await this.c.run('DELETE FROM webhook_outbox WHERE id = ANY($1::bigint[])', [ids]);
  }
}
