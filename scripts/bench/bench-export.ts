// `npm run bench:export`: the snapshot export of a 100k-product store
// (GET /v1/products/export), on the real app served by scripts/bench/bench-server.ts in its own process,
// on the demo catalog (BENCH_PRODUCTS, 3 stores) of each engine. While every phase runs, two probes
// run beside it, one request at a time each:
//   read  - GET /v1/products/{random id}?store=pl: what a request waits behind the export;
//   write - PUT /admin/v1/merchants/{id}/products/BENCH-EXPORT-W (its cost changes each time, a
//           write re-publishing one product in three stores): whether writers wait for the export;
// and the server's own event-loop delay (its /metrics, cps_event_loop_delay_max_seconds, scraped
// at the start and end of the phase). Phases, in BENCH_ROUNDS rounds one after the other (the
// probes' latencies pooled over the rounds, the phases' own figures their medians):
//   idle           - the probes alone (BENCH_IDLE_SECONDS)
//   export         - the `de` store (79 MB of NDJSON at 100k) exported to a client that reads as
//                    fast as it can: MB/s of the NDJSON; identity, then gzip, then br (the MB/s of
//                    the NDJSON it codes, the bytes on the wire beside)
//   paging         - the same store read by keyset paging, 200 a page, as syncStore did before
//                    (one request at a time; identity): the export's speed-up over it
// then once:
//   slow client    - an export whose client reads nothing for BENCH_PAUSE_SECONDS, then all: how
//                    long after the request its snapshot was released (SQLite: a PASSIVE checkpoint
//                    copies the whole WAL again; PostgreSQL: no transaction older than the request)
//                    while its client still had read nothing, and the probes meanwhile
// Only ratios measured in this run mean anything (the machine is shared and noisy).
// Usage: npm run bench:export -- [--engine sqlite|postgres|both] [--json]
//   BENCH_PRODUCTS (100000), BENCH_ROUNDS (3), BENCH_IDLE_SECONDS (3), BENCH_PAUSE_SECONDS (10),
//   BENCH_DEMO_DIR (unset: the SQLite demo catalog is built in a temporary folder each run; set, it
//   is built there once and reused)
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import pg from 'pg';
import { buildDemo, candidateDir, killTracked, startBenchServerProcess, type BenchServerProcess, type Checkout } from './baseline.js';
import { findPostgresBinaries, startPostgresServer, type PostgresServer } from '../dev/postgres-server.js';

const PRODUCTS = Number(process.env.BENCH_PRODUCTS ?? 100_000);
const IDLE_SECONDS = Number(process.env.BENCH_IDLE_SECONDS ?? 3);
const PAUSE_SECONDS = Number(process.env.BENCH_PAUSE_SECONDS ?? 10);
const { values: flags } = parseArgs({ options: { json: { type: 'boolean' }, engine: { type: 'string', default: 'sqlite' } } });
const log = (line: string) => (flags.json ? console.error(line) : console.log(line));
const engines = flags.engine === 'both' ? (['sqlite', 'postgres'] as const) : [flags.engine as 'sqlite' | 'postgres'];
if (!engines.every((e) => e === 'sqlite' || e === 'postgres')) throw new Error('--engine must be sqlite, postgres or both');

interface Latencies {
  n: number;
  p50: number;
  p99: number;
  max: number;
}
/** One run of a phase: its probes' raw latencies (ms), the server's worst event-loop delay, what it measured. */
interface Run {
  seconds: number;
  read: number[];
  write: number[];
  loopMaxMs: number;
  detail: Record<string, number | string | boolean>;
}
/** A phase over every round: the probes' latencies pooled, medians of its own figures. */
interface Phase {
  name: string;
  runs: number;
  seconds: number;
  read: Latencies;
  write: Latencies;
  /** The server's event-loop delay, worst over every run of the phase (ms). */
  loopMaxMs: number;
  detail: Record<string, number | string | boolean>;
}

const stats = (ms: number[]): Latencies => {
  const sorted = [...ms].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
  return { n: sorted.length, p50: at(0.5), p99: at(0.99), max: sorted.at(-1) ?? 0 };
};

/** The bytes of a body kept by get(): all of it, or (an export: 79 MB) only its last ones, which hold the trailer. */
const TAIL_BYTES = 4096;

/**
 * One GET with node:http: status, the bytes on the wire and the time to the last one; `pauseMs`
 * before reading the body. With `tailOnly`, only the body's last bytes are kept: the probes share
 * this process, and holding and decoding a whole export here would stall them, not the server.
 */
function get(
  url: string,
  headers: Record<string, string>,
  { pauseMs = 0, tailOnly = false, onHeaders = () => {} } = {},
): Promise<{ status: number; bytes: number; body: Buffer; headers: http.IncomingHttpHeaders; ms: number; firstByteMs: number }> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const request = http.get(url, { headers }, (response) => {
      const firstByteMs = performance.now() - started;
      onHeaders();
      let chunks: Buffer[] = [];
      let bytes = 0;
      response.pause();
      setTimeout(() => {
        response.on('data', (chunk: Buffer) => {
          bytes += chunk.length;
          chunks.push(chunk);
          if (tailOnly && chunks.length > 2) chunks = [Buffer.concat(chunks.slice(-2)).subarray(-TAIL_BYTES)];
        });
        response.on('end', () =>
          resolve({
            status: response.statusCode!,
            bytes,
            body: Buffer.concat(chunks),
            headers: response.headers,
            ms: performance.now() - started,
            firstByteMs,
          }),
        );
        response.on('error', reject);
        response.resume();
      }, pauseMs);
    });
    request.on('error', reject);
  });
}

function send(method: string, url: string, headers: Record<string, string>, body: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const request = http.request(
      url,
      { method, headers: { ...headers, 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) } },
      (response) => {
        response.resume();
        response.on('end', () => resolve(response.statusCode!));
      },
    );
    request.on('error', reject);
    request.end(body);
  });
}

/** The worst event-loop delay the server saw since its /metrics was last scraped (ms). */
async function loopDelayMaxMs(base: string): Promise<number> {
  const text = (await get(`${base}/metrics`, {})).body.toString('utf8');
  return 1000 * Number(/^cps_event_loop_delay_max_seconds ([0-9.e+-]+)$/m.exec(text)?.[1] ?? 'NaN');
}

/** The two probes, each one request at a time, until stopped. */
function startProbes(base: string, apiKey: string, merchantId: number, ids: number[]) {
  const read: number[] = [];
  const write: number[] = [];
  let running = true;
  let cost = 10;
  const reader = (async () => {
    while (running) {
      const started = performance.now();
      const { status } = await get(`${base}/v1/products/${ids[Math.floor(Math.random() * ids.length)]}?store=pl`, {
        Authorization: `Bearer ${apiKey}`,
        'Accept-Encoding': 'identity',
      });
      if (status !== 200) throw new Error(`read probe: ${status}`);
      read.push(performance.now() - started);
    }
  })();
  const writer = (async () => {
    while (running) {
      cost = cost === 10 ? 11 : 10;
      const body = JSON.stringify({
        content: {
          de: { title: 'Messzelt', description: null },
          en: { title: 'Probe tent', description: null },
          pl: { title: 'Namiot', description: null },
        },
        offers: [{ supplier_ref: 'alpine-wholesale', quantity: 3, cost: `${cost}.00`, currency: 'EUR' }],
      });
      const started = performance.now();
      const status = await send(
        'PUT',
        `${base}/admin/v1/merchants/${merchantId}/products/BENCH-EXPORT-W`,
        { Authorization: 'Bearer bench' },
        body,
      );
      if (status !== 200) throw new Error(`write probe: ${status}`);
      write.push(performance.now() - started);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  })();
  return async () => {
    running = false;
    await Promise.all([reader, writer]);
    return { read, write };
  };
}

async function run(server: BenchServerProcess, ctx: Context, measure: () => Promise<Run['detail']>): Promise<Run> {
  await loopDelayMaxMs(server.base);
  const stop = startProbes(server.base, ctx.apiKey, ctx.merchantId, ctx.ids);
  const started = performance.now();
  const detail = await measure();
  const seconds = (performance.now() - started) / 1000;
  const probes = await stop();
  return { seconds, ...probes, loopMaxMs: await loopDelayMaxMs(server.base), detail };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!;

function pooled(name: string, runs: Run[]): Phase {
  const detail: Phase['detail'] = {};
  for (const [key, value] of Object.entries(runs[0]!.detail)) {
    detail[key] = typeof value === 'number' ? median(runs.map((r) => Number(r.detail[key]))) : value;
  }
  const phase = {
    name,
    runs: runs.length,
    seconds: median(runs.map((r) => r.seconds)),
    read: stats(runs.flatMap((r) => r.read)),
    write: stats(runs.flatMap((r) => r.write)),
    loopMaxMs: Math.max(...runs.map((r) => r.loopMaxMs)),
    detail,
  };
  log(
    `  ${name.padEnd(22)} ${phase.seconds.toFixed(2).padStart(6)} s  read p50 ${phase.read.p50.toFixed(1)} p99 ${phase.read.p99.toFixed(1)} max ${phase.read.max.toFixed(1)} ms (${phase.read.n})` +
      `  write p50 ${phase.write.p50.toFixed(1)} p99 ${phase.write.p99.toFixed(1)} max ${phase.write.max.toFixed(1)} ms (${phase.write.n})  loop max ${phase.loopMaxMs.toFixed(1)} ms  ${JSON.stringify(detail)}`,
  );
  return phase;
}

interface Context {
  apiKey: string;
  merchantId: number;
  ids: number[];
  database: string;
  engine: 'sqlite' | 'postgres';
}

/** An export of `de` read whole: its NDJSON's MB/s (the identity bytes, whatever the coding), the wire's bytes beside. */
async function exportOnce(
  base: string,
  apiKey: string,
  coding: 'identity' | 'gzip' | 'br',
  identityBytes?: number,
  pauseMs = 0,
  onHeaders?: () => void,
) {
  const response = await get(
    `${base}/v1/products/export?store=de`,
    { Authorization: `Bearer ${apiKey}`, 'Accept-Encoding': coding },
    { pauseMs, tailOnly: true, onHeaders },
  );
  if (response.status !== 200) throw new Error(`export: ${response.status}`);
  const ndjsonBytes = coding === 'identity' ? response.bytes : identityBytes!;
  let count: number | string = '';
  if (coding === 'identity') {
    const text = response.body.toString('utf8');
    count = (JSON.parse(text.slice(text.lastIndexOf('\n', text.length - 2) + 1)) as { count: number }).count;
  }
  const seconds = (response.ms - pauseMs) / 1000;
  return {
    ndjson_mb: +(ndjsonBytes / 1e6).toFixed(1),
    wire_mb: +(response.bytes / 1e6).toFixed(1),
    mb_per_s: +(ndjsonBytes / 1e6 / seconds).toFixed(1),
    products_per_s: Math.round((typeof count === 'number' ? count : PRODUCTS) / seconds),
    first_byte_ms: +response.firstByteMs.toFixed(1),
    ...(count !== '' ? { count } : {}),
  };
}

async function pagedRead(base: string, apiKey: string) {
  let bytes = 0;
  let products = 0;
  let requests = 0;
  for (let afterId = 0; ; ) {
    const page = await get(`${base}/v1/products?store=de&per_page=200&after_id=${afterId}`, {
      Authorization: `Bearer ${apiKey}`,
      'Accept-Encoding': 'identity',
    });
    requests++;
    bytes += page.bytes;
    const data = (JSON.parse(page.body.toString('utf8')) as { data: { id: number }[] }).data;
    products += data.length;
    if (data.length < 200) return { requests, products, mb: +(bytes / 1e6).toFixed(1) };
    afterId = data.at(-1)!.id;
  }
}

/** SQLite: whether a PASSIVE checkpoint now copies every frame of the WAL (no reader holds an older snapshot). */
function walCheckpointsFully(database: string): boolean {
  const db = new Database(database);
  try {
    const [result] = db.pragma('wal_checkpoint(PASSIVE)') as { log: number; checkpointed: number }[];
    return result!.checkpointed === result!.log;
  } finally {
    db.close();
  }
}

/** PostgreSQL: whether a transaction that began before `since` is still open on the database (the export's snapshot, begun before its headers). */
async function transactionOpenSince(database: string, since: Date): Promise<boolean> {
  const client = new pg.Client({ connectionString: database });
  await client.connect();
  try {
    const { rows } = await client.query<{ n: number }>(
      `SELECT count(*)::integer AS n FROM pg_stat_activity
      WHERE datname = current_database() AND pid <> pg_backend_pid() AND xact_start < $1`,
      [since],
    );
    return rows[0]!.n > 0;
  } finally {
    await client.end();
  }
}

/**
 * An export whose client reads nothing for BENCH_PAUSE_SECONDS, then all of it: how long after the
 * request the snapshot was released (SQLite: a PASSIVE checkpoint copies the whole WAL again, with
 * the write probe committing meanwhile; PostgreSQL: no transaction begun before the response's
 * headers, which are sent from inside the snapshot, is open any more), polled every 100 ms
 * through the pause.
 */
async function slowClient(ctx: Context, base: string): Promise<Run['detail']> {
  const started = performance.now();
  let headersAt: Date | undefined;
  const exported = exportOnce(base, ctx.apiKey, 'identity', undefined, PAUSE_SECONDS * 1000, () => {
    headersAt = new Date();
  });
  let releasedAfter: number | undefined;
  while (performance.now() - started < PAUSE_SECONDS * 1000 && releasedAfter === undefined) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    if (!headersAt) continue;
    const open = ctx.engine === 'sqlite' ? !walCheckpointsFully(ctx.database) : await transactionOpenSince(ctx.database, headersAt);
    if (!open) releasedAfter = (performance.now() - started) / 1000;
  }
  const result = await exported;
  return {
    snapshot_released_after_s: releasedAfter === undefined ? `not within the ${PAUSE_SECONDS} s pause` : +releasedAfter.toFixed(2),
    read_after_pause_mb_per_s: result.mb_per_s,
    count: result.count ?? '',
  };
}

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);

async function benchEngine(ctx: Context): Promise<Phase[]> {
  const server = await startBenchServerProcess(candidateDir, 'bench-server.ts', ctx.database, ctx.engine);
  try {
    // Warm the server (its statement caches, the store's block counts) before measuring.
    const warm = await exportOnce(server.base, ctx.apiKey, 'identity');
    const identityBytes = warm.ndjson_mb * 1e6;
    const measures: [string, () => Promise<Run['detail']>][] = [
      [
        'idle',
        async () => {
          await new Promise((resolve) => setTimeout(resolve, IDLE_SECONDS * 1000));
          return {};
        },
      ],
      ['export identity', () => exportOnce(server.base, ctx.apiKey, 'identity')],
      ['export gzip', () => exportOnce(server.base, ctx.apiKey, 'gzip', identityBytes)],
      ['export br', () => exportOnce(server.base, ctx.apiKey, 'br', identityBytes)],
      ['paging 200/page', () => pagedRead(server.base, ctx.apiKey)],
    ];
    const runs = new Map<string, Run[]>(measures.map(([name]) => [name, []]));
    // Rounds of every phase, one after the other: the machine's load drifts alike over all of them.
    for (let round = 1; round <= ROUNDS; round++) {
      for (const [name, measure] of measures) runs.get(name)!.push(await run(server, ctx, measure));
      log(`  round ${round}/${ROUNDS} done`);
    }
    const phases = measures.map(([name]) => pooled(name, runs.get(name)!));
    phases.push(pooled(`slow client (${PAUSE_SECONDS} s)`, [await run(server, ctx, () => slowClient(ctx, server.base))]));
    return phases;
  } finally {
    await server.stop();
  }
}

function summary(engine: string, phases: Phase[]): Record<string, number | string> {
  const by = (name: string) => phases.find((p) => p.name.startsWith(name))!;
  const ratio = (a: number, b: number) => +(a / b).toFixed(2);
  const [idle, exported, gzip, br, paging, slow] = [
    'idle',
    'export identity',
    'export gzip',
    'export br',
    'paging',
    'slow client',
  ].map<Phase>(by);
  return {
    engine,
    export_mb_per_s: Number(exported!.detail.mb_per_s),
    gzip_mb_per_s: Number(gzip!.detail.mb_per_s),
    br_mb_per_s: Number(br!.detail.mb_per_s),
    export_over_paging_speed: ratio(paging!.seconds, exported!.seconds),
    read_p50_export_over_idle: ratio(exported!.read.p50, idle!.read.p50),
    read_p99_export_over_idle: ratio(exported!.read.p99, idle!.read.p99),
    read_p99_paging_over_idle: ratio(paging!.read.p99, idle!.read.p99),
    write_p99_export_over_idle: ratio(exported!.write.p99, idle!.write.p99),
    write_p99_paging_over_idle: ratio(paging!.write.p99, idle!.write.p99),
    loop_max_ms_idle: +idle!.loopMaxMs.toFixed(1),
    loop_max_ms_export: +exported!.loopMaxMs.toFixed(1),
    snapshot_released_after_s: slow!.detail.snapshot_released_after_s as number | string,
  };
}

const tempDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-bench-export-'));
// The PostgreSQL server runs as its own user (when this runs as root): it must reach its folder inside.
fs.chmodSync(tempDir, 0o711);
/** BENCH_DEMO_DIR: where the SQLite demo catalog is kept between runs (built once; ~5 min at 100k on a busy machine). */
const DEMO_DIR = process.env.BENCH_DEMO_DIR;
let postgres: PostgresServer | undefined;
/** Synchronous, so it also runs on a signal: the servers, the PostgreSQL cluster, the temp folder. */
const cleanUp = () => {
  killTracked();
  postgres?.stopSync('immediate');
  postgres = undefined;
  fs.rmSync(tempDir, { recursive: true, force: true });
};
for (const signal of ['SIGINT', 'SIGTERM'] as const)
  process.once(signal, () => {
    cleanUp();
    process.exit(130);
  });
try {
  const results: Record<string, { phases: Phase[]; summary: Record<string, number | string> }> = {};
  for (const engine of engines) {
    let database = path.join(DEMO_DIR ?? tempDir, `export-${PRODUCTS}.db`);
    if (engine === 'postgres') {
      if (!findPostgresBinaries()) throw new Error('no PostgreSQL server binaries installed (scripts/dev/postgres-server.ts)');
      postgres = await startPostgresServer({ dir: path.join(tempDir, 'postgres'), durable: false });
      const client = new pg.Client({ connectionString: postgres.url });
      await client.connect();
      await client.query('CREATE DATABASE bench_export');
      await client.end();
      database = postgres.urlOf('bench_export');
    }
    const checkout: Checkout = { name: 'candidate', ref: 'HEAD', sha: '', dir: candidateDir };
    log(`\n== ${engine}`);
    const kept = `${database}.json`;
    const { merchantId, apiKey } =
      engine === 'sqlite'
        ? DEMO_DIR && fs.existsSync(kept)
          ? (JSON.parse(fs.readFileSync(kept, 'utf8')) as { merchantId: number; apiKey: string })
          : await buildDemo(checkout, database, PRODUCTS, log)
        : await buildDemoOn(database, log);
    if (engine === 'sqlite' && DEMO_DIR) fs.writeFileSync(kept, JSON.stringify({ merchantId, apiKey }));
    // Product ids of the demo catalog (the read probe's targets): the first export, read once.
    const ids = await (async () => {
      const server = await startBenchServerProcess(candidateDir, 'bench-server.ts', database, engine);
      try {
        const page = await get(`${server.base}/v1/products?store=pl&per_page=200`, { Authorization: `Bearer ${apiKey}` });
        return (JSON.parse(page.body.toString('utf8')) as { data: { id: number }[] }).data.map((p) => p.id);
      } finally {
        await server.stop();
      }
    })();
    const phases = await benchEngine({ apiKey, merchantId, ids, database, engine });
    results[engine] = { phases, summary: summary(engine, phases) };
    log(`  ${JSON.stringify(results[engine].summary)}`);
    if (postgres) {
      await postgres.stop();
      postgres = undefined;
    }
  }
  if (flags.json) console.log(JSON.stringify({ products: PRODUCTS, results }, null, 2));
} finally {
  cleanUp();
}

/** `demo` on a PostgreSQL database, by the working tree's own CLI. */
async function buildDemoOn(url: string, write: (line: string) => void): Promise<{ merchantId: number; apiKey: string }> {
  const { spawn } = await import('node:child_process');
  const started = performance.now();
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli.ts', 'demo', '--products', String(PRODUCTS), '--json'], {
    cwd: candidateDir,
    env: {
      ...Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('CPS_'))),
      CPS_DATABASE_URL: url,
      CPS_LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => {
    output += chunk.toString('utf8');
  });
  child.stderr.on('data', (chunk: Buffer) => {
    output += chunk.toString('utf8');
  });
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  if (code !== 0) throw new Error(`postgres: demo exited ${code}:\n${output}`);
  const demo = JSON.parse(output.trim().split('\n').at(-1)!) as { merchant_id: number; api_key: string };
  write(`postgres: demo catalog of ${PRODUCTS} products built in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  return { merchantId: demo.merchant_id, apiKey: demo.api_key };
}
