// The webhook outbox on SQLite: sql/outbox.ts, its rows inserted a step at a time, waking this
// process's dispatchers at COMMIT.
import type { OutboxRow } from '../records.js';
import { SqlOutbox } from '../sql/outbox.js';
import { ROWS_PER_STEP, type SqliteConnection } from './connection.js';

export class SqliteOutbox extends SqlOutbox<SqliteConnection> {
  async insertOutbox(rows: OutboxRow[]): Promise<void> {
    const insert = this.c.stmt('INSERT INTO webhook_outbox (endpoint_id, event, store_id, product_id, created_at) VALUES (?, ?, ?, ?, ?)');
    for (const [i, row] of rows.entries()) {
      if (i % ROWS_PER_STEP === 0) await this.c.yieldToOthers();
      insert.run(row.endpointId, row.event, row.storeId, row.productId, row.createdAt);
    }
    if (rows.length > 0) this.c.addedWork.add('deliveries');
  }
}
