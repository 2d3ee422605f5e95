// docs/operating.md#metrics: every SQL statement the storage runs is timed into
// cps_db_statement_duration_seconds{engine,statement} under the name of the storage operation that
// ran it; /metrics shows this process's event-loop delay; a statement slower than
// CPS_SLOW_STATEMENT_MS is logged at warn with its name, engine and duration (never its parameters).
// On the real service (startTestService), on the project's engine: SQLite and PostgreSQL.
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { StatementMetrics, statementName } from '../../src/operations/statements.js';
import { EVENT_LOOP_SAMPLE_MS } from '../../src/operations/metrics.js';
import { adminOk, createMerchant, importNdjson, simpleProduct } from '../support/admin-http.js';
import { onPglite, sqliteOnly, TEST_ENGINE } from '../support/engine.js';
import { LogCapture, type LogLine } from '../support/logs.js';
import { parseExposition, sample } from '../support/metrics.js';
import { sqliteStorageOf, startTestService, type TestService } from '../support/service.js';
import { SqliteConnection } from '../../src/storage/sqlite/connection.js';

const METRIC = 'cps_db_statement_duration_seconds';

async function scrape(service: TestService): Promise<string> {
  const response = await service.fetch(`${service.url}/metrics`);
  expect(response.status).toBe(200);
  return response.text();
}

/** A merchant with a store of two products: a key to read them with. */
async function catalog(service: TestService): Promise<string> {
  const merchant = await createMerchant(service, 'Statement Outfitters');
  await adminOk(service, 'PUT', `${merchant.base}/stores/de`, { name: 'DE', locale: 'de-DE', currency: 'EUR' });
  await adminOk(service, 'PUT', `${merchant.base}/suppliers/alpine`, { name: 'Alpine' });
  expect((await importNdjson(service, merchant.id, [simpleProduct('A'), simpleProduct('B')])).status).toBe(200);
  return merchant.key;
}

const slowLines = (logs: LogCapture): LogLine[] => logs.find('slow statement');

describe('statement durations and the event-loop delay in /metrics', () => {
  let service: TestService;
  let key: string;
  beforeAll(async () => {
    service = await startTestService();
    key = await catalog(service);
  });
  afterAll(() => service.close());

  it('a page read shows under the name of the storage operation that ran it, every name a bounded method name', async () => {
    const labels = { engine: TEST_ENGINE, statement: 'published.publishedPageOfStore' };
    const before = sample(await scrape(service), `${METRIC}_count`, labels) ?? 0;
    for (let i = 0; i < 3; i++) expect((await service.api('/v1/products?store=de', key)).status).toBe(200);
    const after = await scrape(service);
    const count = sample(after, `${METRIC}_count`, labels)!;
    // Every read asks the database, cached or not (the merchant's published version, with the page when it changed).
    expect(count - before).toBeGreaterThanOrEqual(1);
    expect(sample(after, `${METRIC}_bucket`, { ...labels, le: '+Inf' })).toBe(count);
    expect(sample(after, `${METRIC}_sum`, labels)).toBeGreaterThan(0);
    const samples = parseExposition(after).filter((s) => s.name.startsWith(METRIC));
    const names = new Set(samples.map((s) => s.labels.statement));
    // Names of storage methods (aggregate.method) or of the storage's own statements, never SQL text.
    for (const name of names) expect(name).toMatch(/^[a-z][A-Za-z]*\.[a-z][A-Za-z]*$/);
    expect(names).toContain('tenancy.findActiveApiKey');
    expect(new Set(samples.map((s) => s.labels.engine))).toEqual(new Set([TEST_ENGINE]));
    expect(after).not.toMatch(/SELECT|INSERT/);
  });

  it('shows the event-loop delay since the previous scrape: a loop blocked 150 ms past a sampling interval shows in the max', async () => {
    await scrape(service);
    const start = performance.now();
    // The timer is due once an interval: blocked that long and 150 ms more, it runs at least 150 ms late.
    while (performance.now() - start < EVENT_LOOP_SAMPLE_MS + 150) {
      /* blocks this process's event loop, the server's too */
    }
    // The monitor's timer, due during the block, runs now and records how late it is.
    await new Promise((resolve) => setTimeout(resolve, 30));
    const metrics = await scrape(service);
    const max = sample(metrics, 'cps_event_loop_delay_max_seconds')!;
    expect(max).toBeGreaterThanOrEqual(0.12);
    expect(max).toBeLessThan(5);
    expect(sample(metrics, 'cps_event_loop_delay_p50_seconds')).toBeLessThanOrEqual(max);
    expect(sample(metrics, 'cps_event_loop_delay_p99_seconds')).toBeLessThanOrEqual(max);
    // prom-client's series by their names, from the same sampler.
    expect(sample(metrics, 'nodejs_eventloop_lag_max_seconds')).toBe(max);
    // A new window from each scrape: nothing blocked since the last one.
    expect(sample(await scrape(service), 'cps_event_loop_delay_max_seconds')).toBeLessThan(max);
  });

  it("shows prom-client's default process metrics, its event-loop lag series once each, as how late the service's one sampler ran", async () => {
    await scrape(service);
    await new Promise((resolve) => setTimeout(resolve, 3 * EVENT_LOOP_SAMPLE_MS));
    const metrics = await scrape(service);
    const names = [...metrics.matchAll(/^# TYPE (\S+) /gm)].map((match) => match[1]!);
    for (const which of ['', '_min', '_max', '_mean', '_stddev', '_p50', '_p90', '_p99'])
      expect(names.filter((name) => name === `nodejs_eventloop_lag${which}_seconds`)).toHaveLength(1);
    for (const name of [
      'process_cpu_seconds_total',
      'process_resident_memory_bytes',
      'nodejs_heap_size_used_bytes',
      'nodejs_gc_duration_seconds',
    ])
      expect(names).toContain(name);
    // How late a tick ran, not the whole interval between two ticks (what prom-client's own sampler recorded).
    expect(sample(metrics, 'nodejs_eventloop_lag_min_seconds')).toBeLessThan(EVENT_LOOP_SAMPLE_MS / 1000 / 2);
  });
});

describe('the event-loop sampling', () => {
  it('starts with the first scrape: a service nobody scrapes (a worker thread, a worker without its operations port) runs no sampling timer', async () => {
    const service = await startTestService();
    try {
      expect(service.service.metrics.samplesEventLoop).toBe(false);
      // The first scrape has nothing sampled yet: its delay is 0.
      expect(sample(await scrape(service), 'cps_event_loop_delay_max_seconds')).toBe(0);
      expect(service.service.metrics.samplesEventLoop).toBe(true);
    } finally {
      await service.close();
    }
    expect(service.service.metrics.samplesEventLoop).toBe(false);
  });
});

describe('slow statements', () => {
  sqliteOnly.it(
    'SQLite: a statement slower than CPS_SLOW_STATEMENT_MS is logged at warn with its name, engine and duration, and is in the histogram',
    async () => {
      const logs = new LogCapture('info');
      const service = await startTestService({ logger: logs.logger, config: { operations: { slowStatementMs: 5 } } });
      try {
        // /readyz reads the applied migrations (`storage.probe`): with half a million rows more, a recursive CTE's count, that read takes tens of ms.
        sqliteStorageOf(service)
          .db.prepare(`INSERT INTO schema_migrations (id, name, applied_at)
        WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 500000) SELECT 1000000 + x, 'padding', '' FROM n`)
          .run();
        expect((await service.fetch(`${service.url}/readyz`)).status).toBe(200);
        const lines = slowLines(logs).filter((line) => line.statement === 'storage.probe');
        expect(lines.length).toBeGreaterThanOrEqual(1);
        const [line] = lines;
        expect(line!.level).toBe('warn');
        expect(line!.engine).toBe('sqlite');
        expect(line!.duration_ms).toBeGreaterThan(5);
        expect(line!.slow_statement_ms).toBe(5);
        // Its name, engine and duration: no parameters, no SQL.
        expect(Object.keys(line!).sort()).toEqual([
          'duration_ms',
          'engine',
          'level',
          'msg',
          'service',
          'slow_statement_ms',
          'statement',
          'time',
        ]);
        const metrics = await scrape(service);
        const labels = { engine: 'sqlite', statement: 'storage.probe' };
        // Observed above the 5 ms bucket at least once.
        expect(
          sample(metrics, `${METRIC}_count`, labels)! - sample(metrics, `${METRIC}_bucket`, { ...labels, le: '0.005' })!,
        ).toBeGreaterThanOrEqual(1);
      } finally {
        await service.close();
      }
    },
  );

  it.skipIf(TEST_ENGINE !== 'postgres' || onPglite())(
    "PostgreSQL: a statement waiting 300 ms for a lock is logged at warn with its operation's name",
    async () => {
      const logs = new LogCapture('info');
      const service = await startTestService({ logger: logs.logger });
      const locker = new pg.Client({ connectionString: service.database.location });
      await locker.connect();
      try {
        const key = await catalog(service);
        // The read waits for the stores table: another connection holds it for 300 ms from the
        // moment the read is seen waiting (pg_locks), however late a loaded machine sends it.
        await locker.query('BEGIN');
        await locker.query('LOCK TABLE stores IN ACCESS EXCLUSIVE MODE');
        const read = service.api('/v1/products?store=de', key);
        await vi.waitFor(
          async () =>
            expect(
              (
                await locker.query<{ n: number }>(
                  "SELECT count(*)::int AS n FROM pg_locks WHERE NOT granted AND relation = 'stores'::regclass AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
                )
              ).rows[0]!.n,
            ).toBeGreaterThan(0),
          { timeout: 30_000, interval: 5 },
        );
        await new Promise((resolve) => setTimeout(resolve, 300));
        await locker.query('COMMIT');
        expect((await read).status).toBe(200);
        const lines = slowLines(logs);
        expect(lines.length).toBeGreaterThanOrEqual(1);
        for (const line of lines) {
          expect(line.level).toBe('warn');
          expect(line.engine).toBe('postgres');
          expect(line.statement).toMatch(/^(published|tenancy)\.[a-z][A-Za-z]*$/);
          expect(Object.keys(line).sort()).toEqual([
            'duration_ms',
            'engine',
            'level',
            'msg',
            'service',
            'slow_statement_ms',
            'statement',
            'time',
          ]);
        }
        expect(Math.max(...lines.map((line) => line.duration_ms as number))).toBeGreaterThanOrEqual(250);
        expect(logs.text).not.toContain(key);
      } finally {
        await locker.end();
        await service.close();
      }
    },
  );

  it('CPS_SLOW_STATEMENT_MS: 100 by default, 0 turns the log off, anything else but a whole number is refused', () => {
    expect(loadConfig({}).operations.slowStatementMs).toBe(100);
    expect(loadConfig({ CPS_SLOW_STATEMENT_MS: '0' }).operations.slowStatementMs).toBe(0);
    expect(() => loadConfig({ CPS_SLOW_STATEMENT_MS: 'fast' })).toThrow(/CPS_SLOW_STATEMENT_MS must be a non-negative integer, got "fast"/);
    expect(() => loadConfig({ CPS_SLOW_STATEMENT_MS: '-1' })).toThrow(/CPS_SLOW_STATEMENT_MS/);
    const logs = new LogCapture('info');
    const off = new StatementMetrics(logs.logger, 0);
    off.observeStatement('sqlite', 'published.publishedPage', 60_000);
    const on = new StatementMetrics(logs.logger, 100);
    on.observeStatement('sqlite', 'published.publishedPage', 100);
    expect(slowLines(logs)).toEqual([]);
    on.observeStatement('postgres', 'published.publishedPage', 100.5);
    expect(slowLines(logs).map((line) => [line.engine, line.statement, line.duration_ms])).toEqual([
      ['postgres', 'published.publishedPage', 100.5],
    ]);
  });

  sqliteOnly.it('SQLite: iterate() counts once, when it ends or is left, and leaves the statement free for its next run', () => {
    const db = new Database(':memory:');
    try {
      const observed: [string, string][] = [];
      const timing = {
        observer: {
          observeStatement: (engine: string, name: string) => {
            observed.push([engine, name]);
          },
        },
      };
      const connection = new SqliteConnection(db, timing).named('test.countTo');
      const sql = 'WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 10) SELECT x FROM n';
      expect([...connection.stmt(sql).pluck().iterate()]).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
      expect(observed).toEqual([['sqlite', 'test.countTo']]);
      for (const x of connection.stmt(sql).pluck().iterate()) if (x === 3) break;
      expect(observed).toHaveLength(2);
      // Released on break: the same statement runs again.
      expect(connection.stmt(sql).pluck().all()).toHaveLength(10);
      expect(observed).toHaveLength(3);
    } finally {
      db.close();
    }
  });

  it('names a statement after its aggregate and method, the same on both engines', () => {
    expect(statementName('SqliteImages', 'claimDueImageMirrors')).toBe('images.claimDueImageMirrors');
    expect(statementName('PgImages', 'claimDueImageMirrors')).toBe('images.claimDueImageMirrors');
    expect(statementName('PgProductSources', 'upsertProductSource')).toBe('productSources.upsertProductSource');
    expect(statementName('SqlTenancy', 'findActiveApiKey')).toBe('tenancy.findActiveApiKey');
  });
});
