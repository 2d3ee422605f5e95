// What every PostgreSQL aggregate runs its queries on: a pooled client inside a transaction or a
// snapshot, or the pool itself for plain reads. Kept to the one method `pg`'s Pool and PoolClient
// share (and that an embedded PostgreSQL adapter can offer), so aggregates know nothing of pooling.
export type Row = Record<string, unknown>;

export interface PgQueryResult<R extends Row = Row> {
  rows: R[];
  rowCount: number | null;
}

/** pg.Pool, pg.PoolClient, or an adapter with the same query method. */
export interface PgQueryable {
  query<R extends Row = Row>(text: string, values?: unknown[]): Promise<PgQueryResult<R>>;
}

/** A client of the pool, held for one transaction or snapshot, then released (error: discard it). */
export type PgPoolClientLike = PgQueryable & { release(error?: Error | boolean): void };

/** pg.Pool, or an adapter (an embedded PostgreSQL in tests) with the same three methods. */
export type PgPoolLike = PgQueryable & {
  connect(): Promise<PgPoolClientLike>;
  end(): Promise<void>;
};

export class PgConnection {
  constructor(
    readonly client: PgQueryable,
    /** True inside transaction(): reads that a write depends on take row locks (FOR UPDATE). */
    readonly inWriteTransaction: boolean,
  ) {}

  async rows<R extends Row = Row>(sql: string, values: unknown[] = []): Promise<R[]> {
    return (await this.client.query<R>(sql, values)).rows;
  }

  async one<R extends Row = Row>(sql: string, values: unknown[] = []): Promise<R | undefined> {
    return (await this.client.query<R>(sql, values)).rows[0];
  }

  async run(sql: string, values: unknown[] = []): Promise<number> {
    return (await this.client.query(sql, values)).rowCount ?? 0;
  }
}
