// Merchants, API keys and stores on PostgreSQL: sql/tenancy.ts, with PostgreSQL's store ids.
import { SqlTenancy, STORE_INPUT_COLUMNS } from '../sql/tenancy.js';
import type { PgConnection, Row } from './connection.js';

export class PgTenancy extends SqlTenancy<PgConnection> {
  protected async insertStore(values: unknown[]): Promise<Row> {
    // A new store takes its identity's next id, which is never handed out twice. (Not INSERT ... ON
    // CONFLICT: that draws an id for every update too, and ids would drift from SQLite's.)
    return (await this.c.one(`INSERT INTO stores (${STORE_INPUT_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING *`, values))!;
  }
}
