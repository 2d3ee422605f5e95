// `tsx scripts/bench/read-hops.ts`: how many times a read wakes `serve`'s serving (main) thread, by kind.
// On a busy machine each wake-up waits for a core (bench:scale: 1-3 ms each at a load of 20), so a
// read's latency under load is about its wake-ups times that wait: fewer hops, a lower p99.
//
// A throwaway PostgreSQL (or --engine sqlite), `serve` with its demo catalog (--products, 500) and
// every default on, then per kind of read --reads requests one at a time on one keep-alive
// connection: the main thread's voluntary context switches (each a wait its event loop chose, so a
// wake-up after it) and its CPU per read, less what the same thread did over as long a time with
// no read (the idle rate, measured first). Prints a table, or JSON with --json.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { freePort, startPostgresServer } from '../dev/postgres-server.js';
import { threadCpu, threadSwitches } from './process-sampler.js';

const { values: flags } = parseArgs({
  options: {
    engine: { type: 'string', default: 'postgres' },
    products: { type: 'string', default: '500' },
    reads: { type: 'string', default: '200' },
    json: { type: 'boolean', default: false },
    /** tcp: 127.0.0.1; socket: the server's Unix socket. */
    'database-address': { type: 'string', default: 'tcp' },
    env: { type: 'string', default: '' },
    /** e.g. --node-args=--cpu-prof,--cpu-prof-dir=/tmp/x: a profile per thread of serve. */
    'node-args': { type: 'string', default: '' },
  },
});
const reads = Number(flags.reads);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'read-hops-'));
// The server runs as `postgres` when we are root: it must be able to pass through the temp dir.
fs.chmodSync(dir, 0o711);
const postgres = flags.engine === 'postgres' ? await startPostgresServer({ dir: path.join(dir, 'pg'), durable: false }) : null;
const port = await freePort();
const base = `http://127.0.0.1:${port}`;
const extraEnv = Object.fromEntries(
  flags.env
    .split(',')
    .filter(Boolean)
    .map((pair) => pair.split('=') as [string, string]),
);
const child = spawn(process.execPath, [...flags['node-args'].split(',').filter(Boolean), '--import', 'tsx', 'src/cli.ts', 'serve'], {
  env: {
    ...process.env,
    CPS_PORT: String(port),
    CPS_HOST: '127.0.0.1',
    CPS_DB_PATH: path.join(dir, 'catalog.db'),
    CPS_MEDIA_DIR: path.join(dir, 'media'),
    CPS_DATABASE_URL: !postgres
      ? ''
      : flags['database-address'] === 'socket'
        ? `postgres://postgres@/postgres?host=${encodeURIComponent(path.join(postgres.dir, 'socket'))}&port=${postgres.port}`
        : postgres.url,
    CPS_DEMO_PRODUCTS: flags.products,
    CPS_LOG_LEVEL: 'warn',
    ...extraEnv,
  },
  stdio: ['ignore', 'pipe', 'inherit'],
});
const stop = async () => {
  child.kill('SIGTERM');
  await new Promise((resolve) => child.once('exit', resolve));
  await postgres?.stop('immediate');
  fs.rmSync(dir, { recursive: true, force: true });
};
try {
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  const deadline = Date.now() + 300_000;
  while (!output.includes('listening on')) {
    if (Date.now() > deadline || child.exitCode !== null) throw new Error(`serve did not start:\n${output}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const credentials = JSON.parse(fs.readFileSync(path.join(dir, 'demo-credentials.json'), 'utf8')) as { api_key: string; store?: string };
  const headers = { Authorization: `Bearer ${credentials.api_key}` };
  const get = async (pathname: string) => {
    const response = await fetch(`${base}${pathname}`, { headers });
    await response.arrayBuffer();
    if (!response.ok) throw new Error(`${pathname}: ${response.status}`);
  };
  const stores = (await (await fetch(`${base}/v1/stores`, { headers })).json()) as { data: { slug: string }[] };
  const store = stores.data[0]!.slug;
  const page = (await (await fetch(`${base}/v1/products?store=${store}&per_page=200`, { headers })).json()) as { data: { id: number }[] };
  const ids = page.data.map((p) => p.id).join(',');
  const pid = child.pid!;
  const sample = () => ({ at: performance.now(), switches: threadSwitches(pid)!, us: threadCpu(pid).find((t) => t.tid === pid)?.us ?? 0 });
  // Let the start's backlog settle (the demo's images fail at once: the mirror goes idle).
  await new Promise((resolve) => setTimeout(resolve, 5000));
  const idle0 = sample();
  await new Promise((resolve) => setTimeout(resolve, 5000));
  const idle1 = sample();
  // Once /metrics is scraped (as bench:scale does every 5 s), the event-loop delay's samplers run.
  await (await fetch(`${base}/metrics`)).text();
  await new Promise((resolve) => setTimeout(resolve, 1000));
  const scraped0 = sample();
  await new Promise((resolve) => setTimeout(resolve, 5000));
  const scraped1 = sample();
  const idlePerMs = (scraped1.switches.voluntary - scraped0.switches.voluntary) / (scraped1.at - scraped0.at);
  const idleUsPerMs = (scraped1.us - scraped0.us) / (scraped1.at - scraped0.at);
  const beforeScrapePerS = ((idle1.switches.voluntary - idle0.switches.voluntary) / (idle1.at - idle0.at)) * 1000;
  const kinds: [string, string][] = [
    ['stores', '/v1/stores'],
    ['page', `/v1/products?store=${store}&per_page=200`],
    ['ids', `/v1/products?store=${store}&ids=${ids}`],
    ['product', `/v1/products/${page.data[0]!.id}?store=${store}`],
    ['changes', `/v1/changes?store=${store}`],
  ];
  const rows = [];
  for (const [kind, pathname] of kinds) {
    for (let i = 0; i < 10; i++) await get(pathname); // warm
    const a = sample();
    for (let i = 0; i < reads; i++) await get(pathname);
    const b = sample();
    const ms = b.at - a.at;
    rows.push({
      kind,
      wakeups_per_read: Number(((b.switches.voluntary - a.switches.voluntary - idlePerMs * ms) / reads).toFixed(2)),
      preempted_per_read: Number(((b.switches.involuntary - a.switches.involuntary) / reads).toFixed(2)),
      cpu_ms_per_read: Number(((b.us - a.us - idleUsPerMs * ms) / 1000 / reads).toFixed(3)),
      ms_per_read: Number((ms / reads).toFixed(2)),
    });
  }
  const result = {
    engine: flags.engine,
    products: Number(flags.products),
    reads,
    idle_wakeups_per_s_before_a_scrape: Number(beforeScrapePerS.toFixed(1)),
    idle_wakeups_per_s: Number((idlePerMs * 1000).toFixed(1)),
    kinds: rows,
    load: os.loadavg()[0],
  };
  if (flags.json) console.log(JSON.stringify(result, null, 2));
  else {
    console.log(
      `${flags.engine}, ${flags.products} products, ${reads} reads of each kind; idle: ${result.idle_wakeups_per_s_before_a_scrape} wake-ups/s before a /metrics scrape, ${result.idle_wakeups_per_s} after (subtracted below); load ${os.loadavg()[0]!.toFixed(1)}`,
    );
    for (const r of rows)
      console.log(
        `${r.kind.padEnd(9)} ${String(r.wakeups_per_read).padStart(7)} wake-ups ${String(r.preempted_per_read).padStart(6)} preempted ${String(r.cpu_ms_per_read).padStart(7)} ms CPU ${String(r.ms_per_read).padStart(7)} ms a read`,
      );
  }
} finally {
  await stop();
}
