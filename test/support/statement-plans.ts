// The statements a storage operation runs, and what each costs by its plan: the recorder and the
// plan readers the bounded-statement tests share (SQLite: EXPLAIN QUERY PLAN's lines; PostgreSQL:
// the rows EXPLAIN ANALYZE reads, run and rolled back).
import Database from 'better-sqlite3';
import pg from 'pg';
import { vi } from 'vitest';
import { PgConnection } from '../../src/storage/postgres/connection.js';
import { TEST_ENGINE } from './engine.js';

/** A statement an operation ran, with its parameters. */
export interface Ran {
  sql: string;
  params: unknown[];
  /** SQLite: how many rows it returned (all()). */
  returned?: number;
}

// better-sqlite3's Statement class is not exported: reached through a prepared statement.
const statementClass = Object.getPrototypeOf(new Database(':memory:').prepare('SELECT 1')) as Record<
  string,
  (...args: unknown[]) => unknown
>;

/** Where the statements run go while an operation is watched (statementsOf). */
let recording: Ran[] | null = null;

type Spy = { mockImplementation(f: unknown): void; mockRestore(): void };
/** The spies recordStatements installed last. */
const spies: Spy[] = [];

const TRANSACTION_CONTROL = /^\s*(BEGIN|COMMIT|ROLLBACK|SAVEPOINT|RELEASE|SELECT pg_notify|NOTIFY)/i;

/**
 * Records every statement run on the test's engine, for the whole file: call it before the storage
 * opens, since the storage keeps each prepared statement's methods as they were when it prepared it.
 */
export function recordStatements(): void {
  // An earlier file's spies first: a fork runs several files (isolate: false), and a spy wrapping
  // the spy left before it would call itself.
  for (const spy of spies.splice(0)) spy.mockRestore();
  if (TEST_ENGINE === 'sqlite') {
    for (const method of ['all', 'get', 'run', 'iterate'] as const) {
      const real = statementClass[method]!;
      const spy = vi.spyOn(statementClass, method as never);
      spies.push(spy);
      spy.mockImplementation(function (this: { source: string }, ...args: unknown[]) {
        const result = real.apply(this, args);
        recording?.push({ sql: this.source, params: args, returned: Array.isArray(result) ? result.length : undefined });
        return result;
      });
    }
    return;
  }
  for (const method of ['rows', 'one', 'run'] as const) {
    // eslint-disable-next-line @typescript-eslint/unbound-method -- called with its connection as `this` (real.call(this, …))
    const real = PgConnection.prototype[method] as (...args: unknown[]) => unknown;
    const spy = vi.spyOn(PgConnection.prototype, method) as unknown as Spy;
    spies.push(spy);
    spy.mockImplementation(function (this: PgConnection, sql: string, values: unknown[] = []) {
      recording?.push({ sql, params: values });
      return real.call(this, sql, values);
    });
  }
  // Named prepared statements (the hot ones, parsed once per connection): recorded as their text and values.
  for (const method of ['prepared', 'preparedRows', 'preparedRun'] as const) {
    // eslint-disable-next-line @typescript-eslint/unbound-method -- called with its connection as `this` (real.call(this, …))
    const real = PgConnection.prototype[method] as (...args: unknown[]) => unknown;
    const spy = vi.spyOn(PgConnection.prototype, method) as unknown as Spy;
    spies.push(spy);
    spy.mockImplementation(function (this: PgConnection, name: string, sql: string, values: unknown[]) {
      recording?.push({ sql, params: values });
      return real.call(this, name, sql, values);
    });
  }
}

/** The statements `operation` runs on the storage, in order (transaction control left out). */
export async function statementsOf(operation: () => Promise<unknown>): Promise<Ran[]> {
  const ran: Ran[] = [];
  recording = ran;
  try {
    await operation();
  } finally {
    recording = null;
  }
  return ran.filter((r) => !TRANSACTION_CONTROL.test(r.sql));
}

/** SQLite: the plan's lines (EXPLAIN QUERY PLAN on a read-only connection to the file at `location`). */
export function sqlitePlan(location: string, ran: Ran): string[] {
  const db = new Database(location, { readonly: true });
  try {
    return (db.prepare(`EXPLAIN QUERY PLAN ${ran.sql}`).all(...ran.params) as { detail: string }[]).map((r) => r.detail);
  } finally {
    db.close();
  }
}

/** PostgreSQL: the statement's plan as EXPLAIN (ANALYZE) prints it, run and rolled back. */
export async function postgresPlan(location: string, ran: Ran): Promise<string> {
  const client = new pg.Client(location);
  await client.connect();
  try {
    await client.query('BEGIN');
    const { rows } = await client.query<{ 'QUERY PLAN': string }>(`EXPLAIN (ANALYZE) ${ran.sql}`, ran.params);
    await client.query('ROLLBACK');
    return rows.map((row) => row['QUERY PLAN']).join('\n');
  } finally {
    await client.end();
  }
}

/**
 * PostgreSQL: the rows the statement reads (every scan node's rows out and rows filtered away), run
 * and rolled back. A Bitmap Index Scan's rows are those its Bitmap Heap Scan reads, counted there.
 */
export async function postgresRowsRead(location: string, ran: Ran): Promise<number> {
  const client = new pg.Client(location);
  await client.connect();
  try {
    await client.query('BEGIN');
    const { rows } = await client.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${ran.sql}`, ran.params);
    await client.query('ROLLBACK');
    let read = 0;
    const walk = (node: Record<string, unknown>) => {
      if (
        /Scan/.test(String(node['Node Type'])) &&
        !/Function Scan|CTE Scan|Subquery Scan|Values Scan|WorkTable Scan|Bitmap Index Scan/.test(String(node['Node Type']))
      ) {
        read +=
          (Number(node['Actual Rows'] ?? 0) +
            Number(node['Rows Removed by Filter'] ?? 0) +
            Number(node['Rows Removed by Index Recheck'] ?? 0)) *
          Number(node['Actual Loops'] ?? 1);
      }
      for (const child of (node.Plans as Record<string, unknown>[] | undefined) ?? []) walk(child);
    };
    walk((rows[0]['QUERY PLAN'] as { Plan: Record<string, unknown> }[])[0]!.Plan);
    return read;
  } finally {
    await client.end();
  }
}

/**
 * PostgreSQL: the plans of the statements run inside the statement's functions (auto_explain's
 * nested plans, with ANALYZE and BUFFERS), which EXPLAIN of the statement shows as a Function Scan;
 * run and rolled back. Each plan as auto_explain prints it: its query text, then its nodes.
 */
export async function postgresNestedPlans(location: string, ran: Ran): Promise<string[]> {
  const client = new pg.Client(location);
  await client.connect();
  const plans: string[] = [];
  client.on('notice', (notice) => {
    if (/plan:/.test(notice.message ?? '')) plans.push(notice.message!);
  });
  try {
    await client.query("LOAD 'auto_explain'");
    await client.query('BEGIN');
    for (const setting of [
      'auto_explain.log_min_duration = 0',
      'auto_explain.log_nested_statements = on',
      'auto_explain.log_analyze = on',
      'auto_explain.log_buffers = on',
      'auto_explain.log_level = notice',
      'client_min_messages = notice',
    ])
      await client.query(`SET LOCAL ${setting}`);
    await client.query(ran.sql, ran.params);
    await client.query('ROLLBACK');
    // The outer statement's own plan is logged too: only the nested ones.
    return plans.filter((plan) => !plan.includes(ran.sql));
  } finally {
    await client.end();
  }
}
