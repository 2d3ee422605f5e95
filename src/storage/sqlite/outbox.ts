// The webhook outbox on SQLite: one row per (subscribed endpoint, change), written with the change.
import type { OutboxStore } from '../port.js';
import type { OutboxGroup, OutboxRow } from '../records.js';
import { yieldToOthers } from '../../shared/cooperative.js';
import { ROWS_PER_STEP, type SqliteConnection } from './connection.js';

export class SqliteOutbox implements OutboxStore {
  static readonly writes = ['insertOutbox', 'deleteOutboxRows'] as const;

  constructor(private readonly c: SqliteConnection) {}

  async insertOutbox(rows: OutboxRow[]): Promise<void> {
    const insert = this.c.stmt('INSERT INTO webhook_outbox (endpoint_id, event, store_id, product_id, created_at) VALUES (?, ?, ?, ?, ?)');
    for (const [i, row] of rows.entries()) {
      if (i % ROWS_PER_STEP === 0) await yieldToOthers();
      insert.run(row.endpointId, row.event, row.storeId, row.productId, row.createdAt);
    }
    if (rows.length > 0) this.c.addedWork.add('deliveries');
  }

  async outboxGroups(window?: number): Promise<OutboxGroup[]> {
    // The oldest `window` rows from the primary key (all without it), grouped.
    return this.c.stmt(`SELECT endpoint_id AS endpointId, event, store_id AS storeId, count(*) AS count, min(created_at) AS oldestAt
      FROM (SELECT id, endpoint_id, event, store_id, created_at FROM webhook_outbox ORDER BY id LIMIT @window)
      GROUP BY endpoint_id, event, store_id ORDER BY endpoint_id, min(id)`).all({ window: window ?? -1 }) as OutboxGroup[];
  }

  async outboxRows(group: Pick<OutboxGroup, 'endpointId' | 'event' | 'storeId'>, limit: number): Promise<{ id: number; productId: number; createdAt: string }[]> {
    return this.c.stmt(`SELECT id, product_id AS productId, created_at AS createdAt FROM webhook_outbox
      WHERE endpoint_id = ? AND event = ? AND store_id IS ? ORDER BY id LIMIT ?`)
      .all(group.endpointId, group.event, group.storeId, limit) as { id: number; productId: number; createdAt: string }[];
  }

  async deleteOutboxRows(ids: number[]): Promise<void> {
    if (ids.length === 0) return;
    this.c.stmt('DELETE FROM webhook_outbox WHERE id IN (SELECT value FROM json_each(?))').run(JSON.stringify(ids));
  }
}
