// The webhook outbox on SQLite: sql/outbox.ts, its rows inserted a step at a time, waking this
// process's dispatchers at COMMIT.
import type { OutboxRow, OutboxWindowGroup } from '../records.js';
import { groupWindow, SqlOutbox, type OutboxWindowRow } from '../sql/outbox.js';
import { ROWS_PER_STEP, type SqliteConnection } from './connection.js';

export class SqliteOutbox extends SqlOutbox<SqliteConnection> {
  override async outboxWindow(window: number, afterId = 0): Promise<OutboxWindowGroup[]> {
    // Rows as arrays (an object per row cost more than reading it), read until they carry `window` changes.
    const rows: OutboxWindowRow[] = [];
    let changes = 0;
    const read = this.c
      .stmt(
        'SELECT id, endpoint_id, event, store_id, product_ids, created_at, product_count FROM webhook_outbox WHERE id > ? ORDER BY id LIMIT ?',
      )
      .raw(true)
      .iterate(afterId, window) as IterableIterator<[...OutboxWindowRow, number]>;
    for (const row of read) {
      rows.push(row.slice(0, 6) as OutboxWindowRow);
      changes += row[6];
      if (changes >= window) break;
    }
    return groupWindow(rows);
  }

  async insertOutbox(rows: OutboxRow[]): Promise<void> {
    const insert = this.c.stmt(
      'INSERT INTO webhook_outbox (endpoint_id, event, store_id, product_ids, product_count, created_at) VALUES (?, ?, ?, ?, ?, ?)',
    );
    for (const [i, row] of rows.entries()) {
      if (i % ROWS_PER_STEP === 0) await this.c.yieldToOthers();
      insert.run(row.endpointId, row.event, row.storeId, JSON.stringify(row.productIds), row.productIds.length, row.createdAt);
    }
    if (rows.length > 0) this.c.addedWork.add('deliveries');
  }
}
