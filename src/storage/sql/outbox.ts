// The webhook outbox, written once for both engines (dialect.ts): one row per (subscribed endpoint,
// change), written with the change. Its insert wakes the dispatchers each engine's own way:
// SqliteOutbox, PgOutbox.
import type { OutboxStore } from '../port.js';
import type { ChangeType } from '../../changes/model.js';
import type { OutboxEntry, OutboxGroup, OutboxRow, OutboxWindowGroup } from '../records.js';
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

  async outboxWindow(window: number, afterId = 0): Promise<OutboxWindowGroup[]> {
    // The oldest rows from the primary key, the group by in the caller (one statement, no sort).
    const rows = await this.c.rows<{
      id: number;
      endpointId: number;
      event: ChangeType;
      storeId: number | null;
      productId: number;
      createdAt: string;
    }>(
      `SELECT id, endpoint_id AS "endpointId", event, store_id AS "storeId", product_id AS "productId", created_at AS "createdAt"
      FROM webhook_outbox WHERE id > $2 ORDER BY id LIMIT $1`,
      [window, afterId],
    );
    return groupWindow(
      rows.map((r) => [
        Number(r.id),
        Number(r.endpointId),
        r.event,
        r.storeId === null ? null : Number(r.storeId),
        Number(r.productId),
        r.createdAt,
      ]),
    );
  }

  async holdOutboxRows(ids: number[]): Promise<number[]> {
    // Only PostgreSQL has other writers meanwhile: a row another coalescer holds (or has deleted) is left out.
    if (!this.c.locksRows || ids.length === 0) return ids;
    const held = await this.c.rows<{ id: number }>(
      `SELECT id FROM webhook_outbox WHERE ${this.c.dialect.inList('id', '$1', 'bigint')} FOR UPDATE SKIP LOCKED`,
      [this.c.dialect.list(ids)],
    );
    return held.map((r) => Number(r.id));
  }

  async deleteOutboxRows(ids: number[]): Promise<void> {
    if (ids.length === 0) return;
    await this.c.run(`DELETE FROM webhook_outbox WHERE ${this.c.dialect.inList('id', '$1', 'bigint')}`, [this.c.dialect.list(ids)]);
  }
}

/** A window row as [id, endpoint_id, event, store_id, product_id, created_at], in id order. */
export type OutboxWindowRow = [number, number, ChangeType, number | null, number, string];

/** The window's rows grouped as outboxGroups groups them: by endpoint id, then by each group's oldest row. */
export function groupWindow(rows: OutboxWindowRow[]): OutboxWindowGroup[] {
  const groups = new Map<string, OutboxWindowGroup>();
  for (const [id, endpointId, event, storeId, productId, createdAt] of rows) {
    const key = `${endpointId}:${event}:${storeId}`;
    let group = groups.get(key);
    if (!group) {
      group = { endpointId, event, storeId, count: 0, oldestAt: createdAt, rows: [] };
      groups.set(key, group);
    }
    const entry: OutboxEntry = { id, productId, createdAt };
    group.rows.push(entry);
    group.count++;
    if (createdAt < group.oldestAt) group.oldestAt = createdAt;
  }
  // Map order is each group's first (oldest) row: a stable sort by endpoint keeps it within one.
  return [...groups.values()].sort((a, b) => a.endpointId - b.endpointId);
}
