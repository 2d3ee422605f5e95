// The quiet window of bench:scale's dead-origin phase in two minutes, for the inner loop: on a
// throwaway PostgreSQL, two `serve` and a `worker` of this tree (every default on) over the demo
// catalog (every image on the demo's dead host, marked down within the warm-up), /metrics scraped
// every 5 s, optionally a burst of reads first; then over the window the CPU of every thread of
// each process (schedstat), of each PostgreSQL process (backends started and ended), and the
// statements PostgreSQL ran (pg_stat_statements, most called first). Nothing is measured against a
// goal: bench:scale at 100k products is the measure; this finds where the time goes.
// Usage: node --import tsx scripts/bench/idle-probe.ts --dir DIR (readable by the postgres user)
//   [--warm S (60)] [--burst S (0)] [--window S (60)] [--scrape S (5)] [--env CPS_X=V,...]
//   [--node-args="--cpu-prof --cpu-prof-dir=DIR"]  node options of the services (a profile per thread)
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { dataDirOf, freePort, startPostgresServer } from '../dev/postgres-server.js';
import { procCpu, threadCpu, threadSchedstat } from './process-sampler.js';

const { values: flags } = parseArgs({
  options: {
    dir: { type: 'string' },
    tree: { type: 'string', default: process.cwd() },
    warm: { type: 'string', default: '60' },
    window: { type: 'string', default: '60' },
    env: { type: 'string', default: '' },
    scrape: { type: 'string', default: '5' },
    'node-args': { type: 'string', default: '' },
    burst: { type: 'string', default: '0' },
  },
});
const dir = flags.dir!;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const log = (s: string) => console.log(s);
const children: ChildProcess[] = [];
process.on('exit', () => {
  for (const c of children) c.kill('SIGKILL');
});

const postgres = await startPostgresServer({
  dir: path.join(dir, 'postgres'),
  durable: false,
  maxConnections: 300,
  settings: ['shared_preload_libraries=pg_stat_statements', 'pg_stat_statements.track=all'],
});
process.on('exit', () => postgres.stopSync('immediate'));
const admin = new pg.Client({ connectionString: postgres.url });
await admin.connect();
await admin.query('CREATE DATABASE idle');
const url = postgres.urlOf('idle');
const dbc = new pg.Client({ connectionString: url });
await dbc.connect();
await dbc.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');

const extra = Object.fromEntries(
  flags.env
    .split(',')
    .filter(Boolean)
    .map((p) => [p.slice(0, p.indexOf('=')), p.slice(p.indexOf('=') + 1)]),
);
const baseEnv = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('CPS_')));
interface Proc {
  name: string;
  child: ChildProcess;
  base: string;
}
async function start(name: string, command: 'serve' | 'worker', demo: boolean): Promise<Proc> {
  const port = await freePort();
  const env = {
    ...baseEnv,
    CPS_DATABASE_URL: url,
    CPS_ADMIN_TOKEN: 'x'.repeat(32),
    CPS_WEBHOOK_ALLOW_HOSTS: '127.0.0.1',
    CPS_DEMO_ON_EMPTY: demo ? 'true' : 'false',
    CPS_DB_PATH: path.join(dir, 'cps.db'),
    CPS_MEDIA_DIR: path.join(dir, 'media'),
    CPS_HOST: '127.0.0.1',
    CPS_LOG_LEVEL: 'warn',
    ...(command === 'serve' ? { CPS_PORT: String(port) } : { CPS_OPS_PORT: String(port) }),
    ...extra,
  };
  const child = spawn(process.execPath, [...flags['node-args'].split(' ').filter(Boolean), '--import', 'tsx', 'src/cli.ts', command], {
    cwd: flags.tree,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  const out = fs.createWriteStream(path.join(dir, `${name}.log`));
  child.stdout.pipe(out);
  child.stderr.pipe(out);
  const base = `http://127.0.0.1:${port}`;
  for (const deadline = Date.now() + 300_000; ; ) {
    if (child.exitCode !== null) throw new Error(`${name} exited`);
    if (
      await fetch(`${base}/readyz`).then(
        (r) => (void r.body?.cancel(), r.ok),
        () => false,
      )
    )
      break;
    if (Date.now() > deadline) throw new Error(`${name} not ready`);
    await sleep(200);
  }
  return { name, child, base };
}

const serve1 = await start('serve', 'serve', true);
const serve2 = await start('serve-2', 'serve', false);
const worker = await start('worker', 'worker', false);
const procs = [serve1, serve2, worker];
log(`started; warming ${flags.warm} s`);
let scraping = true;
let scrapes = 0;
const scrapeLoops = [serve1, serve2].map(async (p) => {
  while (scraping) {
    await fetch(`${p.base}/metrics`).then((r) => r.text());
    scrapes++;
    await sleep(Number(flags.scrape) * 1000);
  }
});
await sleep(Number(flags.warm) * 1000);
const origin = await dbc.query('SELECT origin, down_since, failures FROM image_origins');
log(`origins: ${JSON.stringify(origin.rows)}`);
const pending = await dbc.query('SELECT state, count(*) FROM image_mirrors GROUP BY state');
log(`images: ${JSON.stringify(pending.rows)}`);

if (Number(flags.burst) > 0) {
  const demo = JSON.parse(fs.readFileSync(path.join(dir, 'demo-credentials.json'), 'utf8')) as { api_key: string };
  const end = Date.now() + Number(flags.burst) * 1000;
  let reads = 0;
  await Promise.all(
    [0, 1, 2, 3].map(async (loop) => {
      const base = [serve1, serve2][loop % 2]!.base;
      for (let i = 0; Date.now() < end; i++) {
        const url = i % 2 ? `${base}/v1/products?store=pl&per_page=200&page=${1 + (i % 3)}` : `${base}/v1/changes?store=pl&limit=500`;
        await fetch(url, { headers: { Authorization: `Bearer ${demo.api_key}` } }).then((r) => r.arrayBuffer());
        reads++;
      }
    }),
  );
  log(`burst: ${reads} reads; then 5 s`);
  await sleep(5000);
}
const pgData = dataDirOf(path.join(dir, 'postgres'));
const postmaster = Number(fs.readFileSync(path.join(pgData, 'postmaster.pid'), 'utf8').split('\n')[0]);
const pgProcs = () => {
  const m = new Map<number, { name: string; us: number }>();
  for (const e of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    const c = procCpu(Number(e));
    if (!c || (c.ppid !== postmaster && Number(e) !== postmaster)) continue;
    let name = '';
    try {
      name = fs.readFileSync(`/proc/${e}/cmdline`, 'utf8').replace(/\0/g, ' ').trim();
    } catch {
      // ended meanwhile: no name
    }
    m.set(Number(e), { name, us: Number(e) === postmaster ? c.own + c.reaped : c.own });
  }
  return m;
};
const threads = () =>
  procs.map((p) => new Map(threadCpu(p.child.pid!).map((t) => [t.tid, { ...t, us: threadSchedstat(p.child.pid!, t.tid)?.runUs ?? t.us }])));
await dbc.query('SELECT pg_stat_statements_reset()');
const t0 = threads();
const p0 = pgProcs();
const s0 = scrapes;
const w0 = performance.now();
const W = Number(flags.window);
await sleep(W * 1000);
const t1 = threads();
const p1 = pgProcs();
const w1 = performance.now();
const seconds = (w1 - w0) / 1000;
const pct = (us: number) => ((us / 1e6 / seconds) * 100).toFixed(3);
let total = 0;
for (const [i, p] of procs.entries()) {
  const rows = [...t1[i]!.values()].map((t) => ({
    tid: t.tid,
    main: t.tid === p.child.pid,
    nice: t.nice,
    us: t.us - (t0[i]!.get(t.tid)?.us ?? 0),
  }));
  const sum = rows.reduce((n, r) => n + r.us, 0);
  total += sum;
  log(
    `${p.name}: ${pct(sum)} %  ${rows
      .filter((r) => r.us > 0)
      .sort((a, b) => b.us - a.us)
      .map((r) => `${r.main ? 'MAIN' : r.tid}${r.nice ? '(n)' : ''}=${pct(r.us)}`)
      .join(' ')}`,
  );
}
let pgTotal = 0;
const pgRows: string[] = [];
for (const [pid, v] of p1) {
  const before = p0.get(pid);
  const d = v.us - (before?.us ?? 0);
  pgTotal += d;
  if (d > 0 || !before) pgRows.push(`  ${before ? '' : 'NEW '}${pid} ${pct(d)} % ${v.name}`);
}
const gone = [...p0.keys()].filter((pid) => !p1.has(pid));
// An ended backend's whole CPU moved to the postmaster's reaped count: what it had at the start is not the window's.
for (const pid of gone) if (pid !== postmaster) pgTotal -= p0.get(pid)!.us;
log(`PostgreSQL: ${pct(pgTotal)} % (${p1.size} processes, ${gone.length} ended, ${[...p1.keys()].filter((k) => !p0.has(k)).length} new)`);
for (const r of pgRows) log(r);
total += pgTotal;
log(`TOTAL ${pct(total)} % of a core over ${seconds.toFixed(1)} s, ${scrapes - s0} scrapes`);
const st = await dbc.query(
  `SELECT calls, round(total_exec_time::numeric, 1) AS ms, left(regexp_replace(query, '\\s+', ' ', 'g'), 110) AS q FROM pg_stat_statements ORDER BY calls DESC LIMIT 40`,
);
for (const r of st.rows) log(`  ${String(r.calls).padStart(5)} ${String(r.ms).padStart(8)} ms  ${r.q}`);
scraping = false;
await Promise.all(scrapeLoops);
await Promise.all(
  procs.map(
    (p) =>
      new Promise((r) => {
        p.child.once('exit', r);
        p.child.kill('SIGTERM');
      }),
  ),
);
await dbc.end();
await admin.end();
await postgres.stop('fast');
process.exit(0);
