// `npm run bench:postgres`: PostgreSQL against SQLite, each engine side by side
// in one run, on a throwaway PostgreSQL server this script starts from the installed binaries in a
// temporary folder (scripts/dev/postgres-server.ts, durable: false: fsync, full-page writes and waiting
// for commits off, as for the tests; a durable server pays a WAL flush per commit on top) and stops
// at the end. Everything runs on this machine; only ratios measured in this run mean anything.
//   page1      - GET /v1/products?per_page=200 on the demo catalog (BENCH_PRODUCTS, 3 stores), each
//                engine served by scripts/bench/bench-server.ts in a child process, driven by autocannon in
//                rounds whose engine order alternates: req/s, the node server's CPU per request and,
//                on PostgreSQL, the database server's too (the postgres processes' CPU from
//                /proc/<pid>/stat: its backends do the work SQLite does inside the node process).
//                Goal: PostgreSQL >= 0.5 x SQLite's req/s.
//   import     - NDJSON import of BENCH_IMPORT_PRODUCTS new products through the admin API of the
//                same servers (POST /admin/v1/merchants/{id}/imports): products per second, CPU.
//   feed       - GET /v1/changes, one full window (1000 changes) from a cursor in the middle of a
//                store's history, 10k against 1M rows (BENCH_SMALL_HISTORY, BENCH_LARGE_HISTORY),
//                built in bulk (generate_series on PostgreSQL), sequential requests in blocks
//                (BENCH_FEED_REQUESTS per history, over the rounds; CPU around each block). Goal on
//                PostgreSQL: 1M / 10k <= 1.3 (latency); SQLite for reference.
//   deliveries - signed webhook deliveries per second: `serve` (CPS_WEBHOOK_DISPATCHER=false) and 1
//                or 3 `worker` processes on one database, BENCH_ENDPOINTS endpoints (each its own
//                port of one local receiver answering 204 at once), BENCH_DELIVERIES x 100 changes
//                put in the outbox at once; the workers coalesce them into deliveries of 100 ids and
//                send them. Rate = deliveries between the receiver's first and last request; the
//                whole drain (outbox committed -> every delivery recorded) beside it. 1 worker on
//                SQLite for reference; PostgreSQL / SQLite printed for each (the goal:
//                >= 0.5 for 1 worker, as for the import's products/s).
// Usage: npm run bench:postgres -- [--json] [--only page1,import,feed,deliveries]
//   BENCH_PRODUCTS (100000), BENCH_ROUNDS (3), BENCH_SECONDS (5), BENCH_CONNECTIONS (8),
//   BENCH_IMPORT_PRODUCTS (10000), BENCH_SMALL_HISTORY (10000), BENCH_LARGE_HISTORY (1000000),
//   BENCH_FEED_REQUESTS (600), BENCH_DELIVERIES (2000), BENCH_ENDPOINTS (8), BENCH_PG_WORKERS (1,3: the
//   PostgreSQL worker counts measured).
//   BENCH_PRODUCTS=10000 BENCH_IMPORT_PRODUCTS=20000 npm run bench:postgres -- --only import,deliveries
//   Quick run: BENCH_PRODUCTS=10000 BENCH_LARGE_HISTORY=200000 BENCH_ROUNDS=2 BENCH_SECONDS=3.
//   Exits 0 whatever the verdicts; 1 when the run itself fails.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import Database from 'better-sqlite3';
import pg from 'pg';
import { loadConfig } from '../../src/config.js';
import { WEBHOOK_EVENTS } from '../../src/generated/public-webhooks.js';
import { createService } from '../../src/service.js';
import { wholeSecondIso } from '../../src/shared/time.js';
import {
  demoImportBody,
  exited,
  inheritedEnv,
  keepOutput,
  killTracked,
  startBenchServerProcess,
  stopChild,
  stopTracked,
  track,
} from './baseline.js';
import { dataDirOf, freePort, startPostgresServer, type PostgresServer } from '../dev/postgres-server.js';
import { postgresServerCpu, processCpu } from './process-sampler.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const env = (name: string, fallback: number) => Number(process.env[name] ?? fallback);
const PRODUCTS = env('BENCH_PRODUCTS', 100_000);
const ROUNDS = Math.max(1, env('BENCH_ROUNDS', 3));
const SECONDS = env('BENCH_SECONDS', 5);
const CONNECTIONS = env('BENCH_CONNECTIONS', 8);
const IMPORT_PRODUCTS = env('BENCH_IMPORT_PRODUCTS', 10_000);
const SMALL = env('BENCH_SMALL_HISTORY', 10_000);
const LARGE = env('BENCH_LARGE_HISTORY', 1_000_000);
const FEED_REQUESTS = env('BENCH_FEED_REQUESTS', 600);
const DELIVERIES = env('BENCH_DELIVERIES', 2000);
const ENDPOINTS = Math.max(1, env('BENCH_ENDPOINTS', 8));
const WARM_UP_SECONDS = 2;
const ADMIN_TOKEN = 'bench'; // scripts/bench/bench-server.ts's
const GOALS = { page1Ratio: 0.5, feedRatio: 1.3, writeRatio: 0.5 };
const PARTS = ['page1', 'import', 'feed', 'deliveries'] as const;
type Part = (typeof PARTS)[number];
type Engine = 'sqlite' | 'postgres';

const { values: flags } = parseArgs({ options: { json: { type: 'boolean' }, only: { type: 'string' } } });
const parts = new Set<Part>(
  flags.only
    ? flags.only.split(',').map((p) => {
        if (!(PARTS as readonly string[]).includes(p)) throw new Error(`--only takes ${PARTS.join(',')}, got "${p}"`);
        return p as Part;
      })
    : PARTS,
);
// With --json, stdout carries only the result.
const log = (line: string) => (flags.json ? console.error(line) : console.log(line));

const median = (xs: number[]) => {
  if (xs.length === 0) return NaN;
  const sorted = [...xs].sort((a, b) => a - b);
  return (sorted[Math.floor((sorted.length - 1) / 2)]! + sorted[Math.ceil((sorted.length - 1) / 2)]!) / 2;
};
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** Which engine goes first alternates from one round to the next. */
const inTurn = <T>(items: T[], round: number) => (round % 2 ? [...items].reverse() : items);

// ---- processes --------------------------------------------------------------------------------

let tempDir: string | null = null;
let postgres: PostgresServer | null = null;

/** Synchronous, so it also runs from a signal handler and on exit. */
function cleanUp(): void {
  killTracked();
  postgres?.stopSync('immediate');
  postgres = null;
  if (tempDir) fs.rmSync(tempDir, { recursive: true, force: true, maxRetries: 3 });
  tempDir = null;
}

/** `src/cli.ts ...args` with only the given CPS_* settings, as `node --import tsx` so its pid is the service's. */
function cli(args: string[], settings: Record<string, string>): { child: ChildProcess; output: () => string } {
  const child = track(
    spawn(process.execPath, ['--import', 'tsx', 'src/cli.ts', ...args], {
      cwd: root,
      env: { ...inheritedEnv(), CPS_LOG_LEVEL: 'warn', ...settings },
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  );
  return { child, output: keepOutput(child) };
}

// ---- CPU --------------------------------------------------------------------------------------

/** The PostgreSQL server's CPU so far (µs; 0 when none runs): scripts/bench/process-sampler.ts. */
const postgresCpu = () => (postgres ? postgresServerCpu(dataDirOf(postgres.dir)) : 0);

// ---- databases --------------------------------------------------------------------------------

async function createDatabase(name: string): Promise<string> {
  const client = new pg.Client({ connectionString: postgres!.url });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE ${name}`);
  } finally {
    await client.end();
  }
  return postgres!.urlOf(name);
}

/** The configured service on one engine, in this process (setting up what the bench then drives). */
function serviceOn(database: string, extra: Record<string, string> = {}) {
  const onPostgres = database.startsWith('postgres://');
  return createService(
    loadConfig(
      { CPS_LOG_LEVEL: 'warn', CPS_WEBHOOK_ALLOW_HOSTS: '127.0.0.1', ...extra },
      onPostgres ? { databaseUrl: database } : { databasePath: database, databaseUrl: null },
    ),
  );
}

// ---- the bench server (scripts/bench/bench-server.ts) -----------------------------------------------

interface BenchServer {
  engine: Engine;
  base: string;
  /** The node server's CPU so far, µs. */
  cpu: () => Promise<number>;
  stop: () => Promise<void>;
}

async function startBenchServer(engine: Engine, database: string): Promise<BenchServer> {
  return { engine, ...(await startBenchServerProcess(root, 'bench-server.ts', database, engine)) };
}

/** CPU of the node server and of PostgreSQL (0 on SQLite) spent while `work` ran, µs. */
async function measured<T>(
  server: BenchServer,
  work: () => Promise<T>,
): Promise<{ result: T; nodeCpu: number; dbCpu: number; seconds: number }> {
  const [node0, db0] = [await server.cpu(), server.engine === 'postgres' ? postgresCpu() : 0];
  const started = performance.now();
  const result = await work();
  const seconds = (performance.now() - started) / 1000;
  const [node1, db1] = [await server.cpu(), server.engine === 'postgres' ? postgresCpu() : 0];
  return { result, nodeCpu: node1 - node0, dbCpu: db1 - db0, seconds };
}

async function getText(url: string, headers: Record<string, string>): Promise<string> {
  const response = await fetch(url, { headers });
  const text = await response.text();
  if (!response.ok) throw new Error(`GET ${url}: ${response.status} ${text.slice(0, 500)}`);
  return text;
}

// ---- page 1 and import ------------------------------------------------------------------------

interface CatalogSide {
  engine: Engine;
  server: BenchServer;
  merchantId: number;
  apiKey: string;
  page1Bytes: string;
  page1: { rps: number[]; nodeUs: number[]; dbUs: number[]; p99: number[] };
  imports: { perSecond: number[]; nodeUs: number[]; dbUs: number[] };
}

async function buildDemo(engine: Engine, database: string): Promise<{ merchantId: number; apiKey: string }> {
  const started = performance.now();
  const { child, output } = cli(
    ['demo', '--products', String(PRODUCTS), '--json'],
    engine === 'postgres' ? { CPS_DATABASE_URL: database } : { CPS_DB_PATH: database },
  );
  const code = await exited(child);
  if (code !== 0) throw new Error(`${engine}: demo exited ${code}:\n${output()}`);
  const demo = JSON.parse(output().trim().split('\n').at(-1)!) as { merchant_id: number; api_key: string };
  log(`${engine}: demo catalog of ${PRODUCTS} products built in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  return { merchantId: demo.merchant_id, apiKey: demo.api_key };
}

async function prepareCatalogs(): Promise<CatalogSide[]> {
  const databases: Record<Engine, string> = { sqlite: path.join(tempDir!, 'catalog.db'), postgres: await createDatabase('catalog') };
  // Both at once: building is not what is measured, and the PostgreSQL one waits on round trips.
  const engines: Engine[] = ['sqlite', 'postgres'];
  const demos = await Promise.all(engines.map((engine) => buildDemo(engine, databases[engine])));
  const sides: CatalogSide[] = [];
  try {
    for (const [i, engine] of engines.entries()) {
      const server = await startBenchServer(engine, databases[engine]);
      sides.push({
        engine,
        server,
        ...demos[i]!,
        page1Bytes: '',
        page1: { rps: [], nodeUs: [], dbUs: [], p99: [] },
        imports: { perSecond: [], nodeUs: [], dbUs: [] },
      });
    }
    for (const side of sides)
      side.page1Bytes = await getText(`${side.server.base}/v1/products?per_page=200`, { Authorization: `Bearer ${side.apiKey}` });
  } catch (error) {
    for (const side of sides) await side.server.stop();
    throw error;
  }
  return sides;
}

async function measurePage1(side: CatalogSide, round: number): Promise<void> {
  const {
    result: run,
    nodeCpu,
    dbCpu,
  } = await measured(side.server, () =>
    autocannon({
      url: `${side.server.base}/v1/products?per_page=200`,
      headers: { Authorization: `Bearer ${side.apiKey}` },
      connections: CONNECTIONS,
      duration: round === 0 ? WARM_UP_SECONDS : SECONDS,
    }),
  );
  if (run.non2xx || run.errors) throw new Error(`${side.engine} page 1: ${run.non2xx} non-2xx, ${run.errors} errors`);
  if (round === 0) return;
  const [nodeUs, dbUs] = [nodeCpu / run.requests.total, dbCpu / run.requests.total];
  side.page1.rps.push(run.requests.average);
  side.page1.nodeUs.push(nodeUs);
  side.page1.dbUs.push(dbUs);
  side.page1.p99.push(run.latency.p99);
  log(
    `page1 round ${round} ${side.engine.padEnd(8)} ${run.requests.average.toFixed(0).padStart(6)} req/s  p99 ${String(run.latency.p99).padStart(4)} ms  ` +
      `CPU per request: node ${nodeUs.toFixed(0)} µs, database ${dbUs.toFixed(0)} µs`,
  );
}

async function measureImport(side: CatalogSide, round: number, body: string): Promise<void> {
  const { result, nodeCpu, dbCpu, seconds } = await measured(side.server, async () => {
    const response = await fetch(`${side.server.base}/admin/v1/merchants/${side.merchantId}/imports`, {
      method: 'POST',
      body,
      headers: { Authorization: `Bearer ${ADMIN_TOKEN}`, 'Content-Type': 'application/x-ndjson' },
    });
    const text = await response.text();
    if (!response.ok) throw new Error(`${side.engine} import: ${response.status} ${text.slice(0, 500)}`);
    return JSON.parse(text) as { upserted: number };
  });
  if (result.upserted !== IMPORT_PRODUCTS) throw new Error(`${side.engine} import: upserted ${result.upserted} of ${IMPORT_PRODUCTS}`);
  side.imports.perSecond.push(IMPORT_PRODUCTS / seconds);
  side.imports.nodeUs.push(nodeCpu / IMPORT_PRODUCTS);
  side.imports.dbUs.push(dbCpu / IMPORT_PRODUCTS);
  log(
    `import round ${round} ${side.engine.padEnd(8)} ${IMPORT_PRODUCTS} products in ${seconds.toFixed(1)} s: ${(IMPORT_PRODUCTS / seconds).toFixed(0)}/s  ` +
      `CPU per product: node ${(nodeCpu / IMPORT_PRODUCTS).toFixed(0)} µs, database ${(dbCpu / IMPORT_PRODUCTS).toFixed(0)} µs`,
  );
}

async function catalogPart(): Promise<CatalogSide[]> {
  log(`\n== page 1${parts.has('import') ? ' and import' : ''}: demo catalog of ${PRODUCTS} products on each engine`);
  const sides = await prepareCatalogs();
  try {
    const [sqlite, postgresSide] = sides as [CatalogSide, CatalogSide];
    log(
      `page 1: ${Buffer.byteLength(sqlite.page1Bytes)} bytes on SQLite, ${Buffer.byteLength(postgresSide.page1Bytes)} on PostgreSQL` +
        ` (${sqlite.page1Bytes === postgresSide.page1Bytes ? 'byte-identical' : 'different bytes'})`,
    );
    if (parts.has('page1')) {
      // Round 0 warms the JIT, the caches and the pool and is not counted.
      for (let round = 0; round <= ROUNDS; round++) {
        for (const side of inTurn(sides, round)) await measurePage1(side, round);
      }
    }
    if (parts.has('import')) {
      const importRounds = Math.max(1, Math.min(ROUNDS, 2));
      for (let round = 1; round <= importRounds; round++) {
        const body = demoImportBody(IMPORT_PRODUCTS, `pg-${round}`);
        for (const side of inTurn(sides, round)) await measureImport(side, round, body);
      }
    }
  } finally {
    for (const side of sides) await side.server.stop();
  }
  return sides;
}

// ---- feed window ------------------------------------------------------------------------------

const HISTORIES = ['small', 'large'] as const;
type History = (typeof HISTORIES)[number];
interface FeedSide {
  engine: Engine;
  server: BenchServer;
  apiKey: string;
  cursors: Record<History, { since: string; id: number }>;
  latencyMs: Record<History, number[]>;
  nodeUs: Record<History, number[]>;
  dbUs: Record<History, number[]>;
}

/** Where the histories start: far enough back to hold the large one, well inside retention. */
const historyStart = () => Math.floor(Date.now() / 1000) * 1000 - 86_400_000;

/**
 * One merchant, two stores (small and large history), an API key; the histories written straight
 * into the table (building history, not recording changes): ids 1..SMALL for the small store, then
 * the large store's, 500 changes per second, product ids cycling so a window holds 1000 distinct
 * ones; the merchant's sequencer row set to the last id and second, as recording would leave it.
 */
async function prepareFeed(engine: Engine): Promise<FeedSide> {
  const database = engine === 'postgres' ? await createDatabase('feed') : path.join(tempDir!, 'feed.db');
  const service = serviceOn(database);
  const { admin } = service;
  const merchant = await admin.createMerchant({ name: 'Feed bench' });
  const stores = {
    small: await admin.upsertStore(merchant.id, 'small', {
      name: 'Small history',
      locale: 'en-GB',
      currency: 'EUR',
      is_default: true,
      active: true,
      exclude_out_of_stock: false,
    }),
    large: await admin.upsertStore(merchant.id, 'large', {
      name: 'Large history',
      locale: 'en-GB',
      currency: 'EUR',
      is_default: false,
      active: true,
      exclude_out_of_stock: false,
    }),
  };
  const { key } = await admin.createApiKey(merchant.id, 'bench');
  await service.close();
  const start = historyStart();
  const lastAt = wholeSecondIso(start + Math.floor((Math.max(SMALL, LARGE) - 1) / 500) * 1000);
  const started = performance.now();
  let cursors: FeedSide['cursors'];
  if (engine === 'postgres') {
    const client = new pg.Client({ connectionString: database });
    await client.connect();
    try {
      const fill = (storeId: number, firstId: number, count: number) =>
        client.query(
          `INSERT INTO changes (merchant_id, id, store_id, product_id, change_type, created_at)
        SELECT $1, $2 + i, $3, 1 + i % 50000, ($6::text[])[(1 + i % cardinality($6::text[]))::integer],
          to_char(to_timestamp($4::bigint / 1000 + i / 500) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
        FROM generate_series(0, $5::bigint - 1) AS i`,
          [merchant.id, firstId, storeId, start, count, WEBHOOK_EVENTS],
        );
      await fill(stores.small.id, 1, SMALL);
      await fill(stores.large.id, SMALL + 1, LARGE);
      await client.query(
        `INSERT INTO change_sequences (merchant_id, last_id, last_at) VALUES ($1, $2, $3)
        ON CONFLICT (merchant_id) DO UPDATE SET last_id = excluded.last_id, last_at = excluded.last_at`,
        [merchant.id, SMALL + LARGE, lastAt],
      );
      // As autovacuum would leave a table that old: statistics, visibility map, hint bits.
      await client.query('VACUUM (ANALYZE) changes');
      const cursorOf = async (storeId: number, count: number) =>
        (
          await client.query<{ since: string; id: number }>(
            'SELECT created_at AS since, id::integer AS id FROM changes WHERE store_id = $1 ORDER BY created_at, id LIMIT 1 OFFSET $2',
            [storeId, Math.floor(count / 2)],
          )
        ).rows[0]!;
      cursors = { small: await cursorOf(stores.small.id, SMALL), large: await cursorOf(stores.large.id, LARGE) };
    } finally {
      await client.end();
    }
  } else {
    const db = new Database(database);
    try {
      const insert = db.prepare(
        'INSERT INTO changes (merchant_id, id, store_id, product_id, change_type, created_at) VALUES (?, ?, ?, ?, ?, ?)',
      );
      db.transaction(() => {
        const fill = (storeId: number, firstId: number, count: number) => {
          for (let i = 0; i < count; i++)
            insert.run(
              merchant.id,
              firstId + i,
              storeId,
              1 + (i % 50_000),
              WEBHOOK_EVENTS[i % WEBHOOK_EVENTS.length],
              wholeSecondIso(start + Math.floor(i / 500) * 1000),
            );
        };
        fill(stores.small.id, 1, SMALL);
        fill(stores.large.id, SMALL + 1, LARGE);
        db.prepare(`INSERT INTO change_sequences (merchant_id, last_id, last_at) VALUES (?, ?, ?)
          ON CONFLICT (merchant_id) DO UPDATE SET last_id = excluded.last_id, last_at = excluded.last_at`).run(
          merchant.id,
          SMALL + LARGE,
          lastAt,
        );
      })();
      db.exec('ANALYZE');
      const cursorOf = (storeId: number, count: number) =>
        db
          .prepare('SELECT created_at AS since, id FROM changes WHERE store_id = ? ORDER BY created_at, id LIMIT 1 OFFSET ?')
          .get(storeId, Math.floor(count / 2)) as { since: string; id: number };
      cursors = { small: cursorOf(stores.small.id, SMALL), large: cursorOf(stores.large.id, LARGE) };
    } finally {
      db.close();
    }
  }
  log(`${engine}: ${SMALL} + ${LARGE} rows of change history written in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  const server = await startBenchServer(engine, database);
  const empty = () => ({ small: [] as number[], large: [] as number[] });
  return { engine, server, apiKey: key, cursors, latencyMs: empty(), nodeUs: empty(), dbUs: empty() };
}

/** A block of sequential full windows from the history's middle; latencies counted unless round 0. */
async function measureFeed(side: FeedSide, history: History, round: number, requests: number): Promise<void> {
  const { since, id } = side.cursors[history];
  const url = `${side.server.base}/v1/changes?store=${history}&since=${since}&since_id=${id}`;
  const headers = { Authorization: `Bearer ${side.apiKey}` };
  // A full window, unless the history's second half is shorter (a quick run's small history).
  const count = history === 'small' ? SMALL : LARGE;
  const expected = Math.min(1000, count - Math.floor(count / 2) - 1);
  const {
    result: times,
    nodeCpu,
    dbCpu,
  } = await measured(side.server, async () => {
    const times: number[] = [];
    for (let i = 0; i < requests; i++) {
      const t = performance.now();
      const response = await fetch(url, { headers });
      const body = (await response.json()) as { changes: unknown[] };
      times.push(performance.now() - t);
      if (response.status !== 200 || body.changes.length !== expected)
        throw new Error(`${side.engine} ${history}: ${response.status}, ${body.changes?.length} changes, not ${expected}`);
    }
    return times;
  });
  if (round === 0) return;
  side.latencyMs[history].push(...times);
  side.nodeUs[history].push(nodeCpu / requests);
  side.dbUs[history].push(dbCpu / requests);
}

async function feedPart(): Promise<FeedSide[]> {
  log(`\n== feed window: ${SMALL} against ${LARGE} rows of change history on each engine`);
  const sides: FeedSide[] = [];
  try {
    for (const engine of ['sqlite', 'postgres'] as const) sides.push(await prepareFeed(engine));
    const perBlock = Math.max(20, Math.round(FEED_REQUESTS / ROUNDS));
    const targets = sides.flatMap((side) => HISTORIES.map((history) => ({ side, history })));
    for (let round = 0; round <= ROUNDS; round++) {
      for (const { side, history } of inTurn(targets, round)) await measureFeed(side, history, round, round === 0 ? 20 : perBlock);
      if (round > 0) {
        log(
          `feed round ${round}: ${sides.map((s) => `${s.engine} ${HISTORIES.map((h) => `${h} ${median(s.latencyMs[h]).toFixed(2)} ms`).join(', ')}`).join('; ')} (medians so far)`,
        );
      }
    }
  } finally {
    for (const side of sides) await side.server.stop();
  }
  return sides;
}

// ---- deliveries -------------------------------------------------------------------------------

/** A receiver in a process of its own: one port per endpoint (one origin each, as separate receivers), 204 at once. */
async function startReceiver(ports: number): Promise<{
  ports: number[];
  stats: () => Promise<{ received: number; first: number; last: number }>;
  reset: () => Promise<void>;
  stop: () => Promise<void>;
}> {
  const script = `
    const http = require('node:http');
    let stats = { received: 0, first: 0, last: 0 };
    const ports = [];
    const handler = (request, response) => {
      request.resume();
      request.on('end', () => {
        if (request.method === 'POST') {
          const now = performance.timeOrigin + performance.now();
          stats.received++;
          if (!stats.first) stats.first = now;
          stats.last = now;
          response.writeHead(204).end();
        } else if (request.method === 'DELETE') {
          stats = { received: 0, first: 0, last: 0 };
          response.writeHead(204).end();
        } else {
          response.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify(stats));
        }
      });
    };
    let listening = 0;
    for (let i = 0; i < ${ports}; i++) {
      const server = http.createServer(handler);
      server.keepAliveTimeout = 60000;
      server.listen(0, '127.0.0.1', () => {
        ports[i] = server.address().port;
        if (++listening === ${ports}) process.stdout.write(JSON.stringify(ports) + '\\n');
      });
    }`;
  const child = track(spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] }));
  const ports_: number[] = await new Promise((resolve, reject) => {
    child.stdout.once('data', (chunk: Buffer) => resolve(JSON.parse(chunk.toString())));
    child.once('exit', (code) => reject(new Error(`receiver exited ${code}`)));
  });
  const control = `http://127.0.0.1:${ports_[0]}/stats`;
  return {
    ports: ports_,
    stats: async () => (await fetch(control)).json() as Promise<{ received: number; first: number; last: number }>,
    reset: async () => {
      await (await fetch(control, { method: 'DELETE' })).arrayBuffer();
    },
    stop: () => stopChild(child),
  };
}

/** PostgreSQL with each count of workers in BENCH_PG_WORKERS (default 1,3), and SQLite with 1 for reference. */
type DeliverySetup = { engine: Engine; workers: number };
const DELIVERY_SETUPS: DeliverySetup[] = [
  ...(process.env.BENCH_PG_WORKERS ?? '1,3').split(',').map((n) => ({ engine: 'postgres' as const, workers: Math.max(1, Number(n)) })),
  { engine: 'sqlite', workers: 1 },
];
const setupName = (s: DeliverySetup) => `${s.engine} ${s.workers} worker${s.workers > 1 ? 's' : ''}`;

interface DeliveryDatabase {
  engine: Engine;
  database: string;
  storeId: number;
  endpointIds: number[];
  serve: ChildProcess;
  /** Changes put in the outbox at once, committed when it resolves. */
  fillOutbox: (changes: number) => Promise<void>;
  /** No outbox row left and every delivery recorded as sent (cheap: polled while the workers run). */
  drained: () => Promise<boolean>;
  /** Deliveries recorded as sent (counted before and after a round, not while it runs). */
  succeeded: () => Promise<number>;
  close: () => Promise<void>;
}

interface DeliveryResult {
  setup: string;
  perSecond: number[];
  drainPerSecond: number[];
  cpuUsPerDelivery: { workers: number[]; database: number[] };
}

async function startServe(engine: Engine, database: string): Promise<ChildProcess> {
  const port = await freePort();
  const { child, output } = cli(['serve'], {
    ...(engine === 'postgres' ? { CPS_DATABASE_URL: database } : { CPS_DB_PATH: database }),
    CPS_PORT: String(port),
    CPS_ADMIN_TOKEN: ADMIN_TOKEN,
    CPS_DEMO_ON_EMPTY: 'false',
    CPS_ACCESS_LOG: 'false',
    CPS_WEBHOOK_DISPATCHER: 'false',
    CPS_IMAGE_MIRRORING: 'false',
  });
  await waitReady(`http://127.0.0.1:${port}/readyz`, child, output, `${engine} serve`);
  return child;
}

async function waitReady(url: string, child: ChildProcess, output: () => string, what: string): Promise<void> {
  for (const deadline = Date.now() + 120_000; ; ) {
    if (child.exitCode !== null) throw new Error(`${what} exited ${child.exitCode}:\n${output()}`);
    const ready = await fetch(url).then(
      async (r) => (await r.arrayBuffer(), r.ok),
      () => false,
    );
    if (ready) return;
    if (Date.now() > deadline) throw new Error(`${what}: not ready after 120 s:\n${output()}`);
    await sleep(100);
  }
}

async function prepareDeliveries(engine: Engine, receiverPorts: number[]): Promise<DeliveryDatabase> {
  const database = engine === 'postgres' ? await createDatabase('deliveries') : path.join(tempDir!, 'deliveries.db');
  const service = serviceOn(database);
  const merchant = await service.admin.createMerchant({ name: 'Delivery bench' });
  const store = await service.admin.upsertStore(merchant.id, 'main', {
    name: 'Main',
    locale: 'en-GB',
    currency: 'EUR',
    is_default: true,
    active: true,
    exclude_out_of_stock: false,
  });
  const endpointIds: number[] = [];
  for (const port of receiverPorts)
    endpointIds.push((await service.endpoints.create(merchant.id, { url: `http://127.0.0.1:${port}/hooks/catalog` })).id);
  await service.close();
  const serve = await startServe(engine, database);
  /** Per endpoint `perEndpoint` changes of distinct products, 'price', created long enough ago to be batched at once. */
  const rowsFor = (changes: number) => ({
    perEndpoint: Math.floor(changes / endpointIds.length),
    createdAt: new Date(Date.now() - 60_000).toISOString(),
  });
  if (engine === 'postgres') {
    const client = new pg.Client({ connectionString: database });
    await client.connect();
    return {
      engine,
      database,
      storeId: store.id,
      endpointIds,
      serve,
      fillOutbox: async (changes) => {
        const { perEndpoint, createdAt } = rowsFor(changes);
        await client.query('BEGIN');
        await client.query(
          `INSERT INTO webhook_outbox (endpoint_id, event, store_id, product_ids, product_count, created_at)
          SELECT e, 'price', $2, '[' || (1 + i) || ']', 1, $3 FROM unnest($1::bigint[]) AS e, generate_series(0, $4::integer - 1) AS i ORDER BY i, e`,
          [endpointIds, store.id, createdAt, perEndpoint],
        );
        // As a write that adds outbox rows does: the workers are woken at commit.
        await client.query('NOTIFY cps_deliveries');
        await client.query('COMMIT');
      },
      drained: async () =>
        (
          await client.query<{ drained: boolean }>(`SELECT NOT EXISTS (SELECT 1 FROM webhook_outbox)
          AND NOT EXISTS (SELECT 1 FROM webhook_deliveries WHERE status IN ('pending', 'failed')) AS drained`)
        ).rows[0]!.drained,
      succeeded: async () =>
        (await client.query<{ n: number }>(`SELECT count(*)::integer AS n FROM webhook_deliveries WHERE status = 'succeeded'`)).rows[0]!.n,
      close: async () => {
        await stopChild(serve);
        await client.end();
      },
    };
  }
  const db = new Database(database);
  db.pragma('busy_timeout = 30000');
  const insert = db.prepare(
    'INSERT INTO webhook_outbox (endpoint_id, event, store_id, product_ids, product_count, created_at) VALUES (?, ?, ?, ?, 1, ?)',
  );
  const drained = db
    .prepare(`SELECT NOT EXISTS (SELECT 1 FROM webhook_outbox)
    AND NOT EXISTS (SELECT 1 FROM webhook_deliveries WHERE status IN ('pending', 'failed'))`)
    .pluck();
  const succeeded = db.prepare(`SELECT count(*) FROM webhook_deliveries WHERE status = 'succeeded'`).pluck();
  return {
    engine,
    database,
    storeId: store.id,
    endpointIds,
    serve,
    fillOutbox: async (changes) => {
      const { perEndpoint, createdAt } = rowsFor(changes);
      db.transaction(() => {
        for (let i = 0; i < perEndpoint; i++) for (const e of endpointIds) insert.run(e, 'price', store.id, `[${1 + i}]`, createdAt);
      })();
    },
    drained: async () => drained.get() === 1,
    succeeded: async () => succeeded.get() as number,
    close: async () => {
      await stopChild(serve);
      db.close();
    },
  };
}

async function startWorkers(side: DeliveryDatabase, count: number): Promise<ChildProcess[]> {
  const workers: ChildProcess[] = [];
  try {
    await Promise.all(
      Array.from({ length: count }, async () => {
        const opsPort = await freePort();
        const { child, output } = cli(['worker'], {
          ...(side.engine === 'postgres' ? { CPS_DATABASE_URL: side.database } : { CPS_DB_PATH: side.database }),
          CPS_OPS_PORT: String(opsPort),
          CPS_WEBHOOK_ALLOW_HOSTS: '127.0.0.1',
          CPS_IMAGE_MIRRORING: 'false',
        });
        workers.push(child);
        await waitReady(`http://127.0.0.1:${opsPort}/readyz`, child, output, `${side.engine} worker`);
      }),
    );
  } catch (error) {
    for (const worker of workers) await stopChild(worker);
    throw error;
  }
  return workers;
}

async function measureDeliveries(
  side: DeliveryDatabase,
  setup: DeliverySetup,
  result: DeliveryResult,
  receiver: Awaited<ReturnType<typeof startReceiver>>,
  round: number,
): Promise<void> {
  const workers = await startWorkers(side, setup.workers);
  try {
    await sleep(500); // the workers' first polls
    await receiver.reset();
    // Round 0 warms each setup up (not counted) on a tenth of the backlog.
    const changes = (round === 0 ? Math.max(1, Math.round(DELIVERIES / 10)) : DELIVERIES) * 100;
    const before = await side.succeeded();
    const pids = workers.map((w) => w.pid!);
    const workers0 = processCpu(pids);
    await side.fillOutbox(changes);
    // After the fill: writing the outbox (the changes' writers' work) is not the deliveries'.
    const db0 = side.engine === 'postgres' ? postgresCpu() : 0;
    const committed = performance.timeOrigin + performance.now();
    // Polled every 100 ms with two EXISTS probes (counting the outbox would cost the database more
    // than the workers' own queries); its CPU is in the database's figure.
    for (const deadline = Date.now() + 600_000; !(await side.drained()); ) {
      if (Date.now() > deadline) throw new Error(`${setupName(setup)}: not drained after 600 s`);
      for (const worker of workers)
        if (worker.exitCode !== null) throw new Error(`${setupName(setup)}: a worker exited ${worker.exitCode}`);
      await sleep(100);
    }
    const drained = performance.timeOrigin + performance.now();
    const [workers1, db1] = [processCpu(pids), side.engine === 'postgres' ? postgresCpu() : 0];
    const stats = await receiver.stats();
    const delivered = (await side.succeeded()) - before;
    if (stats.received !== delivered) throw new Error(`${setupName(setup)}: ${delivered} deliveries recorded, ${stats.received} received`);
    const perSecond = (delivered - 1) / ((stats.last - stats.first) / 1000);
    const drainPerSecond = delivered / ((drained - committed) / 1000);
    if (round > 0) {
      result.perSecond.push(perSecond);
      result.drainPerSecond.push(drainPerSecond);
      result.cpuUsPerDelivery.workers.push((workers1 - workers0) / delivered);
      result.cpuUsPerDelivery.database.push((db1 - db0) / delivered);
    }
    log(
      `deliveries round ${round}${round === 0 ? ' (warm-up)' : ''} ${setupName(setup).padEnd(19)} ${delivered} deliveries of ${changes} changes: ` +
        `${perSecond.toFixed(0)}/s sending, ${drainPerSecond.toFixed(0)}/s whole drain (${((drained - committed) / 1000).toFixed(1)} s); ` +
        `CPU per delivery: workers ${((workers1 - workers0) / delivered).toFixed(0)} µs, database ${((db1 - db0) / delivered).toFixed(0)} µs`,
    );
  } finally {
    for (const worker of workers) await stopChild(worker);
  }
}

async function deliveriesPart(): Promise<DeliveryResult[]> {
  log(`\n== signed deliveries: ${DELIVERIES} deliveries (${DELIVERIES * 100} changes in the outbox) to ${ENDPOINTS} endpoints per round`);
  const receiver = await startReceiver(ENDPOINTS);
  const sides = new Map<Engine, DeliveryDatabase>();
  try {
    for (const engine of ['postgres', 'sqlite'] as const) sides.set(engine, await prepareDeliveries(engine, receiver.ports));
    const results = DELIVERY_SETUPS.map((setup) => ({
      setup: setupName(setup),
      perSecond: [],
      drainPerSecond: [],
      cpuUsPerDelivery: { workers: [], database: [] },
    }));
    for (let round = 0; round <= ROUNDS; round++) {
      // The order of the setups turns from one round to the next.
      for (let k = 0; k < DELIVERY_SETUPS.length; k++) {
        const i = (k + round) % DELIVERY_SETUPS.length;
        const setup = DELIVERY_SETUPS[i]!;
        await measureDeliveries(sides.get(setup.engine)!, setup, results[i]!, receiver, round);
      }
    }
    return results;
  } finally {
    for (const side of sides.values()) await side.close();
    await receiver.stop();
  }
}

// ---- report -----------------------------------------------------------------------------------

function report(catalog: CatalogSide[] | null, feed: FeedSide[] | null, deliveries: DeliveryResult[] | null, seconds: number): void {
  const fixed = (x: number, digits = 0) => (Number.isFinite(x) ? x.toFixed(digits) : '-');
  const page1 =
    catalog && parts.has('page1')
      ? (Object.fromEntries(
          catalog.map((s) => [
            s.engine,
            {
              rps: median(s.page1.rps),
              node_cpu_us: median(s.page1.nodeUs),
              db_cpu_us: median(s.page1.dbUs),
              p99_ms: median(s.page1.p99),
              rps_rounds: s.page1.rps,
              bytes: Buffer.byteLength(s.page1Bytes),
            },
          ]),
        ) as Record<Engine, { rps: number; node_cpu_us: number; db_cpu_us: number; p99_ms: number; rps_rounds: number[]; bytes: number }>)
      : null;
  const imports =
    catalog && parts.has('import')
      ? (Object.fromEntries(
          catalog.map((s) => [
            s.engine,
            {
              products_per_second: median(s.imports.perSecond),
              node_cpu_us: median(s.imports.nodeUs),
              db_cpu_us: median(s.imports.dbUs),
              rounds: s.imports.perSecond,
            },
          ]),
        ) as Record<Engine, { products_per_second: number; node_cpu_us: number; db_cpu_us: number; rounds: number[] }>)
      : null;
  const feedFigures = feed
    ? (Object.fromEntries(
        feed.map((s) => [
          s.engine,
          Object.fromEntries(
            HISTORIES.map((h) => [
              h,
              {
                median_ms: median(s.latencyMs[h]),
                node_cpu_us: median(s.nodeUs[h]),
                db_cpu_us: median(s.dbUs[h]),
              },
            ]),
          ),
        ]),
      ) as Record<Engine, Record<History, { median_ms: number; node_cpu_us: number; db_cpu_us: number }>>)
    : null;
  const feedRatio = (engine: Engine) => (feedFigures ? feedFigures[engine].large.median_ms / feedFigures[engine].small.median_ms : NaN);
  const feedCpuRatio = (engine: Engine) => {
    if (!feedFigures) return NaN;
    const f = feedFigures[engine];
    return (f.large.node_cpu_us + f.large.db_cpu_us) / (f.small.node_cpu_us + f.small.db_cpu_us);
  };
  const deliveryFigures =
    deliveries?.map((d) => ({
      setup: d.setup,
      per_second: median(d.perSecond),
      drain_per_second: median(d.drainPerSecond),
      worker_cpu_us: median(d.cpuUsPerDelivery.workers),
      db_cpu_us: median(d.cpuUsPerDelivery.database),
      rounds: d.perSecond,
    })) ?? null;
  const deliveryPair = deliveryFigures && [
    deliveryFigures.find((d) => d.setup === 'postgres 1 worker'),
    deliveryFigures.find((d) => d.setup === 'sqlite 1 worker'),
  ];
  const deliveryRatio = deliveryPair?.[0] && deliveryPair[1] ? deliveryPair[0].per_second / deliveryPair[1].per_second : null;
  const verdicts = [
    ...(page1
      ? [
          {
            goal: `page 1: PostgreSQL req/s >= ${GOALS.page1Ratio} x SQLite's`,
            measured: page1.postgres.rps / page1.sqlite.rps,
            pass: page1.postgres.rps / page1.sqlite.rps >= GOALS.page1Ratio,
          },
        ]
      : []),
    ...(imports
      ? [
          {
            goal: `import: PostgreSQL products/s >= ${GOALS.writeRatio} x SQLite's`,
            measured: imports.postgres.products_per_second / imports.sqlite.products_per_second,
            pass: imports.postgres.products_per_second / imports.sqlite.products_per_second >= GOALS.writeRatio,
          },
        ]
      : []),
    ...(deliveryRatio !== null
      ? [
          {
            goal: `deliveries: PostgreSQL (1 worker) sending/s >= ${GOALS.writeRatio} x SQLite's`,
            measured: deliveryRatio,
            pass: deliveryRatio >= GOALS.writeRatio,
          },
        ]
      : []),
    ...(feedFigures
      ? [
          {
            goal: `feed window on PostgreSQL: ${LARGE} / ${SMALL} rows of history <= ${GOALS.feedRatio} (median latency)`,
            measured: feedRatio('postgres'),
            pass: feedRatio('postgres') <= GOALS.feedRatio,
          },
        ]
      : []),
  ];
  if (flags.json) {
    console.log(
      JSON.stringify(
        {
          products: PRODUCTS,
          rounds: ROUNDS,
          seconds: SECONDS,
          connections: CONNECTIONS,
          import_products: IMPORT_PRODUCTS,
          histories: { small: SMALL, large: LARGE },
          deliveries_per_round: DELIVERIES,
          endpoints: ENDPOINTS,
          postgres_durable: false,
          page1,
          import: imports,
          feed: feedFigures && {
            ...feedFigures,
            ratio: { sqlite: feedRatio('sqlite'), postgres: feedRatio('postgres') },
            cpu_ratio: { sqlite: feedCpuRatio('sqlite'), postgres: feedCpuRatio('postgres') },
          },
          deliveries: deliveryFigures,
          verdicts,
          whole_run_seconds: seconds,
        },
        null,
        2,
      ),
    );
    return;
  }
  console.log('');
  console.log(
    `PostgreSQL (throwaway server, durable: false) against SQLite, side by side; ${ROUNDS} round(s), medians over the rounds; whole run ${fixed(seconds)} s`,
  );
  if (page1) {
    console.log('');
    console.log(`page 1 (GET /v1/products?per_page=200, ${PRODUCTS} products, ${CONNECTIONS} connections, ${SECONDS} s per round):`);
    console.log(
      `${'engine'.padEnd(12)}${'req/s'.padStart(8)}${'p99 ms'.padStart(8)}${'node CPU/req'.padStart(14)}${'db CPU/req'.padStart(12)}${'total'.padStart(9)}`,
    );
    for (const engine of ['sqlite', 'postgres'] as const) {
      const f = page1[engine];
      console.log(
        `${engine.padEnd(12)}${fixed(f.rps).padStart(8)}${fixed(f.p99_ms).padStart(8)}${`${fixed(f.node_cpu_us)} µs`.padStart(14)}${`${fixed(f.db_cpu_us)} µs`.padStart(12)}${`${fixed(f.node_cpu_us + f.db_cpu_us)} µs`.padStart(9)}`,
      );
    }
    console.log(
      `PostgreSQL / SQLite: req/s ${fixed(page1.postgres.rps / page1.sqlite.rps, 2)}, CPU per request (node + db) ${fixed((page1.postgres.node_cpu_us + page1.postgres.db_cpu_us) / (page1.sqlite.node_cpu_us + page1.sqlite.db_cpu_us), 2)}x`,
    );
  }
  if (imports) {
    console.log('');
    console.log(`NDJSON import of ${IMPORT_PRODUCTS} new products through the admin API:`);
    for (const engine of ['sqlite', 'postgres'] as const) {
      const f = imports[engine];
      console.log(
        `${engine.padEnd(12)}${`${fixed(f.products_per_second)} products/s`.padStart(18)}   CPU per product: node ${fixed(f.node_cpu_us)} µs, database ${fixed(f.db_cpu_us)} µs`,
      );
    }
    console.log(`PostgreSQL / SQLite: ${fixed(imports.postgres.products_per_second / imports.sqlite.products_per_second, 2)}`);
  }
  if (feedFigures) {
    console.log('');
    console.log(`feed window (1000 changes from the middle of the history), sequential requests:`);
    console.log(
      `${'engine'.padEnd(12)}${'history'.padStart(9)}${'median ms'.padStart(11)}${'node CPU/req'.padStart(14)}${'db CPU/req'.padStart(12)}`,
    );
    for (const engine of ['sqlite', 'postgres'] as const) {
      for (const h of HISTORIES) {
        const f = feedFigures[engine][h];
        console.log(
          `${engine.padEnd(12)}${String(h === 'small' ? SMALL : LARGE).padStart(9)}${fixed(f.median_ms, 2).padStart(11)}${`${fixed(f.node_cpu_us)} µs`.padStart(14)}${`${fixed(f.db_cpu_us)} µs`.padStart(12)}`,
        );
      }
      console.log(
        `${engine.padEnd(12)}${'ratio'.padStart(9)}${fixed(feedRatio(engine), 2).padStart(11)}${`CPU ${fixed(feedCpuRatio(engine), 2)}`.padStart(14)}`,
      );
    }
  }
  if (deliveryFigures) {
    console.log('');
    console.log(`signed deliveries (${DELIVERIES} per round of 100 changes each, ${ENDPOINTS} endpoints, receiver answering 204):`);
    console.log(
      `${'setup'.padEnd(22)}${'sending/s'.padStart(10)}${'drain/s'.padStart(9)}${'workers CPU/delivery'.padStart(22)}${'db CPU/delivery'.padStart(17)}`,
    );
    for (const d of deliveryFigures) {
      console.log(
        `${d.setup.padEnd(22)}${fixed(d.per_second).padStart(10)}${fixed(d.drain_per_second).padStart(9)}${`${fixed(d.worker_cpu_us)} µs`.padStart(22)}${`${fixed(d.db_cpu_us)} µs`.padStart(17)}`,
      );
    }
    const sqlite = deliveryFigures.find((d) => d.setup === 'sqlite 1 worker')!;
    for (const d of deliveryFigures.filter((f) => f !== sqlite)) {
      console.log(
        `${d.setup} / sqlite 1 worker: ${fixed(d.per_second / sqlite.per_second, 2)} (sending), ${fixed(d.drain_per_second / sqlite.drain_per_second, 2)} (whole drain)`,
      );
    }
    const [one, three] = [
      deliveryFigures.find((d) => d.setup === 'postgres 1 worker'),
      deliveryFigures.find((d) => d.setup === 'postgres 3 workers'),
    ];
    if (one && three)
      console.log(
        `PostgreSQL 3 workers / 1 worker: ${fixed(three.per_second / one.per_second, 2)} (sending), ${fixed(three.drain_per_second / one.drain_per_second, 2)} (whole drain)`,
      );
  }
  console.log('');
  console.log('goals, measured in this run:');
  for (const v of verdicts) console.log(`  ${v.pass ? 'PASS' : 'FAIL'}  ${v.goal}: ${fixed(v.measured, 2)}`);
}

// ---- run --------------------------------------------------------------------------------------

tempDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-bench-postgres-'));
// The server runs as the postgres user when we are root: it must reach its folder inside.
fs.chmodSync(tempDir, 0o711);
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    console.error(`\n${signal}: stopping the services and PostgreSQL, removing ${tempDir}`);
    cleanUp();
    process.exit(130);
  });
}
process.once('exit', cleanUp);
const started = performance.now();
try {
  postgres = await startPostgresServer({ dir: path.join(tempDir, 'postgres'), durable: false });
  log(`PostgreSQL on ${postgres.url} (${postgres.bindir}; durable: false), SQLite files in ${tempDir}`);
  const catalog = parts.has('page1') || parts.has('import') ? await catalogPart() : null;
  const feed = parts.has('feed') ? await feedPart() : null;
  const deliveries = parts.has('deliveries') ? await deliveriesPart() : null;
  const seconds = (performance.now() - started) / 1000;
  report(catalog, feed, deliveries, seconds);
} catch (error) {
  console.error(error);
  process.exitCode = 1;
} finally {
  await stopTracked();
  if (postgres) await postgres.stop('fast').catch(() => postgres?.stopSync('immediate'));
  postgres = null;
  cleanUp();
}
