// One better-sqlite3 connection and its statement cache, shared by every aggregate's queries on it.
import type Database from 'better-sqlite3';
import type { StatementTiming } from '../../operations/statements.js';
import { yieldToOthers } from '../../shared/cooperative.js';
import type { WorkTopic } from '../port.js';
import { sqliteDialect, type Row, type SqlConnection } from '../sql/dialect.js';

export type { Row } from '../sql/dialect.js';

/**
 * SQLite runs every statement on the caller's thread: a bulk write (a chunk's published rows,
 * changes and outbox rows: tens of thousands in a re-pricing) lets the requests waiting meanwhile run
 * between steps of this many rows (`yieldToOthers`, once its slice is used up). The transaction stays
 * open across the yield; reads run on the read connection and never see it before its COMMIT.
 */
export const ROWS_PER_STEP = 32;

/** A statement written with PostgreSQL's $n placeholders, prepared with SQLite's `?` (sql/dialect.ts). */
interface NumberedStatement {
  statement: Database.Statement;
  /** The index of the value each `?` takes, in order; null when that is 0, 1, 2, ... (each $n once, in order). */
  order: number[] | null;
}

export class SqliteConnection implements SqlConnection {
  readonly dialect = sqliteDialect;
  /** SQLite's one writer holds the database's write lock: nothing a transaction reads changes under it. */
  readonly locksRows = false;
  private readonly statements = new Map<string, Database.Statement>();
  private readonly numbered = new Map<string, NumberedStatement>();
  /** The named views of this connection (named()), made once each. */
  private readonly views: Map<string, SqliteConnection>;

  constructor(
    readonly db: Database.Database,
    /** Where its statements' durations go (operations/statements.ts): the storage's, shared by its connections. */
    readonly timing: StatementTiming = { observer: null },
    /** What its statements are called in the statement metrics and the slow-statement log. */
    readonly statementName = 'storage',
    /** Work the open transaction adds: the storage wakes this process's workers after its COMMIT. */
    readonly addedWork = new Set<WorkTopic>(),
    views?: Map<string, SqliteConnection>,
    /** Stores the open transaction records changes for: the storage wakes the live feed after its COMMIT. */
    readonly changedStores = new Set<number>(),
  ) {
    this.views = views ?? new Map<string, SqliteConnection>();
  }

  /**
   * The same connection (its database, its open transaction's added work) with its statements
   * named `name`: each storage operation runs on a view of its own (sql/operations.ts).
   */
  named(name: string): SqliteConnection {
    let view = this.views.get(name);
    if (!view) {
      view = new SqliteConnection(this.db, this.timing, name, this.addedWork, this.views, this.changedStores);
      this.views.set(name, view);
    }
    return view;
  }

  /** The prepared statement for this SQL, prepared once per connection and name, its runs timed. */
  stmt(sql: string): Database.Statement {
    let statement = this.statements.get(sql);
    if (!statement) {
      statement = timed(this.db.prepare(sql), this.statementName, this.timing);
      this.statements.set(sql, statement);
    }
    return statement;
  }

  /** The statement for SQL written with $n placeholders (as the aggregates of sql/ are), prepared once with `?`. */
  private numberedStmt(sql: string): NumberedStatement {
    let numbered = this.numbered.get(sql);
    if (!numbered) {
      const order: number[] = [];
      const text = sql.replace(/\$(\d+)/g, (_, n: string) => {
        order.push(Number(n) - 1);
        return '?';
      });
      numbered = { statement: this.stmt(text), order: order.every((index, i) => index === i) ? null : order };
      this.numbered.set(sql, numbered);
    }
    return numbered;
  }

  private bound(sql: string, values: unknown[]): [Database.Statement, unknown[]] {
    const { statement, order } = this.numberedStmt(sql);
    return [statement, order === null ? values : order.map((index) => values[index])];
  }

  async one<R extends Row = Row>(sql: string, values: unknown[] = []): Promise<R | undefined> {
    const [statement, params] = this.bound(sql, values);
    return statement.get(...params) as R | undefined;
  }

  async rows<R extends Row = Row>(sql: string, values: unknown[] = []): Promise<R[]> {
    const [statement, params] = this.bound(sql, values);
    return statement.all(...params) as R[];
  }

  async run(sql: string, values: unknown[] = []): Promise<number> {
    const [statement, params] = this.bound(sql, values);
    return statement.run(...params).changes;
  }

  yieldToOthers(): Promise<void> {
    return yieldToOthers();
  }
}

type Run = (this: Database.Statement, ...params: unknown[]) => unknown;

/**
 * The statement with its run, get and all timed (own properties over the prototype's: pluck(),
 * raw() and bind() return the same object, so chains stay timed), reported to the storage's
 * observer when it has one. iterate() is timed as the sum of its steps (the work of the loop
 * that consumes it is not counted), reported once when it ends or is left.
 */
function timed(statement: Database.Statement, name: string, timing: StatementTiming): Database.Statement {
  const target = statement as unknown as Record<string, Run>;
  for (const method of ['run', 'get', 'all'] as const) {
    const original = target[method]!;
    target[method] = function timedRun(this: Database.Statement, ...params: unknown[]) {
      const observer = timing.observer;
      if (observer === null) return original.apply(this, params);
      const start = performance.now();
      try {
        return original.apply(this, params);
      } finally {
        observer.observeStatement('sqlite', name, performance.now() - start);
      }
    };
  }
  const iterate = target.iterate! as (this: Database.Statement, ...params: unknown[]) => IterableIterator<unknown>;
  target.iterate = function* timedIterate(this: Database.Statement, ...params: unknown[]) {
    const observer = timing.observer;
    if (observer === null) return yield* iterate.apply(this, params);
    let start = performance.now();
    const rows = iterate.apply(this, params);
    let ms = performance.now() - start;
    try {
      for (;;) {
        start = performance.now();
        const next = rows.next();
        ms += performance.now() - start;
        if (next.done) return;
        yield next.value;
      }
    } finally {
      // Left early (break, throw): the statement is released for its next run.
      rows.return?.();
      observer.observeStatement('sqlite', name, ms);
    }
  };
  return statement;
}

/** A JSON array parameter, read back in SQL with json_each(?). */
export const jsonList = (values: readonly unknown[]) => JSON.stringify(values);
