// Merchants, API keys and stores on SQLite: sql/tenancy.ts, with SQLite's store ids.
import { SqlTenancy, STORE_INPUT_COLUMNS } from '../sql/tenancy.js';
import type { Row, SqliteConnection } from './connection.js';

export class SqliteTenancy extends SqlTenancy<SqliteConnection> {
  protected async insertStore(values: unknown[]): Promise<Row> {
    // A new store takes the next id never handed out (migration 2), not SQLite's max(id) + 1.
    const next = await this.c.one<{ last_id: number }>('UPDATE store_id_sequence SET last_id = last_id + 1 RETURNING last_id');
    return (await this.c.one(`INSERT INTO stores (id, ${STORE_INPUT_COLUMNS}) VALUES ($9, $1, $2, $3, $4, $5, $6, $7, $8) RETURNING *`, [
      ...values,
      next!.last_id,
    ]))!;
  }
}
