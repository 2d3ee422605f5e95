// `npm run bench:scale`: the whole service at catalog scale, with every worker on.
//
// The catalog (--products N, default 100,000) is built before the measured start by a `serve`
// started for the build alone (workers off), through the admin API: one merchant with 3 stores,
// 2 to 5 images per product, local webhook receivers behind --endpoints endpoints (a quarter of them
// for one store), and (seeded into the database while no service runs) an endpoint with
// --seed-deliveries finished deliveries in its log. Nothing is cached between runs: every run
// builds its catalogs anew (at 100,000 products about a minute on SQLite; at 1,000,000 several).
//
// Where the catalog's images are: the demo's unresolvable host behind the whole catalog, a live
// origin beside it. Every product has images on `images.demo-supplier.test`, the host `demo`
// puts every image on: a name reserved for tests, which the service's outbound guard refuses before
// any DNS query, so each fetch of it fails at once (`blocked_address`) and nothing leaves
// 127.0.0.1. Products 1..K also have every image but the first on the live origin (a local port
// answering every image at once), K the fewest products with --live-images images there (default
// 400 x --phase-seconds, 24,000 at the default 60 s: phases a and c at 4/3 of the mirroring goal's
// rate; faster, c ends when they are all mirrored and its rate is over the time it took); every image of the other products is on the dead host (as in the demo's catalog), plus
// --hanging products whose last image is on a local host that accepts and never answers (the
// mirror's time-out ends each of those fetches). Why not the whole catalog on the dead host alone:
// the mirroring phase has to measure a live origin's images/s, which needs a live backlog; and why
// not a live share of every product: the dead-origin phase needs the live backlog done to measure
// what the down host costs at rest, and 2.5 live images in each product would put 14 minutes (at
// 100,000 products) to 2.3 hours (1,000,000) of mirroring at the goal's rate before it. So the
// breaker meets the dead host from the first start on, beside a busy live origin, as a merchant with
// a dead supplier host and working ones would have it. The imports of phases e and f follow the same
// layout (f re-imports the catalog's refs with their images unchanged); the tenants' catalog (b) is
// on the live origin alone.
//
// Then `serve` starts on it as `npm start` runs it: every default on (image mirroring, webhook
// dispatcher, retention; the origin breaker's CPS_IMAGE_ORIGIN_FAILURES and probe intervals), only
// the port, the database, the admin token and CPS_WEBHOOK_ALLOW_HOSTS=127.0.0.1 (so the local origins
// and receivers pass the SSRF guard; the dead host's name stays refused) set. It runs from the
// version's tree as `node --import tsx src/cli.ts serve`, as every bench script here does (the same
// code `npm start` builds to dist/).
//
// During every phase a light reader (--readers loops, one API key each, at most 20 requests/s
// each: far under the default rate limit) reads in turn: a numbered page of 200 (page 1, the last
// pages, or any page), `?ids=` with 200 ids of the store, `/v1/stores` and a window of
// `/v1/changes`; /metrics is scraped every 5 s (event-loop delay from prom-client's
// nodejs_eventloop_lag_* gauges, which it resets at each scrape, so each scrape gives the delay since
// the one before; and any cps_*event_loop* / cps_*statement* series the version exposes; images by
// state). A read is counted in the phase it started in; one still unanswered when its phase ends is
// counted with the time it had waited by then (so a stalled server shows however long it stalls).
// Which it was, under load: the machine is shared, and a read's time is the serve's own work, or its
// serving thread waiting for a core, or the bench's own event loop (its reader times each read). So
// each phase gives, beside the reads, the machine's load average, each serving (main) thread's CPU
// and its time runnable but queued for a core (/proc/PID/task/TID/schedstat, with the mean wait per
// wake-up), the serve's event-loop delay, and the bench's own event-loop delay and queueing; a reads
// verdict that fails says "mostly waiting for a core" when the serving thread spent longer queued
// than on a core, "mostly the serve's own" otherwise.
//
// Phases (each bounded in time; a write that cannot finish within its budget is reported as such):
//   a  backlog    the start: time to the first answer after the `listening` log line, then
//                 --phase-seconds/2 of reads while the workers start on the mirroring backlog;
//   c  mirroring  images/s over --phase-seconds, or until the live origin has nothing pending (the
//                 cps_images gauges of /metrics; the origin's own count of fetches beside it; the
//                 dead host's images stay pending, only probed once it is down);
//   i  dead origin (the mirror has met the dead host since the start) waits until the dead host is
//                 marked down in image_origins (the time from `listening` is reported), the live
//                 origin's backlog is mirrored and the receivers' count has been steady for 3 s;
//                 then a quiet window (--quiet-seconds, default min(30, --phase-seconds/2)) with the
//                 reader paused, nothing asked of the service but /metrics every 5 s: the CPU of
//                 every service process in it (utime + stime of all threads, /proc/PID/stat, per
//                 thread; on PostgreSQL the database server's processes added), the cost of a down
//                 host at rest (goal: < 5 % of a core), with the host's probes meanwhile; then the
//                 reader again, and an import of 200 products whose 700 images are on a second live
//                 origin (a host of its own): the time from the import's answer to the first of
//                 them mirrored and to all (goals 2 s and 10 s), from their rows in image_mirrors
//                 (a range of its primary key, looked at every 50 ms from the bench's process), and
//                 reads meanwhile (until all are mirrored, at least --phase-seconds/2);
//   d  repricing  PUT exchange-rates/EUR/GBP (re-resolves the GBP store: the costs are in EUR and USD,
//                 and only EUR's conversion into GBP changes; before conversions through intermediate currencies, the EUR store too): products/s;
//   e  import     an NDJSON import of min(20,000, N) new products: products/s;
//   f  storm      a re-import of min(20,000, N) products with new costs (a price change in every
//                 store: ~3 changes per product for every endpoint), then the deliveries the
//                 receivers get: peak deliveries/s over 5 s, and in all over --phase-seconds;
//   h  panel      the operator's panel pages (overview, images, endpoint list, endpoint detail of
//                 the endpoint with the seeded log, and filtered by status, catalog list, a deep
//                 catalog page, the excluded ones, a search by ref and by EAN) and the admin status
//                 calls (images, endpoints, the delivery log): 5 requests each, one at a time;
//   g  retention  SIGTERM (timed), --seed-changes changes 60 days old seeded into the database,
//                 `serve` started again: first answer, then time until retention has pruned them
//                 (its log line) and reads meanwhile;
//   b  tenants    a second catalog of M merchants of P products (default M = P = round(sqrt(N)),
//                 so 1,000 x 1,000 at N = 1,000,000; --tenants / --tenant-products), one endpoint
//                 each created before their products (a delivery backlog per merchant), its own
//                 `serve`: first answer, reads of random tenants, images/s and deliveries/s.
// Run in the order a c i d e f h g, then b. At the end of each serve: SIGTERM, and the time until it
// exited (goal: within CPS_SHUTDOWN_GRACE_MS, 10 s by default).
//
// --engine postgres: a throwaway PostgreSQL (scripts/dev/postgres-server.ts, non-durable as for
// bench:postgres) holds each catalog in a database of its own, and every measured deployment is two
// `serve` processes (every default on) and a `worker`; the reader alternates between both serves.
// --baseline REF: the same phases against another commit (scripts/bench/baseline.ts), every catalog of
// both versions built before either version's measured service starts.
//
// Usage: npm run bench:scale -- [--products N] [--baseline REF] [--engine sqlite|postgres]
//   [--only a,c,i,d,e,f,h,g,b] [--json] [--phase-seconds S (60)] [--endpoints E (20)] [--readers R (2)]
//   [--live-images L (400 x S)] [--quiet-seconds Q] [--hanging H (8)]
//   [--no-dead-host]  every image on the live origin: the dead-origin phase's quiet window without a
//                     dead host, the reference for what the down host itself costs (small catalogs)
//   [--tenants M] [--tenant-products P] [--seed-changes C (1000000)] [--seed-deliveries D (100000)]
//   [--baseline-env CPS_X=V,...] [--candidate-env CPS_X=V,...]  settings of each version's measured services
//   [--logs DIR]  every service's whole output in DIR, a file per process
//   [--sessions own|shared (own)] [--baseline-sessions own|shared]  own: each measured service process
//                     (serve, serve-2, worker) in a session of its own (setsid), as a deployment's units run
//                     them, the bench (its readers, peers, write clients) in its own; shared: all in the bench's
//                     one session (one CPU share under the kernel's autogroups); --baseline HEAD
//                     --baseline-sessions shared: both ways side by side
//   [--database-address tcp|socket (tcp)] [--baseline-database-address tcp|socket]  PostgreSQL: the measured
//                     services reach the server on 127.0.0.1 or through its Unix socket
//   [--worker-autogroup-nice N]  own sessions, the candidate's worker: its autogroup's nice set to N
//                     (/proc/PID/autogroup), what CPS_WORKER_NICE would be worth between units
//   [--statement-stats]  PostgreSQL: the server loads pg_stat_statements, and each phase reports the
//                     statements that took the database's most time in it (calls, ms, rows and
//                     buffers per call), beside the serve's own statement histogram
//   (e.g. --baseline HEAD --baseline-env CPS_WORKERS=inline: one commit, two settings, side by side)
// With --json, stdout carries only the result (progress on stderr). Exits 0 whatever the verdicts;
// 1 when the run itself fails.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import {
  candidateDir,
  git,
  inheritedEnv,
  killTracked,
  moduleArguments,
  runSideBySide,
  track,
  trackSession,
  type Checkout,
} from './baseline.js';
import { startPeers, type Peers } from './peers.js';
import { startPostgresServer, freePort, dataDirOf, type PostgresServer } from '../dev/postgres-server.js';
import {
  autogroupOf,
  postgresProcesses,
  postgresServerCpu,
  processCpu,
  threadCpu,
  threadSchedstat,
  threadSwitches,
} from './process-sampler.js';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import Database from 'better-sqlite3';
import {
  AdminClient,
  buildMainCatalog,
  buildTenants,
  layoutOf,
  liveImagesUpTo,
  liveProductsFor,
  mainProductLine,
  ndjson,
  seedDeliveryLog,
  seedOldChanges,
  type CatalogLayout,
  type DatabaseRef,
  type MainCatalog,
  type Tenant,
} from './scale-catalog.js';

// ---- options ----------------------------------------------------------------------------------

const PHASE_KEYS = ['a', 'c', 'i', 'd', 'e', 'f', 'h', 'g', 'b'] as const;
type PhaseKey = (typeof PHASE_KEYS)[number];
const PHASE_TITLES: Record<PhaseKey, string> = {
  a: 'backlog after start',
  b: 'many tenants',
  c: 'mirroring',
  d: 'exchange-rate re-pricing',
  e: 'import',
  f: 'delivery storm',
  g: 'retention pruning',
  h: 'panel and admin status',
  i: 'dead origin',
};

const { values: flags } = parseArgs({
  options: {
    products: { type: 'string', default: '100000' },
    baseline: { type: 'string' },
    engine: { type: 'string', default: 'sqlite' },
    only: { type: 'string' },
    json: { type: 'boolean' },
    'phase-seconds': { type: 'string', default: '60' },
    endpoints: { type: 'string', default: '20' },
    readers: { type: 'string', default: '2' },
    tenants: { type: 'string' },
    'tenant-products': { type: 'string' },
    'seed-changes': { type: 'string', default: '1000000' },
    'seed-deliveries': { type: 'string', default: '100000' },
    hanging: { type: 'string', default: '8' },
    'live-images': { type: 'string' },
    'quiet-seconds': { type: 'string' },
    'no-dead-host': { type: 'boolean' },
    'baseline-env': { type: 'string' },
    'candidate-env': { type: 'string' },
    logs: { type: 'string' },
    'statement-stats': { type: 'boolean' },
    sessions: { type: 'string', default: 'own' },
    'baseline-sessions': { type: 'string' },
    'database-address': { type: 'string', default: 'tcp' },
    'baseline-database-address': { type: 'string' },
    'worker-autogroup-nice': { type: 'string' },
  },
});
const int = (name: string, value: string | undefined, min = 0) => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < min) throw new Error(`--${name} must be an integer >= ${min}, got "${value}"`);
  return n;
};
const PRODUCTS = int('products', flags.products, 100);
const PHASE_SECONDS = Number(flags['phase-seconds']);
if (!(PHASE_SECONDS > 0)) throw new Error('--phase-seconds must be a positive number');
const ENDPOINTS = int('endpoints', flags.endpoints, 1);
const READERS = int('readers', flags.readers, 1);
const TENANTS = flags.tenants ? int('tenants', flags.tenants, 1) : Math.max(2, Math.round(Math.sqrt(PRODUCTS)));
const TENANT_PRODUCTS = flags['tenant-products']
  ? int('tenant-products', flags['tenant-products'], 1)
  : Math.max(10, Math.round(Math.sqrt(PRODUCTS)));
const SEED_CHANGES = int('seed-changes', flags['seed-changes'], 1);
const SEED_DELIVERIES = int('seed-deliveries', flags['seed-deliveries'], 1);
const HANGING = int('hanging', flags.hanging);
/** Images of the catalog on the live origin: phases a and c's windows at 4/3 of the goal's rate. */
const LIVE_IMAGES = flags['live-images'] ? int('live-images', flags['live-images'], 1) : Math.ceil(400 * PHASE_SECONDS);
/** The dead-origin phase's quiet window (the reader paused), and how many products it then imports on the fresh origin. */
const QUIET_SECONDS = flags['quiet-seconds'] ? Number(flags['quiet-seconds']) : Math.max(1, Math.min(30, PHASE_SECONDS / 2));
if (!(QUIET_SECONDS > 0)) throw new Error('--quiet-seconds must be a positive number');
const FRESH_PRODUCTS = Math.min(200, PRODUCTS);
/** PostgreSQL: each phase's statements by the database's own account (pg_stat_statements), most time first. */
const STATEMENT_STATS = flags['statement-stats'] === true;
const LAYOUT: CatalogLayout = {
  products: PRODUCTS,
  liveProducts: liveProductsFor(LIVE_IMAGES, PRODUCTS),
  hanging: HANGING,
  deadHost: !flags['no-dead-host'],
};
const IMPORT_PRODUCTS = Math.min(20_000, PRODUCTS);
const STORM_PRODUCTS = Math.min(20_000, PRODUCTS);
const ENGINE =
  flags.engine === 'postgres'
    ? 'postgres'
    : flags.engine === 'sqlite'
      ? 'sqlite'
      : (() => {
          throw new Error(`--engine takes sqlite or postgres, got "${flags.engine}"`);
        })();
const PHASES = new Set<PhaseKey>(
  flags.only
    ? flags.only.split(',').map((p) => {
        const key = p.trim() as PhaseKey;
        if (!PHASE_KEYS.includes(key)) throw new Error(`--only takes ${PHASE_KEYS.join(',')}, got "${p}"`);
        return key;
      })
    : PHASE_KEYS,
);
type Sessions = 'own' | 'shared';
const sessionsFlag = (name: string, value: string): Sessions => {
  if (value !== 'own' && value !== 'shared') throw new Error(`--${name} takes own or shared, got "${value}"`);
  return value;
};
/**
 * own: each service process in a session of its own (setsid), as its own unit runs it in a
 * deployment: with the kernel's autogroups, a CPU share of its own beside each PostgreSQL backend's
 * (each calls setsid) and the bench's (its readers, peers and write clients: the load from other
 * machines). shared: every process in the bench's one session, one share among them all.
 */
const SESSIONS = {
  candidate: sessionsFlag('sessions', flags.sessions),
  baseline: sessionsFlag('baseline-sessions', flags['baseline-sessions'] ?? flags.sessions),
};
const addressFlag = (name: string, value: string): 'tcp' | 'socket' => {
  if (value !== 'tcp' && value !== 'socket') throw new Error(`--${name} takes tcp or socket, got "${value}"`);
  return value;
};
/**
 * How the measured services reach PostgreSQL: tcp, 127.0.0.1 (a loopback write runs the receiver's
 * TCP work in the writer's thread); socket, the server's Unix socket, as a database on the same host can be reached.
 */
const DATABASE_ADDRESS = {
  candidate: addressFlag('database-address', flags['database-address']),
  baseline: addressFlag('baseline-database-address', flags['baseline-database-address'] ?? flags['database-address']),
};
const MAIN_PHASES = PHASE_KEYS.filter((k) => k !== 'b' && PHASES.has(k));

const ADMIN_TOKEN = 'bench-scale-admin-token';
const GOALS = {
  firstAnswerMs: 2000,
  readP99Ms: 50,
  readMaxMs: 200,
  imagesPerSecond: 300,
  panelMs: 300,
  shutdownMs: 10_000,
  /** The dead-origin phase: the fresh origin's first image and all its images mirrored, after the import's answer. */
  freshFirstMs: 2000,
  freshAllMs: 10_000,
  /** The deployment's CPU over the quiet window once the dead host is down, in cores. */
  deadHostCores: 0.05,
};
const READ_TIMEOUT_MS = 120_000;
const SCRAPE_INTERVAL_MS = 5000;
const SCRAPE_TIMEOUT_MS = 10_000;
/** The panel phase stops sending requests after this long. */
const PANEL_BUDGET_S = Math.max(30, PHASE_SECONDS);
/** A write phase (re-pricing, imports) gives up waiting after this long (the server goes on with it). */
const WRITE_BUDGET_S = Math.max(120, PHASE_SECONDS * 2, PRODUCTS / 2000);

const log = (line: string) => (flags.json ? console.error(line) : console.log(line));
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const now = () => performance.now();

// ---- statistics -------------------------------------------------------------------------------

/** Nearest-rank percentile of sorted values; null when there are none. */
const rank = (sorted: number[], p: number) => (sorted.length ? sorted[Math.max(0, Math.ceil(p * sorted.length) - 1)]! : null);
interface LatencyStats {
  n: number;
  errors: number;
  unanswered: number;
  p50: number | null;
  p99: number | null;
  max: number | null;
}
function latencyStats(samples: { ms: number; error?: string | undefined; unanswered?: boolean }[]): LatencyStats {
  const sorted = samples.map((s) => s.ms).sort((a, b) => a - b);
  return {
    n: samples.length,
    errors: samples.filter((s) => s.error).length,
    unanswered: samples.filter((s) => s.unanswered).length,
    p50: rank(sorted, 0.5),
    p99: rank(sorted, 0.99),
    max: sorted.at(-1) ?? null,
  };
}

// ---- service processes ------------------------------------------------------------------------

interface ServiceProcess {
  name: string;
  child: ChildProcess;
  /** http://127.0.0.1:PORT (for a worker: its ops port). */
  base: string;
  spawnedAt: number;
  /** performance.now() when its `listening` line arrived (worker: when /readyz first answered). */
  listeningAt: number;
  output: () => string;
  /** Resolves when a line containing `text` is logged (from now on); rejects after timeoutMs. */
  waitForLog: (text: string, timeoutMs: number) => Promise<number>;
}

function spawnCli(
  dir: string,
  args: string[],
  env: Record<string, string>,
  sessions: Sessions,
): { child: ChildProcess; output: () => string; seen: Map<string, number>; onLine: (watch: (chunk: string) => void) => () => void } {
  // Node 20 refuses --cpu-prof* in NODE_OPTIONS: those go on the command line (a profile per thread).
  const options = (env.NODE_OPTIONS ?? '').split(/\s+/).filter(Boolean);
  const profiling = options.filter((o) => o.startsWith('--cpu-prof'));
  const childEnv = { ...inheritedEnv(), ...env };
  if (profiling.length) childEnv.NODE_OPTIONS = options.filter((o) => !o.startsWith('--cpu-prof')).join(' ');
  const child = (sessions === 'own' ? trackSession : track)(
    spawn(process.execPath, [...profiling, ...moduleArguments(dir, 'src/cli.ts'), ...args], {
      cwd: dir,
      env: childEnv,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: sessions === 'own',
    }),
  );
  let tail = '';
  const watchers = new Set<(chunk: string) => void>();
  /** When each marker was first logged (performance.now()), watched from the spawn on. */
  const seen = new Map<string, number>();
  const onData = (chunk: Buffer) => {
    const text = chunk.toString();
    const joined = tail.slice(-300) + text;
    tail = (tail + text).slice(-20_000);
    for (const marker of LOG_MARKERS) if (!seen.has(marker) && joined.includes(marker)) seen.set(marker, now());
    for (const watch of watchers) watch(joined);
  };
  child.stdout.on('data', onData);
  child.stderr.on('data', onData);
  if (flags.logs) {
    // --logs DIR: every service's whole output, a file per process (its pid), for what the tail misses.
    fs.mkdirSync(flags.logs, { recursive: true });
    const file = fs.createWriteStream(path.join(flags.logs, `${path.basename(dir)}-${args[0]}-${child.pid}.log`));
    child.stdout.pipe(file);
    child.stderr.pipe(file);
  }
  return {
    child,
    output: () => tail,
    seen,
    onLine: (watch) => {
      watchers.add(watch);
      return () => watchers.delete(watch);
    },
  };
}

/** Log lines whose first appearance is remembered from the spawn on (so a wait that starts late still sees them). */
const LOG_MARKERS = ['"msg":"listening"', 'expired changes deleted'];

const exitOf = (child: ChildProcess) =>
  new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve({ code: child.exitCode, signal: child.signalCode });
    else child.once('exit', (code, signal) => resolve({ code, signal }));
  });

/** `serve` (or `worker` with CPS_OPS_PORT) of one tree; resolves at its `listening` line (worker: /readyz). */
async function startCli(
  version: Version,
  name: string,
  command: 'serve' | 'worker',
  env: Record<string, string>,
  ready: 'log' | 'readyz' = command === 'serve' ? 'log' : 'readyz',
): Promise<ServiceProcess> {
  const dir = version.dir;
  const port = await freePort();
  const settings =
    command === 'serve'
      ? { ...env, CPS_PORT: String(port), CPS_HOST: '127.0.0.1' }
      : { ...env, CPS_OPS_PORT: String(port), CPS_HOST: '127.0.0.1' };
  const spawnedAt = now();
  const { child, output, onLine, seen } = spawnCli(dir, [command], settings, version.sessions);
  // A service that ends by itself (not by the bench's SIGTERM) is news: say so with its last output.
  child.once('exit', (code, signal) => {
    if (!terminating.has(child)) log(`*** ${name} exited by itself (${code ?? signal}); its last output:\n${output().slice(-4000)}`);
  });
  const base = `http://127.0.0.1:${port}`;
  const waitForLog = (text: string, timeoutMs: number) =>
    new Promise<number>((resolve, reject) => {
      const already = seen.get(text);
      if (already !== undefined) return resolve(already);
      const timer = setTimeout(() => {
        stop();
        reject(new Error(`${name}: no "${text}" within ${timeoutMs / 1000} s`));
      }, timeoutMs);
      const onExit = () => {
        stop();
        reject(new Error(`${name} exited (${child.exitCode ?? child.signalCode}) before "${text}":\n${output().slice(-3000)}`));
      };
      const unwatch = onLine((chunk) => {
        if (chunk.includes(text)) {
          stop();
          resolve(now());
        }
      });
      const stop = () => {
        clearTimeout(timer);
        unwatch();
        child.off('exit', onExit);
      };
      child.once('exit', onExit);
    });
  let listeningAt: number;
  if (ready === 'log') {
    listeningAt = await waitForLog('"msg":"listening"', 30 * 60_000);
  } else {
    for (const deadline = now() + 10 * 60_000; ; ) {
      if (child.exitCode !== null) throw new Error(`${name} exited ${child.exitCode}:\n${output().slice(-3000)}`);
      if (
        await fetch(`${base}/readyz`, { signal: AbortSignal.timeout(5000) }).then(
          (r) => (r.body?.cancel(), r.ok),
          () => false,
        )
      )
        break;
      if (now() > deadline) throw new Error(`${name}: not ready after 10 min`);
      await sleep(100);
    }
    listeningAt = now();
  }
  return { name, child, base, spawnedAt, listeningAt, output, waitForLog };
}

interface ShutdownResult {
  process: string;
  after: string;
  ms: number;
  code: number | null;
  signal: string | null;
  killed: boolean;
}

/** SIGTERM, timed until the process exits; SIGKILL after 60 s. */
const terminating = new WeakSet<ChildProcess>();

async function terminate(service: ServiceProcess, after: string): Promise<ShutdownResult> {
  terminating.add(service.child);
  const started = now();
  service.child.kill('SIGTERM');
  let killed = false;
  const killer = setTimeout(() => {
    killed = true;
    service.child.kill('SIGKILL');
  }, 60_000);
  const { code, signal } = await exitOf(service.child);
  clearTimeout(killer);
  return { process: service.name, after, ms: now() - started, code, signal, killed };
}

// ---- the reader -------------------------------------------------------------------------------

type ReadKind = 'page' | 'ids' | 'stores' | 'changes';
interface ReadTarget {
  base: string;
  apiKey: string;
  store: string;
}
interface ReadSample {
  kind: ReadKind;
  startedAt: number;
  ms: number;
  error?: string;
  unanswered?: boolean;
}

/** What the reader has learnt of a target: its last page, the ids it has seen, its feed cursor. */
interface TargetState {
  lastPage: number;
  ids: number[];
  known: Set<number>;
  cursor: { since: string; id: number } | null;
}

class Reader {
  readonly samples: ReadSample[] = [];
  private readonly inFlight = new Map<number, { kind: ReadKind; startedAt: number }>();
  private readonly state = new Map<string, TargetState>();
  private running = true;
  private loops: Promise<void>[] = [];
  private nextId = 0;

  constructor(private readonly targets: (loop: number) => ReadTarget) {}

  /** Starts the loops (again, after stop(): the dead-origin phase pauses the reader for its quiet window). */
  start(loops: number): void {
    this.running = true;
    for (let loop = 0; loop < loops; loop++) this.loops.push(this.loop(loop));
  }

  /** Samples that started in [from, to), plus the ones still unanswered at `to`, counted with their wait so far. */
  between(from: number, to: number): ReadSample[] {
    const done = this.samples.filter((s) => s.startedAt >= from && s.startedAt < to && s.startedAt + s.ms <= to);
    const late = this.samples.filter((s) => s.startedAt >= from && s.startedAt < to && s.startedAt + s.ms > to);
    const open = [...this.inFlight.values()].filter((r) => r.startedAt >= from && r.startedAt < to);
    return [
      ...done,
      ...late.map((s) => ({ ...s, ms: s.ms })),
      ...open.map((r) => ({ kind: r.kind, startedAt: r.startedAt, ms: to - r.startedAt, unanswered: true })),
    ];
  }

  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops);
    this.loops = [];
  }

  private async loop(loop: number): Promise<void> {
    const kinds: ReadKind[] = ['page', 'ids', 'stores', 'changes'];
    for (let i = 0; this.running; i++) {
      const cycleStart = now();
      const target = this.targets(loop);
      const key = `${target.base}|${target.apiKey}|${target.store}`;
      let state = this.state.get(key);
      if (!state) this.state.set(key, (state = { lastPage: 1, ids: [], known: new Set(), cursor: null }));
      const next = kinds[(i + loop) % 4]!;
      // ?ids= once a page has shown some ids of this target.
      const kind = next === 'ids' && state.ids.length === 0 ? 'page' : next;
      await this.read(kind, target, state);
      // At most 20 requests per second per loop: a light sampler, and far under the key's rate limit.
      const wait = 50 - (now() - cycleStart);
      if (wait > 0) await sleep(wait);
    }
  }

  private async read(kind: ReadKind, target: ReadTarget, state: TargetState): Promise<void> {
    let url: string;
    if (kind === 'page') {
      // Page 1, one of the last pages, or any page: numbered pages, deep ones included.
      const r = Math.random();
      const page =
        r < 0.3
          ? 1
          : r < 0.6
            ? Math.max(1, state.lastPage - Math.floor(Math.random() * 3))
            : 1 + Math.floor(Math.random() * state.lastPage);
      url = `${target.base}/v1/products?store=${target.store}&per_page=200&page=${page}`;
    } else if (kind === 'ids') {
      const ids = new Set<number>();
      while (ids.size < Math.min(200, state.ids.length)) ids.add(state.ids[Math.floor(Math.random() * state.ids.length)]!);
      url = `${target.base}/v1/products?store=${target.store}&ids=${[...ids].join(',')}`;
    } else if (kind === 'stores') {
      url = `${target.base}/v1/stores`;
    } else {
      const cursor = state.cursor;
      url = `${target.base}/v1/changes?store=${target.store}${cursor ? `&since=${encodeURIComponent(cursor.since)}&since_id=${cursor.id}` : ''}`;
    }
    const id = this.nextId++;
    const startedAt = now();
    this.inFlight.set(id, { kind, startedAt });
    let error: string | undefined;
    try {
      const response = await fetch(url, {
        headers: { Authorization: `Bearer ${target.apiKey}` },
        signal: AbortSignal.timeout(READ_TIMEOUT_MS),
      });
      const text = await response.text();
      if (response.status !== 200) {
        error = `${response.status} ${text.slice(0, 200)}`;
      } else if (kind === 'page') {
        const body = JSON.parse(text) as { data: { id: number }[]; meta: { last_page: number } };
        state.lastPage = Math.max(1, body.meta.last_page);
        for (const p of body.data) {
          if (state.ids.length < 20_000 && !state.known.has(p.id)) {
            state.known.add(p.id);
            state.ids.push(p.id);
          }
        }
      } else if (kind === 'changes') {
        const body = JSON.parse(text) as { changes: unknown[]; next_since: string; next_id: number };
        // Caught up: start from the beginning of the history again next time.
        state.cursor = body.changes.length < 1000 ? null : { since: body.next_since, id: body.next_id };
      }
    } catch (e) {
      error = (e as Error).name === 'TimeoutError' ? `no answer in ${READ_TIMEOUT_MS / 1000} s` : (e as Error).message;
    }
    this.inFlight.delete(id);
    this.samples.push({ kind, startedAt, ms: now() - startedAt, ...(error ? { error: `${kind}: ${error}` } : {}) });
  }
}

// ---- /metrics -----------------------------------------------------------------------------------

type MetricSet = Map<string, number>;
function parseMetrics(text: string): MetricSet {
  const metrics: MetricSet = new Map();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const space = line.lastIndexOf(' ');
    const value = Number(line.slice(space + 1));
    if (Number.isFinite(value) || line.endsWith('Inf')) metrics.set(line.slice(0, space), value);
  }
  return metrics;
}

interface Scrape {
  at: number;
  process: string;
  metrics: MetricSet | null;
  ms: number;
  error?: string;
}

/** Scrapes each serve's /metrics every 5 s (one at a time per process, 10 s time-out). */
class Scraper {
  readonly scrapes: Scrape[] = [];
  private running = true;
  private readonly loops: Promise<void>[];

  constructor(services: ServiceProcess[]) {
    this.loops = services.map((service) => this.loop(service));
  }

  add(service: ServiceProcess): void {
    this.loops.push(this.loop(service));
  }

  private async loop(service: ServiceProcess): Promise<void> {
    while (this.running) {
      const started = now();
      await this.scrape(service);
      const wait = SCRAPE_INTERVAL_MS - (now() - started);
      for (let waited = 0; this.running && waited < wait; waited += 250) await sleep(Math.min(250, wait - waited));
    }
  }

  async scrape(service: ServiceProcess): Promise<Scrape> {
    const started = now();
    let scrape: Scrape;
    try {
      const response = await fetch(`${service.base}/metrics`, { signal: AbortSignal.timeout(SCRAPE_TIMEOUT_MS) });
      const text = await response.text();
      scrape = response.ok
        ? { at: now(), process: service.name, metrics: parseMetrics(text), ms: now() - started }
        : { at: now(), process: service.name, metrics: null, ms: now() - started, error: `${response.status}` };
    } catch (e) {
      scrape = {
        at: now(),
        process: service.name,
        metrics: null,
        ms: now() - started,
        error: (e as Error).name === 'TimeoutError' ? `no answer in ${SCRAPE_TIMEOUT_MS / 1000} s` : (e as Error).message,
      };
    }
    this.scrapes.push(scrape);
    return scrape;
  }

  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops);
  }
}

/** The event-loop figures and statement durations the scrapes answered within [from, to]. */
function eventLoopOf(scrapes: Scrape[], from: number, to: number) {
  const within = scrapes.filter((s) => s.at >= from && s.at <= to);
  const answered = within.filter((s) => s.metrics);
  const failed = within.filter((s) => !s.metrics);
  const maxOf = (name: string) => {
    const values = answered.map((s) => s.metrics!.get(name)).filter((v): v is number => v !== undefined);
    return values.length ? Math.max(...values) * 1000 : null;
  };
  // The event-loop series a version adds beyond prom-client's (cps_event_loop_*): their worst value in the phase.
  const own: Record<string, number> = {};
  for (const s of answered) {
    for (const [name, value] of s.metrics!) {
      if (/^cps_[a-z_]*event_?loop/.test(name) && !/_(bucket|count|sum)(\{|$)/.test(name))
        own[name] = Math.max(own[name] ?? -Infinity, value);
    }
  }
  // A statement-duration histogram (cps_*statement*): what it counted between the phase's first and
  // last answered scrape of each process, in all and by statement.
  const byStatement = new Map<string, { count: number; seconds: number; over100ms: number }>();
  for (const process of new Set(answered.map((s) => s.process))) {
    const mine = answered.filter((s) => s.process === process);
    const first = mine[0]!;
    const last = mine.at(-1)!;
    if (first === last) continue;
    for (const [name, value] of last.metrics!) {
      const match = /^(cps_[a-z_]*statement[a-z_]*)_(count|sum|bucket)\{(.*)\}$/.exec(name);
      if (!match) continue;
      const labels = match[3]!;
      const statement = /statement="([^"]*)"/.exec(labels)?.[1] ?? match[1]!;
      const entry = byStatement.get(statement) ?? { count: 0, seconds: 0, over100ms: 0 };
      const delta = value - (first.metrics!.get(name) ?? 0);
      if (match[2] === 'count') {
        entry.count += delta;
        entry.over100ms += delta;
      } else if (match[2] === 'sum') entry.seconds += delta;
      else if (labels.includes('le="0.1"')) entry.over100ms -= delta;
      byStatement.set(statement, entry);
    }
  }
  const statements = byStatement.size
    ? {
        count: [...byStatement.values()].reduce((n, e) => n + e.count, 0),
        over_100ms: [...byStatement.values()].reduce((n, e) => n + e.over100ms, 0),
        seconds: [...byStatement.values()].reduce((n, e) => n + e.seconds, 0),
        top: [...byStatement]
          .sort((a, b) => b[1].seconds - a[1].seconds)
          .slice(0, 5)
          .map(([name, e]) => ({
            name,
            count: e.count,
            seconds: Number(e.seconds.toFixed(3)),
            mean_ms: e.count ? Number(((e.seconds / e.count) * 1000).toFixed(3)) : null,
            over_100ms: e.over100ms,
          })),
      }
    : null;
  return {
    scrapes: within.length,
    scrapes_failed: failed.length,
    scrape_errors: [...new Set(failed.map((s) => s.error))].slice(0, 3),
    slowest_scrape_ms: within.length ? Math.max(...within.map((s) => s.ms)) : null,
    /** prom-client's monitorEventLoopDelay, reset at every scrape: the worst over the phase. */
    max_ms: maxOf('nodejs_eventloop_lag_max_seconds'),
    p99_ms: maxOf('nodejs_eventloop_lag_p99_seconds'),
    own: Object.keys(own).length ? own : null,
    statements,
  };
}

/**
 * Images by state from the latest answered scrape at or before `at`, or with `after`, the first one
 * answered after `after` (the start of a window whose first scrape came late); null when none answered.
 */
function imagesAt(scrapes: Scrape[], at: number, after?: number): { mirrored: number; dead: number; pending: number; at: number } | null {
  const found = imagesBefore(scrapes, at);
  if (found || after === undefined) return found;
  const later = scrapes
    .filter((s) => s.at >= after)
    .map((s) => imagesBefore([s], s.at))
    .find((x) => x);
  return later ?? null;
}

function imagesBefore(scrapes: Scrape[], at: number): { mirrored: number; dead: number; pending: number; at: number } | null {
  for (let i = scrapes.length - 1; i >= 0; i--) {
    const s = scrapes[i]!;
    if (s.at > at || !s.metrics) continue;
    const get = (state: string) => s.metrics!.get(`cps_images{state="${state}"}`) ?? 0;
    if (![...s.metrics.keys()].some((k) => k.startsWith('cps_images{'))) continue;
    return { mirrored: get('mirrored'), dead: get('dead'), pending: get('pending'), at: s.at };
  }
  return null;
}

// ---- one measured deployment ------------------------------------------------------------------

// ---- CPU of the deployment ---------------------------------------------------------------------

/**
 * One look at the deployment's CPU so far, µs: each process (all its threads), its main thread (on
 * a core, and runnable but waiting for one), the database server; the bench's own main thread (its
 * reader answers the reads' latencies) the same way, the longest delay of its event loop since the
 * sample before, and the machine's load average.
 */
interface CpuSample {
  at: number;
  processes: Map<
    string,
    {
      us: number;
      mainUs: number;
      mainRunUs: number;
      mainWaitUs: number;
      mainSlices: number;
      mainVoluntary: number;
      mainInvoluntary: number;
    }
  >;
  db: number | null;
  bench: { runUs: number; waitUs: number; slices: number } | null;
  benchLoopMaxMs: number;
  load1: number;
}

/** The CPU a phase's window cost: cores used on average in it, per process, its main thread, the database server. */
interface PhaseCpu {
  seconds: number;
  cores: number;
  processes: Record<
    string,
    {
      cores: number;
      main_thread_cores: number;
      /** The serving (main) thread's time runnable but waiting for a core, as cores (share of the window). */
      main_thread_waiting_cores: number;
      /** Its mean wait for a core each time it was put on one, ms. */
      main_thread_wait_per_slice_ms: number | null;
      /** How often it was put on a core, per second (after a wake-up or a preemption), each a wait for a core on a busy machine. */
      main_thread_wakeups_per_s: number;
      /** Of them, after a wait it chose (voluntary context switches): the event loop's wake-ups proper. */
      main_thread_voluntary_per_s: number;
      /** Times it was preempted while it had work (involuntary context switches). */
      main_thread_preempted_per_s: number;
    }
  >;
  database_cores: number | null;
  /** The bench's own main thread (the reader's requests and answers): its event loop's longest delay, its wait for a core. */
  bench: { loop_max_ms: number; cores: number; waiting_cores: number } | null;
  /** The machine's 1-minute load average, mean of the samples in the window (2 cores: above 2, threads wait for a core). */
  load: number;
  /** CPU of the whole deployment (database included) per unit of the phase's throughput, ms. */
  ms_per_unit?: number | null;
  unit?: string;
}

/**
 * Samples the CPU of the deployment's processes from /proc every 500 ms (utime + stime of every
 * thread, the main thread apart; on PostgreSQL the database server's processes): a phase's CPU is
 * the difference of the samples around its window.
 */
class CpuSampler {
  private readonly samples: CpuSample[] = [];
  private readonly timer: NodeJS.Timeout;
  private readonly benchLoop = monitorEventLoopDelay({ resolution: 10 });

  constructor(
    private readonly processes: () => ServiceProcess[],
    private readonly pgData: string | null,
  ) {
    this.benchLoop.enable();
    this.sample();
    this.timer = setInterval(() => this.sample(), 500);
  }

  sample(): void {
    const processes: CpuSample['processes'] = new Map();
    for (const p of this.processes()) {
      const pid = p.child.pid!;
      if (p.child.exitCode !== null || p.child.signalCode !== null) continue;
      const sched = threadSchedstat(pid);
      const switches = threadSwitches(pid);
      processes.set(p.name, {
        us: processCpu([pid]),
        mainUs: threadCpu(pid).find((t) => t.tid === pid)?.us ?? 0,
        mainRunUs: sched?.runUs ?? 0,
        mainWaitUs: sched?.waitUs ?? 0,
        mainSlices: sched?.slices ?? 0,
        mainVoluntary: switches?.voluntary ?? 0,
        mainInvoluntary: switches?.involuntary ?? 0,
      });
    }
    const benchLoopMaxMs = this.benchLoop.max / 1e6;
    this.benchLoop.reset();
    let db: number | null;
    try {
      db = this.pgData ? postgresServerCpu(this.pgData) : null;
    } catch {
      db = null; // the server stopping meanwhile
    }
    this.samples.push({ at: now(), processes, db, bench: threadSchedstat(process.pid), benchLoopMaxMs, load1: os.loadavg()[0]! });
  }

  /** The CPU between the last sample at or before `from` and the first at or after `to`. */
  between(from: number, to: number): PhaseCpu | null {
    this.sample();
    const a = [...this.samples].reverse().find((s) => s.at <= from) ?? this.samples[0];
    const b = this.samples.find((s) => s.at >= to) ?? this.samples.at(-1);
    if (!a || !b || b.at <= a.at) return null;
    const seconds = (b.at - a.at) / 1000;
    const cores = (us: number) => Number((us / 1e6 / seconds).toFixed(3));
    const processes: PhaseCpu['processes'] = {};
    let total = 0;
    for (const [name, end] of b.processes) {
      const start = a.processes.get(name) ?? {
        us: 0,
        mainUs: 0,
        mainRunUs: 0,
        mainWaitUs: 0,
        mainSlices: 0,
        mainVoluntary: 0,
        mainInvoluntary: 0,
      };
      total += end.us - start.us;
      const slices = end.mainSlices - start.mainSlices;
      processes[name] = {
        cores: cores(end.us - start.us),
        main_thread_cores: cores(end.mainUs - start.mainUs),
        main_thread_waiting_cores: cores(end.mainWaitUs - start.mainWaitUs),
        main_thread_wait_per_slice_ms: slices > 0 ? Number(((end.mainWaitUs - start.mainWaitUs) / slices / 1000).toFixed(3)) : null,
        main_thread_wakeups_per_s: Number((slices / seconds).toFixed(1)),
        main_thread_voluntary_per_s: Number(((end.mainVoluntary - start.mainVoluntary) / seconds).toFixed(1)),
        main_thread_preempted_per_s: Number(((end.mainInvoluntary - start.mainInvoluntary) / seconds).toFixed(1)),
      };
    }
    const db = a.db !== null && b.db !== null ? b.db - a.db : null;
    const within = this.samples.filter((s) => s.at > a.at && s.at <= b.at);
    const bench =
      a.bench && b.bench
        ? {
            loop_max_ms: Number(Math.max(0, ...within.map((s) => s.benchLoopMaxMs)).toFixed(1)),
            cores: cores(b.bench.runUs - a.bench.runUs),
            waiting_cores: cores(b.bench.waitUs - a.bench.waitUs),
          }
        : null;
    const load = within.length ? Number((within.reduce((sum, s) => sum + s.load1, 0) / within.length).toFixed(2)) : b.load1;
    return {
      seconds,
      cores: cores(total + (db ?? 0)),
      processes,
      database_cores: db === null ? null : cores(db),
      bench,
      load,
    };
  }

  stop(): void {
    clearInterval(this.timer);
    this.benchLoop.disable();
  }
}

interface Deployment {
  serves: ServiceProcess[];
  worker: ServiceProcess | null;
  reader: Reader;
  scraper: Scraper;
  cpu: CpuSampler;
  firstAnswer: { stores_ms: number | null; page_ms: number | null; error?: string };
}

interface Version extends Checkout {
  /** Where its measured services run: each in a session of its own, or all in the bench's. */
  sessions: Sessions;
  /** Each deployment's autogroups when it started (logAutogroups). */
  autogroups: string[];
  mainDb: DatabaseRef | null;
  tenantsDb: DatabaseRef | null;
  main: MainCatalog | null;
  layout: CatalogLayout;
  tenants: Tenant[];
  build: Record<string, number>;
  phases: PhaseResult[];
  shutdowns: ShutdownResult[];
  notes: string[];
}

/** A statement's share of a phase by PostgreSQL's own account (pg_stat_statements). */
interface DatabaseStatement {
  query: string;
  calls: number;
  total_ms: number;
  ms_per_call: number;
  rows_per_call: number;
  /** Shared buffers hit or read per call: the pages it looked at. */
  blocks_per_call: number;
}

interface PhaseResult {
  key: PhaseKey;
  title: string;
  seconds: number;
  budget_seconds: number;
  /** The phase's own work finished within its budget (sampling phases: their window ran to its end). */
  completed: boolean;
  first_answer_ms?: { stores_ms: number | null; page_ms: number | null; error?: string };
  reads: { all: LatencyStats } & Partial<Record<ReadKind, LatencyStats>>;
  read_errors: string[];
  event_loop: ReturnType<typeof eventLoopOf>;
  /** The deployment's CPU over the phase's window (every service process, the database server). */
  cpu?: PhaseCpu | null;
  throughput: { value: number | null; unit: string; detail: Record<string, unknown> };
  pages?: { name: string; path: string; status: number; n: number; p50: number | null; max: number | null; error?: string }[];
  /** --statement-stats: the database's statements over the phase, most time first. */
  database_statements?: DatabaseStatement[];
  verdicts: { goal: string; measured: string; pass: boolean }[];
}

/** --database-address socket: the version's measured services connect through the server's Unix socket. */
function databaseAddressEnv(version: Version, db: DatabaseRef): Record<string, string> {
  if (db.engine !== 'postgres' || DATABASE_ADDRESS[version.name] === 'tcp' || !postgres) return {};
  const url = new URL(db.url);
  return {
    CPS_DATABASE_URL: `postgres://postgres@/${url.pathname.slice(1)}?host=${encodeURIComponent(path.join(postgres.dir, 'socket'))}&port=${postgres.port}`,
  };
}

function serviceEnv(db: DatabaseRef): Record<string, string> {
  return {
    ...(db.engine === 'sqlite' ? { CPS_DB_PATH: db.path } : { CPS_DATABASE_URL: db.url }),
    CPS_ADMIN_TOKEN: ADMIN_TOKEN,
    CPS_WEBHOOK_ALLOW_HOSTS: '127.0.0.1',
    CPS_DEMO_ON_EMPTY: 'false',
  };
}

/**
 * Settings a version's measured services get on top of the defaults (`--baseline-env`,
 * `--candidate-env`: NAME=VALUE,...), e.g. one commit side by side with two settings; NODE_OPTIONS
 * too (`NODE_OPTIONS=--cpu-prof --cpu-prof-dir=DIR`: a CPU profile of each thread of each serve).
 */
function versionEnv(version: Version): Record<string, string> {
  const raw = version.name === 'baseline' ? flags['baseline-env'] : flags['candidate-env'];
  if (!raw) return {};
  return Object.fromEntries(
    raw.split(',').map((pair) => {
      const at = pair.indexOf('=');
      if (at <= 0 || !(pair.startsWith('CPS_') || pair.startsWith('NODE_OPTIONS='))) {
        throw new Error(`--${version.name}-env takes CPS_NAME=VALUE,... (or NODE_OPTIONS=..., e.g. to profile), got "${pair}"`);
      }
      return [pair.slice(0, at), pair.slice(at + 1)];
    }),
  );
}

/** The measured deployment: `serve` as npm start runs it (+ a second serve and a worker on PostgreSQL). */
async function startDeployment(
  version: Version,
  db: DatabaseRef,
  targets: (serves: ServiceProcess[], loop: number) => ReadTarget,
  probe: ReadTarget & { label: string },
): Promise<Deployment> {
  const env = { ...serviceEnv(db), ...databaseAddressEnv(version, db), ...versionEnv(version) };
  const first = await startCli(version, `${version.name} serve`, 'serve', env);
  // The first answer after `listening`: /v1/stores and page 1, sent at once.
  const firstAnswer = await (async () => {
    const get = async (url: string) => {
      const response = await fetch(url, {
        headers: { Authorization: `Bearer ${probe.apiKey}` },
        signal: AbortSignal.timeout(READ_TIMEOUT_MS),
      });
      await response.arrayBuffer();
      if (response.status !== 200) throw new Error(`${url}: ${response.status}`);
      return now() - first.listeningAt;
    };
    const [stores, page] = await Promise.allSettled([
      get(`${first.base}/v1/stores`),
      get(`${first.base}/v1/products?store=${probe.store}&per_page=200`),
    ]);
    const value = (r: PromiseSettledResult<number>) => (r.status === 'fulfilled' ? r.value : null);
    const error = [stores, page]
      .map((r) => (r.status === 'rejected' ? String((r.reason as Error).message) : ''))
      .filter(Boolean)
      .join('; ');
    return { stores_ms: value(stores), page_ms: value(page), ...(error ? { error } : {}) };
  })();
  const serves = [first];
  // Reading and scraping start with the first serve; on PostgreSQL the second serve and the worker
  // start meanwhile (the reader reads from each serve once it listens).
  const reader = new Reader((loop) => targets(serves, loop));
  reader.start(READERS);
  const scraper = new Scraper(serves);
  let worker: ServiceProcess | null = null;
  if (db.engine === 'postgres') {
    const second = await startCli(version, `${version.name} serve-2`, 'serve', env);
    serves.push(second);
    scraper.add(second);
    worker = await startCli(version, `${version.name} worker`, 'worker', env);
  }
  if (worker && flags['worker-autogroup-nice'] && version.name === 'candidate' && version.sessions === 'own') {
    // What the worker's nice would be worth between units if it lowered its autogroup's weight too.
    fs.writeFileSync(`/proc/${worker.child.pid}/autogroup`, flags['worker-autogroup-nice']);
  }
  logAutogroups(version, [...serves, ...(worker ? [worker] : [])]);
  const cpu = new CpuSampler(() => [...serves, ...(worker ? [worker] : [])], postgres ? dataDirOf(postgres.dir) : null);
  return { serves, worker, reader, scraper, firstAnswer, cpu };
}

/**
 * Which scheduler autogroup (one per session, /proc/PID/autogroup) each measured process, the
 * bench (its readers) and PostgreSQL's processes are in, logged and kept with the version.
 */
function logAutogroups(version: Version, services: ServiceProcess[]): void {
  const groups = services.map((s) => `${s.name.replace(`${version.name} `, '')} ${autogroupOf(s.child.pid!) ?? '?'}`);
  groups.push(`bench (readers) ${autogroupOf(process.pid) ?? '?'}`);
  if (postgres) {
    const backends = postgresProcesses(dataDirOf(postgres.dir)).map(autogroupOf);
    groups.push(`PostgreSQL ${backends.length} processes in ${new Set(backends).size} autogroups`);
  }
  const line = `sessions ${version.sessions}, database over ${DATABASE_ADDRESS[version.name]}: ${groups.join(', ')}`;
  log(`${version.name}: ${line}`);
  version.autogroups.push(line);
}

/** One scrape of every serve's /metrics now (beside the periodic ones). */
async function scrapeAll(deployment: Deployment): Promise<void> {
  await Promise.all(deployment.serves.map((s) => deployment.scraper.scrape(s)));
}

async function stopDeployment(deployment: Deployment, after: string): Promise<ShutdownResult[]> {
  await deployment.reader.stop();
  await deployment.scraper.stop();
  deployment.cpu.stop();
  // All at once, as a deploy stops them.
  const results = await Promise.all(
    [...deployment.serves, ...(deployment.worker ? [deployment.worker] : [])].map((s) => terminate(s, after)),
  );
  for (const r of results)
    log(`${r.process}: SIGTERM (${after}) -> exit ${r.code ?? r.signal} after ${r.ms.toFixed(0)} ms${r.killed ? ' (killed)' : ''}`);
  return results;
}

/**
 * The phase's CPU per unit of its throughput (images finished, products re-priced or imported,
 * deliveries made): the whole deployment's CPU in the window, whatever else ran meanwhile (reads,
 * the deliveries that mirrored images cause), over the units.
 */
function withCpuPerUnit(phase: Omit<PhaseResult, 'verdicts'>): void {
  const cpu = phase.cpu;
  if (!cpu) return;
  const d = phase.throughput.detail as Record<string, number | null | undefined>;
  const [units, unit] =
    phase.key === 'a' || phase.key === 'c'
      ? [d.mirrored_or_dead, 'image']
      : phase.key === 'd'
        ? [phase.completed ? PRODUCTS : null, 'product re-priced']
        : phase.key === 'e'
          ? [phase.completed ? d.products : null, 'product imported']
          : phase.key === 'f'
            ? [d.deliveries_in_phase, 'delivery']
            : phase.key === 'b'
              ? [d.images, 'image']
              : [null, ''];
  if (!unit) return;
  cpu.unit = unit;
  cpu.ms_per_unit = units ? Number(((cpu.cores * cpu.seconds * 1000) / units).toFixed(3)) : null;
}

function readStats(reader: Reader, from: number, to: number): Pick<PhaseResult, 'reads' | 'read_errors'> {
  const samples = reader.between(from, to);
  const reads: PhaseResult['reads'] = { all: latencyStats(samples) };
  for (const kind of ['page', 'ids', 'stores', 'changes'] as const) {
    const of = samples.filter((s) => s.kind === kind);
    if (of.length) reads[kind] = latencyStats(of);
  }
  return { reads, read_errors: [...new Set(samples.filter((s) => s.error).map((s) => s.error!))].slice(0, 5) };
}

const fmt = (ms: number | null | undefined, digits = 1) => (ms === null || ms === undefined ? 'n/a' : `${ms.toFixed(digits)} ms`);

/**
 * Which it was, for a reads verdict that failed: the serving threads waiting for a core (a busy
 * machine) or the serve's own latency. Each serving (main) thread's time in the phase is either on a
 * core or runnable and queued for one (/proc schedstat); when the queued time is the larger part of
 * the two, a request's time was mostly spent waiting for a core. Beside it: the machine's load, the
 * serve's event-loop delay (its own stalls and the waits alike) and the bench's own event loop
 * (its reader times the reads: a stall there is counted in every read in flight).
 */
function readTailOf(phase: Omit<PhaseResult, 'verdicts'>): string | null {
  const cpu = phase.cpu;
  if (!cpu) return null;
  const serves = Object.values(cpu.processes);
  const ran = serves.reduce((n, p) => n + p.main_thread_cores, 0);
  const waited = serves.reduce((n, p) => n + p.main_thread_waiting_cores, 0);
  const share = ran + waited > 0 ? waited / (ran + waited) : 0;
  const which = share >= 0.5 ? 'mostly waiting for a core' : "mostly the serve's own";
  return (
    `${which}: serving thread${serves.length > 1 ? 's' : ''} on a core ${ran.toFixed(2)}, queued for one ${waited.toFixed(2)} ` +
    `(${(share * 100).toFixed(0)} %), load ${cpu.load.toFixed(1)}, serve's loop delay max ${fmt(phase.event_loop.max_ms, 0)}` +
    `${cpu.bench ? `, bench's own loop delay max ${fmt(cpu.bench.loop_max_ms, 0)}` : ''}`
  );
}

function verdictsOf(phase: Omit<PhaseResult, 'verdicts'>): PhaseResult['verdicts'] {
  const verdicts: PhaseResult['verdicts'] = [];
  if (phase.first_answer_ms) {
    const fa = Math.max(phase.first_answer_ms.stores_ms ?? Infinity, phase.first_answer_ms.page_ms ?? Infinity);
    verdicts.push({
      goal: `first answer <= ${GOALS.firstAnswerMs} ms after listening`,
      measured: Number.isFinite(fa) ? fmt(fa, 0) : `no answer (${phase.first_answer_ms.error})`,
      pass: fa <= GOALS.firstAnswerMs,
    });
  }
  const all = phase.reads.all;
  const p99Pass = all.n > 0 && all.p99! <= GOALS.readP99Ms;
  const maxPass = all.n > 0 && all.max! <= GOALS.readMaxMs;
  const tail = readTailOf(phase);
  verdicts.push({
    goal: `reads p99 <= ${GOALS.readP99Ms} ms`,
    measured: all.n ? `${fmt(all.p99)}${p99Pass || !tail ? '' : `; ${tail}`}` : 'no reads',
    pass: p99Pass,
  });
  verdicts.push({
    goal: `reads max <= ${GOALS.readMaxMs} ms`,
    measured: all.n
      ? `${fmt(all.max)}${all.unanswered ? ` (${all.unanswered} unanswered at the end)` : ''}${maxPass || !tail ? '' : `; ${tail}`}`
      : 'no reads',
    pass: maxPass,
  });
  if (all.errors) verdicts.push({ goal: 'no read errors', measured: `${all.errors} errors`, pass: false });
  if (phase.key === 'c') {
    const v = phase.throughput.value;
    verdicts.push({
      goal: `mirroring >= ${GOALS.imagesPerSecond} images/s`,
      measured: v === null ? 'n/a' : `${v.toFixed(1)} images/s`,
      pass: v !== null && v >= GOALS.imagesPerSecond,
    });
  }
  if (phase.key === 'i') {
    const detail = phase.throughput.detail as {
      first_mirrored_ms: number | null;
      all_mirrored_ms: number | null;
      fresh_images: number;
      mirrored_at_end: number | null;
      dead_host: { down_since: string | null };
      quiet: { cores: number; seconds: number; live_origin_pending: number; deliveries_settled: boolean };
    };
    if (LAYOUT.deadHost)
      verdicts.push({
        goal: 'the dead host marked down',
        measured: detail.dead_host.down_since ? `down since ${detail.dead_host.down_since}` : 'not marked down',
        pass: detail.dead_host.down_since !== null,
      });
    verdicts.push({
      goal: `the fresh origin's first image mirrored <= ${GOALS.freshFirstMs} ms after the import's answer`,
      measured: detail.first_mirrored_ms === null ? 'none mirrored' : fmt(detail.first_mirrored_ms, 0),
      pass: detail.first_mirrored_ms !== null && detail.first_mirrored_ms <= GOALS.freshFirstMs,
    });
    verdicts.push({
      goal: `all ${detail.fresh_images} of its images mirrored <= ${GOALS.freshAllMs} ms after the import's answer`,
      measured:
        detail.all_mirrored_ms === null
          ? `${detail.mirrored_at_end ?? 0} of ${detail.fresh_images} mirrored`
          : fmt(detail.all_mirrored_ms, 0),
      pass: detail.all_mirrored_ms !== null && detail.all_mirrored_ms <= GOALS.freshAllMs,
    });
    verdicts.push({
      goal: `the deployment's CPU with the dead host down < ${GOALS.deadHostCores * 100} % of a core (quiet window)`,
      measured: `${(detail.quiet.cores * 100).toFixed(2)} % over ${detail.quiet.seconds.toFixed(1)} s${detail.quiet.live_origin_pending || !detail.quiet.deliveries_settled ? ` (not quiet: ${detail.quiet.live_origin_pending} live images pending, deliveries ${detail.quiet.deliveries_settled ? 'settled' : 'still arriving'})` : ''}`,
      pass: detail.quiet.cores < GOALS.deadHostCores,
    });
  }
  if (phase.pages) {
    for (const page of phase.pages) {
      verdicts.push({
        goal: `${page.name} <= ${GOALS.panelMs} ms`,
        measured: page.error ? page.error : `max ${fmt(page.max)} (p50 ${fmt(page.p50)})`,
        pass: !page.error && page.max !== null && page.max <= GOALS.panelMs,
      });
    }
  }
  if (!phase.completed)
    verdicts.push({ goal: 'finished within its budget', measured: `not finished after ${phase.budget_seconds.toFixed(0)} s`, pass: false });
  return verdicts;
}

/** A write sent from a client process of its own (its upload must not share the reader's loop); null when over budget. */
async function timedWrite(
  tempDir: string,
  url: string,
  init: { method: string; contentType: string; body: string },
  budgetS: number,
): Promise<
  { ms: number; status: number; result: any; answeredAt: number } | { ms: number; timedOut: true } | { ms: number; failed: string }
> {
  const bodyFile = path.join(tempDir, `write-${Date.now()}-${Math.random().toString(36).slice(2)}.body`);
  fs.writeFileSync(bodyFile, init.body);
  const script = `
    const body = require('node:fs').readFileSync(${JSON.stringify(bodyFile)});
    const from = performance.timeOrigin + performance.now();
    fetch(${JSON.stringify(url)}, { method: ${JSON.stringify(init.method)}, body,
      headers: { Authorization: 'Bearer ${ADMIN_TOKEN}', 'Content-Type': ${JSON.stringify(init.contentType)} } })
      .then(async (response) => {
        const text = await response.text();
        process.stdout.write(JSON.stringify({ from, to: performance.timeOrigin + performance.now(), status: response.status, text }));
      }, (error) => { process.stdout.write(JSON.stringify({ error: String(error) })); });`;
  const started = now();
  const child = track(spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] }));
  let out = '';
  child.stdout.on('data', (chunk: Buffer) => {
    out += chunk.toString();
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), budgetS * 1000);
  await exitOf(child);
  clearTimeout(timer);
  fs.rmSync(bodyFile, { force: true });
  if (!out) return { ms: now() - started, timedOut: true };
  const answer = JSON.parse(out) as { from: number; to: number; status: number; text: string; error?: string };
  // A failed write is the phase's result (not finished), not the end of the run.
  if (answer.error) return { ms: now() - started, failed: `${init.method} ${url}: ${answer.error}` };
  if (answer.status < 200 || answer.status > 299)
    return { ms: now() - started, failed: `${init.method} ${url}: ${answer.status} ${answer.text.slice(0, 500)}` };
  // answeredAt: when the answer arrived, on this process's clock (performance.now()).
  return {
    ms: answer.to - answer.from,
    status: answer.status,
    result: answer.text ? JSON.parse(answer.text) : null,
    answeredAt: answer.to - performance.timeOrigin,
  };
}

// ---- builds -----------------------------------------------------------------------------------

let postgres: PostgresServer | null = null;

async function newDatabase(tempDir: string, name: string): Promise<DatabaseRef> {
  if (ENGINE === 'sqlite') {
    const dir = path.join(tempDir, name);
    fs.mkdirSync(dir, { recursive: true });
    return { engine: 'sqlite', path: path.join(dir, 'catalog.db') };
  }
  if (!postgres) {
    // The server runs as `postgres` when we are root: it must be able to pass through the temp dir.
    fs.chmodSync(tempDir, 0o711);
    postgres = await startPostgresServer({
      dir: path.join(tempDir, 'postgres'),
      durable: false,
      maxConnections: 300,
      settings: STATEMENT_STATS ? ['shared_preload_libraries=pg_stat_statements', 'pg_stat_statements.track=all'] : [],
    });
    log(`PostgreSQL on 127.0.0.1:${postgres.port} (${postgres.bindir}, non-durable)`);
  }
  const client = new pg.Client({ connectionString: postgres.url });
  await client.connect();
  const database = name.replace(/[^a-z0-9_]/g, '_');
  try {
    await client.query(`CREATE DATABASE ${database}`);
  } finally {
    await client.end();
  }
  return { engine: 'postgres', url: postgres.urlOf(database) };
}

/**
 * Read-only looks at a version's database while its services run (tables by name, as the seeding
 * does): a few indexed statements a second at most, from the bench's own process. `?` placeholders.
 */
class DatabaseProbe {
  private constructor(
    private readonly sqlite: Database.Database | null,
    private readonly client: pg.Client | null,
  ) {}

  static async open(db: DatabaseRef): Promise<DatabaseProbe> {
    if (db.engine === 'sqlite') {
      const sqlite = new Database(db.path, { readonly: true, fileMustExist: true });
      sqlite.pragma('busy_timeout = 30000');
      return new DatabaseProbe(sqlite, null);
    }
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    return new DatabaseProbe(null, client);
  }

  async all<T>(sql: string, params: unknown[]): Promise<T[]> {
    if (this.sqlite) return this.sqlite.prepare(sql).all(...params) as T[];
    let i = 0;
    return (
      await this.client!.query(
        sql.replace(/\?/g, () => `$${++i}`),
        params,
      )
    ).rows as T[];
  }

  /** PostgreSQL with --statement-stats: forgets what pg_stat_statements counted so far (a phase begins). */
  async resetStatementStats(): Promise<void> {
    if (!this.client || !STATEMENT_STATS) return;
    await this.client.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
    await this.client.query('SELECT pg_stat_statements_reset()');
  }

  /** PostgreSQL with --statement-stats: the statements that took the database's most time since the reset. */
  async statementStats(limit = 12): Promise<DatabaseStatement[] | undefined> {
    if (!this.client || !STATEMENT_STATS) return undefined;
    const { rows } = await this.client.query<DatabaseStatement>(
      `SELECT left(regexp_replace(query, '\\s+', ' ', 'g'), 160) AS query, calls::integer AS calls,
        round(total_exec_time::numeric, 1)::float AS total_ms, round((total_exec_time / calls)::numeric, 3)::float AS ms_per_call,
        round((rows::numeric / calls), 1)::float AS rows_per_call,
        round(((shared_blks_hit + shared_blks_read)::numeric / calls), 1)::float AS blocks_per_call
      FROM pg_stat_statements WHERE calls > 0 AND query NOT LIKE '%pg_stat_statements%' ORDER BY total_exec_time DESC LIMIT $1`,
      [limit],
    );
    return rows;
  }

  /** The merchant's images of one host by state: a range of the primary key (merchant, url). */
  async imagesOfHost(merchantId: number, host: string): Promise<{ pending: number; mirrored: number; dead: number }> {
    const rows = await this.all<{ state: string; n: number | string }>(
      'SELECT state, count(*) AS n FROM image_mirrors WHERE merchant_id = ? AND url >= ? AND url < ? GROUP BY state',
      [merchantId, `${host}/`, `${host}0`],
    );
    const of = (state: string) => Number(rows.find((r) => r.state === state)?.n ?? 0);
    return { pending: of('pending'), mirrored: of('mirrored'), dead: of('dead') };
  }

  /**
   * How many of the merchant's products its unfinished publish run has re-published (up to its
   * position), 0 without one: an unfinished re-pricing's rate. A run of an import counts chunks, not ids.
   */
  async republishedByRun(merchantId: number): Promise<number> {
    const rows = await this.all<{ n: number | string | null }>(
      `SELECT (SELECT count(*) FROM products WHERE merchant_id = ? AND id <= r.after_product_id) AS n
       FROM publish_runs AS r WHERE r.merchant_id = ? AND r.import_job_id IS NULL ORDER BY r.id LIMIT 1`,
      [merchantId, merchantId],
    );
    return Number(rows[0]?.n ?? 0);
  }

  /** The host's pending images: how many are due now, and when the others are (leased, or waiting for a retry). */
  async pendingOfHost(
    merchantId: number,
    host: string,
  ): Promise<{ pending: number; due: number; attempted: number; next_at: string | null; last_at: string | null }> {
    const at = new Date().toISOString();
    const rows = await this.all<{
      pending: number | string;
      due: number | string | null;
      attempted: number | string | null;
      next_at: string | null;
      last_at: string | null;
    }>(
      `SELECT count(*) AS pending, sum(CASE WHEN next_attempt_at <= ? THEN 1 ELSE 0 END) AS due,
         sum(CASE WHEN attempts > 0 THEN 1 ELSE 0 END) AS attempted,
         min(CASE WHEN next_attempt_at > ? THEN next_attempt_at END) AS next_at, max(next_attempt_at) AS last_at
       FROM image_mirrors WHERE merchant_id = ? AND url >= ? AND url < ? AND state = 'pending'`,
      [at, at, merchantId, `${host}/`, `${host}0`],
    );
    const row = rows[0]!;
    return {
      pending: Number(row.pending),
      due: Number(row.due ?? 0),
      attempted: Number(row.attempted ?? 0),
      next_at: row.next_at,
      last_at: row.last_at,
    };
  }

  /** The merchant's row of an origin in image_origins (the breaker's state), or null. */
  async originState(
    merchantId: number,
    host: string,
  ): Promise<{ failures: number; down_since: string | null; next_probe_at: string | null; probe_ms: number | null } | null> {
    const rows = await this.all<{ failures: number; down_since: string | null; next_probe_at: string | null; probe_ms: number | null }>(
      'SELECT failures, down_since, next_probe_at, probe_ms FROM image_origins WHERE merchant_id = ? AND origin = ?',
      [merchantId, host.toLowerCase()],
    ).catch(() => []);
    return rows[0] ? { ...rows[0], failures: Number(rows[0].failures) } : null;
  }

  async close(): Promise<void> {
    this.sqlite?.close();
    await this.client?.end();
  }
}

/** A `serve` for building a catalog through the admin API: workers off, quiet; stopped before anything is measured. */
async function withBuilder<T>(version: Version, db: DatabaseRef, work: (admin: AdminClient) => Promise<T>): Promise<T> {
  const builder = await startCli(
    version,
    `${version.name} builder`,
    'serve',
    {
      ...serviceEnv(db),
      CPS_IMAGE_MIRRORING: 'false',
      CPS_WEBHOOK_DISPATCHER: 'false',
      CPS_LOG_LEVEL: 'warn',
      CPS_ACCESS_LOG: 'false',
    },
    'readyz',
  );
  try {
    return await work(new AdminClient(builder.base, ADMIN_TOKEN));
  } finally {
    const stopped = await terminate(builder, 'build');
    if (stopped.code !== 0) log(`  ${version.name}: the builder exited ${stopped.code ?? stopped.signal}`);
  }
}

async function buildVersion(version: Version, peers: Peers, tempDir: string): Promise<void> {
  if (MAIN_PHASES.length) {
    version.mainDb = await newDatabase(tempDir, `${version.name}_main`);
    const started = now();
    version.main = await withBuilder(version, version.mainDb, (admin) =>
      buildMainCatalog(admin, {
        products: PRODUCTS,
        hosts: peers.hosts,
        endpoints: ENDPOINTS,
        receiver: peers.receiver,
        readers: READERS,
        layout: version.layout,
        log,
      }),
    );
    version.build.main_seconds = (now() - started) / 1000;
    version.build.main_products_per_second = PRODUCTS / version.build.main_seconds;
    if (PHASES.has('h')) {
      const seeded = now();
      await seedDeliveryLog(version.mainDb, version.main.endpoints[0]!.id, SEED_DELIVERIES).catch((error: Error) =>
        version.notes.push(`seeding the delivery log failed (schema?): ${error.message}`),
      );
      version.build.delivery_log_seconds = (now() - seeded) / 1000;
    }
    log(
      `${version.name}: main catalog of ${PRODUCTS} products built in ${version.build.main_seconds.toFixed(1)} s (${version.build.main_products_per_second.toFixed(0)} products/s)`,
    );
  }
  if (PHASES.has('b')) {
    version.tenantsDb = await newDatabase(tempDir, `${version.name}_tenants`);
    const started = now();
    version.tenants = await withBuilder(version, version.tenantsDb, (admin) =>
      buildTenants(admin, {
        merchants: TENANTS,
        products: TENANT_PRODUCTS,
        hosts: peers.hosts,
        receiver: peers.receiver,
        log,
      }),
    );
    version.build.tenants_seconds = (now() - started) / 1000;
    log(`${version.name}: ${TENANTS} tenants of ${TENANT_PRODUCTS} products built in ${version.build.tenants_seconds.toFixed(1)} s`);
  }
}

// ---- the phases -------------------------------------------------------------------------------

async function runMainPhases(version: Version, peers: Peers, tempDir: string): Promise<void> {
  const main = version.main!;
  const db = version.mainDb!;
  const targets = (serves: ServiceProcess[], loop: number): ReadTarget => ({
    base: serves[Math.floor(Math.random() * serves.length)]!.base,
    apiKey: main.apiKeys[loop % READERS]!,
    store: ['de', 'pl', 'uk'][Math.floor(Math.random() * 3)]!,
  });
  const probe = { base: '', apiKey: main.apiKeys[READERS]!, store: 'de', label: 'main' };
  const admin = (d: Deployment) => `${d.serves[0]!.base}/admin/v1/merchants/${main.merchantId}`;

  const startMain = async () => {
    const started = now();
    const d = await startDeployment(version, db, targets, probe);
    log(
      `${version.name}: serve listening ${((d.serves[0]!.listeningAt - started) / 1000).toFixed(1)} s after spawn; first answer: stores ${fmt(d.firstAnswer.stores_ms, 0)}, page 1 ${fmt(d.firstAnswer.page_ms, 0)}${d.firstAnswer.error ? ` (${d.firstAnswer.error})` : ''}`,
    );
    return d;
  };
  // Retention is measured on a start of its own (old changes seeded while stopped).
  const onlyRetention = MAIN_PHASES.length === 1 && MAIN_PHASES[0] === 'g';
  if (onlyRetention) {
    await seedForRetention(version, db, main);
  }
  let deployment = await startMain();
  let startedFresh = true;
  const dbProbe = await DatabaseProbe.open(db);

  const record = async (phase: Omit<PhaseResult, 'verdicts'>) => {
    withCpuPerUnit(phase);
    const database_statements = await dbProbe.statementStats();
    const full = { ...phase, ...(database_statements ? { database_statements } : {}), verdicts: verdictsOf(phase) };
    version.phases.push(full);
    printPhase(version, full);
  };
  // Every phase scrapes /metrics as it begins (prom-client's event-loop figures restart there) and
  // as it ends, so even a phase of a second has its own figures.
  const measured = async (key: PhaseKey, from: number, to: number, budget: number, completed: boolean, d: Deployment) => {
    await scrapeAll(d);
    return {
      key,
      title: PHASE_TITLES[key],
      seconds: (to - from) / 1000,
      budget_seconds: budget,
      completed,
      ...readStats(d.reader, from, to),
      event_loop: eventLoopOf(d.scraper.scrapes, from, now()),
      cpu: d.cpu.between(from, to),
      ...(startedFresh ? { first_answer_ms: d.firstAnswer } : {}),
    };
  };
  const imagesThroughput = async (d: Deployment, from: number, to: number, originFrom: number) => {
    // One more scrape now, so the end of the window has a figure if the server answers at all.
    await d.scraper.scrape(d.serves[0]!);
    const a = imagesAt(d.scraper.scrapes, from + 1000, from);
    const b = imagesAt(d.scraper.scrapes, now());
    const origin = (await peers.counts()).images - originFrom;
    const seconds = (to - from) / 1000;
    const finished = a && b ? b.mirrored + b.dead - (a.mirrored + a.dead) : null;
    return {
      value: a && b && b.at > a.at ? finished! / ((b.at - a.at) / 1000) : null,
      unit: 'images/s',
      detail: {
        mirrored_or_dead: finished,
        gauge_seconds: a && b ? (b.at - a.at) / 1000 : null,
        origin_fetches: origin,
        origin_fetches_per_second: origin / seconds,
        pending_at_end: b?.pending ?? null,
        mirrored_at_end: b?.mirrored ?? null,
      },
    };
  };

  /**
   * The dead-origin phase: the dead host marked down, the live origin's backlog and its deliveries
   * done, then a quiet window (the reader paused) whose CPU is the deployment's cost of the down
   * host at rest, then FRESH_PRODUCTS products on the fresh origin imported and timed until all
   * their images are mirrored, reads sampled meanwhile.
   */
  const deadOriginPhase = async (d: Deployment): Promise<Omit<PhaseResult, 'verdicts'>> => {
    const merchant = main.merchantId;
    const budgetMs = WRITE_BUDGET_S * 1000;
    const started = now();
    // 1. The dead host marked down (from the first start's backlog on).
    let dead = await dbProbe.originState(merchant, peers.hosts.dead);
    while (version.layout.deadHost && !dead?.down_since && now() - started < budgetMs) {
      await sleep(250);
      dead = await dbProbe.originState(merchant, peers.hosts.dead);
    }
    const listeningWall = performance.timeOrigin + d.serves[0]!.listeningAt;
    const downAfterListeningMs = dead?.down_since ? Date.parse(dead.down_since) - listeningWall : null;
    // 2. The live origin's backlog mirrored and the deliveries it caused made (the quiet window is
    // quiet only then): the live origin's pending images, then the receivers' count steady for 3 s.
    let live = await dbProbe.imagesOfHost(merchant, peers.hosts.origin);
    const drainMs = Math.max(budgetMs, (LIVE_IMAGES / 100) * 1000);
    while (live.pending > 0 && now() - started < drainMs) {
      await sleep(1000);
      live = await dbProbe.imagesOfHost(merchant, peers.hosts.origin);
    }
    let deliveriesSettled = false;
    for (let last = (await peers.counts()).deliveries, steadySince = now(); now() - started < drainMs + 60_000; ) {
      await sleep(500);
      const count = (await peers.counts()).deliveries;
      if (count !== last) [last, steadySince] = [count, now()];
      else if (now() - steadySince >= 3000) {
        deliveriesSettled = true;
        break;
      }
    }
    const waitedS = (now() - started) / 1000;
    log(
      `  dead origin: ${peers.hosts.dead} ${dead?.down_since ? `down since ${dead.down_since} (${fmt(downAfterListeningMs, 0)} after listening)` : 'NOT marked down'}; live origin ${live.pending} pending; deliveries ${deliveriesSettled ? 'settled' : 'NOT settled'}; ${waitedS.toFixed(0)} s of waiting`,
    );

    // 3. The quiet window: nothing asked of the deployment but /metrics every 5 s; its CPU from /proc.
    await d.reader.stop();
    const processes = [...d.serves, ...(d.worker ? [d.worker] : [])];
    const pgData = postgres ? dataDirOf(postgres.dir) : null;
    const cpuNow = () => ({
      processes: processes.map((p) => processCpu([p.child.pid!])),
      threads: processes.map((p) => new Map(threadCpu(p.child.pid!).map((t) => [t.tid, t]))),
      db: pgData ? postgresServerCpu(pgData) : null,
    });
    const deadBefore = await dbProbe.originState(merchant, peers.hosts.dead);
    const livePending = await dbProbe.pendingOfHost(merchant, peers.hosts.origin);
    const peers0 = await peers.counts();
    // The window on the monotonic clock (µs) too: a --cpu-prof profile's sample times (NODE_OPTIONS in
    // --candidate-env) are on it, so the profile can be cut to the window.
    const monotonicUs = () => Number(process.hrtime.bigint() / 1000n);
    const scrapedBefore = now();
    await scrapeAll(d);
    const cpu0 = cpuNow();
    const q0 = now();
    const m0 = monotonicUs();
    await sleep(QUIET_SECONDS * 1000);
    const cpu1 = cpuNow();
    const q1 = now();
    const m1 = monotonicUs();
    await scrapeAll(d);
    // The statements the window ran (cps_db_statement_duration_seconds between the scrapes around it).
    const quietStatements = eventLoopOf(d.scraper.scrapes, scrapedBefore, now()).statements;
    const peers1 = await peers.counts();
    const deadAfter = await dbProbe.originState(merchant, peers.hosts.dead);
    const quietS = (q1 - q0) / 1000;
    const cores = (us: number) => Number((us / 1e6 / quietS).toFixed(4));
    const perProcess = processes.map((p, i) => {
      const threads = [...cpu1.threads[i]!.values()]
        .map((t) => ({ tid: t.tid, nice: t.nice, main: t.tid === p.child.pid, us: t.us - (cpu0.threads[i]!.get(t.tid)?.us ?? 0) }))
        .filter((t) => t.us > 0)
        .sort((a, b) => b.us - a.us);
      return {
        process: p.name,
        cores: cores(cpu1.processes[i]! - cpu0.processes[i]!),
        main_thread_cores: cores(threads.filter((t) => t.main).reduce((n, t) => n + t.us, 0)),
        other_threads: threads.filter((t) => !t.main).map((t) => ({ tid: t.tid, nice: t.nice, cores: cores(t.us) })),
      };
    });
    const dbCores = cpu1.db !== null && cpu0.db !== null ? cores(cpu1.db - cpu0.db) : null;
    const quietCores = perProcess.reduce((n, p) => n + p.cores, 0) + (dbCores ?? 0);
    log(
      `  quiet window ${quietS.toFixed(1)} s: ${(quietCores * 100).toFixed(2)} % of a core (${perProcess.map((p) => `${p.process} ${(p.cores * 100).toFixed(2)} %`).join(', ')}${dbCores !== null ? `, PostgreSQL ${(dbCores * 100).toFixed(2)} %` : ''}); dead host failures ${deadBefore?.failures ?? 'n/a'} -> ${deadAfter?.failures ?? 'n/a'}`,
    );
    d.reader.start(READERS);

    // 4. FRESH_PRODUCTS products on the fresh origin: from the import's answer to their images mirrored.
    const expected = Array.from({ length: FRESH_PRODUCTS }, (_, i) => 2 + ((i + 1) % 4)).reduce((a, b) => a + b, 0);
    const body = ndjson(1, FRESH_PRODUCTS, (n) => mainProductLine(n, peers.hosts, { tag: 'fresh', images: 'fresh' }));
    const seen: { at: number; mirrored: number; pending: number; dead: number }[] = [];
    let polling = true;
    const poller = (async () => {
      while (polling) {
        const state = await dbProbe.imagesOfHost(merchant, peers.hosts.fresh);
        // When the state was seen at the latest: after the look.
        seen.push({ at: now(), ...state });
        if (state.mirrored + state.dead >= expected) return;
        await sleep(50);
      }
    })();
    const from = now();
    const write = await timedWrite(
      tempDir,
      `${admin(d)}/imports`,
      { method: 'POST', contentType: 'application/x-ndjson', body },
      WRITE_BUDGET_S,
    );
    const answeredAt = 'answeredAt' in write ? write.answeredAt : null;
    if ('failed' in write) version.notes.push(`phase i: the import failed: ${write.failed}`);
    const doneOf = (x: { mirrored: number; dead: number } | undefined) => !!x && x.mirrored + x.dead >= expected;
    const waitUntil = (answeredAt ?? now()) + Math.max(30_000, 3 * GOALS.freshAllMs);
    while (answeredAt !== null && now() < waitUntil && !doneOf(seen.at(-1))) await sleep(50);
    polling = false;
    await poller;
    const firstSeen = seen.find((x) => x.mirrored > 0);
    const allSeen = seen.find(doneOf);
    const firstMs = answeredAt !== null && firstSeen ? firstSeen.at - answeredAt : null;
    const allMs = answeredAt !== null && allSeen ? allSeen.at - answeredAt : null;
    // Reads: from the import on, until its images are mirrored, and at least half a phase.
    const to = Math.max(now(), from + (PHASE_SECONDS / 2) * 1000);
    await sleep(Math.max(0, to - now()));
    const peers2 = await peers.counts();
    const last = seen.at(-1);
    // Its budget: the wait for the fresh images after the import's answer.
    const phase = await measured('i', from, to, Math.max(30, (3 * GOALS.freshAllMs) / 1000), allMs !== null, d);
    // The readers pause for the count of the dead host's images: on SQLite it runs in this process,
    // synchronously (every image of the catalog at 1M products: a second and more), and a read
    // waiting on this event loop meanwhile would count the bench's stall as the serve's.
    await d.reader.stop();
    const deadImages = await dbProbe.imagesOfHost(merchant, peers.hosts.dead);
    const deadEnd = await dbProbe.originState(merchant, peers.hosts.dead);
    d.reader.start(READERS);
    return {
      ...phase,
      throughput: {
        value: allMs,
        unit: `ms from the import's answer to all ${FRESH_PRODUCTS} products' images mirrored`,
        detail: {
          import_ms: write.ms,
          fresh_products: FRESH_PRODUCTS,
          fresh_images: expected,
          first_mirrored_ms: firstMs,
          all_mirrored_ms: allMs,
          mirrored_at_end: last?.mirrored ?? null,
          pending_at_end: last?.pending ?? null,
          fresh_origin_fetches: peers2.fresh - peers1.fresh,
          live_origin_fetches: peers2.images - peers1.images,
          dead_host: {
            origin: peers.hosts.dead,
            down_since: dead?.down_since ?? null,
            down_ms_after_listening: downAfterListeningMs,
            failures: deadEnd?.failures ?? null,
            next_probe_at: deadEnd?.next_probe_at ?? null,
            probe_ms: deadEnd?.probe_ms ?? null,
            images: deadImages,
          },
          quiet: {
            seconds: quietS,
            cores: Number(quietCores.toFixed(4)),
            processes: perProcess,
            database_cores: dbCores,
            live_origin_pending: live.pending,
            live_origin_pending_detail: livePending,
            statements: quietStatements,
            monotonic_us: { from: m0, to: m1 },
            deliveries_settled: deliveriesSettled,
            deliveries: peers1.deliveries - peers0.deliveries,
            live_origin_fetches: peers1.images - peers0.images,
            dead_host_failures: deadBefore && deadAfter ? deadAfter.failures - deadBefore.failures : null,
            waited_seconds_before: waitedS,
          },
        },
      },
    };
  };

  for (const key of MAIN_PHASES) {
    await dbProbe.resetStatementStats();
    if (key !== 'a' && key !== 'g') await scrapeAll(deployment);
    if (key === 'a') {
      // The window from `listening`: the workers start on the whole catalog's backlog.
      const from = deployment.serves[0]!.listeningAt;
      const counts0 = await peers.counts();
      const budget = PHASE_SECONDS / 2;
      await sleep(Math.max(0, from + budget * 1000 - now()));
      const to = now();
      const counts1 = await peers.counts();
      const images = await imagesThroughput(deployment, from, to, counts0.images);
      await record({
        ...(await measured('a', from, to, budget, true, deployment)),
        throughput: { ...images, detail: { ...images.detail, deliveries: counts1.deliveries - counts0.deliveries } },
      });
    } else if (key === 'c') {
      const from = now();
      const counts0 = await peers.counts();
      await deployment.scraper.scrape(deployment.serves[0]!);
      const budget = PHASE_SECONDS;
      // The window, or until nothing of the live origin is pending any more (the dead host's images
      // stay pending: the mirror only probes that host once it is down).
      let live = await dbProbe.imagesOfHost(main.merchantId, peers.hosts.origin);
      while (now() - from < budget * 1000 && live.pending > 0) {
        await sleep(1000);
        live = await dbProbe.imagesOfHost(main.merchantId, peers.hosts.origin);
      }
      const to = now();
      const throughput = await imagesThroughput(deployment, from, to, counts0.images);
      await record({
        ...(await measured('c', from, to, budget, true, deployment)),
        throughput: { ...throughput, detail: { ...throughput.detail, live_origin_pending_at_end: live.pending } },
      });
    } else if (key === 'i') {
      await record(await deadOriginPhase(deployment));
    } else if (key === 'd') {
      const rates = (await fetch(`${admin(deployment)}/exchange-rates`, {
        headers: { Authorization: `Bearer ${ADMIN_TOKEN}` },
        signal: AbortSignal.timeout(READ_TIMEOUT_MS),
      }).then((r) => r.json())) as { data: { base: string; quote: string; rate: string }[] };
      const current = rates.data.find((r) => r.base === 'EUR' && r.quote === 'GBP')!;
      const rate = (Number(current.rate) * 1.02).toFixed(4);
      const from = now();
      const write = await timedWrite(
        tempDir,
        `${admin(deployment)}/exchange-rates/EUR/GBP`,
        { method: 'PUT', contentType: 'application/json', body: JSON.stringify({ rate }) },
        WRITE_BUDGET_S,
      );
      const to = now();
      const done = 'status' in write;
      if ('failed' in write) version.notes.push(`phase d: the write failed: ${write.failed}`);
      // Not finished in its budget: how far its run got, read before the services stop.
      const republished = done ? PRODUCTS : await dbProbe.republishedByRun(main.merchantId);
      await record({
        ...(await measured('d', from, to, WRITE_BUDGET_S, done, deployment)),
        throughput: {
          value: done ? PRODUCTS / (write.ms / 1000) : null,
          unit: 'products/s',
          detail: {
            write_ms: write.ms,
            rate: `${current.rate} -> ${rate}`,
            resolutions: PRODUCTS,
            ...(done ? {} : { republished_when_stopped: republished, republished_per_second: republished / ((to - from) / 1000) }),
          },
        },
      });
    } else if (key === 'e' || key === 'f') {
      const count = key === 'e' ? IMPORT_PRODUCTS : STORM_PRODUCTS;
      const body =
        key === 'e'
          ? ndjson(1, count, (n) => mainProductLine(n, peers.hosts, { tag: 'import', images: layoutOf(version.layout, n).images }))
          : ndjson(1, count, (n) =>
              mainProductLine(n, peers.hosts, { tag: 'scale', variant: 1 + version.phases.length, ...layoutOf(version.layout, n) }),
            );
      const counts0 = await peers.counts();
      const from = now();
      const write = await timedWrite(
        tempDir,
        `${admin(deployment)}/imports`,
        { method: 'POST', contentType: 'application/x-ndjson', body },
        WRITE_BUDGET_S,
      );
      const done = 'status' in write;
      if ('failed' in write) version.notes.push(`phase ${key}: the import failed: ${write.failed}`);
      if (key === 'e') {
        const to = now();
        await record({
          ...(await measured('e', from, to, WRITE_BUDGET_S, done, deployment)),
          throughput: {
            value: done ? count / (write.ms / 1000) : null,
            unit: 'products/s',
            detail: {
              write_ms: write.ms,
              products: count,
              result: 'result' in write ? write.result : null,
              error: 'failed' in write ? write.failed : undefined,
            },
          },
        });
        continue;
      }
      // The storm: deliveries the receivers get, sampled every second, for the phase's window after the import.
      const series: { at: number; deliveries: number }[] = [{ at: now(), deliveries: (await peers.counts()).deliveries }];
      const windowEnd = now() + PHASE_SECONDS * 1000;
      while (now() < windowEnd) {
        await sleep(1000);
        series.push({ at: now(), deliveries: (await peers.counts()).deliveries });
      }
      const to = now();
      let peak = 0;
      for (let i = 0; i < series.length; i++) {
        const j = series.findIndex((s) => s.at >= series[i]!.at + 5000);
        if (j < 0) break;
        peak = Math.max(peak, (series[j]!.deliveries - series[i]!.deliveries) / ((series[j]!.at - series[i]!.at) / 1000));
      }
      const total = series.at(-1)!.deliveries - counts0.deliveries;
      await record({
        ...(await measured('f', from, to, WRITE_BUDGET_S + PHASE_SECONDS, done, deployment)),
        throughput: {
          value:
            series.length > 5 ? peak : (series.at(-1)!.deliveries - series[0]!.deliveries) / ((series.at(-1)!.at - series[0]!.at) / 1000),
          unit: 'deliveries/s (peak over 5 s)',
          detail: {
            trigger_import_ms: write.ms,
            trigger_products: count,
            deliveries_in_phase: total,
            mean_per_second: total / ((to - from) / 1000),
          },
        },
      });
    } else if (key === 'h') {
      const from = now();
      const pages = await panelPages(deployment, main);
      const to = now();
      const slowest = Math.max(...pages.map((p) => p.max ?? Infinity));
      await record({
        ...(await measured(
          'h',
          from,
          to,
          PANEL_BUDGET_S,
          pages.every((p) => !p.error?.startsWith('not requested')),
          deployment,
        )),
        pages,
        throughput: { value: Number.isFinite(slowest) ? slowest : null, unit: 'ms (slowest page or call)', detail: {} },
      });
    } else if (key === 'g') {
      if (!onlyRetention) {
        version.shutdowns.push(...(await stopDeployment(deployment, 'retention restart')));
        await seedForRetention(version, db, main);
        deployment = await startMain();
        startedFresh = true;
      }
      const from = deployment.serves[0]!.listeningAt;
      const budget = Math.max(PHASE_SECONDS * 2, 120);
      // serve prunes at start, in batches, and logs once when it has deleted everything expired.
      const pruned = await Promise.any(
        deployment.serves.map((s) => s.waitForLog('expired changes deleted', Math.max(1000, from + budget * 1000 - now()))),
      ).catch(() => null);
      // Pruning starts before `listening`: timed from the spawn. Reads are sampled from `listening`
      // until it is done, and for at least a few seconds after the start.
      const spawnedAt = deployment.serves[0]!.spawnedAt;
      const to = Math.max(pruned ?? now(), from + Math.min(PHASE_SECONDS / 2, 10) * 1000);
      await sleep(Math.max(0, to - now()));
      await record({
        ...(await measured('g', from, to, budget, pruned !== null, deployment)),
        throughput: {
          value: pruned ? SEED_CHANGES / ((pruned - spawnedAt) / 1000) : null,
          unit: 'changes pruned/s',
          detail: {
            seeded: SEED_CHANGES,
            pruned_ms_after_spawn: pruned ? pruned - spawnedAt : null,
            pruned_ms_after_listening: pruned ? pruned - from : null,
          },
        },
      });
    }
    startedFresh = false;
  }
  version.shutdowns.push(...(await stopDeployment(deployment, 'end of the main phases')));
  await dbProbe.close();
}

async function seedForRetention(version: Version, db: DatabaseRef, main: MainCatalog): Promise<void> {
  const started = now();
  await seedOldChanges(db, main.archive, SEED_CHANGES, 60);
  version.build.seed_changes_seconds = (now() - started) / 1000;
  log(`${version.name}: ${SEED_CHANGES} changes of 60 days ago seeded in ${version.build.seed_changes_seconds.toFixed(1)} s`);
}

/** The operator's panel pages and the admin status calls, 5 requests each, one at a time. */
async function panelPages(deployment: Deployment, main: MainCatalog): Promise<NonNullable<PhaseResult['pages']>> {
  const base = deployment.serves[0]!.base;
  const signIn = await fetch(`${base}/panel/login/operator`, {
    method: 'POST',
    redirect: 'manual',
    body: new URLSearchParams({ admin_token: ADMIN_TOKEN }),
    headers: { 'Content-Type': 'application/x-www-form-urlencoded', Origin: base },
    signal: AbortSignal.timeout(READ_TIMEOUT_MS),
  });
  await signIn.arrayBuffer();
  const cookie = (signIn.headers.getSetCookie?.() ?? []).map((c) => c.split(';')[0]).join('; ');
  const m = `/panel/merchants/${main.merchantId}`;
  const detail = main.endpoints[0]!.id;
  const deepAfter = Math.max(0, Math.floor(PRODUCTS * 0.9));
  const targets: { name: string; path: string; admin?: boolean }[] = [
    { name: 'panel: merchants', path: '/panel' },
    { name: 'panel: overview', path: m },
    { name: 'panel: images', path: `${m}/images` },
    { name: 'panel: endpoints', path: `${m}/endpoints` },
    { name: 'panel: endpoint detail', path: `${m}/endpoints/${detail}` },
    { name: 'panel: endpoint detail, given up', path: `${m}/endpoints/${detail}?status=given_up` },
    { name: 'panel: catalog list', path: `${m}/catalog?store=de` },
    { name: 'panel: catalog, deep page', path: `${m}/catalog?store=de&after_id=${deepAfter}` },
    { name: 'panel: catalog, excluded', path: `${m}/catalog?store=uk&excluded=1` },
    { name: 'panel: catalog search by ref', path: `${m}/catalog?store=de&q=SCALE-${String(Math.ceil(PRODUCTS / 2)).padStart(7, '0')}` },
    { name: 'admin: images status', path: `/admin/v1/merchants/${main.merchantId}/images`, admin: true },
    { name: 'admin: endpoints', path: `/admin/v1/merchants/${main.merchantId}/webhook-endpoints`, admin: true },
    {
      name: 'admin: delivery log',
      path: `/admin/v1/merchants/${main.merchantId}/webhook-endpoints/${detail}/deliveries?limit=50`,
      admin: true,
    },
  ];
  const results: NonNullable<PhaseResult['pages']> = [];
  // Bounded: a server that takes seconds per page gets no more requests once the budget is spent.
  const deadline = now() + PANEL_BUDGET_S * 1000;
  for (const target of targets) {
    const times: number[] = [];
    let status = 0;
    let error: string | undefined = now() > deadline ? `not requested: the phase's ${PANEL_BUDGET_S} s were spent` : undefined;
    for (let i = 0; i < 5 && !error; i++) {
      if (i > 0 && now() > deadline) break;
      const started = now();
      try {
        const response = await fetch(`${base}${target.path}`, {
          redirect: 'manual',
          signal: AbortSignal.timeout(READ_TIMEOUT_MS),
          headers: target.admin ? { Authorization: `Bearer ${ADMIN_TOKEN}` } : { Cookie: cookie },
        });
        await response.arrayBuffer();
        status = response.status;
        times.push(now() - started);
        if (status !== 200) error = `${status}`;
      } catch (e) {
        error = (e as Error).message;
        times.push(now() - started);
      }
    }
    const sorted = [...times].sort((a, b) => a - b);
    results.push({
      name: target.name,
      path: target.path,
      status,
      n: times.length,
      p50: rank(sorted, 0.5),
      max: sorted.at(-1) ?? null,
      ...(error ? { error } : {}),
    });
  }
  return results;
}

async function runTenantsPhase(version: Version, peers: Peers): Promise<void> {
  const tenants = version.tenants;
  const targets = (serves: ServiceProcess[]): ReadTarget => {
    const tenant = tenants[Math.floor(Math.random() * tenants.length)]!;
    return { base: serves[Math.floor(Math.random() * serves.length)]!.base, apiKey: tenant.apiKey, store: 'main' };
  };
  const probe = { base: '', apiKey: tenants[0]!.apiKey, store: 'main', label: 'tenant' };
  const counts0 = await peers.counts();
  const deployment = await startDeployment(version, version.tenantsDb!, targets, probe);
  const from = deployment.serves[0]!.listeningAt;
  const budget = PHASE_SECONDS;
  await sleep(Math.max(0, from + budget * 1000 - now()));
  const to = now();
  await deployment.scraper.scrape(deployment.serves[0]!);
  const a = imagesAt(deployment.scraper.scrapes, from + 1000, from);
  const b = imagesAt(deployment.scraper.scrapes, now());
  const counts1 = await peers.counts();
  const tenantsServed = Object.keys(counts1.byPath).filter(
    (p) => p.startsWith('/tenant/') && counts1.byPath[p]! - (counts0.byPath[p] ?? 0) > 0,
  ).length;
  const phase = {
    key: 'b' as const,
    title: PHASE_TITLES.b,
    seconds: (to - from) / 1000,
    budget_seconds: budget,
    completed: true,
    first_answer_ms: deployment.firstAnswer,
    ...readStats(deployment.reader, from, to),
    event_loop: eventLoopOf(deployment.scraper.scrapes, from, now()),
    cpu: deployment.cpu.between(from, to),
    throughput: {
      value: a && b && b.at > a.at ? (b.mirrored + b.dead - (a.mirrored + a.dead)) / ((b.at - a.at) / 1000) : null,
      unit: 'images/s',
      detail: {
        images: a && b ? b.mirrored + b.dead - (a.mirrored + a.dead) : null,
        merchants: TENANTS,
        products_per_merchant: TENANT_PRODUCTS,
        origin_fetches_per_second: (counts1.images - counts0.images) / ((to - from) / 1000),
        deliveries: counts1.deliveries - counts0.deliveries,
        deliveries_per_second: (counts1.deliveries - counts0.deliveries) / ((to - from) / 1000),
        merchants_delivered_to: tenantsServed,
      },
    },
  };
  withCpuPerUnit(phase);
  const full = { ...phase, verdicts: verdictsOf(phase) };
  version.phases.push(full);
  printPhase(version, full);
  version.shutdowns.push(...(await stopDeployment(deployment, 'end of the tenants phase')));
}

// ---- output -----------------------------------------------------------------------------------

function printPhase(version: Version, phase: PhaseResult): void {
  const lines = [
    `\n[${version.name}] phase ${phase.key} (${phase.title}): ${phase.seconds.toFixed(1)} s${phase.completed ? '' : ` (NOT finished within ${phase.budget_seconds.toFixed(0)} s)`}`,
  ];
  if (phase.first_answer_ms)
    lines.push(
      `  first answer after listening: stores ${fmt(phase.first_answer_ms.stores_ms, 0)}, page 1 ${fmt(phase.first_answer_ms.page_ms, 0)}`,
    );
  for (const [kind, s] of Object.entries<LatencyStats>(phase.reads)) {
    lines.push(
      `  reads ${kind.padEnd(8)} n=${String(s.n).padStart(5)}  p50 ${fmt(s.p50).padStart(10)}  p99 ${fmt(s.p99).padStart(10)}  max ${fmt(s.max).padStart(11)}${s.errors ? `  errors ${s.errors}` : ''}${s.unanswered ? `  unanswered ${s.unanswered}` : ''}`,
    );
  }
  if (phase.read_errors.length) lines.push(`  read errors: ${phase.read_errors.join(' | ')}`);
  const el = phase.event_loop;
  lines.push(
    `  event-loop delay: max ${fmt(el.max_ms)}, p99 ${fmt(el.p99_ms)} (${el.scrapes} scrapes of /metrics, ${el.scrapes_failed} unanswered, slowest ${fmt(el.slowest_scrape_ms, 0)})`,
  );
  if (el.own)
    lines.push(
      `  the service's event-loop series (worst scrape): ${Object.entries(el.own)
        .map(([k, v]) => `${k.replace(/^cps_/, '')}=${(v * 1000).toFixed(1)} ms`)
        .join(', ')}`,
    );
  lines.push(
    el.statements
      ? `  statements: ${el.statements.count} in ${el.statements.seconds.toFixed(2)} s, ${el.statements.over_100ms} over 100 ms; most time: ${el.statements.top.map((t) => `${t.name} ${t.count}x ${t.seconds.toFixed(2)} s${t.over_100ms ? ` (${t.over_100ms} > 100 ms)` : ''}`).join(', ')}`
      : '  statement durations: n/a (no statement histogram in /metrics)',
  );
  for (const st of phase.database_statements ?? [])
    lines.push(
      `  db ${st.total_ms.toFixed(0).padStart(7)} ms ${String(st.calls).padStart(7)}x ${st.ms_per_call.toFixed(3)} ms ${st.rows_per_call} rows ${st.blocks_per_call} blocks: ${st.query}`,
    );
  if (phase.cpu) {
    const c = phase.cpu;
    lines.push(
      `  CPU: ${c.cores.toFixed(2)} cores over ${c.seconds.toFixed(1)} s, load ${c.load.toFixed(1)} (${Object.entries(c.processes)
        .map(
          ([name, p]) =>
            `${name} ${p.cores.toFixed(2)}, its main thread ${p.main_thread_cores.toFixed(2)} and queued for a core ${p.main_thread_waiting_cores.toFixed(2)} (${fmt(p.main_thread_wait_per_slice_ms, 2)} a wake-up, ${p.main_thread_wakeups_per_s.toFixed(0)} on a core/s: ${p.main_thread_voluntary_per_s.toFixed(0)} wake-ups, ${p.main_thread_preempted_per_s.toFixed(0)} preempted)`,
        )
        .join(
          '; ',
        )}${c.database_cores !== null ? `; PostgreSQL ${c.database_cores.toFixed(2)}` : ''})${c.unit ? `; ${c.ms_per_unit === null || c.ms_per_unit === undefined ? 'n/a' : `${c.ms_per_unit.toFixed(2)} ms`} per ${c.unit}` : ''}`,
    );
  }
  if (phase.cpu?.bench)
    lines.push(
      `  the bench's reader: event-loop delay max ${fmt(phase.cpu.bench.loop_max_ms)}, main thread ${phase.cpu.bench.cores.toFixed(2)} cores, queued for a core ${phase.cpu.bench.waiting_cores.toFixed(2)}`,
    );
  const t = phase.throughput;
  lines.push(`  throughput: ${t.value === null ? 'n/a' : t.value.toFixed(1)} ${t.unit}  ${JSON.stringify(t.detail)}`);
  for (const page of phase.pages ?? [])
    lines.push(
      `  ${page.name.padEnd(36)} p50 ${fmt(page.p50).padStart(10)}  max ${fmt(page.max).padStart(10)}${page.error ? `  ${page.error}` : ''}`,
    );
  for (const v of phase.verdicts) lines.push(`  ${v.pass ? 'PASS' : 'FAIL'}  ${v.goal}: ${v.measured}`);
  log(lines.join('\n'));
}

/** The summary's load, serving threads' CPU and queueing, and the bench's loop delay columns. */
function servingOf(p: PhaseResult): string {
  const c = p.cpu;
  if (!c) return '-';
  const serves = Object.values(c.processes);
  const ran = serves.reduce((n, x) => n + x.main_thread_cores, 0);
  const waited = serves.reduce((n, x) => n + x.main_thread_waiting_cores, 0);
  return `${c.load.toFixed(1).padStart(6)}${`${ran.toFixed(2)}/${waited.toFixed(2)}`.padStart(16)}${(c.bench ? c.bench.loop_max_ms.toFixed(1) : '-').padStart(12)}`;
}

function summary(versions: Version[]): void {
  const out = (line: string) => (flags.json ? console.error(line) : console.log(line));
  out(`\n=== bench:scale, ${PRODUCTS} products, ${ENGINE}${ENGINE === 'postgres' ? ' (2 serve + 1 worker)' : ''} ===`);
  // srv cpu / queued: the serving (main) threads' cores on a core and queued for one; bench loop: the reader's own event-loop delay max.
  const header = `${'version'.padEnd(10)}${'phase'.padEnd(28)}${'first ans.'.padStart(11)}${'reads'.padStart(7)}${'p50'.padStart(10)}${'p99'.padStart(11)}${'max'.padStart(12)}${'loop max'.padStart(11)}${'load'.padStart(6)}${'srv cpu/queued'.padStart(16)}${'bench loop'.padStart(12)}  throughput`;
  out(header);
  for (const v of versions) {
    for (const p of v.phases) {
      const fa = p.first_answer_ms ? Math.max(p.first_answer_ms.stores_ms ?? NaN, p.first_answer_ms.page_ms ?? NaN) : null;
      const r = p.reads.all;
      const ms = (x: number | null) =>
        x === null || Number.isNaN(x) ? '-' : x >= 10_000 ? `${(x / 1000).toFixed(1)} s` : `${x.toFixed(1)}`;
      out(
        `${v.name.padEnd(10)}${`${p.key} ${p.title}`.padEnd(28)}${ms(fa).padStart(11)}${String(r.n).padStart(7)}${ms(r.p50).padStart(10)}${ms(r.p99).padStart(11)}${ms(r.max).padStart(12)}${ms(p.event_loop.max_ms).padStart(11)}${servingOf(p).padStart(34)}  ` +
          `${p.throughput.value === null ? 'n/a' : p.throughput.value.toFixed(1)} ${p.throughput.unit}${p.completed ? '' : ' (not finished)'}`,
      );
    }
    for (const s of v.shutdowns)
      out(
        `${v.name.padEnd(10)}SIGTERM (${s.after}) ${s.process}: exit ${s.code ?? s.signal} after ${s.ms.toFixed(0)} ms${s.killed ? ' (KILLED after 60 s)' : ''}: ${s.ms <= GOALS.shutdownMs && !s.killed ? 'PASS' : 'FAIL'} (<= ${GOALS.shutdownMs} ms)`,
      );
    for (const note of v.notes) out(`${v.name.padEnd(10)}note: ${note}`);
    for (const line of v.autogroups) out(`${v.name.padEnd(10)}${line}`);
    const failed = v.phases.flatMap((p) => p.verdicts.filter((x) => !x.pass).map((x) => `${p.key}: ${x.goal} (${x.measured})`));
    out(`${v.name}: ${failed.length ? `${failed.length} goal(s) FAIL:\n  ${failed.join('\n  ')}` : 'every goal PASS'}`);
  }
  if (versions.length === 2) {
    const [base, cand] = versions as [Version, Version];
    for (const key of ['d', 'e'] as const) {
      const b = base.phases.find((p) => p.key === key)?.throughput.value;
      const c = cand.phases.find((p) => p.key === key)?.throughput.value;
      if (b && c)
        out(`${PHASE_TITLES[key]}: candidate / baseline products/s = ${(c / b).toFixed(2)} (goal: >= 1.0, no slower per product)`);
    }
  }
}

// ---- main -------------------------------------------------------------------------------------

async function bench(tempDir: string, checkouts: Checkout[]): Promise<void> {
  const started = now();
  const peers = await startPeers();
  log(
    `live image origin ${peers.hosts.origin}, fresh origin ${peers.hosts.fresh}, dead host ${peers.hosts.dead}, hanging host ${peers.hosts.hang}, receivers ${peers.receiver}`,
  );
  log(
    !LAYOUT.deadHost
      ? 'main catalog: every image on the live origin (--no-dead-host)'
      : `main catalog: products 1..${LAYOUT.liveProducts} with their first image on the dead host and ${liveImagesUpTo(LAYOUT.liveProducts)} images on the live origin, every image of the other ${PRODUCTS - LAYOUT.liveProducts} on the dead host`,
  );
  log(
    `${PRODUCTS} products (2-5 images each), ${ENDPOINTS} endpoints, ${READERS} reader loops; tenants ${TENANTS} x ${TENANT_PRODUCTS}; phases ${[...MAIN_PHASES, ...(PHASES.has('b') ? ['b'] : [])].join(',')}; ${ENGINE}`,
  );
  const versions: Version[] = checkouts.map((c) => ({
    ...c,
    sessions: SESSIONS[c.name],
    autogroups: [],
    mainDb: null,
    tenantsDb: null,
    main: null,
    layout: LAYOUT,
    tenants: [],
    build: {},
    phases: [],
    shutdowns: [],
    notes: [],
  }));
  // Every catalog before any measured service starts (a server idle during another build measured slower in bench:reads).
  for (const v of versions) await buildVersion(v, peers, tempDir);
  for (const v of versions) {
    if (MAIN_PHASES.length) await runMainPhases(v, peers, tempDir);
    if (PHASES.has('b')) await runTenantsPhase(v, peers);
  }
  summary(versions);
  if (flags.json) {
    console.log(
      JSON.stringify(
        {
          products: PRODUCTS,
          engine: ENGINE,
          phase_seconds: PHASE_SECONDS,
          endpoints: ENDPOINTS,
          readers: READERS,
          tenants: { merchants: TENANTS, products: TENANT_PRODUCTS },
          import_products: IMPORT_PRODUCTS,
          layout: {
            ...LAYOUT,
            live_images: liveImagesUpTo(LAYOUT.liveProducts),
            fresh_products: FRESH_PRODUCTS,
            quiet_seconds: QUIET_SECONDS,
          },
          storm_products: STORM_PRODUCTS,
          seed: { changes: SEED_CHANGES, deliveries: SEED_DELIVERIES },
          goals: GOALS,
          phases_requested: [...PHASES],
          seconds: (now() - started) / 1000,
          versions: versions.map((v) => ({
            name: v.name,
            ref: v.ref,
            sha: v.sha,
            sessions: v.sessions,
            autogroups: v.autogroups,
            build: v.build,
            phases: v.phases,
            shutdowns: v.shutdowns,
            notes: v.notes,
          })),
        },
        null,
        2,
      ),
    );
  }
}

function cleanUpPostgres(): void {
  postgres?.stopSync('immediate');
  postgres = null;
}

if (flags.baseline) {
  process.once('exit', cleanUpPostgres);
  await runSideBySide({ tempPrefix: 'cps-bench-scale-', baseline: flags.baseline, log }, async ({ tempDir, checkouts }) => {
    try {
      await bench(tempDir, checkouts);
    } finally {
      killTracked();
      cleanUpPostgres();
    }
  });
} else {
  const tempDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-bench-scale-'));
  const cleanUp = () => {
    killTracked();
    cleanUpPostgres();
    fs.rmSync(tempDir, { recursive: true, force: true, maxRetries: 3 });
  };
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      console.error(`\n${signal}: stopping the services and removing ${tempDir}`);
      cleanUp();
      process.exit(130);
    });
  }
  const dirty = git('status', '--porcelain', '--untracked-files=no') ? ' + uncommitted changes' : '';
  const candidate: Checkout = { name: 'candidate', ref: 'working tree', sha: `${git('rev-parse', 'HEAD')}${dirty}`, dir: candidateDir };
  try {
    await bench(tempDir, [candidate]);
  } catch (error) {
    console.error(error);
    process.exitCode = 1;
  } finally {
    cleanUp();
  }
}
