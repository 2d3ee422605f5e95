// One better-sqlite3 connection and its statement cache, shared by every aggregate's queries on it.
import type Database from 'better-sqlite3';
import type { WorkTopic } from '../port.js';

export type Row = Record<string, unknown>;

export class SqliteConnection {
  private readonly statements = new Map<string, Database.Statement>();
  /** Work the open transaction adds: the storage wakes this process's workers after its COMMIT. */
  readonly addedWork = new Set<WorkTopic>();

  constructor(readonly db: Database.Database) {}

  /** The prepared statement for this SQL, prepared once per connection. */
  stmt(sql: string): Database.Statement {
    let statement = this.statements.get(sql);
    if (!statement) {
      statement = this.db.prepare(sql);
      this.statements.set(sql, statement);
    }
    return statement;
  }
}

/** A JSON array parameter, read back in SQL with json_each(?). */
export const jsonList = (values: readonly unknown[]) => JSON.stringify(values);
