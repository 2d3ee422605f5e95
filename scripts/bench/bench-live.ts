// `npm run bench:live`: how soon a change reaches the clients waiting on the live
// change feed, with one client and with 1,000 on one process, side by side in interleaved rounds.
//
// The real `serve` runs in a child process (worker threads on, access log on, as `npm start` runs
// it) on the demo catalog (BENCH_PRODUCTS, 3 stores); the clients wait on store `de` from the
// current cursor, spread over API keys of 20 connections each (the default per-key cap):
//   poll-1, poll-N  - 1 or N long-polls (`GET /v1/changes?wait=30`), each on a connection of its own,
//                     timed at the answer's first bytes on a bare socket (rawLongPoll);
//   sse-1, sse-N    - 1 or N streams (`Accept: text/event-stream`), opened for the round.
//   get-N           - the reference: N plain polls (no `wait`) sent at once and answered at once:
//                     what the same clients cost the service when they poll instead of waiting.
// Each round: the clients connect and the service reports them all waiting (`cps_feed_live_connections`
// in /metrics), then one product's price is changed through the admin API (`PUT
// …/products/{ref}`): one `price` change per store. The latency of a client is from the moment the
// write request is sent until its window (the response, or the event) has arrived in this process:
// it includes the write's own request, commit and response (also reported), so it is an upper
// bound of "commit to visible". Every window is checked to hold the change. The service's own count
// of window reads (`cps_db_statement_duration_seconds_count{statement="changes.changesAfter"}`) is
// read around the wake-up: one per store per wake-up, whatever N. So is the CPU time of serve's
// serving thread (Linux /proc, 10 ms ticks) from sending the write to the last arrival: on a
// machine shared with other work the wall-clock latencies measure the machine as much as the
// service, the CPU a wake-up costs does not (the load average is printed with the figures).
// The modes' order rotates from round to round; the first round is a warm-up and not counted.
// Goal: with N = 1000, every client has the change within 100 ms (the rounds' max, median).
//
// Usage: npm run bench:live -- [--clients 1000] [--rounds 11] [--engine sqlite|postgres|both]
//          [--only poll-1,poll-1000,sse-1,sse-1000,get-1000] [--poll-client raw|http] [--json]
//   BENCH_PRODUCTS (1000). PostgreSQL: a throwaway server from the installed binaries
//   (scripts/dev/postgres-server.ts, durable: false). BENCH_SERVE_NODE_ARGS: node options for serve
//   (`--cpu-prof --cpu-prof-dir=/tmp/prof`); BENCH_SERVE_STDERR=1 passes serve's stderr through.
//   Exits 0 whatever the verdicts; 1 when the run fails.
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { buildDemoCatalog } from '../../src/admin/demo.js';
import { loadConfig } from '../../src/config.js';
import { createService } from '../../src/service.js';
import { killTracked } from './baseline.js';
import { adminAgent, benchDatabase, metric, request, startServe, type Serve } from './serve-process.js';

const { values: args } = parseArgs({
  options: {
    clients: { type: 'string', default: '1000' },
    rounds: { type: 'string', default: '11' },
    engine: { type: 'string', default: 'sqlite' },
    json: { type: 'boolean', default: false },
    only: { type: 'string' },
    'poll-client': { type: 'string', default: 'raw' },
  },
});
const CLIENTS = Number(args.clients);
const ROUNDS = Math.max(2, Number(args.rounds));
const PRODUCTS = Number(process.env.BENCH_PRODUCTS ?? 1000);
const PER_KEY = 20;
const ADMIN_TOKEN = 'adm_bench_live_0123456789abcdef';
const GOAL_MS = 100;
const engines = args.engine === 'both' ? (['sqlite', 'postgres'] as const) : [args.engine as 'sqlite' | 'postgres'];
const log = (line: string) => {
  if (!args.json) console.log(line);
};

type Mode = 'poll' | 'sse' | 'get';
interface Target {
  name: string;
  mode: Mode;
  clients: number;
}
const TARGETS: Target[] = (
  [
    { name: 'poll-1', mode: 'poll', clients: 1 },
    { name: `poll-${CLIENTS}`, mode: 'poll', clients: CLIENTS },
    { name: 'sse-1', mode: 'sse', clients: 1 },
    { name: `sse-${CLIENTS}`, mode: 'sse', clients: CLIENTS },
    // The reference: as many plain polls at once, answered at once (no write, nothing waits).
    { name: `get-${CLIENTS}`, mode: 'get', clients: CLIENTS },
  ] as const satisfies readonly Target[]
).filter((t) => !args.only || args.only.split(',').includes(t.name));

interface Page {
  changes: { product_id: number }[];
  next_since: string;
  next_id: number;
}
interface RoundResult {
  latencies: number[];
  writeMs: number;
  reads: number;
  cpuMs: number;
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]!;
const median = (xs: number[]) =>
  percentile(
    [...xs].sort((a, b) => a - b),
    0.5,
  );

/** A database with the demo catalog, one product the bench re-prices, and the API keys the clients use. */
async function prepare(database: string): Promise<{ merchantId: number; keys: string[] }> {
  const onPostgres = database.startsWith('postgres://');
  const service = createService(
    loadConfig({ CPS_LOG_LEVEL: 'warn' }, onPostgres ? { databaseUrl: database } : { databasePath: database, databaseUrl: null }),
  );
  try {
    const demo = await buildDemoCatalog(service.admin, PRODUCTS);
    await service.admin.upsertProduct(demo.merchant_id, 'LIVE-BENCH', productSource(0));
    const keys: string[] = [];
    for (let i = 0; i < Math.ceil(CLIENTS / PER_KEY) + 1; i++)
      keys.push((await service.admin.createApiKey(demo.merchant_id, `live ${i}`)).key);
    return { merchantId: demo.merchant_id, keys };
  } finally {
    await service.close();
  }
}

function productSource(version: number) {
  return {
    content: {
      de: { title: 'Live bench tent', description: null },
      en: { title: 'Live bench tent', description: null },
      pl: { title: 'Namiot', description: null },
    },
    offers: [{ supplier_ref: 'alpine-wholesale', quantity: 5, cost: `${100 + version}.00`, currency: 'EUR' }],
  };
}

const windowReads = (serve: Serve, engine: string) =>
  metric(serve, 'cps_db_statement_duration_seconds_count', `{engine="${engine}",statement="changes.changesAfter"}`);

/** The cursor after the last change of store de. */
async function headCursor(serve: Serve, key: string): Promise<Page> {
  let page = JSON.parse((await request(serve.base, '/v1/changes?store=de', { headers: { Authorization: `Bearer ${key}` } })).body) as Page;
  for (;;) {
    const next = JSON.parse(
      (
        await request(serve.base, `/v1/changes?store=de&since=${page.next_since}&since_id=${page.next_id}`, {
          headers: { Authorization: `Bearer ${key}` },
        })
      ).body,
    ) as Page;
    if (next.changes.length === 0) return next;
    page = next;
  }
}

/** One SSE client: resolves `next` with the arrival time of its first window event after it is armed. */
function openStream(serve: Serve, key: string, cursor: Page): Promise<{ arrived: Promise<{ at: number; page: Page }>; close(): void }> {
  return new Promise((resolve, reject) => {
    const req = http.get(
      `${serve.base}/v1/changes?store=de&since=${cursor.next_since}&since_id=${cursor.next_id}`,
      {
        agent: false,
        headers: { Authorization: `Bearer ${key}`, Accept: 'text/event-stream' },
      },
      (res) => {
        if (res.statusCode !== 200) return reject(new Error(`stream: ${res.statusCode}`));
        let buffer = '';
        let settle: (value: { at: number; page: Page }) => void = () => {};
        const arrived = new Promise<{ at: number; page: Page }>((r) => {
          settle = r;
        });
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          const at = performance.now();
          buffer += chunk;
          const match = /\ndata: ([^\n]*)\n\n/.exec(buffer);
          if (match) settle({ at, page: JSON.parse(match[1]!) as Page });
        });
        res.on('error', () => {});
        resolve({ arrived, close: () => req.destroy() });
      },
    );
    req.on('error', () => {});
  });
}

/**
 * One long-poll on a connection of its own, kept alive, sent and read on a bare socket: its arrival
 * is when the answer's first bytes come in (as a stream's event is timed), then the answer is
 * parsed and checked. 1,000 clients in one process through http.request cost the bench itself
 * about as much as the service (a response object, headers, a promise each): the last arrival then
 * measured this process's queue as much as the service's (`--poll-client http` still does that).
 */
function rawLongPoll(serve: Serve, pathAndQuery: string, key: string): { arrived: Promise<{ at: number; page: Page }>; close(): void } {
  const { hostname, port } = new URL(serve.base);
  const socket = net.connect(Number(port), hostname);
  socket.setNoDelay(true);
  const arrived = new Promise<{ at: number; page: Page }>((resolve, reject) => {
    let at = 0;
    let buffer = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      if (at === 0) at = performance.now();
      buffer = Buffer.concat([buffer, chunk]);
      const end = buffer.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = buffer.subarray(0, end).toString('latin1');
      const length = Number(/\r\ncontent-length: *([0-9]+)/i.exec(head)?.[1]);
      if (buffer.length < end + 4 + length) return;
      const body = buffer.subarray(end + 4, end + 4 + length).toString('utf8');
      if (!head.startsWith('HTTP/1.1 200 ')) reject(new Error(`long-poll: ${head.split('\r\n')[0]} ${body}`));
      else resolve({ at, page: JSON.parse(body) as Page });
    });
    socket.on('error', reject);
  });
  socket.write(`GET ${pathAndQuery} HTTP/1.1\r\nHost: ${hostname}:${port}\r\nAuthorization: Bearer ${key}\r\n\r\n`);
  return { arrived, close: () => socket.destroy() };
}

/** CPU time (user + system) of serve's serving thread so far, ms (Linux: /proc, in clock ticks). */
function servingThreadCpuMs(pid: number): number {
  const stat = fs.readFileSync(`/proc/${pid}/task/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS;
}
const CLOCK_TICKS = 100;

async function waitForConnections(serve: Serve, count: number): Promise<void> {
  const deadline = Date.now() + 60_000;
  // Waiting: admitted, their first window read (empty), each in its turn.
  while ((await metric(serve, 'cps_feed_live_waiting')) !== count) {
    if (Date.now() > deadline) throw new Error(`the service never reported ${count} live connections`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

async function round(
  serve: Serve,
  engine: string,
  target: Target,
  setup: { merchantId: number; keys: string[] },
  version: number,
): Promise<RoundResult> {
  const cursor = await headCursor(serve, setup.keys[0]!);
  const keyOf = (i: number) => setup.keys[1 + Math.floor(i / PER_KEY)]!;
  if (target.mode === 'get') return plainPolls(serve, engine, target.clients, cursor, keyOf);
  let arrivals: Promise<{ at: number; page: Page }>[];
  let close = () => {};
  if (target.mode === 'poll' && args['poll-client'] === 'http') {
    arrivals = Array.from({ length: target.clients }, (_, i) =>
      request(serve.base, `/v1/changes?store=de&since=${cursor.next_since}&since_id=${cursor.next_id}&wait=30`, {
        headers: { Authorization: `Bearer ${keyOf(i)}` },
      }).then(({ status, body }) => {
        const at = performance.now();
        if (status !== 200) throw new Error(`long-poll: ${status} ${body}`);
        return { at, page: JSON.parse(body) as Page };
      }),
    );
  } else if (target.mode === 'poll') {
    const polls = Array.from({ length: target.clients }, (_, i) =>
      rawLongPoll(serve, `/v1/changes?store=de&since=${cursor.next_since}&since_id=${cursor.next_id}&wait=30`, keyOf(i)),
    );
    arrivals = polls.map((p) => p.arrived);
    close = () => {
      for (const p of polls) p.close();
    };
  } else {
    const streams: Awaited<ReturnType<typeof openStream>>[] = [];
    for (let i = 0; i < target.clients; i += 100) {
      streams.push(
        ...(await Promise.all(
          Array.from({ length: Math.min(100, target.clients - i) }, (_, j) => openStream(serve, keyOf(i + j), cursor)),
        )),
      );
    }
    arrivals = streams.map((s) => s.arrived);
    close = () => {
      for (const s of streams) s.close();
    };
  }
  await waitForConnections(serve, target.clients);
  const readsBefore = await windowReads(serve, engine);
  const cpuBefore = servingThreadCpuMs(serve.child.pid!);
  const sent = performance.now();
  const write = await request(serve.base, `/admin/v1/merchants/${setup.merchantId}/products/LIVE-BENCH`, {
    method: 'PUT',
    agent: adminAgent,
    headers: { Authorization: `Bearer ${ADMIN_TOKEN}`, 'Content-Type': 'application/json' },
    body: JSON.stringify(productSource(version)),
  });
  const writeMs = performance.now() - sent;
  if (write.status >= 300) throw new Error(`write: ${write.status} ${write.body}`);
  for (const arrival of arrivals) arrival.catch(() => {}); // one failure fails the round, not the process
  const arrived = await Promise.all(arrivals);
  const cpuMs = servingThreadCpuMs(serve.child.pid!) - cpuBefore;
  const reads = (await windowReads(serve, engine)) - readsBefore;
  close();
  for (const { page } of arrived) {
    if (page.changes.length !== 1 || page.next_id <= cursor.next_id)
      throw new Error(`a client got ${JSON.stringify(page)} after ${JSON.stringify(cursor)}`);
  }
  await waitForConnections(serve, 0);
  return { latencies: arrived.map(({ at }) => at - sent), writeMs, reads, cpuMs };
}

/** The reference round: N plain polls sent at once, each answered at once (empty windows). */
async function plainPolls(serve: Serve, engine: string, clients: number, cursor: Page, keyOf: (i: number) => string): Promise<RoundResult> {
  const readsBefore = await windowReads(serve, engine);
  const cpuBefore = servingThreadCpuMs(serve.child.pid!);
  const sent = performance.now();
  const answers = await Promise.all(
    Array.from({ length: clients }, (_, i) =>
      request(serve.base, `/v1/changes?store=de&since=${cursor.next_since}&since_id=${cursor.next_id}`, {
        headers: { Authorization: `Bearer ${keyOf(i)}` },
      }).then(({ status }) => {
        if (status !== 200) throw new Error(`poll: ${status}`);
        return performance.now() - sent;
      }),
    ),
  );
  const cpuMs = servingThreadCpuMs(serve.child.pid!) - cpuBefore;
  return { latencies: answers, writeMs: 0, reads: (await windowReads(serve, engine)) - readsBefore, cpuMs };
}

interface Summary {
  target: string;
  p50: number;
  p99: number;
  max: number;
  roundMaxMedian: number;
  writeMs: number;
  readsPerWakeup: number;
  /** The serving thread's CPU from sending the write to the last arrival (the write included), mean over the rounds. */
  cpuMs: number;
}

async function benchEngine(engine: 'sqlite' | 'postgres', dir: string): Promise<Summary[]> {
  const { database, settings, postgres } = await benchDatabase(engine, dir, 'live_bench');
  try {
    log(`${engine}: building the demo catalog (${PRODUCTS} products) and ${Math.ceil(CLIENTS / PER_KEY) + 1} API keys ...`);
    const setup = await prepare(database);
    // One merchant's N clients: its cap of live connections (100 by default) is raised to N, as an
    // operator serving one merchant's many readers would.
    const serve = await startServe({
      adminToken: ADMIN_TOKEN,
      env: { ...settings, CPS_FEED_LIVE_PER_MERCHANT: String(Math.max(CLIENTS, 100)) },
    });
    try {
      const results = new Map<string, RoundResult[]>(TARGETS.map((t) => [t.name, []]));
      let version = 0;
      for (let r = 0; r < ROUNDS; r++) {
        const order = TARGETS.map((_, i) => TARGETS[(i + r) % TARGETS.length]!);
        for (const target of order) {
          const result = await round(serve, engine, target, setup, ++version);
          if (r > 0) results.get(target.name)!.push(result);
        }
        log(
          `${engine}: round ${r + 1}/${ROUNDS}${r === 0 ? ' (warm-up)' : ''}: ${order
            .map((t) => {
              const last = results.get(t.name)!.at(-1);
              return r === 0 || !last ? t.name : `${t.name} max ${Math.max(...last.latencies).toFixed(1)} ms`;
            })
            .join(', ')}`,
        );
      }
      return TARGETS.map((target) => {
        const rounds = results.get(target.name)!;
        const all = rounds.flatMap((x) => x.latencies).sort((a, b) => a - b);
        return {
          target: target.name,
          p50: percentile(all, 0.5),
          p99: percentile(all, 0.99),
          max: all.at(-1)!,
          roundMaxMedian: median(rounds.map((x) => Math.max(...x.latencies))),
          writeMs: median(rounds.map((x) => x.writeMs)),
          readsPerWakeup: median(rounds.map((x) => x.reads)),
          cpuMs: rounds.reduce((sum, x) => sum + x.cpuMs, 0) / rounds.length,
        };
      });
    } finally {
      await serve.stop();
    }
  } finally {
    await postgres?.stop('immediate').catch(() => {});
  }
}

async function main(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-bench-live-'));
  // PostgreSQL runs as the `postgres` user when this is root: it must reach its folder inside.
  fs.chmodSync(dir, 0o711);
  const cleanUp = () => {
    killTracked();
    fs.rmSync(dir, { recursive: true, force: true });
  };
  process.once('SIGINT', () => {
    cleanUp();
    process.exit(130);
  });
  try {
    const report: Record<string, Summary[]> = {};
    const loads: Record<string, string> = {};
    for (const engine of engines) {
      report[engine] = await benchEngine(engine, dir);
      loads[engine] = os
        .loadavg()
        .map((x) => x.toFixed(1))
        .join(' / ');
      if (!args.json) printEngine(engine, report[engine], loads[engine]);
    }
    if (args.json)
      console.log(
        JSON.stringify({ clients: CLIENTS, rounds: ROUNDS - 1, products: PRODUCTS, cpus: os.cpus().length, loads, report }, null, 2),
      );
  } finally {
    cleanUp();
  }
}

/** One engine's figures as the Markdown tables of docs/benchmarks/log.md. */
function printEngine(engine: string, summaries: Summary[], load: string): void {
  log(`\n${engine}: latency from sending the write to the window arriving at each client (${ROUNDS - 1} rounds), ms; load average ${load}`);
  log(
    "| target | p50 | p99 | max | median of the rounds' max | write (request to response) | window reads per wake-up | serving thread CPU per wake-up |",
  );
  log('|---|---|---|---|---|---|---|---|');
  for (const s of summaries) {
    log(
      `| ${s.target} | ${s.p50.toFixed(1)} | ${s.p99.toFixed(1)} | ${s.max.toFixed(1)} | ${s.roundMaxMedian.toFixed(1)} | ${s.writeMs.toFixed(1)} | ${s.readsPerWakeup} | ${s.cpuMs.toFixed(0)} ms |`,
    );
  }
  const by = Object.fromEntries(summaries.map((s) => [s.target, s]));
  const ratio = (a: string, b: string, what: (s: Summary) => number, label: string) => {
    if (by[a] && by[b]) log(`| ${a} / ${b} (${label}) | ${(what(by[a]) / what(by[b])).toFixed(2)} |`);
  };
  log(`\n| ratio (${engine}) | measured |`);
  log('|---|---|');
  ratio(`poll-${CLIENTS}`, 'poll-1', (s) => s.p99, 'p99');
  ratio(`sse-${CLIENTS}`, 'sse-1', (s) => s.p99, 'p99');
  ratio(`sse-${CLIENTS}`, `poll-${CLIENTS}`, (s) => s.p99, 'p99');
  ratio(`sse-${CLIENTS}`, `poll-${CLIENTS}`, (s) => s.cpuMs, 'serving thread CPU');
  ratio(`poll-${CLIENTS}`, `get-${CLIENTS}`, (s) => s.cpuMs, 'serving thread CPU');
  ratio(`sse-${CLIENTS}`, `get-${CLIENTS}`, (s) => s.cpuMs, 'serving thread CPU');
  for (const s of summaries.filter((x) => x.target.endsWith(`-${CLIENTS}`) && !x.target.startsWith('get'))) {
    log(
      `${engine} ${s.target}: the rounds' max median ${s.roundMaxMedian.toFixed(1)} ms: ${s.roundMaxMedian <= GOAL_MS ? 'within' : 'ABOVE'} the ${GOAL_MS} ms goal`,
    );
  }
}

main().catch((error: unknown) => {
  console.error(error);
  killTracked();
  process.exitCode = 1;
});
