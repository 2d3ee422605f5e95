// How long each SQL statement of the storage takes: every statement a storage
// operation runs is timed around its run/get/all/iterate (SQLite) or its query (PostgreSQL) and
// reported here under the name of the operation that ran it (`published.publishedPageOfStore`), never
// its SQL or its parameters: the names are the storage's methods, a bounded set.
//
// On SQLite (better-sqlite3 is synchronous) a statement's duration is time the event loop was
// blocked; on PostgreSQL it is the time from sending the query to its result, waiting for a pooled
// connection included, while the loop stays free.
//
// Per statement this costs two performance.now() calls, one Map lookup and a bucket search (well
// under a microsecond): prom-client's Histogram.observe (about 0.5 µs per call, as it hashes the
// labels each time) would have cost a per-row write statement several percent, so the counts are
// kept here and exposed as one Prometheus histogram through prom-client's registry.
import type { Metric, Registry } from 'prom-client';
import type { Logger } from './log.js';

export type StatementEngine = 'sqlite' | 'postgres';

/** Told of each statement a storage ran: its engine, its operation's name, and how long it took (milliseconds). */
export interface StatementObserver {
  observeStatement(engine: StatementEngine, name: string, ms: number): void;
}

/** One storage's link to the observer, shared by all its connections: null until one is attached (nothing is reported then). */
export interface StatementTiming {
  observer: StatementObserver | null;
}

/** A storage that can report its statements (both engines' storages); not on the port, so other implementations need not. */
export interface StatementTimed {
  observeStatements(observer: StatementObserver | null): void;
}

export function isStatementTimed(storage: object): storage is StatementTimed {
  return typeof (storage as Partial<StatementTimed>).observeStatements === 'function';
}

/**
 * The statement name of an aggregate's method: the class name without its engine prefix (or `Sql`,
 * an aggregate written once for both: storage/sql/), then the method (`SqliteImages`,
 * `claimDueImageMirrors` -> `images.claimDueImageMirrors`); the same on both engines.
 */
export function statementName(aggregateClass: string, method: string): string {
  const aggregate = aggregateClass.replace(/^(?:Sqlite|Pg|Sql)(?=[A-Z])/, '');
  return `${aggregate.charAt(0).toLowerCase()}${aggregate.slice(1)}.${method}`;
}

/** Statement observations as StatementMetrics.drain hands them over (structured-clonable). */
export type DrainedStatements = { engine: StatementEngine; name: string; buckets: number[]; sumMs: number; count: number }[];

/** Upper bounds of the buckets, seconds: from 0.1 ms (an indexed read) to 10 s. */
export const STATEMENT_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const BUCKETS_MS = STATEMENT_BUCKETS.map((seconds) => seconds * 1000);

/** The observations of one (engine, statement): per bucket (not cumulative; the last is +Inf only), their sum and count. */
interface Cell {
  buckets: Float64Array;
  sumMs: number;
  count: number;
}

const METRIC_NAME = 'cps_db_statement_duration_seconds';
const HELP =
  'Time one SQL statement took, by engine and by the storage operation that ran it (SQLite: the event loop was blocked that long).';

/**
 * The histogram `cps_db_statement_duration_seconds{engine,statement}` and the slow-statement log:
 * a statement slower than `slowMs` (CPS_SLOW_STATEMENT_MS; 0: never) is logged at warn with its
 * name, engine and duration (never its parameters: they may hold secrets).
 */
export class StatementMetrics implements StatementObserver {
  private readonly cells: Record<StatementEngine, Map<string, Cell>> = { sqlite: new Map(), postgres: new Map() };
  private readonly slowMs: number;

  constructor(
    private readonly logger: Logger,
    slowStatementMs: number,
  ) {
    this.slowMs = slowStatementMs > 0 ? slowStatementMs : Number.POSITIVE_INFINITY;
  }

  observeStatement(engine: StatementEngine, name: string, ms: number): void {
    const cells = this.cells[engine];
    let cell = cells.get(name);
    if (cell === undefined) {
      cell = { buckets: new Float64Array(BUCKETS_MS.length + 1), sumMs: 0, count: 0 };
      cells.set(name, cell);
    }
    let bucket = 0;
    while (bucket < BUCKETS_MS.length && ms > BUCKETS_MS[bucket]!) bucket++;
    cell.buckets[bucket]! += 1;
    cell.sumMs += ms;
    cell.count += 1;
    if (ms > this.slowMs) {
      this.logger.warn(
        { statement: name, engine, duration_ms: Math.round(ms * 10) / 10, slow_statement_ms: this.slowMs },
        'slow statement',
      );
    }
  }

  /**
   * The observations since the last drain, and forgets them: what a worker thread sends the serving
   * thread, whose /metrics shows both (addDrained there; nothing is logged twice).
   */
  drain(): DrainedStatements {
    const drained: DrainedStatements = [];
    for (const engine of ['sqlite', 'postgres'] as const) {
      for (const [name, cell] of this.cells[engine])
        drained.push({ engine, name, buckets: [...cell.buckets], sumMs: cell.sumMs, count: cell.count });
      this.cells[engine].clear();
    }
    return drained;
  }

  /** Adds observations drained elsewhere (another thread's) to this histogram. */
  addDrained(drained: DrainedStatements): void {
    for (const { engine, name, buckets, sumMs, count } of drained) {
      let cell = this.cells[engine].get(name);
      if (cell === undefined) {
        cell = { buckets: new Float64Array(BUCKETS_MS.length + 1), sumMs: 0, count: 0 };
        this.cells[engine].set(name, cell);
      }
      buckets.forEach((n, i) => {
        cell.buckets[i]! += n;
      });
      cell.sumMs += sumMs;
      cell.count += count;
    }
  }

  /** Adds the histogram to a prom-client registry (as a metric of its own: prom-client formats it). */
  register(registry: Registry): void {
    const metric = {
      name: METRIC_NAME,
      help: HELP,
      type: 'histogram',
      get: () => Promise.resolve(this.get()),
      reset: () => {
        for (const cells of Object.values(this.cells)) cells.clear();
      },
    };
    registry.registerMetric(metric as unknown as Metric);
  }

  /** prom-client's shape of a histogram (as Histogram.get() returns it). */
  private get() {
    const values: { labels: Record<string, string | number>; value: number; metricName: string }[] = [];
    for (const engine of ['sqlite', 'postgres'] as const) {
      for (const [statement, cell] of [...this.cells[engine]].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
        let cumulative = 0;
        for (const [i, bound] of STATEMENT_BUCKETS.entries()) {
          cumulative += cell.buckets[i]!;
          values.push({ labels: { engine, statement, le: bound }, value: cumulative, metricName: `${METRIC_NAME}_bucket` });
        }
        values.push({ labels: { engine, statement, le: '+Inf' }, value: cell.count, metricName: `${METRIC_NAME}_bucket` });
        values.push({ labels: { engine, statement }, value: cell.sumMs / 1000, metricName: `${METRIC_NAME}_sum` });
        values.push({ labels: { engine, statement }, value: cell.count, metricName: `${METRIC_NAME}_count` });
      }
    }
    return { name: METRIC_NAME, help: HELP, type: 'histogram', values, aggregator: 'sum' };
  }
}
