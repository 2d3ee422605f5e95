// The seam the aggregates written once for both engines run on (storage/sql/): their SQL is
// PostgreSQL's own ($1, $2 placeholders; SQLite's connection reads them as positional `?`), and the
// few things the engines spell differently come from the connection's dialect. An aggregate whose
// statement differs on purpose keeps that method in its engine's subclass (sqlite/, postgres/).
export type Row = Record<string, unknown>;

/** The column types a list or a typed parameter is read as. */
export type SqlType = 'bigint' | 'integer' | 'text';

export interface Dialect {
  readonly engine: 'sqlite' | 'postgres';
  /** A boolean parameter: SQLite stores 0 and 1 (a boolean in SQL text, `true`/`false`, reads the same on both). */
  bool(value: boolean): boolean | number;
  /** A list parameter, read by inList or listRows. */
  list(values: readonly (number | string)[]): unknown;
  /** `column` is one of the list parameter `param`'s values. */
  inList(column: string, param: string, type: SqlType): string;
  /** The list parameter as rows of one column, `alias.value`, for a FROM clause. */
  listRows(param: string, type: SqlType, alias: string): string;
  /** A parameter PostgreSQL cannot type from its context (compared with NULL, or NULL itself). */
  typed(param: string, type: SqlType): string;
}

/** A JSON array parameter, read back with json_each. */
export const sqliteDialect: Dialect = {
  engine: 'sqlite',
  bool: (value) => (value ? 1 : 0),
  list: (values) => JSON.stringify(values),
  inList: (column, param) => `${column} IN (SELECT value FROM json_each(${param}))`,
  listRows: (param, _type, alias) => `json_each(${param}) AS ${alias}`,
  typed: (param) => param,
};

/** An array parameter (pg sends a JS array as one), read with = ANY and unnest. */
export const postgresDialect: Dialect = {
  engine: 'postgres',
  bool: (value) => value,
  list: (values) => values,
  inList: (column, param, type) => `${column} = ANY(${param}::${type}[])`,
  listRows: (param, type, alias) => `unnest(${param}::${type}[]) AS ${alias}(value)`,
  typed: (param, type) => `${param}::${type}`,
};

/** What an aggregate written once runs its statements on: an engine's connection (SqliteConnection, PgConnection). */
export interface SqlConnection {
  readonly dialect: Dialect;
  /**
   * True where a read that a write depends on must lock the rows it reads (FOR UPDATE): PostgreSQL
   * in a write transaction. Never on SQLite, whose one writer holds the database's write lock.
   */
  readonly locksRows: boolean;
  /** The statement's first row (undefined: none). */
  one<R extends Row = Row>(sql: string, values?: unknown[]): Promise<R | undefined>;
  rows<R extends Row = Row>(sql: string, values?: unknown[]): Promise<R[]>;
  /** Runs a statement that returns no rows; resolves to the number of rows it changed. */
  run(sql: string, values?: unknown[]): Promise<number>;
  /**
   * Between the steps of a long write: SQLite runs statements on the event loop, so the requests
   * waiting meanwhile run here once its slice is used (shared/cooperative.ts); PostgreSQL's
   * statements wait on the network, which frees the loop already.
   */
  yieldToOthers(): Promise<void>;
}
