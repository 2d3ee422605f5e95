// The webhook outbox, written once for both engines (dialect.ts): one row per (write, subscribed
// endpoint, event, store), carrying the products the write changed, written with the changes. Its insert wakes the dispatchers each engine's own way:
// SqliteOutbox, PgOutbox.
import type { OutboxStore } from '../port.js';
import type { ChangeType } from '../../changes/model.js';
import type { OutboxEntry, OutboxGroup, OutboxRow, OutboxWindowGroup } from '../records.js';
import type { SqlConnection } from './dialect.js';

export abstract class SqlOutbox<C extends SqlConnection = SqlConnection> implements OutboxStore {
  static readonly writes = ['insertOutbox', 'deleteOutboxRows', 'trimOutboxRows'] as const;

  constructor(protected readonly c: C) {}

  abstract insertOutbox(rows: OutboxRow[]): Promise<void>;

  async outboxGroups(window?: number): Promise<OutboxGroup[]> {
    // The oldest `window` rows from the primary key (all without it), grouped.
    return this.c.rows<OutboxGroup & Record<string, unknown>>(
      `SELECT endpoint_id AS "endpointId", event, store_id AS "storeId",
        CAST(sum(product_count) AS integer) AS count, min(created_at) AS "oldestAt"
      FROM (SELECT id, endpoint_id, event, store_id, product_count, created_at FROM webhook_outbox ORDER BY id${window === undefined ? '' : ' LIMIT $1'}) AS oldest
      GROUP BY endpoint_id, event, store_id ORDER BY endpoint_id, min(id)`,
      window === undefined ? [] : [window],
    );
  }

  async outboxRows(
    group: Pick<OutboxGroup, 'endpointId' | 'event' | 'storeId'>,
    limit: number,
  ): Promise<{ id: number; productId: number; createdAt: string }[]> {
    // A row carries one product at least: `limit` rows carry `limit` changes at least.
    const rows = await this.c.rows<{ id: number; productIds: string; createdAt: string }>(
      `SELECT id, product_ids AS "productIds", created_at AS "createdAt" FROM webhook_outbox
      WHERE endpoint_id = $1 AND event = $2 AND store_id IS NOT DISTINCT FROM ${this.c.dialect.typed('$3', 'bigint')} ORDER BY id LIMIT $4
      ${this.c.locksRows ? 'FOR UPDATE SKIP LOCKED' : ''}`,
      [group.endpointId, group.event, group.storeId, limit],
    );
    return rows
      .flatMap((r) => (JSON.parse(r.productIds) as number[]).map((productId) => ({ id: Number(r.id), productId, createdAt: r.createdAt })))
      .slice(0, limit);
  }

  async outboxWindow(window: number, afterId = 0): Promise<OutboxWindowGroup[]> {
    // The oldest rows from the primary key, up to `window` changes (the rows before them carry fewer),
    // the group by in the caller (one statement, no sort).
    const rows = await this.c.rows<OutboxWindowRecord>(
      `SELECT id, "endpointId", event, "storeId", "productIds", "createdAt" FROM (
        SELECT id, endpoint_id AS "endpointId", event, store_id AS "storeId", product_ids AS "productIds", created_at AS "createdAt",
          sum(product_count) OVER (ORDER BY id) - product_count AS before
        FROM (SELECT * FROM webhook_outbox WHERE id > $2 ORDER BY id LIMIT $1) AS oldest) AS counted
      WHERE before < $1 ORDER BY id`,
      [window, afterId],
    );
    return groupWindowRecords(rows);
  }

  async holdOutboxRows(rows: OutboxEntry[]): Promise<OutboxEntry[]> {
    // Only PostgreSQL has other writers meanwhile: a row another coalescer holds (or has deleted) is
    // left out, and one it trimmed after the window was read is taken as it is now (a row locked
    // FOR UPDATE is its latest committed version), not with the products that coalescer batched.
    if (!this.c.locksRows || rows.length === 0) return rows;
    const held = await this.c.rows<{ id: number; productIds: string }>(
      `SELECT id, product_ids AS "productIds" FROM webhook_outbox WHERE ${this.c.dialect.inList('id', '$1', 'bigint')} FOR UPDATE SKIP LOCKED`,
      [this.c.dialect.list(rows.map((r) => r.id))],
    );
    const now = new Map(held.map((r) => [Number(r.id), r.productIds]));
    return rows.flatMap((row) => {
      const productIds = now.get(row.id);
      if (productIds === undefined) return [];
      const current = JSON.parse(productIds) as number[];
      return [current.length === row.productIds.length ? row : { ...row, productIds: current }];
    });
  }

  async deleteOutboxRows(ids: number[]): Promise<void> {
    if (ids.length === 0) return;
    await this.c.run(`DELETE FROM webhook_outbox WHERE ${this.c.dialect.inList('id', '$1', 'bigint')}`, [this.c.dialect.list(ids)]);
  }

  async trimOutboxRows(rows: { id: number; productIds: number[] }[]): Promise<void> {
    for (const row of rows) {
      await this.c.run('UPDATE webhook_outbox SET product_ids = $2, product_count = $3 WHERE id = $1', [
        row.id,
        JSON.stringify(row.productIds),
        row.productIds.length,
      ]);
    }
  }
}

/** A window row as [id, endpoint_id, event, store_id, product_ids (JSON), created_at], in id order. */
export type OutboxWindowRow = [number, number, ChangeType, number | null, string, string];

/** A window row as a statement names its columns (ids as the driver gives them). */
export type OutboxWindowRecord = {
  id: number;
  endpointId: number;
  event: ChangeType;
  storeId: number | null;
  productIds: string;
  createdAt: string;
};

/** groupWindow of rows as a statement names them. */
export function groupWindowRecords(rows: OutboxWindowRecord[]): OutboxWindowGroup[] {
  return groupWindow(
    rows.map((r) => [
      Number(r.id),
      Number(r.endpointId),
      r.event,
      r.storeId === null ? null : Number(r.storeId),
      r.productIds,
      r.createdAt,
    ]),
  );
}

/** The window's rows grouped as outboxGroups groups them: by endpoint id, then by each group's oldest row. */
export function groupWindow(rows: OutboxWindowRow[]): OutboxWindowGroup[] {
  const groups = new Map<string, OutboxWindowGroup>();
  for (const [id, endpointId, event, storeId, productIdsJson, createdAt] of rows) {
    const key = `${endpointId}:${event}:${storeId}`;
    let group = groups.get(key);
    if (!group) {
      group = { endpointId, event, storeId, count: 0, oldestAt: createdAt, rows: [] };
      groups.set(key, group);
    }
    const productIds = JSON.parse(productIdsJson) as number[];
    const entry: OutboxEntry = { id, productIds, createdAt };
    group.rows.push(entry);
    group.count += productIds.length;
    if (createdAt < group.oldestAt) group.oldestAt = createdAt;
  }
  // Map order is each group's first (oldest) row: a stable sort by endpoint keeps it within one.
  return [...groups.values()].sort((a, b) => a.endpointId - b.endpointId);
}
