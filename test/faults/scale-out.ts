// Scaling out on PostgreSQL under a fault: two `serve` and three `worker`
// processes on one database, a burst of changes to one receiver written through both servers at
// once, and kill -9 of one worker in the middle. Afterwards every change has reached the receiver,
// no delivery was sent twice except the ones whose lease ran out with the killed worker (counted and
// reported), the outbox drains, and the full recompute finds nothing wrong.
// Used by the quick variant in `npm test` (test/faults/scale-out.test.ts) and by `npm run fault`.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { startPostgresServer, type PostgresServer } from '../../scripts/dev/postgres-server.js';
import { OUTCOMES_PER_TRANSACTION } from '../../src/webhooks/dispatcher.js';
import { contractFetch } from '../support/contract.js';
import { Receiver } from '../support/receiver.js';
import type { ConsistencyReport } from '../support/verify.js';
import { catalogProduct, freePort, ndjson, ROOT, ServiceProcess, sleep, until } from './harness.js';

const ADMIN_TOKEN = 'adm_scale_out_token_0123456789';

export interface ScaleOutOptions {
  /** Products imported (one store: one change each), half through each server. */
  products: number;
  /** Product ids per delivery (CPS_WEBHOOK_BATCH_SIZE): smaller means more deliveries. */
  batchSize?: number;
  /** A fresh, empty or migrated database to use (tests: the run's server); by default a server is started for the run. */
  database?: { url: string };
  log?: (line: string) => void;
}

export interface ScaleOutReport {
  changes: number;
  deliveries: number;
  /** Requests the receiver got. */
  requests: number;
  /** Deliveries whose payload reached the receiver more than once: leases that ran out with the killed worker. */
  sentTwice: number;
  /** Deliveries the killed worker held (leased, not finished) when it died. */
  heldByKilledWorker: number;
  deliveredAtKill: number;
}

/** The burst, the kill, and the checks; throws on the first check that fails. */
export async function killWorkerOnPostgres(options: ScaleOutOptions): Promise<ScaleOutReport> {
  const log = options.log ?? (() => {});
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-scale-out-'));
  // The server runs as the postgres user when this runs as root: it must be able to reach its folder.
  fs.chmodSync(dir, 0o755);
  let server: PostgresServer | undefined;
  let url = options.database?.url;
  if (!url) {
    server = await startPostgresServer({ dir: path.join(dir, 'postgres'), durable: false });
    url = server.url;
  }
  const db = new pg.Pool({ connectionString: url, max: 2 });
  const count = async (sql: string, values: unknown[] = []) => Number((await db.query(sql, values)).rows[0].count);
  // 50 ms per answer: with six deliveries in flight across three workers, each worker holds some at any moment.
  const receiver = await Receiver.start({ behaviour: { status: 204, delayMs: 50 } });
  const processes: ServiceProcess[] = [];
  const fetch = contractFetch();
  try {
    const common = {
      CPS_DATABASE_URL: url,
      CPS_DB_POOL_SIZE: '4',
      CPS_HOST: '127.0.0.1',
      CPS_ADMIN_TOKEN: ADMIN_TOKEN,
      CPS_DEMO_ON_EMPTY: 'false',
      CPS_IMAGE_MIRRORING: 'false',
      CPS_MEDIA_DIR: path.join(dir, 'media'),
      CPS_PUBLISH_CHUNK: '1000',
      CPS_WEBHOOK_ALLOW_HOSTS: '127.0.0.1',
      CPS_WEBHOOK_COALESCE_MS: '100',
      CPS_WEBHOOK_BATCH_SIZE: String(options.batchSize ?? 20),
      CPS_WEBHOOK_POLL_INTERVAL_MS: '50',
      CPS_WEBHOOK_ENDPOINT_CONCURRENCY: '6',
      CPS_ACCESS_LOG: 'false',
      // A delivery in flight at the kill is re-sent once its lease lapses: time-out + margin.
      CPS_WEBHOOK_TIMEOUT_MS: '1000',
      CPS_WEBHOOK_LEASE_MARGIN_MS: '1000',
    };
    const ports = [await freePort(), await freePort()];
    // The servers only serve; the three workers dispatch.
    const serves = await Promise.all(
      ports.map((port) => ServiceProcess.start({ ...common, CPS_PORT: String(port), CPS_WEBHOOK_DISPATCHER: 'false' })),
    );
    processes.push(...serves);
    const workers = await Promise.all([0, 1, 2].map(() => ServiceProcess.start(common, 30_000, 'worker')));
    processes.push(...workers);
    log(
      `  2 serve (pids ${serves.map((s) => s.pid).join(', ')}) and 3 worker (pids ${workers.map((w) => w.pid).join(', ')}) on one PostgreSQL database`,
    );

    const call = async (port: number, method: string, pathname: string, body?: unknown, contentType = 'application/json') => {
      const response = await fetch(`http://127.0.0.1:${port}${pathname}`, {
        method,
        headers: { Authorization: `Bearer ${ADMIN_TOKEN}`, ...(body === undefined ? {} : { 'Content-Type': contentType }) },
        body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
      });
      const text = await response.text();
      if (response.status >= 300) throw new Error(`${method} ${pathname}: ${response.status} ${text.slice(0, 500)}`);
      return text ? JSON.parse(text) : undefined;
    };
    const merchant = await call(ports[0]!, 'POST', '/admin/v1/merchants', { name: 'Scale-out Outfitters' });
    const base = `/admin/v1/merchants/${merchant.id}`;
    await call(ports[0]!, 'PUT', `${base}/stores/de`, { name: 'DE', locale: 'de-DE', currency: 'EUR' });
    await call(ports[1]!, 'PUT', `${base}/suppliers/alpine`, { name: 'Alpine Wholesale AG' });
    await call(ports[1]!, 'PUT', `${base}/suppliers/baltic`, { name: 'Baltic Outdoor' });
    await call(ports[0]!, 'PUT', `${base}/exchange-rates/USD/EUR`, { rate: '0.92' });
    await call(ports[0]!, 'PUT', `${base}/attributes/weight`, { unit: 'kg', labels: {} });
    const endpoint = await call(ports[1]!, 'POST', `${base}/webhook-endpoints`, { url: receiver.url });
    receiver.secret = endpoint.secret;
    // Change timestamps are whole seconds: from the next second on, every change comes after the endpoint.
    await sleep(1000 - (Date.now() % 1000) + 5);

    // Both servers write at once: half of the products each.
    const half = Math.ceil(options.products / 2);
    const lines = (from: number, to: number) => ndjson(Array.from({ length: to - from }, (_, i) => catalogProduct(from + i, 1)));
    const started = Date.now();
    await Promise.all([
      call(ports[0]!, 'POST', `${base}/imports`, lines(0, half), 'application/x-ndjson'),
      call(ports[1]!, 'POST', `${base}/imports`, lines(half, options.products), 'application/x-ndjson'),
    ]);
    const changes = await count('SELECT count(*) FROM changes');
    log(`  imported ${options.products} products through both servers at once in ${Date.now() - started} ms: ${changes} changes`);

    // kill -9 of one worker while deliveries are under way.
    const target = Math.max(5, Math.floor(changes / (options.batchSize ?? 20) / 4));
    await receiver.waitFor(target, 120_000);
    await until(
      () => receiver.inFlightNow >= 4,
      10_000,
      () => 'no deliveries in flight to kill a worker during',
      1,
    );
    const victim = workers[1]!;
    await victim.stop('SIGKILL');
    const deliveredAtKill = receiver.count;
    const heldByKilledWorker = await count(
      `SELECT count(*) FROM webhook_deliveries WHERE status IN ('pending', 'failed') AND leased_until > $1`,
      [new Date().toISOString()],
    );
    log(
      `  killed worker ${victim.pid} with SIGKILL after ${deliveredAtKill} deliveries; ${heldByKilledWorker} deliveries leased at that moment (by any worker)`,
    );

    // The outbox drains and nothing is left pending.
    let state = { outbox: 0, unfinished: 0 };
    const drainStarted = Date.now();
    const deadline = Date.now() + 300_000;
    for (;;) {
      state = {
        outbox: await count('SELECT count(*) FROM webhook_outbox'),
        unfinished: await count("SELECT count(*) FROM webhook_deliveries WHERE status IN ('pending', 'failed')"),
      };
      if (state.outbox === 0 && state.unfinished === 0) break;
      if (Date.now() > deadline) throw new Error(`deliveries not drained: ${JSON.stringify(state)}`);
      await sleep(100);
    }
    log(`  outbox and deliveries drained ${Date.now() - drainStarted} ms after the kill`);
    await until(
      () => receiver.inFlightNow === 0,
      10_000,
      () => 'requests still in flight at the receiver',
    );

    // Every change reached the receiver.
    const rows = (await db.query('SELECT store_id, product_id, change_type FROM changes')).rows as {
      store_id: number;
      product_id: number;
      change_type: string;
    }[];
    const delivered = new Set<string>();
    const bodies = new Map<string, number>();
    for (const request of receiver.requests) {
      for (const id of request.payload.product_ids) delivered.add(`${request.payload.event}:${request.payload.store_id}:${id}`);
      const body = request.rawBody.toString('utf8');
      bodies.set(body, (bodies.get(body) ?? 0) + 1);
    }
    const missing = rows.filter((c) => !delivered.has(`${c.change_type}:${c.store_id}:${c.product_id}`));
    if (missing.length > 0)
      throw new Error(
        `${missing.length} of ${rows.length} changes never reached the receiver, e.g. ${JSON.stringify(missing.slice(0, 5))}`,
      );
    // A delivery's body is fixed at its claim (occurred_at included): the same body twice is the same delivery sent twice.
    const sentTwice = [...bodies.values()].filter((n) => n > 1).length;
    const deliveries = await count('SELECT count(*) FROM webhook_deliveries');
    const succeeded = await count("SELECT count(*) FROM webhook_deliveries WHERE status = 'succeeded'");
    if (succeeded !== deliveries) throw new Error(`${deliveries - succeeded} of ${deliveries} deliveries did not succeed`);
    if (bodies.size !== deliveries) throw new Error(`${deliveries} deliveries, but ${bodies.size} distinct payloads reached the receiver`);
    // Only what the killed worker held can go twice: its attempts awaiting answers (the endpoint's
    // concurrency at most) and its answered successes not yet recorded (OUTCOMES_PER_TRANSACTION at most).
    if (sentTwice > Number(common.CPS_WEBHOOK_ENDPOINT_CONCURRENCY) + OUTCOMES_PER_TRANSACTION || sentTwice > heldByKilledWorker) {
      throw new Error(
        `${sentTwice} deliveries were sent twice: more than the killed worker can have held (${heldByKilledWorker} leased at the kill)`,
      );
    }
    const retried = await count('SELECT count(*) FROM webhook_deliveries WHERE attempts > 1');
    log(
      `  the receiver saw all ${rows.length} changes: ${deliveries} deliveries, ${receiver.count} requests, ` +
        `${sentTwice} deliveries sent twice (their lease ran out with the killed worker; ${retried} recorded with a second attempt)`,
    );

    // The full recompute, in a process of its own.
    const report = await new Promise<ConsistencyReport>((resolve, reject) => {
      execFile(
        process.execPath,
        ['--import', 'tsx', path.join(ROOT, 'test', 'faults', 'verify-process.ts'), url],
        { cwd: ROOT, maxBuffer: 64 * 1024 * 1024 },
        (error, stdout, stderr) => (error ? reject(new Error(`${error.message}\n${stderr}`)) : resolve(JSON.parse(stdout))),
      );
    });
    if (report.problemCount > 0) throw new Error(`full recompute: ${report.problemCount} problems:\n${report.problems.join('\n')}`);
    log(`  full recompute: ${report.payloadsCompared} payloads equal to the stored ones; ${report.changes} changes agree with them`);
    return { changes: rows.length, deliveries, requests: receiver.count, sentTwice, heldByKilledWorker, deliveredAtKill };
  } finally {
    await Promise.all(processes.map((p) => p.stop('SIGKILL')));
    await receiver.close().catch(() => {});
    await db.end();
    await server?.stop('immediate');
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
