// `npm run bench:storm`: a bulk import to an endpoint limited by `max_per_second`.
// A real `serve` (every default worker on: the dispatcher in its worker thread) on a fresh SQLite
// file; a merchant with two stores; endpoint `limited` (store de, content, max_per_second R) and
// endpoint `free` (store at, price, no limit), receivers on 127.0.0.1 (the limited one in a process of
// its own, scripts/bench/bench-storm-receiver.ts, so that the bench's work does not delay its arrivals). The
// bench imports N products (BENCH_STORM_PRODUCTS, default 100,000), then, while the limited
// endpoint drains, changes one product's cost every 2 s and times how long the free endpoint takes
// to receive it. It reports, for the limited endpoint: deliveries, ids per delivery, ids lost or
// received twice, and the most deliveries that started within any one second; for the free one:
// the latency of those changes while the limited one still had a backlog.
//
//   npm run bench:storm                                   # 100k products, 5/s, SQLite
//   BENCH_STORM_ENGINE=postgres npm run bench:storm       # on a throwaway local PostgreSQL server
//   BENCH_STORM_PRODUCTS=20000 BENCH_STORM_RATE=10 npm run bench:storm
import { fork, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { inheritedEnv, keepOutput, killTracked, stopChild, track } from './baseline.js';
import pg from 'pg';
import { startPostgresServer, type PostgresServer } from '../dev/postgres-server.js';
import { AdminClient, ndjson } from './scale-catalog.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const PRODUCTS = Number(process.env.BENCH_STORM_PRODUCTS ?? 100_000);
const RATE = Number(process.env.BENCH_STORM_RATE ?? 5);
const ENGINE = process.env.BENCH_STORM_ENGINE === 'postgres' ? 'postgres' : 'sqlite';
const ADMIN_TOKEN = 'storm-bench-admin-token-0123456789abcdef';
const log = (line: string) => console.log(`[${new Date().toISOString().slice(11, 19)}] ${line}`);

interface Arrival {
  at: number;
  ids: number[];
  id: string;
}

/** A receiver that answers 204 at once and notes each delivery's arrival, ids and webhook-id. */
async function receiver(): Promise<{ url: string; arrivals: Arrival[]; ids: Set<number>; close(): Promise<void> }> {
  const arrivals: Arrival[] = [];
  // Kept as they arrive: counting them again from the arrivals would block this process (and
  // delay the arrival times it records) for tens of ms at 100k ids.
  const ids = new Set<number>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const at = performance.now();
      const payload = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { product_ids: number[] };
      arrivals.push({ at, ids: payload.product_ids, id: String(req.headers['webhook-id']) });
      for (const id of payload.product_ids) ids.add(id);
      res.writeHead(204).end();
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`,
    arrivals,
    ids,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** The limited endpoint's receiver, in its own process (scripts/bench/bench-storm-receiver.ts). */
async function receiverProcess(): Promise<{ url: string; child: ChildProcess; ask<T>(what: 'count' | 'report'): Promise<T> }> {
  const child = track(fork(path.join(root, 'scripts', 'bench', 'bench-storm-receiver.ts'), [], { execArgv: ['--import', 'tsx'], stdio: 'inherit' }));
  const port: number = await new Promise((resolve) => child.once('message', (m: { port: number }) => resolve(m.port)));
  return {
    url: `http://127.0.0.1:${port}/hooks`,
    child,
    ask: <T>(what: 'count' | 'report') =>
      new Promise<T>((resolve) => {
        child.once('message', (m) => resolve(m as T));
        child.send(what);
      }),
  };
}

async function freePort(): Promise<number> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** The database `serve` runs on: a fresh SQLite file, or a database on a throwaway PostgreSQL server. */
async function database(dir: string): Promise<{ env: Record<string, string>; server?: PostgresServer }> {
  if (ENGINE === 'sqlite') return { env: { CPS_DB_PATH: path.join(dir, 'storm.db') } };
  const server = await startPostgresServer({ dir: path.join(dir, 'postgres'), durable: false });
  const client = new pg.Client({ connectionString: server.url });
  await client.connect();
  await client.query('CREATE DATABASE storm_bench');
  await client.end();
  return { env: { CPS_DATABASE_URL: server.urlOf('storm_bench') }, server };
}

const line = (n: number, cost = 20 + (n % 50)) =>
  JSON.stringify({
    op: 'upsert_product',
    product: {
      ref: `STORM-${n}`,
      content: { de: { title: `Sturmzelt ${n}`, description: null } },
      offers: [{ supplier_ref: 'alpine', quantity: 3, cost: `${cost}.00`, currency: 'EUR' }],
    },
  });

async function main(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-storm-'));
  // The PostgreSQL server runs as its own user, which must reach its folder under this one.
  fs.chmodSync(dir, 0o755);
  const limited = await receiverProcess();
  const free = await receiver();
  const port = await freePort();
  const db = await database(dir);
  const child = track(
    spawn(process.execPath, ['--import', 'tsx', 'src/cli.ts', 'serve'], {
      cwd: root,
      stdio: ['ignore', 'ignore', 'pipe'],
      env: {
        ...inheritedEnv(),
        ...db.env,
        CPS_PORT: String(port),
        CPS_HOST: '127.0.0.1',
        CPS_ADMIN_TOKEN: ADMIN_TOKEN,
        CPS_DEMO_ON_EMPTY: 'false',
        CPS_WEBHOOK_ALLOW_HOSTS: '127.0.0.1',
        CPS_LOG_LEVEL: 'warn',
      },
    }),
  );
  const output = keepOutput(child);
  const base = `http://127.0.0.1:${port}`;
  try {
    for (let ready = false; !ready; ) {
      if (child.exitCode !== null) throw new Error(`serve exited:\n${output()}`);
      ready = await fetch(`${base}/readyz`).then(
        (r) => r.ok,
        () => false,
      );
      if (!ready) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const admin = new AdminClient(base, ADMIN_TOKEN);
    const merchant = await admin.call('POST', '/merchants', { name: 'Storm Outdoor', owner_emails: [] });
    const m = `/merchants/${merchant.id}`;
    await admin.call('PUT', `${m}/stores/de`, { name: 'Sturm DE', locale: 'de-DE', currency: 'EUR', is_default: true, active: true });
    await admin.call('PUT', `${m}/stores/at`, { name: 'Sturm AT', locale: 'de-AT', currency: 'EUR', is_default: false, active: true });
    await admin.call('POST', `${m}/customer-groups`, { name: 'retail' });
    await admin.call('PUT', `${m}/suppliers/alpine`, { name: 'Alpine Wholesale AG' });
    const limitedEndpoint = await admin.call('POST', `${m}/webhook-endpoints`, {
      url: limited.url,
      store: 'de',
      events: ['content'],
      max_per_second: RATE,
    });
    await admin.call('POST', `${m}/webhook-endpoints`, { url: free.url, store: 'at', events: ['price'] });
    log(`serve (${ENGINE}) on ${base}; endpoint ${limitedEndpoint.id} limited to ${RATE}/s; importing ${PRODUCTS} products`);

    // The free endpoint's latency before the storm, for comparison: a change, timed to its arrival.
    let version = 0;
    const timeChange = async (): Promise<number> => {
      version++;
      const before = free.arrivals.length;
      const sent = performance.now();
      await admin.call('POST', `${m}/imports`, `${line(1, 1000 + version)}\n`, 'application/x-ndjson');
      for (;;) {
        const arrival = free.arrivals.slice(before).find((a) => a.ids.includes(1));
        if (arrival) return arrival.at - sent;
        if (performance.now() - sent > 60_000) throw new Error('the free endpoint did not get the change within 60 s');
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    };
    const quiet: number[] = [];
    for (let i = 0; i < 5; i++) quiet.push(await timeChange());

    const importStarted = performance.now();
    const chunk = 20_000;
    for (let first = 1; first <= PRODUCTS; first += chunk) {
      const last = Math.min(PRODUCTS, first + chunk - 1);
      const result = await admin.call(
        'POST',
        `${m}/imports`,
        ndjson(first, last, (n) => line(n)),
        'application/x-ndjson',
      );
      if (result.upserted !== last - first + 1) throw new Error(`import ${first}..${last}: ${JSON.stringify(result)}`);
    }
    const importSeconds = (performance.now() - importStarted) / 1000;
    log(`imported in ${importSeconds.toFixed(0)} s; the limited endpoint drains (${Math.ceil(PRODUCTS / 100)} deliveries at least)`);

    // While the limited endpoint drains: a price change every 2 s, timed to the free endpoint.
    const latencies: number[] = [];
    const expected = PRODUCTS;
    const received = async () => (await limited.ask<{ count: number }>('count')).count;
    const drainStarted = performance.now();
    const deadline = drainStarted + (PRODUCTS / 100 / RATE) * 1000 * 3 + 120_000;
    while ((await received()) < expected && performance.now() < deadline) {
      latencies.push(await timeChange());
      if (latencies.length % 15 === 0)
        log(`  limited: ${await received()}/${expected} ids; free endpoint's last change in ${latencies.at(-1)!.toFixed(0)} ms`);
      await new Promise((resolve) => setTimeout(resolve, 2000));
    }
    const drainSeconds = (performance.now() - drainStarted) / 1000;

    // The limited endpoint: every id once? full deliveries? the rate held?
    const { arrivals } = await limited.ask<{ arrivals: Arrival[] }>('report');
    const ids = arrivals.flatMap((a) => a.ids);
    const counts = new Map<number, number>();
    for (const id of ids) counts.set(id, (counts.get(id) ?? 0) + 1);
    const lost = Array.from({ length: expected }, (_, i) => i + 1).filter((id) => !counts.has(id)).length;
    const twice = [...counts.values()].filter((n) => n > 1).length;
    const sizes = arrivals.map((a) => a.ids.length);
    const full = sizes.filter((n) => n === 100).length;
    const times = arrivals.map((a) => a.at).sort((a, b) => a - b);
    let busiest = 0;
    let busiestAt = 0;
    for (let i = 0, j = 0; i < times.length; i++) {
      while (times[i]! - times[j]! >= 1000) j++;
      if (i - j + 1 > busiest) [busiest, busiestAt] = [i - j + 1, j];
    }
    const busiestGaps = times
      .slice(busiestAt, busiestAt + busiest)
      .slice(1)
      .map((t, k) => Math.round(t - times[busiestAt + k]!));
    const pct = (values: number[], p: number) => {
      const sorted = [...values].sort((a, b) => a - b);
      return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
    };
    const gaps = times.slice(1).map((t, i) => t - times[i]!);
    const distinctIds = new Set(arrivals.map((a) => a.id)).size;
    console.log(`\nbench:storm (${ENGINE})`);
    console.log(`  products imported            ${PRODUCTS} in ${importSeconds.toFixed(0)} s`);
    console.log(
      `  limited endpoint (${RATE}/s)     ${arrivals.length} deliveries (${distinctIds} webhook-ids) in ${drainSeconds.toFixed(0)} s after the import`,
    );
    console.log(
      `    ids per delivery           full (100): ${full}; smaller: ${sizes.length - full} (${sizes.filter((n) => n < 100).join(', ') || 'none'})`,
    );
    console.log(`    ids lost / received twice  ${lost} / ${twice}`);
    console.log(
      `    most arrivals in 1 second  ${busiest} (limit ${RATE}; slots ${((1000 / RATE) * 1.05).toFixed(0)} ms apart, arrival gaps min ${Math.min(...gaps).toFixed(0)} ms, p5 ${pct(gaps, 5).toFixed(0)} ms, p50 ${pct(gaps, 50).toFixed(0)} ms; the busiest second's gaps ${busiestGaps.join(', ')} ms)`,
    );
    console.log(`  free endpoint, same merchant (its changes wait the ${2} s batching window)`);
    console.log(
      `    before the import          ${quiet.length} changes: p50 ${pct(quiet, 50).toFixed(0)} ms, max ${Math.max(...quiet).toFixed(0)} ms`,
    );
    console.log(
      `    during the drain           ${latencies.length} changes: p50 ${pct(latencies, 50).toFixed(0)} ms, p95 ${pct(latencies, 95).toFixed(0)} ms, max ${Math.max(...latencies).toFixed(0)} ms`,
    );
    if (lost > 0) process.exitCode = 1;
  } finally {
    await stopChild(child);
    await db.server?.stop();
    await stopChild(limited.child);
    await free.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  killTracked();
  console.error(error);
  process.exit(1);
});
