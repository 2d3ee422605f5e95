// The webhook outbox, written once for both engines (dialect.ts): one row per (subscribed endpoint,
// change), written with the change. Its insert wakes the dispatchers each engine's own way:
// SqliteOutbox, PgOutbox.
import type { OutboxStore } from '../port.js';
import type { OutboxGroup, OutboxRow } from '../records.js';
import type { SqlConnection } from './dialect.js';

export abstract class SqlOutbox<C extends SqlConnection = SqlConnection> implements OutboxStore {
  static readonly writes = ['insertOutbox', 'deleteOutboxRows'] as const;

  constructor(protected readonly c: C) {}

  abstract insertOutbox(rows: OutboxRow[]): Promise<void>;

  async outboxGroups(window?: number): Promise<OutboxGroup[]> {
    // The oldest `window` rows from the primary key (all without it), grouped.
    return this.c.rows<OutboxGroup & Record<string, unknown>>(
      `SELECT endpoint_id AS "endpointId", event, store_id AS "storeId",
        CAST(count(*) AS integer) AS count, min(created_at) AS "oldestAt"
      FROM (SELECT id, endpoint_id, event, store_id, created_at FROM webhook_outbox ORDER BY id${window === undefined ? '' : ' LIMIT $1'}) AS oldest
      GROUP BY endpoint_id, event, store_id ORDER BY endpoint_id, min(id)`,
      window === undefined ? [] : [window],
    );
  }

  async outboxRows(
    group: Pick<OutboxGroup, 'endpointId' | 'event' | 'storeId'>,
    limit: number,
  ): Promise<{ id: number; productId: number; createdAt: string }[]> {
    // A coalescer locks the rows it batches, and another one skips them (PostgreSQL): no outbox row
    // goes into two deliveries however many dispatchers coalesce at once.
    return this.c.rows(
      `SELECT id, product_id AS "productId", created_at AS "createdAt" FROM webhook_outbox
      WHERE endpoint_id = $1 AND event = $2 AND store_id IS NOT DISTINCT FROM ${this.c.dialect.typed('$3', 'bigint')} ORDER BY id LIMIT $4
      ${this.c.locksRows ? 'FOR UPDATE SKIP LOCKED' : ''}`,
      [group.endpointId, group.event, group.storeId, limit],
    );
  }

  async deleteOutboxRows(ids: number[]): Promise<void> {
    if (ids.length === 0) return;
    await this.c.run(`DELETE FROM webhook_outbox WHERE ${this.c.dialect.inList('id', '$1', 'bigint')}`, [this.c.dialect.list(ids)]);
  }
}
