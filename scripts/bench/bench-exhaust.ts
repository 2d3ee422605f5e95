// `npm run bench:exhaust`: whether one merchant with many API keys can exhaust a process.
// The real `serve` runs in a child process (worker threads, access log, every default
// cap) on the demo catalog of merchant A (BENCH_PRODUCTS, 40,000: an export of store `uk` is ~33 MB
// of NDJSON, four times CPS_EXPORT_MEMORY_BYTES, so what a client does not read is spooled) and
// a second demo merchant B (1,000 products). A attacks with 60 API keys from bare sockets
// (scripts/bench/exhaust-clients.ts: a refused attempt is sent again after its Retry-After, or after
// 1 s whatever it says with --ignore-retry-after, as a client that ignores it would); B, with
// one key, meanwhile reads `GET /v1/products?store=de&per_page=50` one request at a time on a new
// connection each (what a new client of B meets), and checks `/healthz` and the admin API
// (`GET /admin/v1/merchants/{B}`) every 250 ms. B is measured while A holds its connections (stopped
// before A's clients let go of them all at once). Phases, BENCH_SECONDS (20) each, in this order:
//   idle       - B alone: its usual latency
//   repricing  - B while A's EUR/GBP rate is changed again and again (each re-prices store `uk`):
//                the reference of scenario 3
//   1 stalled  - 60 keys x 2 exports of `uk` that read nothing after the status line
//   2 trickle  - 50 keys x 2 exports read at 4 KB/s
//   3 streams  - 50 keys x 20 event streams (`GET /v1/changes`, `Accept: text/event-stream`) that
//                read nothing, while the re-pricings run
//   4 fds      - 60 keys x 20 streams: descriptor pressure (serve runs with `ulimit -n` --nofile,
//                1,024, a common default)
// For each: serve's peak RSS (/proc VmRSS sampled every 200 ms, and the kernel's VmHWM reset at the
// phase's start), descriptors and sockets, spool files open and their bytes
// (scripts/bench/process-sampler.ts), the machine's TCP buffer memory, A's attempts by answer (200, 429,
// 503, reset before an answer) and what became of its 200s, B's read p50/p99 and failures.
// Verdicts: the peak RSS within the documented ceiling (idle RSS + CPS_EXPORTS_PER_PROCESS x
// CPS_EXPORT_MEMORY_BYTES + CPS_FEED_LIVE_PER_PROCESS x (CPS_UNSENT_BYTES_MAX + 64 KiB of a
// connection's own state), SECURITY.md), and B within its usual latency: no failed read or check,
// and p99 at most 3x idle (the machine is shared: only this run's ratios mean anything).
//
// Usage: npm run bench:exhaust -- [--engine sqlite|postgres] [--only 1,2,3,4] [--nofile 1024] [--ignore-retry-after] [--json]
//   BENCH_PRODUCTS (40000), BENCH_SECONDS (20). Exits 0 whatever the verdicts; 1 when the run fails.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { buildDemoCatalog } from '../../src/admin/demo.js';
import { loadConfig } from '../../src/config.js';
import { createService } from '../../src/service.js';
import { killTracked } from './baseline.js';
import { startAttack, type AttemptCounts, type Fate } from './exhaust-clients.js';
import { openFilesLimit, sampleProcess, startSampler, type ProcessSample } from './process-sampler.js';
import { adminAgent, benchDatabase, metric, request, startServe, type Engine, type Serve } from './serve-process.js';

const { values: args } = parseArgs({
  options: {
    engine: { type: 'string', default: 'sqlite' },
    only: { type: 'string' },
    nofile: { type: 'string' },
    json: { type: 'boolean', default: false },
    'ignore-retry-after': { type: 'boolean', default: false },
  },
});
const engine = args.engine as Engine;
if (engine !== 'sqlite' && engine !== 'postgres') throw new Error('--engine must be sqlite or postgres');
const PRODUCTS = Number(process.env.BENCH_PRODUCTS ?? 40_000);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 20);
const ADMIN_TOKEN = 'adm_bench_exhaust_0123456789abcdef';
const ATTACK_KEYS = 60;
/** A live connection's own state beside what waits for it (socket, parser, response, stream): an allowance, checked by scenario 4. */
const CONNECTION_BYTES = 64 * 1024;
const MIB = 1024 * 1024;
const log = (line: string) => (args.json ? console.error(line) : console.log(line));
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Setup {
  a: { merchantId: number; keys: string[] };
  b: { merchantId: number; key: string };
}

/** Merchant A (the demo catalog, 60 keys) and merchant B (a second demo merchant, 1,000 products, one key). */
async function prepare(database: string): Promise<Setup> {
  const service = createService(
    loadConfig(
      { CPS_LOG_LEVEL: 'warn' },
      engine === 'postgres' ? { databaseUrl: database } : { databasePath: database, databaseUrl: null },
    ),
  );
  try {
    const a = await buildDemoCatalog(service.admin, PRODUCTS);
    const keys = [a.api_key];
    while (keys.length < ATTACK_KEYS) keys.push((await service.admin.createApiKey(a.merchant_id, `attack ${keys.length}`)).key);
    const b = await buildDemoCatalog(service.admin, 1000);
    return { a: { merchantId: a.merchant_id, keys }, b: { merchantId: b.merchant_id, key: b.api_key } };
  } finally {
    await service.close();
  }
}

interface Victim {
  reads: number[];
  readFailures: Record<string, number>;
  checks: number;
  checkFailures: Record<string, number>;
}

const failure = (error: unknown) => (error as NodeJS.ErrnoException).code ?? (error as Error).message;
const count = (counts: Record<string, number>, name: string) => {
  counts[name] = (counts[name] ?? 0) + 1;
};

/** Merchant B: reads one at a time, each on a new connection, and the operations and admin checks, until stopped. */
function startVictim(serve: Serve, setup: Setup): { stop(): Promise<Victim> } {
  const victim: Victim = { reads: [], readFailures: {}, checks: 0, checkFailures: {} };
  let running = true;
  const reader = (async () => {
    while (running) {
      const started = performance.now();
      try {
        const { status } = await request(serve.base, '/v1/products?store=de&per_page=50', {
          agent: false,
          headers: { Authorization: `Bearer ${setup.b.key}`, 'Accept-Encoding': 'identity' },
        });
        if (status === 200) victim.reads.push(performance.now() - started);
        else count(victim.readFailures, String(status));
      } catch (error) {
        count(victim.readFailures, failure(error));
      }
      await sleep(20);
    }
  })();
  const checker = (async () => {
    while (running) {
      for (const [pathAndQuery, headers] of [
        ['/healthz', {}],
        [`/admin/v1/merchants/${setup.b.merchantId}`, { Authorization: `Bearer ${ADMIN_TOKEN}` }],
      ] as const) {
        try {
          const { status } = await request(serve.base, pathAndQuery, { agent: false, headers });
          victim.checks++;
          if (status !== 200) count(victim.checkFailures, `${pathAndQuery.split('/')[1]} ${status}`);
        } catch (error) {
          victim.checks++;
          count(victim.checkFailures, `${pathAndQuery.split('/')[1]} ${failure(error)}`);
        }
      }
      await sleep(250);
    }
  })();
  return {
    async stop() {
      running = false;
      await Promise.all([reader, checker]);
      return victim;
    },
  };
}

/** A's EUR/GBP rate set again and again (each re-prices store `uk`: windows for every stream), until stopped. */
function startRepricing(serve: Serve, merchantId: number): { stop(): Promise<number> } {
  let running = true;
  let done = 0;
  const loop = (async () => {
    while (running) {
      const rate = done % 2 === 0 ? '0.8600' : '0.8571';
      const answer = await request(serve.base, `/admin/v1/merchants/${merchantId}/exchange-rates/EUR/GBP`, {
        method: 'PUT',
        agent: adminAgent,
        headers: { Authorization: `Bearer ${ADMIN_TOKEN}`, 'Content-Type': 'application/json' },
        body: JSON.stringify({ rate }),
      }).catch((error: unknown) => ({ status: failure(error), body: '' }));
      if (answer.status === 200) done++;
      else log(`  re-pricing failed: ${answer.status} ${answer.body}`);
      await sleep(200);
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return done;
    },
  };
}

interface Scenario {
  name: string;
  keys: number;
  perKey: number;
  kind?: 'export' | 'stream';
  bytesPerSecond?: number;
  repricing?: boolean;
  /** The phase whose peak RSS and B latency this one is compared with: the same work without A. */
  reference?: string;
}

const SCENARIOS: Scenario[] = [
  { name: 'idle', keys: 0, perKey: 0 },
  { name: 'repricing', keys: 0, perKey: 0, repricing: true },
  { name: '1 stalled exports', keys: 60, perKey: 2, kind: 'export', bytesPerSecond: 0, reference: 'idle' },
  { name: '2 trickle exports', keys: 50, perKey: 2, kind: 'export', bytesPerSecond: 4096, reference: 'idle' },
  { name: '3 streams + repricing', keys: 50, perKey: 20, kind: 'stream', bytesPerSecond: 0, repricing: true, reference: 'repricing' },
  { name: '4 streams (fds)', keys: 60, perKey: 20, kind: 'stream', bytesPerSecond: 0, reference: 'idle' },
];

interface PhaseResult {
  name: string;
  reference?: string;
  clients: number;
  attempts?: AttemptCounts;
  fates?: Record<Fate, number>;
  /** Live connections serve reported holding at the phase's end, before the attack stopped. */
  liveHeld: number;
  repricings: number;
  peak: ProcessSample;
  startRssBytes: number;
  victim: {
    n: number;
    p50: number;
    p99: number;
    max: number;
    readFailures: Record<string, number>;
    checks: number;
    checkFailures: Record<string, number>;
  };
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? NaN;

async function runPhase(serve: Serve, setup: Setup, spoolDir: string, scenario: Scenario): Promise<PhaseResult> {
  const pid = serve.child.pid!;
  const startRssBytes = sampleProcess(pid, spoolDir).rssBytes;
  const sampler = startSampler(pid, spoolDir, 200);
  const victim = startVictim(serve, setup);
  const repricing = scenario.repricing ? startRepricing(serve, setup.a.merchantId) : undefined;
  // Streams start at the current second: they wait for the re-pricings' windows, not the history.
  const since = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  const attack = scenario.kind
    ? startAttack({
        base: serve.base,
        keys: setup.a.keys.slice(0, scenario.keys),
        perKey: scenario.perKey,
        pathAndQuery: scenario.kind === 'export' ? '/v1/products/export?store=uk' : `/v1/changes?store=uk&since=${since}`,
        headers: scenario.kind === 'export' ? { 'Accept-Encoding': 'identity' } : { Accept: 'text/event-stream' },
        bytesPerSecond: scenario.bytesPerSecond ?? 0,
        honourRetryAfter: !args['ignore-retry-after'],
      })
    : undefined;
  await sleep(SECONDS * 1000);
  const liveHeld = await metric(serve, 'cps_feed_live_connections').catch(() => NaN);
  // B is measured while A holds its connections: A letting go of all of them at once is not the scenario.
  const b = await victim.stop();
  const repricings = (await repricing?.stop()) ?? 0;
  const attacked = await attack?.stop();
  const peak = sampler.stop();
  const reads = b.reads.sort((x, y) => x - y);
  const result: PhaseResult = {
    name: scenario.name,
    reference: scenario.reference,
    clients: scenario.keys * scenario.perKey,
    ...attacked,
    liveHeld,
    repricings,
    peak,
    startRssBytes,
    victim: {
      n: reads.length,
      p50: percentile(reads, 0.5),
      p99: percentile(reads, 0.99),
      max: reads.at(-1) ?? NaN,
      readFailures: b.readFailures,
      checks: b.checks,
      checkFailures: b.checkFailures,
    },
  };
  log(`  ${scenario.name}: ${JSON.stringify({ ...result, peak: undefined, rss_mib: +(peak.rssBytes / MIB).toFixed(1) })}`);
  await settle(serve, spoolDir);
  return result;
}

/** Until serve holds no live connection and no spool file (at most 30 s), then a second more. */
async function settle(serve: Serve, spoolDir: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    const live = await metric(serve, 'cps_feed_live_connections').catch(() => NaN);
    if (live === 0 && sampleProcess(serve.child.pid!, spoolDir).spoolFiles === 0) break;
    await sleep(200);
  }
  await sleep(1000);
}

/** What the process may hold above idle with the defaults: the exports' read-ahead and the live connections. */
function ceilings() {
  const c = loadConfig({}, {});
  const perConnection = c.unsentBytesMax + CONNECTION_BYTES;
  return {
    processBytes: c.exports.perProcess * c.exports.memoryBytes + c.changes.livePerProcess * perConnection,
    merchantBytes: c.exports.perMerchant * c.exports.memoryBytes + c.changes.livePerMerchant * perConnection,
    formula: `${c.exports.perProcess} x ${c.exports.memoryBytes / MIB} MiB + ${c.changes.livePerProcess} x (${c.unsentBytesMax / 1024} + ${CONNECTION_BYTES / 1024}) KiB`,
    merchantFormula: `${c.exports.perMerchant} x ${c.exports.memoryBytes / MIB} MiB + ${c.changes.livePerMerchant} x (${c.unsentBytesMax / 1024} + ${CONNECTION_BYTES / 1024}) KiB`,
  };
}

const mib = (bytes: number) => (bytes / MIB).toFixed(1);
const counts = (record: Record<string, number>) =>
  Object.entries(record)
    .filter(([, n]) => n > 0)
    .map(([name, n]) => `${name} ${n}`)
    .join(', ') || '0';

function print(results: PhaseResult[], load: string, nofile: number): void {
  const byName = new Map(results.map((r) => [r.name, r]));
  const referenceOf = (r: PhaseResult) => byName.get(r.reference ?? 'idle') ?? byName.get('idle')!;
  const limits = ceilings();
  log(
    `\n${engine}, ${PRODUCTS} products, ${SECONDS} s a phase, serve's ulimit -n ${nofile}, A's refusals retried ${args['ignore-retry-after'] ? 'every 1 s' : 'after their Retry-After'}, load average ${load} (${os.cpus().length} cores)`,
  );
  log(
    "| phase | A attempts (200 / 429 / 503 / other / reset / unanswered) | A's 200s at the end (held / closed / reset) | live held | peak RSS MiB (over its reference) | peak fds (sockets) | spool files, MiB (on disk) | TCP buffers MiB | B reads n, p50 / p99 / max ms | B failures | B checks (failed) |",
  );
  log('|---|---|---|---|---|---|---|---|---|---|---|');
  for (const r of results) {
    const a = r.attempts;
    const over = r.peak.rssBytes - referenceOf(r).peak.rssBytes;
    log(
      `| ${r.name}${r.repricings ? ` (${r.repricings} re-pricings)` : ''} | ${a ? `${a[200]} / ${a[429]} / ${a[503]} / ${a.other} / ${a.reset} / ${a.unanswered}` : '—'} | ${r.fates ? `${r.fates.held} / ${r.fates.closed} / ${r.fates.reset}` : '—'} | ${r.liveHeld} | ${mib(r.peak.rssBytes)}${r.attempts ? ` (${over >= 0 ? '+' : ''}${mib(over)})` : ''} | ${r.peak.fds} (${r.peak.sockets}) | ${r.peak.spoolFiles}, ${mib(r.peak.spoolBytes)} (${mib(r.peak.spoolDiskBytes)}) | ${mib(r.peak.tcpMemBytes)} | ${r.victim.n}, ${r.victim.p50.toFixed(1)} / ${r.victim.p99.toFixed(1)} / ${r.victim.max.toFixed(1)} | ${counts(r.victim.readFailures)} | ${r.victim.checks} (${counts(r.victim.checkFailures)}) |`,
    );
  }
  log(`\nceiling over the reference's peak RSS: ${limits.formula} = ${mib(limits.processBytes)} MiB`);
  log(`one merchant's share of it: ${limits.merchantFormula} = ${mib(limits.merchantBytes)} MiB`);
  for (const r of results.filter((x) => x.attempts)) {
    const reference = referenceOf(r);
    const over = r.peak.rssBytes - reference.peak.rssBytes;
    const failures = Object.keys(r.victim.readFailures).length + Object.keys(r.victim.checkFailures).length;
    const ratio = r.victim.p99 / reference.victim.p99;
    log(
      `${r.name}: peak RSS ${mib(r.peak.rssBytes)} MiB, ${mib(over)} over ${reference.name}: ${over <= limits.processBytes ? 'within' : 'ABOVE'} the ceiling ` +
        `(${over <= limits.merchantBytes ? 'within' : 'above'} one merchant's share); B ${failures ? `FAILED (${counts(r.victim.readFailures)}; ${counts(r.victim.checkFailures)})` : 'never failed'}, ` +
        `p99 ${ratio.toFixed(1)}x ${reference.name}'s: ${ratio > 3 ? 'ABOVE' : 'within'} 3x`,
    );
  }
}

async function main(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-bench-exhaust-'));
  // PostgreSQL runs as the `postgres` user when this is root: it must reach its folder inside.
  fs.chmodSync(dir, 0o711);
  const spoolDir = path.join(dir, 'spool');
  fs.mkdirSync(spoolDir);
  const { database, settings, postgres } = await benchDatabase(engine, dir, 'exhaust_bench');
  const cleanUp = () => {
    killTracked();
    postgres?.stopSync('immediate');
    fs.rmSync(dir, { recursive: true, force: true });
  };
  process.once('SIGINT', () => {
    cleanUp();
    process.exit(130);
  });
  try {
    const started = performance.now();
    log(`${engine}: building merchant A (${PRODUCTS} products, ${ATTACK_KEYS} keys) and merchant B (1,000 products) ...`);
    const setup = await prepare(database);
    log(`  built in ${((performance.now() - started) / 1000).toFixed(0)} s`);
    const serve = await startServe({
      adminToken: ADMIN_TOKEN,
      env: { ...settings, CPS_EXPORT_SPOOL_DIR: spoolDir },
      ...(args.nofile ? { nofile: Number(args.nofile) } : {}),
    });
    try {
      // Warm-up: B's reads and one export of A read whole, so that idle is serve after such work.
      const warm = await fetch(`${serve.base}/v1/products/export?store=uk`, {
        headers: { Authorization: `Bearer ${setup.a.keys[0]}`, 'Accept-Encoding': 'identity' },
      });
      log(`  warm-up export: ${warm.status}, ${mib((await warm.arrayBuffer()).byteLength)} MiB`);
      for (let i = 0; i < 100; i++)
        await request(serve.base, '/v1/products?store=de&per_page=50', { headers: { Authorization: `Bearer ${setup.b.key}` } });
      const only = args.only?.split(',');
      const results: PhaseResult[] = [];
      for (const scenario of SCENARIOS.filter((s) => !only || !s.kind || only.includes(s.name[0]!) || only.includes(s.name)))
        results.push(await runPhase(serve, setup, spoolDir, scenario));
      const load = os
        .loadavg()
        .map((x) => x.toFixed(1))
        .join(' / ');
      if (args.json)
        console.log(JSON.stringify({ engine, products: PRODUCTS, seconds: SECONDS, nofile: Number(args.nofile), load, results }, null, 2));
      print(results, load, openFilesLimit(serve.child.pid!));
      log(`\nwhole run: ${((performance.now() - started) / 1000).toFixed(0)} s`);
    } finally {
      await serve.stop();
    }
  } finally {
    cleanUp();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  killTracked();
  process.exitCode = 1;
});
