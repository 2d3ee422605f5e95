// What every PostgreSQL aggregate runs its queries on: a pooled client inside a transaction or a
// snapshot, or the pool itself for plain reads. Kept to the one method `pg`'s Pool and PoolClient
// share (and that an embedded PostgreSQL adapter can offer), so aggregates know nothing of pooling.
import type { StatementTiming } from '../../operations/statements.js';
import { postgresDialect, type Row, type SqlConnection } from '../sql/dialect.js';

export type { Row } from '../sql/dialect.js';

export interface PgQueryResult<R extends Row = Row> {
  rows: R[];
  rowCount: number | null;
}

/** A statement prepared once per connection under its name (pg's QueryConfig); an adapter may run it as plain text. */
export interface PgPreparedQuery {
  name: string;
  text: string;
  values: unknown[];
}

/** pg.Pool, pg.PoolClient, or an adapter with the same query method. */
export interface PgQueryable {
  query<R extends Row = Row>(text: string | PgPreparedQuery, values?: unknown[]): Promise<PgQueryResult<R>>;
}

/** "cached plan must not change result type" (and other unsupported features): see PgConnection.prepared. */
const FEATURE_NOT_SUPPORTED = '0A000';

/** Each prepared statement's current generation: a schema change makes the next one prepare it under a new name. */
const generations = new Map<string, number>();

/** A client of the pool, held for one transaction or snapshot, then released (error: discard it). */
export type PgPoolClientLike = PgQueryable & { release(error?: Error | boolean): void };

/** pg.Pool, or an adapter (an embedded PostgreSQL in tests) with the same three methods. */
export type PgPoolLike = PgQueryable & {
  connect(): Promise<PgPoolClientLike>;
  end(): Promise<void>;
};

export class PgConnection implements SqlConnection {
  readonly dialect = postgresDialect;

  constructor(
    readonly client: PgQueryable,
    /** True inside transaction(): reads that a write depends on take row locks (FOR UPDATE). */
    readonly inWriteTransaction: boolean,
    /** True inside transaction() or snapshot(): a failed statement ends the transaction (no retry). */
    readonly inTransaction: boolean = inWriteTransaction,
    /** Where its statements' durations go (operations/statements.ts): the storage's, shared by its connections. */
    readonly timing: StatementTiming = { observer: null },
    /** What its statements are called in the statement metrics and the slow-statement log. */
    readonly statementName = 'storage',
  ) {}

  /** Reads that a write depends on lock their rows inside transaction() (sql/dialect.ts). */
  get locksRows(): boolean {
    return this.inWriteTransaction;
  }

  /** Statements wait on the network: the event loop is free meanwhile. */
  async yieldToOthers(): Promise<void> {}

  /** The same connection with its statements named `name`: each storage operation runs on one of its own (sql/operations.ts). */
  named(name: string): PgConnection {
    return new PgConnection(this.client, this.inWriteTransaction, this.inTransaction, this.timing, name);
  }

  /**
   * The client's query, timed from sending it to its result (waiting for a pooled connection, or
   * for the transaction's previous query, included) when the storage has a statement observer.
   */
  private async query<R extends Row>(text: string | PgPreparedQuery, values?: unknown[]): Promise<PgQueryResult<R>> {
    const observer = this.timing.observer;
    if (observer === null) return this.client.query<R>(text, values);
    const start = performance.now();
    try {
      return await this.client.query<R>(text, values);
    } finally {
      observer.observeStatement('postgres', this.statementName, performance.now() - start);
    }
  }

  /**
   * The first row of a named prepared statement, parsed and planned once per connection: for the
   * hottest reads only, each with its columns listed (no `*`), so that another process's migration
   * that adds a column does not change its result type. One that changes a listed column's type
   * makes PostgreSQL refuse the cached plan (0A000): outside a transaction, the statement is then
   * prepared again under a new name, on every connection as it next runs it.
   */
  async prepared<R extends Row = Row>(name: string, sql: string, values: unknown[]): Promise<R | undefined> {
    return (await this.preparedQuery<R>(name, sql, values)).rows[0];
  }

  /** Every row of a named prepared statement (see prepared): for the hot multi-row statements of a claim. */
  async preparedRows<R extends Row = Row>(name: string, sql: string, values: unknown[]): Promise<R[]> {
    return (await this.preparedQuery<R>(name, sql, values)).rows;
  }

  /** The rows a named prepared statement changed (see prepared). */
  async preparedRun(name: string, sql: string, values: unknown[]): Promise<number> {
    return (await this.preparedQuery(name, sql, values)).rowCount ?? 0;
  }

  private async preparedQuery<R extends Row>(name: string, sql: string, values: unknown[]): Promise<PgQueryResult<R>> {
    const generation = generations.get(name) ?? 0;
    try {
      return await this.query<R>({ name: `${name}.${generation}`, text: sql, values });
    } catch (error) {
      if ((error as { code?: string }).code !== FEATURE_NOT_SUPPORTED || this.inTransaction) throw error;
      if ((generations.get(name) ?? 0) === generation) generations.set(name, generation + 1);
      return await this.query<R>({ name: `${name}.${generation + 1}`, text: sql, values });
    }
  }

  async rows<R extends Row = Row>(sql: string, values: unknown[] = []): Promise<R[]> {
    return (await this.query<R>(sql, values)).rows;
  }

  async one<R extends Row = Row>(sql: string, values: unknown[] = []): Promise<R | undefined> {
    return (await this.query<R>(sql, values)).rows[0];
  }

  async run(sql: string, values: unknown[] = []): Promise<number> {
    return (await this.query(sql, values)).rowCount ?? 0;
  }
}
