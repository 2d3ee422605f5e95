// The embedded PostgreSQL (@electric-sql/pglite, PostgreSQL compiled to WebAssembly) behind the
// pool interface the PostgreSQL engine runs on (PgPoolLike), for machines without server binaries.
// It has ONE connection: connect() hands it out under a mutex, and a plain query waits for it too
// (it would otherwise run inside someone else's transaction). A test that needs two connections at
// once (a snapshot open while a transaction runs, concurrent writers) would wait forever: the wait
// is bounded and fails naming the cause; such tests are skipped on pglite by name (engine.ts).
import { PGlite, type PGliteInterface, types } from '@electric-sql/pglite';
import type { PgPoolClientLike, PgPoolLike, PgPreparedQuery, PgQueryResult, Row } from '../../src/storage/postgres/connection.js';

/** How long a query waits for the one connection before it fails (a test needing two connections). */
const WAIT_MS = 10_000;

// pg's parsing, which the engine expects: bytea as Buffer (pglite: Uint8Array); int8 as number (the
// engine's pool setting, and pglite's default).
const PARSERS = {
  [types.BYTEA]: (value: string) => Buffer.from(value.slice(2), 'hex'),
  [types.INT8]: (value: string) => Number(value),
};

export class PglitePool implements PgPoolLike {
  private holder: Promise<void> = Promise.resolve();
  private ended = false;

  constructor(readonly db: PGliteInterface) {}

  /** A fresh in-memory database (~2 s to start). */
  static async create(): Promise<PglitePool> {
    return new PglitePool(await PGlite.create({ parsers: PARSERS }));
  }

  /** An independent copy of this database as it is now (~0.4 s): one per test service. */
  async clone(): Promise<PglitePool> {
    return this.exclusive(async () => new PglitePool(await this.db.clone()));
  }

  async query<R extends Row = Row>(text: string | PgPreparedQuery, values?: unknown[]): Promise<PgQueryResult<R>> {
    return this.exclusive(() => this.run<R>(text, values));
  }

  async connect(): Promise<PgPoolClientLike> {
    const release = await this.acquire();
    let released = false;
    return {
      query: <R extends Row = Row>(text: string | PgPreparedQuery, values?: unknown[]) => {
        if (released) throw new Error('pglite: query on a released client');
        return this.run<R>(text, values);
      },
      release: () => {
        if (released) return;
        released = true;
        release();
      },
    };
  }

  async end(): Promise<void> {
    if (this.ended) return;
    this.ended = true;
    await this.exclusive(() => this.db.close());
  }

  private async run<R extends Row>(query: string | PgPreparedQuery, parameters?: unknown[]): Promise<PgQueryResult<R>> {
    // A prepared statement runs as its text (pglite plans each query anew).
    const [text, values] = typeof query === 'string' ? [query, parameters] : [query.text, query.values];
    if (values === undefined || values.length === 0) {
      // Without parameters pg uses the simple protocol, which runs several statements (migrations).
      const results = await this.db.exec(text);
      const last = results[results.length - 1];
      return { rows: (last?.rows ?? []) as R[], rowCount: last ? Math.max(last.affectedRows ?? 0, last.rows.length) : 0 };
    }
    const result = await this.db.query<R>(text, values);
    return { rows: result.rows, rowCount: Math.max(result.affectedRows ?? 0, result.rows.length) };
  }

  private async exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const release = await this.acquire();
    try {
      return await fn();
    } finally {
      release();
    }
  }

  /** Waits for the one connection (bounded), then holds it until the returned function is called. */
  private async acquire(): Promise<() => void> {
    const previous = this.holder;
    let release!: () => void;
    this.holder = new Promise<void>((resolve) => {
      release = resolve;
    });
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(
        () => reject(new Error(`pglite has one connection and it stayed busy for ${WAIT_MS} ms: this needs several connections`)),
        WAIT_MS,
      );
    });
    try {
      await Promise.race([previous, timeout]);
    } catch (error) {
      // Give our turn up once the earlier holder is done, so later waiters are not stuck behind us.
      void previous.then(release);
      throw error;
    } finally {
      clearTimeout(timer);
    }
    return release;
  }
}
