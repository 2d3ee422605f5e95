// `npm run bench:cost`: the server CPU one unit of background work costs, beside a reference doing
// the same inherent work in one process (scripts/bench/cost-reference.ts), on SQLite and on PostgreSQL.
//
// Per engine: the demo catalog (`demo --products N`, default 2,000; its images are on a reserved
// host that never resolves) is built into a fresh database (PostgreSQL: a throwaway server,
// scripts/dev/postgres-server.ts, non-durable as for the tests), and `serve` runs on it as `npm start`
// runs it (scripts/bench/serve-process.ts: `node --import tsx src/cli.ts serve`, every default on) with
// CPS_WEBHOOK_ALLOW_HOSTS=127.0.0.1 so that the local image origin and receiver (scripts/bench/scale-peers.ts,
// in a child process) pass the SSRF guard. A first serve runs until the image mirror has marked the
// demo's dead host down (its image_origins row), so that its images no longer cost anything but a
// probe now and then; then one unit at a time, each in a serve of its own (started, measured from
// /readyz on, stopped), the units measured before it off only where their work would run at the same time:
//   import      POST .../imports (NDJSON) of --import-products new products (default 20,000), each
//               with --images-per-product images (2) on the local origin; mirroring and the
//               dispatcher off (their work is the units below); one webhook endpoint exists, so each
//               change also writes its outbox row, as it does for any merchant with an endpoint;
//   unchanged   the same file again;
//   new cost    the same refs with every cost 1.37 higher: a price change in every store;
//   image       mirroring on (dispatcher off): the images the three imports left pending, all on the
//               local origin, mirrored (the cps_images{state="mirrored"} gauge; the origin's count
//               of requests beside it), until none is left or --unit-seconds (300);
//   delivery    every default on: the outbox the imports and the mirroring filled, coalesced and
//               delivered to the one endpoint, whose local receiver answers 200 at once (the
//               deliveries it received), until the outbox is drained or --unit-seconds. Its window
//               opens once the receiver has --warmup-deliveries (default 400) of them: a fresh serve
//               spends its first second compiling (V8's optimising compiler on its helper threads,
//               a third of the unit's CPU on 2,400 deliveries, measured with perf) and loading the
//               publishing thread's modules, a cost per process start, not per delivery. The
//               reference warms up the same way (as many deliveries, not measured). The figure
//               from /readyz on is reported beside it (`from_start` in --json, "cold" in the table).
// CPU per unit: utime + stime of the serve process (/proc/PID/stat: every thread, ended ones
// included) over the unit's window, divided by the units; per thread too (/proc/PID/task/*/stat: the
// serving thread, the worker thread (it lowers its own priority: CPS_WORKER_NICE; Node names every
// thread `node`, so the nice value tells it) and the helper threads (libuv's pool, V8's GC and
// compilers, the SQLite WAL checkpointer's thread, tsx's module loader)); on PostgreSQL the database server's
// processes added (the postmaster's children, live and reaped). Rate: units per second of the window.
// Statement counts and times per unit from serve's cps_db_statement_duration_seconds histogram.
// The reference (scripts/bench/cost-reference.ts) runs in this process while no serve runs: the three
// imports on the same files, --reference-images images from the local origin and
// --reference-deliveries deliveries to the receiver; its CPU is process.cpuUsage() (plus the
// database server's on PostgreSQL, where it uses a database of its own on the same server).
// Targets: on SQLite each unit <= 2x its reference's CPU; on PostgreSQL each unit's CPU (serve +
// database server) <= 1.5x SQLite's and its rate >= 0.7x SQLite's.
// --profile DIR: every unit's serve runs with `--cpu-prof --cpu-prof-dir=DIR/<engine>-<unit>
// --cpu-prof-interval 500` (a profile per thread, written when it exits) and the report adds each
// unit's top functions and files by self time, per thread. The profiler's sampling (a sample every
// 500 µs on each thread) is CPU of the serve: 130-235 ms a second while it is idle (the "idle" figure,
// against 0-10 ms/s without --profile, 2026-11-30), counted in every unit's CPU of such a run, on both
// engines. Compare CPU per unit only between runs without --profile.
// The idle figure (the serve's CPU per second in the 2 s before an import unit) is shown, not
// subtracted: without --profile it is 0-10 ms/s on both engines (the pool, timers), under 0.002 ms
// a unit over a unit's window.
// Everything runs on this machine; CPU per unit is the figure that stays meaningful when other
// processes share it (rates less so).
// Usage: npm run bench:cost -- [--engine sqlite|postgres|both (both)] [--products N (2000)]
//   [--import-products N (20000)] [--images-per-product N (2)] [--unit-seconds S (300)]
//   [--reference-images N (4000)] [--reference-deliveries N (1000)] [--warmup-deliveries N (400)]
//   [--units LIST (all): a comma list of import, unchanged, new_cost, image, delivery; the delivery
//             unit delivers what the units run before it left in the outbox, so it needs an import]
//   [--profile DIR] [--json]
//   [--keep]  leaves the temporary folder (each engine's database, media, the stopped PostgreSQL
//             cluster) for a look afterwards, e.g. EXPLAIN of the statements a unit ran
// With --json, stdout carries only the result (progress on stderr). Exits 0 whatever the verdicts;
// 1 when the run itself fails.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import pg from 'pg';
import { buildDemo, candidateDir, demoImportBody, killTracked } from './baseline.js';
import {
  merchantContext,
  postgresReference,
  referenceDeliveries,
  referenceImages,
  referenceImport,
  sqliteReference,
  type ReferenceDb,
} from './cost-reference.js';
import { startPeers, type Peers } from './peers.js';
import { dataDirOf, type PostgresServer } from '../dev/postgres-server.js';
import { postgresServerCpu, procCpu, threadCpu } from './process-sampler.js';
import { AdminClient } from './scale-catalog.js';
import { adminAgent, benchDatabase, request, startServe, type Engine, type Serve } from './serve-process.js';

// ---- options ----------------------------------------------------------------------------------

const { values: flags } = parseArgs({
  options: {
    engine: { type: 'string', default: 'both' },
    products: { type: 'string', default: '2000' },
    'import-products': { type: 'string', default: '20000' },
    'images-per-product': { type: 'string', default: '2' },
    'unit-seconds': { type: 'string', default: '300' },
    'reference-images': { type: 'string', default: '4000' },
    'reference-deliveries': { type: 'string', default: '1000' },
    'warmup-deliveries': { type: 'string', default: '400' },
    units: { type: 'string' },
    profile: { type: 'string' },
    keep: { type: 'boolean' },
    json: { type: 'boolean' },
  },
});
const int = (name: string, min: number) => {
  const value = flags[name as keyof typeof flags] as string;
  const n = Number(value);
  if (!Number.isInteger(n) || n < min) throw new Error(`--${name} must be an integer >= ${min}, got "${value}"`);
  return n;
};
const PRODUCTS = int('products', 1);
const IMPORT_PRODUCTS = int('import-products', 1);
const IMAGES_PER_PRODUCT = int('images-per-product', 1);
const UNIT_SECONDS = int('unit-seconds', 1);
const REFERENCE_IMAGES = int('reference-images', 1);
const REFERENCE_DELIVERIES = int('reference-deliveries', 1);
const WARMUP_DELIVERIES = int('warmup-deliveries', 0);
const ENGINES: Engine[] =
  flags.engine === 'both'
    ? ['sqlite', 'postgres']
    : flags.engine === 'sqlite' || flags.engine === 'postgres'
      ? [flags.engine]
      : (() => {
          throw new Error(`--engine takes sqlite, postgres or both, got "${flags.engine}"`);
        })();
const PROFILE_DIR = flags.profile ? path.resolve(flags.profile) : undefined;

const TARGETS = { referenceRatio: 2, postgresCpuRatio: 1.5, postgresRateRatio: 0.7 };
const ADMIN_TOKEN = 'bench-cost-admin-token';
const COST_STEP = 1.37;
const UNITS = ['import', 'unchanged', 'new_cost', 'image', 'delivery'] as const;
type Unit = (typeof UNITS)[number];
/** The units --units names (all without it), in UNITS' order. */
const RUN_UNITS: Unit[] = (() => {
  if (flags.units === undefined) return [...UNITS];
  const named = flags.units.split(',').map((u) => u.trim());
  const unknown = named.filter((u) => !(UNITS as readonly string[]).includes(u));
  if (unknown.length > 0 || named.length === 0) throw new Error(`--units takes a comma list of ${UNITS.join(', ')}, got "${flags.units}"`);
  return UNITS.filter((u) => named.includes(u));
})();
/** How often the delivery unit counts the receiver's deliveries: its window ends at the sample that saw the last one. */
const DELIVERY_SAMPLE_MS = 20;
const UNIT_TITLES: Record<Unit, string> = {
  import: 'import, new product',
  unchanged: 're-import, unchanged',
  new_cost: 're-import, new cost',
  image: 'image mirrored',
  delivery: 'delivery made',
};

const log = (line: string) => (flags.json ? console.error(line) : console.log(line));
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const now = () => performance.now();

// ---- CPU marks --------------------------------------------------------------------------------

/** The CPU of serve (whole process, and per thread by tid) and of the database server so far, µs. */
interface CpuMark {
  at: number;
  /** The monotonic clock in µs, as V8's CPU profiles time their samples. */
  monotonicUs: number;
  serve: number;
  threads: Map<number, { nice: number; us: number }>;
  db: number;
}

function mark(pid: number, postgres: PostgresServer | undefined): CpuMark {
  return {
    at: now(),
    monotonicUs: Number(process.hrtime.bigint() / 1000n),
    serve: procCpu(pid)?.own ?? NaN,
    threads: new Map(threadCpu(pid).map((t) => [t.tid, { nice: t.nice, us: t.us }])),
    db: postgres ? postgresServerCpu(dataDirOf(postgres.dir)) : 0,
  };
}

/** Milliseconds of CPU between two marks: serve's, by kind of thread, and the database server's. */
interface CpuSpent {
  seconds: number;
  serveMs: number;
  dbMs: number;
  threadsMs: { main: number; workers: number; helpers: number; ended: number };
}

function spent(pid: number, a: CpuMark, b: CpuMark): CpuSpent {
  const threadsMs = { main: 0, workers: 0, helpers: 0, ended: 0 };
  for (const [tid, t] of b.threads) {
    const ms = (t.us - (a.threads.get(tid)?.us ?? 0)) / 1000;
    if (tid === pid) threadsMs.main += ms;
    else if (t.nice > 0) threadsMs.workers += ms;
    else threadsMs.helpers += ms;
  }
  const serveMs = (b.serve - a.serve) / 1000;
  threadsMs.ended = Math.max(0, serveMs - threadsMs.main - threadsMs.workers - threadsMs.helpers);
  return { seconds: (b.at - a.at) / 1000, serveMs, dbMs: (b.db - a.db) / 1000, threadsMs };
}

// ---- /metrics ---------------------------------------------------------------------------------

type Scrape = Map<string, number>;

async function scrape(serve: Serve): Promise<Scrape> {
  const { body } = await request(serve.base, '/metrics', { agent: adminAgent });
  const values: Scrape = new Map();
  for (const line of body.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const space = line.lastIndexOf(' ');
    values.set(line.slice(0, space), Number(line.slice(space + 1)));
  }
  return values;
}

const gauge = (s: Scrape, name: string) => s.get(name) ?? 0;

interface StatementUse {
  statement: string;
  count: number;
  ms: number;
}

/** What serve's statement histogram counted between two scrapes, by statement, most time first. */
function statementsBetween(a: Scrape, b: Scrape): StatementUse[] {
  const uses: StatementUse[] = [];
  for (const [name, count] of b) {
    const match = /^cps_db_statement_duration_seconds_count\{(.*)\}$/.exec(name);
    if (!match) continue;
    const statement = /statement="([^"]*)"/.exec(match[1]!)?.[1] ?? match[1]!;
    const sum = name.replace('_count{', '_sum{');
    const used = { statement, count: count - (a.get(name) ?? 0), ms: 1000 * ((b.get(sum) ?? 0) - (a.get(sum) ?? 0)) };
    if (used.count > 0) uses.push(used);
  }
  return uses.sort((x, y) => y.ms - x.ms);
}

// ---- CPU profiles (--profile) -----------------------------------------------------------------

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}
interface CpuProfile {
  startTime: number;
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}
interface ProfileSummary {
  thread: string;
  totalMs: number;
  functions: { name: string; ms: number }[];
  files: { name: string; ms: number }[];
}

/** A frame's file, short: this tree's path, or node_modules/<package>, or the node: module. */
function shortFile(url: string): string {
  if (!url) return '(native / V8)';
  const file = url.replace(/^file:\/\//, '');
  const modules = file.lastIndexOf('/node_modules/');
  if (modules >= 0) {
    const rest = file.slice(modules + '/node_modules/'.length).split('/');
    return `node_modules/${rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]}`;
  }
  return file.startsWith(candidateDir) ? path.relative(candidateDir, file) : file;
}

/**
 * Self time per function and per file of every profile in `dir` (one per thread), counting only
 * the samples taken within `window` (µs on the monotonic clock: the unit's measured window, not
 * serve's start nor its stop).
 */
function summariseProfiles(dir: string, window: { fromUs: number; toUs: number }, top = 25): ProfileSummary[] {
  if (!fs.existsSync(dir)) return [];
  const summaries: ProfileSummary[] = [];
  for (const file of fs.readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'))) {
    const profile = JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8')) as CpuProfile;
    const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
    const byFunction = new Map<string, number>();
    const byFile = new Map<string, number>();
    let total = 0;
    let at = profile.startTime;
    profile.samples.forEach((id, i) => {
      const delta = profile.timeDeltas[i] ?? 0;
      at += delta;
      if (at < window.fromUs || at > window.toUs) return;
      const ms = delta / 1000;
      const frame = nodes.get(id)!.callFrame;
      if (frame.functionName === '(idle)' || frame.functionName === '(program)') return;
      total += ms;
      const fileName = shortFile(frame.url);
      // tsx's transformed sources do not keep their lines: a .ts frame is named by its file alone.
      const line = frame.url && !frame.url.endsWith('.ts') ? `:${frame.lineNumber + 1}` : '';
      const name = `${frame.functionName || '(anonymous)'} ${fileName}${line}`;
      byFunction.set(name, (byFunction.get(name) ?? 0) + ms);
      byFile.set(fileName, (byFile.get(fileName) ?? 0) + ms);
    });
    // CPU.<date>.<time>.<pid>.<thread id>.<n>.cpuprofile: thread 0 is the serving thread.
    const threadId = Number(file.split('.').at(-3));
    const sorted = (m: Map<string, number>) =>
      [...m]
        .sort((a, b) => b[1] - a[1])
        .slice(0, top)
        .map(([name, ms]) => ({ name, ms }));
    summaries.push({
      thread: threadId === 0 ? 'main' : `worker ${threadId}`,
      totalMs: total,
      functions: sorted(byFunction),
      files: sorted(byFile),
    });
  }
  return summaries.sort((a, b) => b.totalMs - a.totalMs);
}

// ---- the database, read from outside ----------------------------------------------------------

/** Rows of one query on the service's database (an SQLite file read-only, or a postgres:// URL). */
async function query<T>(database: string, sql: string): Promise<T[]> {
  if (/^postgres(ql)?:\/\//.test(database)) {
    const client = new pg.Client({ connectionString: database });
    await client.connect();
    try {
      return (await client.query(sql)).rows as T[];
    } finally {
      await client.end();
    }
  }
  const db = new Database(database, { readonly: true, fileMustExist: true });
  try {
    return db.prepare(sql).all() as T[];
  } finally {
    db.close();
  }
}

// ---- one engine -------------------------------------------------------------------------------

interface UnitResult {
  unit: Unit;
  units: number;
  seconds: number;
  cpuMsPerUnit: number;
  serveMsPerUnit: number;
  dbMsPerUnit: number;
  threadsMsPerUnit: CpuSpent['threadsMs'];
  perSecond: number;
  /** Serve's CPU per second while idle just before the unit, ms (polls, timers). */
  idleMsPerSecond: number;
  statements: { statement: string; perUnit: number; msPerUnit: number }[];
  detail: Record<string, unknown>;
  profile?: ProfileSummary[];
  /** The measured window on the monotonic clock, µs. */
  window: { fromUs: number; toUs: number };
  reference?: { units: number; seconds: number; cpuMsPerUnit: number; dbMsPerUnit: number; perSecond: number };
}

interface EngineResult {
  engine: Engine;
  deadHostDownSeconds: number | null;
  units: UnitResult[];
}

async function runEngine(engine: Engine, peers: Peers, tempDir: string): Promise<EngineResult> {
  log(`\n== ${engine} ==`);
  const { database, settings, postgres } = await benchDatabase(engine, tempDir, `cost_${engine}`);
  try {
    const demo = await buildDemo({ name: 'candidate', dir: candidateDir }, database, PRODUCTS, log);
    const env = {
      ...settings,
      CPS_WEBHOOK_ALLOW_HOSTS: '127.0.0.1',
      CPS_MEDIA_DIR: path.join(tempDir, `media-${engine}`),
      CPS_IMAGE_MIRRORING: 'true',
    };
    const merchant = `/merchants/${demo.merchantId}`;
    const origin = peers.hosts.origin;
    const images = (n: number) => Array.from({ length: IMAGES_PER_PRODUCT }, (_, i) => `${origin}/p/cost-${engine}/${n}/${i + 1}.jpg`);
    const newProducts = demoImportBody(IMPORT_PRODUCTS, 'cost', { images });
    const newCosts = demoImportBody(IMPORT_PRODUCTS, 'cost', { images, costStep: COST_STEP });
    const receiverPath = `/cost/${engine}`;

    // The demo's dead host, marked down by the mirror before anything is measured.
    let deadHostDownSeconds: number | null = null;
    {
      const serve = await startServe({ adminToken: ADMIN_TOKEN, env });
      const started = now();
      while (now() - started < 120_000) {
        const down = await query<{ origin: string }>(database, 'SELECT origin FROM image_origins WHERE down_since IS NOT NULL');
        if (down.some((r) => r.origin.includes('demo-supplier.test'))) {
          deadHostDownSeconds = (now() - started) / 1000;
          break;
        }
        await sleep(250);
      }
      log(
        deadHostDownSeconds === null
          ? "the demo's dead image host was not marked down within 120 s: its fetches are in the image unit's CPU"
          : `the demo's dead image host marked down ${deadHostDownSeconds.toFixed(1)} s after /readyz`,
      );
      await new AdminClient(serve.base, ADMIN_TOKEN).call('POST', `${merchant}/webhook-endpoints`, {
        url: `${peers.receiver}${receiverPath}`,
        store: null,
      });
      await serve.stop();
    }

    const results: UnitResult[] = [];
    const expectedImages = IMPORT_PRODUCTS * IMAGES_PER_PRODUCT;
    let imagesLeft = true;
    for (const unit of RUN_UNITS) {
      const unitEnv: Record<string, string> = { ...env };
      if (unit === 'import' || unit === 'unchanged' || unit === 'new_cost') {
        unitEnv.CPS_IMAGE_MIRRORING = 'false';
        unitEnv.CPS_WEBHOOK_DISPATCHER = 'false';
      } else if (unit === 'image') {
        unitEnv.CPS_WEBHOOK_DISPATCHER = 'false';
      } else if (imagesLeft) {
        // Images the image unit left (it ran out of time) would be mirrored meanwhile.
        unitEnv.CPS_IMAGE_MIRRORING = 'false';
      }
      const profileDir = PROFILE_DIR && path.join(PROFILE_DIR, `${engine}-${unit}`);
      if (profileDir) {
        fs.rmSync(profileDir, { recursive: true, force: true });
        process.env.BENCH_SERVE_NODE_ARGS = `--cpu-prof --cpu-prof-dir=${profileDir} --cpu-prof-interval 500`;
      }
      // The receiver's count before serve starts: its dispatcher may send before /readyz answers,
      // and under load it can finish a small outbox before the first scrape.
      const receivedBeforeStart = (await peers.counts()).byPath[receiverPath] ?? 0;
      const serve = await startServe({ adminToken: ADMIN_TOKEN, env: unitEnv });
      delete process.env.BENCH_SERVE_NODE_ARGS;
      const pid = serve.child.pid!;
      let result: Omit<UnitResult, 'idleMsPerSecond' | 'unit'>;
      let idleMsPerSecond = NaN;
      try {
        const admin = new AdminClient(serve.base, ADMIN_TOKEN);
        const measure = async (
          work: () => Promise<{ units: number; start?: CpuMark; end?: CpuMark; endScrape?: Scrape; detail: Record<string, unknown> }>,
        ): Promise<Omit<UnitResult, 'idleMsPerSecond' | 'unit'>> => {
          const scrape0 = await scrape(serve);
          const done0 = mark(pid, postgres);
          const done = await work();
          const mark0 = done.start ?? done0;
          const mark1 = done.end ?? mark(pid, postgres);
          const scrape1 = done.endScrape ?? (await scrape(serve));
          const cpu = spent(pid, mark0, mark1);
          const per = (ms: number) => ms / Math.max(1, done.units);
          return {
            units: done.units,
            seconds: cpu.seconds,
            cpuMsPerUnit: per(cpu.serveMs + cpu.dbMs),
            serveMsPerUnit: per(cpu.serveMs),
            dbMsPerUnit: per(cpu.dbMs),
            threadsMsPerUnit: {
              main: per(cpu.threadsMs.main),
              workers: per(cpu.threadsMs.workers),
              helpers: per(cpu.threadsMs.helpers),
              ended: per(cpu.threadsMs.ended),
            },
            perSecond: done.units / cpu.seconds,
            statements: statementsBetween(scrape0, scrape1)
              .slice(0, 15)
              .map((s) => ({ statement: s.statement, perUnit: per(s.count), msPerUnit: per(s.ms) })),
            detail: done.detail,
            window: { fromUs: mark0.monotonicUs, toUs: mark1.monotonicUs },
          };
        };
        if (unit === 'import' || unit === 'unchanged' || unit === 'new_cost') {
          // Idle first: what serve spends with nothing to do (subtracted from nothing, shown beside).
          const idle0 = mark(pid, postgres);
          await sleep(2000);
          idleMsPerSecond = spent(pid, idle0, mark(pid, postgres)).serveMs / 2;
          const body = unit === 'new_cost' ? newCosts : newProducts;
          result = await measure(async () => {
            const answer = await admin.call<{ upserted: number }>('POST', `${merchant}/imports`, body, 'application/x-ndjson');
            return { units: answer.upserted, detail: { answer } };
          });
        } else if (unit === 'image') {
          result = await measure(async () => {
            const first = await scrape(serve);
            const mirrored0 = gauge(first, 'cps_images{state="mirrored"}');
            const fetched0 = (await peers.counts()).images;
            let last = { mark: mark(pid, postgres), scrape: first, mirrored: 0 };
            const started = now();
            while (now() - started < UNIT_SECONDS * 1000) {
              await sleep(1000);
              const [at, s] = [mark(pid, postgres), await scrape(serve)];
              const mirrored = gauge(s, 'cps_images{state="mirrored"}') - mirrored0;
              if (mirrored > last.mirrored) last = { mark: at, scrape: s, mirrored };
              // Done when every imported image is mirrored (the few mirrored before /readyz included:
              // the demo's never are, so the gauge counts only the local origin's).
              if (gauge(s, 'cps_images{state="mirrored"}') >= expectedImages) break;
            }
            imagesLeft = gauge(last.scrape, 'cps_images{state="mirrored"}') < expectedImages;
            const fetched = (await peers.counts()).images - fetched0;
            return {
              units: last.mirrored,
              end: last.mark,
              endScrape: last.scrape,
              detail: { expected: expectedImages, origin_requests: fetched, images: Object.fromEntries(imageGauges(last.scrape)) },
            };
          });
        } else {
          const received = async () => (await peers.counts()).byPath[receiverPath] ?? 0;
          // From /readyz on (the "cold" figure), then the warm-up: the window opens once the
          // receiver has WARMUP_DELIVERIES deliveries (or after a fifth of --unit-seconds).
          const fromStart = mark(pid, postgres);
          const warmupUntil = now() + (UNIT_SECONDS * 1000) / 5;
          while (WARMUP_DELIVERIES > 0 && (await received()) - receivedBeforeStart < WARMUP_DELIVERIES && now() < warmupUntil) {
            await sleep(20);
          }
          result = await measure(async () => {
            const beforeWindow = (await received()) - receivedBeforeStart;
            let latest = await scrape(serve);
            let last: { mark: CpuMark; scrape: Scrape | null; deliveries: number; at: number } = {
              mark: mark(pid, postgres),
              scrape: latest,
              deliveries: beforeWindow,
              at: now(),
            };
            const waitingIn = (s: Scrape) =>
              gauge(s, 'cps_webhook_outbox_depth') +
              gauge(s, 'cps_webhook_deliveries_waiting{status="pending"}') +
              gauge(s, 'cps_webhook_deliveries_waiting{status="failed"}');
            // The receiver's count every DELIVERY_SAMPLE_MS (the window ends at the sample that saw the
            // last delivery: sampled every second, a 1.3 s drain counted as 2 s), /metrics every second.
            const started = now();
            let scrapedAt = now();
            while (now() - started < UNIT_SECONDS * 1000) {
              const settled = waitingIn(latest) === 0 && last.deliveries > 0 && now() - last.at > 3000;
              if (settled) break;
              await sleep(DELIVERY_SAMPLE_MS);
              const deliveries = (await received()) - receivedBeforeStart;
              if (deliveries > last.deliveries) last = { mark: mark(pid, postgres), scrape: null, deliveries, at: now() };
              if (now() - scrapedAt >= 1000) {
                latest = await scrape(serve);
                scrapedAt = now();
                // The statements counted up to the first scrape after the last delivery.
                last.scrape ??= latest;
              }
            }
            last.scrape ??= await scrape(serve);
            const outcomes = Object.fromEntries(
              ['succeeded', 'failed', 'given_up', 'dropped'].map((o) => [o, gauge(latest, `cps_webhook_deliveries_total{outcome="${o}"}`)]),
            );
            if (last.deliveries === 0) log(`no delivery reached the receiver; serve's output:\n${serve.output().slice(-4000)}`);
            const cold = spent(pid, fromStart, last.mark);
            // An outbox the warm-up drained (a small run) leaves the window nothing: the unit is then
            // the figure from /readyz on.
            const drained = WARMUP_DELIVERIES > 0 && last.deliveries === beforeWindow;
            if (drained) log(`the warm-up drained the outbox (${beforeWindow} deliveries): the unit is measured from /readyz on`);
            return {
              // With a warm-up, the deliveries in the window; without one, those the receiver had
              // before the window opened too (counted as units, their CPU not).
              units: WARMUP_DELIVERIES > 0 && !drained ? last.deliveries - beforeWindow : last.deliveries,
              ...(drained ? { start: fromStart } : {}),
              end: last.mark,
              endScrape: last.scrape,
              // What was still waiting at the end, the outcomes serve counted, and the figure from
              // /readyz on (warm-up included).
              detail: {
                before_window: beforeWindow,
                waiting_at_end: waitingIn(latest),
                outcomes,
                warmup_drained: drained,
                from_start: {
                  units: last.deliveries,
                  cpuMsPerUnit: (cold.serveMs + cold.dbMs) / Math.max(1, last.deliveries),
                  seconds: cold.seconds,
                },
              },
            };
          });
        }
      } finally {
        await serve.stop();
      }
      const entry: UnitResult = { unit, ...result, idleMsPerSecond };
      if (profileDir) entry.profile = summariseProfiles(profileDir, entry.window);
      results.push(entry);
      log(
        `${UNIT_TITLES[unit].padEnd(22)} ${entry.units} units in ${entry.seconds.toFixed(1)} s: ${entry.cpuMsPerUnit.toFixed(3)} ms CPU/unit ` +
          `(${threadLine(entry)}), ${entry.perSecond.toFixed(0)}/s${coldLine(entry)}`,
      );
    }

    // The references, while no serve runs.
    const context = await merchantContext(database, demo.merchantId);
    let db: ReferenceDb;
    if (postgres) {
      const client = new pg.Client({ connectionString: postgres.url });
      await client.connect();
      await client.query('CREATE DATABASE cost_reference');
      await client.end();
      db = await postgresReference(postgres.urlOf('cost_reference'));
    } else {
      db = sqliteReference(path.join(tempDir, 'reference-sqlite.db'));
    }
    try {
      const referenceImageRows = Array.from({ length: REFERENCE_IMAGES }, (_, i) => `${origin}/r/cost-${engine}/${i + 1}.jpg`);
      const imageIds = await db.addImages(referenceImageRows);
      const runs: Record<Unit, () => Promise<number>> = {
        import: () => referenceImport(db, context, newProducts).then(() => IMPORT_PRODUCTS),
        unchanged: () => referenceImport(db, context, newProducts).then(() => IMPORT_PRODUCTS),
        new_cost: () => referenceImport(db, context, newCosts).then(() => IMPORT_PRODUCTS),
        image: () =>
          referenceImages(
            db,
            imageIds.map((id, i) => ({ id, url: referenceImageRows[i]! })),
            path.join(tempDir, `reference-media-${engine}`),
          ),
        delivery: () => referenceDeliveries(db, `${peers.receiver}/reference/${engine}`, REFERENCE_DELIVERIES),
      };
      // Not measured: the delivery reference's warm-up, as the delivery unit's window opens after its own.
      const warmups: Partial<Record<Unit, () => Promise<unknown>>> = {
        delivery: () => referenceDeliveries(db, `${peers.receiver}/reference/${engine}`, WARMUP_DELIVERIES),
      };
      for (const entry of results) {
        if (WARMUP_DELIVERIES > 0) await warmups[entry.unit]?.();
        const [cpu0, db0, t0] = [process.cpuUsage(), postgres ? postgresServerCpu(dataDirOf(postgres.dir)) : 0, now()];
        const units = await runs[entry.unit]();
        const seconds = (now() - t0) / 1000;
        const cpu = process.cpuUsage(cpu0);
        const dbMs = ((postgres ? postgresServerCpu(dataDirOf(postgres.dir)) : 0) - db0) / 1000;
        entry.reference = {
          units,
          seconds,
          cpuMsPerUnit: ((cpu.user + cpu.system) / 1000 + dbMs) / units,
          dbMsPerUnit: dbMs / units,
          perSecond: units / seconds,
        };
        log(
          `reference: ${UNIT_TITLES[entry.unit].padEnd(22)} ${entry.reference.cpuMsPerUnit.toFixed(3)} ms CPU/unit, ${entry.reference.perSecond.toFixed(0)}/s`,
        );
      }
    } finally {
      await db.close();
    }
    return { engine, deadHostDownSeconds, units: results };
  } finally {
    await postgres?.stop('immediate');
  }
}

function imageGauges(s: Scrape): Map<string, number> {
  const states = new Map<string, number>();
  for (const [name, value] of s) {
    const match = /^cps_images\{state="([^"]*)"\}$/.exec(name);
    if (match) states.set(match[1]!, value);
  }
  return states;
}

const ms = (x: number) => (x >= 10 ? x.toFixed(1) : x >= 1 ? x.toFixed(2) : x.toFixed(3));

/** The delivery unit's figure from /readyz on, its warm-up included, beside the window's. */
function coldLine(u: UnitResult): string {
  const cold = u.detail.from_start as { units: number; cpuMsPerUnit: number } | undefined;
  return cold ? `; cold (from /readyz, ${cold.units} units): ${ms(cold.cpuMsPerUnit)} ms CPU/unit` : '';
}

function threadLine(u: UnitResult): string {
  const t = u.threadsMsPerUnit;
  const parts = [`main ${ms(t.main)}`, `workers ${ms(t.workers)}`, `helpers ${ms(t.helpers)}`];
  if (t.ended > 0.0005) parts.push(`ended ${ms(t.ended)}`);
  if (u.dbMsPerUnit > 0) parts.push(`database ${ms(u.dbMsPerUnit)}`);
  return parts.join(', ');
}

// ---- the report -------------------------------------------------------------------------------

interface Verdict {
  engine: Engine;
  unit: Unit;
  target: string;
  value: number | null;
  met: boolean | null;
}

function verdicts(results: EngineResult[]): Verdict[] {
  const out: Verdict[] = [];
  const sqlite = results.find((r) => r.engine === 'sqlite');
  const postgres = results.find((r) => r.engine === 'postgres');
  for (const u of sqlite?.units ?? []) {
    const ratio = u.reference ? u.cpuMsPerUnit / u.reference.cpuMsPerUnit : null;
    out.push({
      engine: 'sqlite',
      unit: u.unit,
      target: `CPU/unit <= ${TARGETS.referenceRatio}x the reference's`,
      value: ratio,
      met: ratio === null ? null : ratio <= TARGETS.referenceRatio,
    });
  }
  for (const u of postgres?.units ?? []) {
    const s = sqlite?.units.find((x) => x.unit === u.unit);
    const cpu = s ? u.cpuMsPerUnit / s.cpuMsPerUnit : null;
    const rate = s ? u.perSecond / s.perSecond : null;
    out.push({
      engine: 'postgres',
      unit: u.unit,
      target: `CPU/unit (serve + database) <= ${TARGETS.postgresCpuRatio}x SQLite's`,
      value: cpu,
      met: cpu === null ? null : cpu <= TARGETS.postgresCpuRatio,
    });
    out.push({
      engine: 'postgres',
      unit: u.unit,
      target: `rate >= ${TARGETS.postgresRateRatio}x SQLite's`,
      value: rate,
      met: rate === null ? null : rate >= TARGETS.postgresRateRatio,
    });
  }
  return out;
}

function printReport(results: EngineResult[]): void {
  const sqlite = results.find((r) => r.engine === 'sqlite');
  for (const r of results) {
    const onPostgres = r.engine === 'postgres';
    log(`\n${onPostgres ? 'PostgreSQL (serve + database server)' : 'SQLite'}: CPU per unit beside the reference's`);
    const head = ['unit', 'CPU/unit', 'reference', 'ratio', 'rate/s', 'reference rate/s'];
    if (onPostgres && sqlite) head.push("CPU vs SQLite's", "rate vs SQLite's");
    const rows = r.units.map((u) => {
      const row = [
        UNIT_TITLES[u.unit],
        `${ms(u.cpuMsPerUnit)} ms`,
        u.reference ? `${ms(u.reference.cpuMsPerUnit)} ms` : 'n/a',
        u.reference ? `${(u.cpuMsPerUnit / u.reference.cpuMsPerUnit).toFixed(1)}x` : 'n/a',
        u.perSecond.toFixed(0),
        u.reference ? u.reference.perSecond.toFixed(0) : 'n/a',
      ];
      const s = sqlite?.units.find((x) => x.unit === u.unit);
      if (onPostgres && sqlite)
        row.push(s ? `${(u.cpuMsPerUnit / s.cpuMsPerUnit).toFixed(2)}x` : 'n/a', s ? `${(u.perSecond / s.perSecond).toFixed(2)}x` : 'n/a');
      return row;
    });
    const widths = head.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
    for (const row of [head, ...rows]) log(`  ${row.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ')}`);
    log('  per thread (ms/unit) and idle serve (ms of CPU per second, before the unit):');
    for (const u of r.units) {
      const idle = Number.isNaN(u.idleMsPerSecond) ? '' : `; idle ${u.idleMsPerSecond.toFixed(1)} ms/s`;
      log(`    ${UNIT_TITLES[u.unit].padEnd(22)} ${threadLine(u)}${idle}${coldLine(u)}`);
    }
    log('  statements per unit (most time first):');
    for (const u of r.units) {
      const top = u.statements.slice(0, 6).map((s) => `${s.statement} ${s.perUnit.toFixed(2)}x ${ms(s.msPerUnit)} ms`);
      log(`    ${UNIT_TITLES[u.unit].padEnd(22)} ${top.join(', ') || 'n/a'}`);
    }
    for (const u of r.units) {
      if (!u.profile?.length) continue;
      log(`  profile of ${UNIT_TITLES[u.unit]} (self time, ms per unit):`);
      for (const p of u.profile) {
        log(`    ${p.thread}: ${ms(p.totalMs / u.units)} ms/unit sampled`);
        for (const f of p.files.slice(0, 10)) log(`      ${ms(f.ms / u.units).padStart(7)}  ${f.name}`);
        log('      functions:');
        for (const f of p.functions) log(`      ${ms(f.ms / u.units).padStart(7)}  ${f.name}`);
      }
    }
  }
  log('\ntargets:');
  for (const v of verdicts(results)) {
    const value = v.value === null ? 'n/a' : `${v.value.toFixed(2)}x`;
    log(
      `  ${v.met === null ? 'n/a   ' : v.met ? 'met   ' : 'MISSED'}  ${v.engine.padEnd(8)} ${UNIT_TITLES[v.unit].padEnd(22)} ${v.target}: ${value}`,
    );
  }
}

// ---- the run ----------------------------------------------------------------------------------

async function main(): Promise<void> {
  const tempDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-cost-'));
  // PostgreSQL runs as `postgres` when this process is root: it has to reach its folder in here.
  fs.chmodSync(tempDir, 0o711);
  const cleanUp = () => {
    killTracked();
    if (flags.keep) console.error(`--keep: the databases, media and PostgreSQL cluster (stopped) are in ${tempDir}`);
    else fs.rmSync(tempDir, { recursive: true, force: true, maxRetries: 3 });
  };
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      console.error(`\n${signal}: stopping and removing ${tempDir}`);
      cleanUp();
      process.exit(130);
    });
  }
  const started = now();
  try {
    log(
      `bench:cost: ${ENGINES.join(' and ')}; demo of ${PRODUCTS} products, ${IMPORT_PRODUCTS} products imported with ${IMAGES_PER_PRODUCT} images each; ${os.cpus().length} CPUs`,
    );
    if (PROFILE_DIR) log("--profile: the profiler's sampling is in every unit's CPU (compare CPU per unit only between runs without it)");
    const peers = await startPeers();
    const results: EngineResult[] = [];
    for (const engine of ENGINES) results.push(await runEngine(engine, peers, tempDir));
    printReport(results);
    log(`\nwhole run: ${((now() - started) / 1000).toFixed(0)} s`);
    if (flags.json) {
      console.log(
        JSON.stringify(
          {
            options: { products: PRODUCTS, import_products: IMPORT_PRODUCTS, images_per_product: IMAGES_PER_PRODUCT, engines: ENGINES },
            targets: TARGETS,
            results,
            verdicts: verdicts(results),
          },
          null,
          2,
        ),
      );
    }
  } catch (error) {
    console.error(error);
    process.exitCode = 1;
  } finally {
    cleanUp();
  }
}

await main();
