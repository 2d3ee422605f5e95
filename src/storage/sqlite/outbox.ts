// The webhook outbox on SQLite: sql/outbox.ts, its rows inserted a step at a time, waking this
// process's dispatchers at COMMIT.
import type { OutboxRow, OutboxWindowGroup } from '../records.js';
import { groupWindow, SqlOutbox, type OutboxWindowRow } from '../sql/outbox.js';
import { ROWS_PER_STEP, type SqliteConnection } from './connection.js';

export class SqliteOutbox extends SqlOutbox<SqliteConnection> {
  override async outboxWindow(window: number, afterId = 0): Promise<OutboxWindowGroup[]> {
    // Rows as arrays: a pass reads thousands, and an object per row cost more than the read itself.
    const rows = this.c
      .stmt('SELECT id, endpoint_id, event, store_id, product_id, created_at FROM webhook_outbox WHERE id > ? ORDER BY id LIMIT ?')
      .raw(true)
      .all(afterId, window) as OutboxWindowRow[];
    return groupWindow(rows);
  }

  async insertOutbox(rows: OutboxRow[]): Promise<void> {
    const insert = this.c.stmt('INSERT INTO webhook_outbox (endpoint_id, event, store_id, product_id, created_at) VALUES (?, ?, ?, ?, ?)');
    for (const [i, row] of rows.entries()) {
      if (i % ROWS_PER_STEP === 0) await this.c.yieldToOthers();
      insert.run(row.endpointId, row.event, row.storeId, row.productId, row.createdAt);
    }
    if (rows.length > 0) this.c.addedWork.add('deliveries');
  }
}
