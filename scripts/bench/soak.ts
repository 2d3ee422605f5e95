// `npm run soak`: the real service in a child process on 127.0.0.1 under mixed load for a while —
// reads from a few concurrent clients (list pages, lookups by ids, prices, single products, feed
// polls, stores), product upserts at a steady rate with an occasional exchange-rate change, and the
// webhook deliveries they cause flowing to a local receiver that checks every signature. Reports
// every few seconds and ends with a verdict on errors (target 0) and on the service's RSS (target:
// flat), then drains the deliveries, stops the service with SIGTERM and runs the full recompute.
// It also scrapes the service's /metrics with each report (feed lag) and at the end (what the
// service itself counted: 5xx answers, deliveries by outcome), so the metrics are checked too.
// Every request goes to 127.0.0.1; every loop is bounded by the deadline; it stops by itself.
// Each reader has an API key of its own and reads at SOAK_READ_RPS / SOAK_READERS (50/s by default,
// the default per-key rate limit, which paced requests never exceed); a 429 counts as an error.
// The service gets this process's environment, so CPS_* settings (e.g. the rate limit) apply.
//   SOAK_SECONDS (180: RSS needs a few minutes to settle)  SOAK_PRODUCTS (5000)  SOAK_READERS (4)  SOAK_READ_RPS (200, all readers)
//   SOAK_WRITE_RPS (5)  SOAK_RATE_EVERY_SECONDS (20)  SOAK_REPORT_SECONDS (10)
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { buildDemoCatalog, demoProduct } from '../../src/admin/demo.js';
import { verifyCatalog } from '../../test/support/verify.js';
import { openSqliteStorage } from '../../src/storage/sqlite/index.js';
import { loadConfig } from '../../src/config.js';
import { createService } from '../../src/service.js';
import { ServiceProcess, freePort, killAllServices, sleep } from '../../test/faults/harness.js';
import { sample, total } from '../../test/support/metrics.js';
import { signatureMatches } from '../../test/support/receiver.js';

function setting(name: string, fallback: number): number {
  const value = Number(process.env[name] ?? fallback);
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${name} must be a positive number`);
  return value;
}

const SECONDS = setting('SOAK_SECONDS', 180);
const PRODUCTS = Math.floor(setting('SOAK_PRODUCTS', 5000));
const READERS = Math.floor(setting('SOAK_READERS', 4));
const READ_RPS = setting('SOAK_READ_RPS', 200);
const WRITE_RPS = setting('SOAK_WRITE_RPS', 5);
const RATE_EVERY_SECONDS = setting('SOAK_RATE_EVERY_SECONDS', 20);
const REPORT_SECONDS = setting('SOAK_REPORT_SECONDS', 10);
const ADMIN_TOKEN = 'adm_soak_token_0123456789abcdef';
const STORES = ['de', 'pl', 'uk'];

process.on('exit', killAllServices);

/** Deterministic choices, so two runs put the same load on the service. */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// ---- measurements ---------------------------------------------------------------------------

interface Interval {
  requests: number;
  reads: number[];
  writes: number[];
  errors: number;
  errorSamples: string[];
}

const fresh = (): Interval => ({ requests: 0, reads: [], writes: [], errors: 0, errorSamples: [] });
let interval = fresh();
const totals = {
  requests: 0,
  reads: 0,
  writes: 0,
  errors: 0,
  rateChanges: 0,
  readLatencies: [] as number[],
  writeLatencies: [] as number[],
};
const rssSamples: { at: number; kib: number }[] = [];

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

function recordError(what: string): void {
  interval.errors++;
  totals.errors++;
  if (interval.errorSamples.length < 3) interval.errorSamples.push(what);
}

/** One request; its latency counts as a read or a write; anything but 2xx/304 is an error. */
async function timed(kind: 'read' | 'write', url: string, init: RequestInit): Promise<any> {
  const started = performance.now();
  interval.requests++;
  totals.requests++;
  try {
    const response = await fetch(url, init);
    const text = await response.text();
    const ms = performance.now() - started;
    (kind === 'read' ? interval.reads : interval.writes).push(ms);
    (kind === 'read' ? totals.readLatencies : totals.writeLatencies).push(ms);
    if (kind === 'read') totals.reads++;
    else totals.writes++;
    if (response.status >= 300 && response.status !== 304) {
      recordError(`${init.method ?? 'GET'} ${url.replace(/^http:\/\/[^/]+/, '')} -> ${response.status} ${text.slice(0, 200)}`);
      return undefined;
    }
    return text ? JSON.parse(text) : undefined;
  } catch (error) {
    recordError(`${init.method ?? 'GET'} ${url.replace(/^http:\/\/[^/]+/, '')} -> ${(error as Error).message}`);
    return undefined;
  }
}

/** Runs `step` about `perSecond` times a second until the deadline (closed loop: never more than one at a time). */
async function paced(perSecond: number, deadline: number, step: (i: number) => Promise<void>): Promise<void> {
  const start = Date.now();
  const gap = 1000 / perSecond;
  const most = Math.ceil(perSecond * SECONDS) + 1;
  for (let i = 0; i < most && Date.now() < deadline; i++) {
    const due = start + i * gap;
    if (due > Date.now()) await sleep(due - Date.now());
    if (Date.now() >= deadline) return;
    await step(i);
  }
}

// ---- the webhook receiver -------------------------------------------------------------------

/** A receiver on 127.0.0.1 that checks each delivery's signature and remembers what it announced. */
async function startReceiver() {
  const state = { secret: '', deliveries: 0, invalid: 0, seen: new Set<string>() };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const timestamp = String(req.headers['x-service-timestamp']);
      const signature = String(req.headers['x-service-signature']);
      if (!signatureMatches(state.secret, timestamp, body, signature)) {
        state.invalid++;
        res.writeHead(400).end();
        return;
      }
      const payload = JSON.parse(body.toString('utf8')) as { event: string; store_id: number | null; product_ids: number[] };
      state.deliveries++;
      for (const id of payload.product_ids) state.seen.add(`${payload.event}:${payload.store_id}:${id}`);
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks/catalog`;
  return {
    state,
    url,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

// ---- the run --------------------------------------------------------------------------------

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-soak-'));
const database = path.join(dir, 'catalog.db');
const log = (line: string) => console.log(line);

log(
  `Soak: ${SECONDS} s, ${PRODUCTS} products in ${STORES.length} stores, ${READERS} readers at ${READ_RPS} req/s in all, ` +
    `${WRITE_RPS} product upserts/s, an exchange-rate change every ${RATE_EVERY_SECONDS} s, report every ${REPORT_SECONDS} s`,
);
const setupStarted = Date.now();
const seed = createService(loadConfig({}, { databasePath: database }));
const demo = await buildDemoCatalog(seed.admin, PRODUCTS);
await seed.close();

const receiver = await startReceiver();
const port = await freePort();
const base = `http://127.0.0.1:${port}`;
const service = await ServiceProcess.start({
  CPS_DB_PATH: database,
  CPS_PORT: String(port),
  CPS_HOST: '127.0.0.1',
  CPS_ADMIN_TOKEN: ADMIN_TOKEN,
  CPS_DEMO_ON_EMPTY: 'false',
  CPS_IMAGE_MIRRORING: 'false',
  CPS_WEBHOOK_ALLOW_HOSTS: '127.0.0.1',
});
const adminHeaders = { Authorization: `Bearer ${ADMIN_TOKEN}`, 'Content-Type': 'application/json' };
const merchantPath = `${base}/admin/v1/merchants/${demo.merchant_id}`;
async function adminSetup(method: string, url: string, body: unknown): Promise<any> {
  const response = await fetch(url, { method, headers: adminHeaders, body: JSON.stringify(body) });
  if (!response.ok) throw new Error(`${method} ${url}: ${response.status} ${await response.text()}`);
  return response.json();
}
const endpoint = await adminSetup('POST', `${merchantPath}/webhook-endpoints`, { url: receiver.url });
receiver.state.secret = endpoint.secret;
// One API key per reader, as separate integrators would have.
const keys: string[] = [];
for (let r = 0; r < READERS; r++) keys.push((await adminSetup('POST', `${merchantPath}/api-keys`, { name: `soak-reader-${r}` })).key);
log(`Setup in ${((Date.now() - setupStarted) / 1000).toFixed(1)} s: serve pid ${service.pid} on ${base}, receiver ${receiver.url}`);

const probe = new Database(database, { fileMustExist: true, readonly: true });
// Changes up to here (the demo catalog's) predate the endpoint: the receiver is owed the later ones.
const changesBefore = probe.prepare('SELECT coalesce(max(id), 0) FROM changes').pluck().get() as number;
const backlog = () => ({
  outbox: probe.prepare('SELECT count(*) FROM webhook_outbox').pluck().get() as number,
  unfinished: probe.prepare("SELECT count(*) FROM webhook_deliveries WHERE status IN ('pending', 'failed')").pluck().get() as number,
});

const scrape = async () => (await fetch(`${base}/metrics`)).text();
let maxFeedLag = 0;

const started = Date.now();
const deadline = started + SECONDS * 1000;
const lastPage = Math.ceil(PRODUCTS / 50);

async function reader(r: number): Promise<void> {
  const random = seeded(1000 + r);
  const pick = (n: number) => 1 + Math.floor(random() * n);
  const headers = { Authorization: `Bearer ${keys[r]}` };
  const cursors = new Map<string, { since: string; since_id: number }>();
  const ids = (n: number) => Array.from({ length: n }, () => pick(PRODUCTS)).join(',');
  await paced(READ_RPS / READERS, deadline, async () => {
    const store = STORES[Math.floor(random() * STORES.length)]!;
    const roll = random();
    if (roll < 0.4) {
      await timed('read', `${base}/v1/products?store=${store}&per_page=50&page=${pick(lastPage)}`, { headers });
    } else if (roll < 0.6) {
      await timed('read', `${base}/v1/products?store=${store}&ids=${ids(20)}`, { headers });
    } else if (roll < 0.7) {
      await timed('read', `${base}/v1/prices?store=${store}&ids=${ids(50)}`, { headers });
    } else if (roll < 0.8) {
      await timed('read', `${base}/v1/products/${pick(PRODUCTS)}?store=${store}`, { headers });
    } else if (roll < 0.95) {
      // A feed poll from this reader's cursor for the store (the first poll starts from the beginning).
      const cursor = cursors.get(store);
      const query = cursor ? `&since=${encodeURIComponent(cursor.since)}&since_id=${cursor.since_id}` : '';
      const page = await timed('read', `${base}/v1/changes?store=${store}${query}`, { headers });
      if (page) cursors.set(store, { since: page.next_since, since_id: page.next_id });
    } else {
      await timed('read', `${base}/v1/stores`, { headers });
    }
  });
}

async function writer(): Promise<void> {
  const random = seeded(7);
  await paced(WRITE_RPS, deadline, async (i) => {
    const n = 1 + Math.floor(random() * PRODUCTS);
    const { ref, source } = demoProduct(n);
    // A new stock level and cost: usually a price and a content change in every store.
    const offers = source.offers.map((o, k) =>
      k === 0 ? { ...o, quantity: (o.quantity + i) % 50, cost: (Number(o.cost) + (i % 7) / 10).toFixed(2) } : o,
    );
    await timed('write', `${merchantPath}/products/${ref}`, {
      method: 'PUT',
      headers: adminHeaders,
      body: JSON.stringify({ ...source, offers }),
    });
  });
}

async function rateChanger(): Promise<void> {
  await paced(1 / RATE_EVERY_SECONDS, deadline, async (i) => {
    if (i === 0) return; // the first change comes one period in
    totals.rateChanges++;
    await timed('write', `${merchantPath}/exchange-rates/EUR/PLN`, {
      method: 'PUT',
      headers: adminHeaders,
      body: JSON.stringify({ rate: i % 2 ? '4.3015' : '4.2715' }),
    });
  });
}

async function reporter(): Promise<void> {
  const header =
    '  time | requests |   req/s | errors | read p50 |  read p99 | write p50 | write p99 |    RSS | deliveries | backlog | feed lag';
  log(header);
  let last = Date.now();
  let deliveredBefore = 0;
  let nextReport = started + REPORT_SECONDS * 1000;
  while (Date.now() < deadline) {
    await sleep(Math.min(1000, Math.max(0, deadline - Date.now())));
    const kib = service.rssKib();
    if (kib !== undefined) rssSamples.push({ at: Date.now() - started, kib });
    if (Date.now() < nextReport && Date.now() < deadline) continue;
    nextReport += REPORT_SECONDS * 1000;
    const now = Date.now();
    const { requests, reads, writes, errors, errorSamples } = interval;
    interval = fresh();
    reads.sort((a, b) => a - b);
    writes.sort((a, b) => a - b);
    const { outbox, unfinished } = backlog();
    const feedLag = sample(await scrape(), 'cps_feed_lag_seconds') ?? Number.NaN;
    maxFeedLag = Math.max(maxFeedLag, feedLag);
    const ms = (v: number) => `${v.toFixed(1)} ms`;
    log(
      [
        `${String(Math.round((now - started) / 1000)).padStart(4)} s`,
        String(requests).padStart(8),
        ((requests * 1000) / (now - last)).toFixed(0).padStart(7),
        String(errors).padStart(6),
        ms(percentile(reads, 50)).padStart(8),
        ms(percentile(reads, 99)).padStart(9),
        ms(percentile(writes, 50)).padStart(9),
        ms(percentile(writes, 99)).padStart(9),
        `${((kib ?? 0) / 1024).toFixed(0)} MiB`.padStart(6),
        String(receiver.state.deliveries - deliveredBefore).padStart(10),
        String(outbox + unfinished).padStart(7),
        `${feedLag.toFixed(1)} s`.padStart(8),
      ].join(' | '),
    );
    for (const sample of errorSamples) log(`         error: ${sample}`);
    deliveredBefore = receiver.state.deliveries;
    last = now;
  }
}

await Promise.all([...Array.from({ length: READERS }, (_, r) => reader(r)), writer(), rateChanger(), reporter()]);
const elapsedSeconds = (Date.now() - started) / 1000;

// ---- the end: drain, stop, recompute, verdict ---------------------------------------------

const drainStarted = Date.now();
let left = backlog();
while ((left.outbox > 0 || left.unfinished > 0) && Date.now() - drainStarted < 30_000) {
  await sleep(250);
  left = backlog();
}
probe.close();
const drainedMs = Date.now() - drainStarted;
// What the service counted itself, before it stops.
const metrics = await scrape();
const served5xx = total(metrics, 'cps_http_request_duration_seconds_count', (labels) => labels.status!.startsWith('5'));
const servedRequests = total(metrics, 'cps_http_request_duration_seconds_count');
const deliveriesByOutcome = Object.fromEntries(
  ['succeeded', 'failed', 'given_up', 'dropped'].map((outcome) => [
    outcome,
    sample(metrics, 'cps_webhook_deliveries_total', { outcome }) ?? 0,
  ]),
);
const feedLagAfterDrain = sample(metrics, 'cps_feed_lag_seconds') ?? Number.NaN;
const finalRss = service.rssKib();
const stopStarted = Date.now();
await service.stop('SIGTERM');
const stopMs = Date.now() - stopStarted;
const exitedCleanly = service.child.exitCode === 0;
await receiver.close();

const storage = openSqliteStorage(database);
const consistency = await verifyCatalog(storage);
const changes = storage.db.prepare('SELECT store_id, product_id, change_type FROM changes WHERE id > ?').all(changesBefore) as {
  store_id: number;
  product_id: number;
  change_type: string;
}[];
await storage.close();
const unseen = changes.filter(
  (c) =>
    !receiver.state.seen.has(`${c.change_type}:${c.store_id}:${c.product_id}`) &&
    !(c.change_type === 'removed' && receiver.state.seen.has(`removed:null:${c.product_id}`)),
).length;

totals.readLatencies.sort((a, b) => a - b);
totals.writeLatencies.sort((a, b) => a - b);
const third = Math.floor(rssSamples.length / 3);
const average = (samples: { kib: number }[]) => samples.reduce((s, x) => s + x.kib, 0) / Math.max(1, samples.length);
const middle = average(rssSamples.slice(third, 2 * third));
const lastThird = average(rssSamples.slice(2 * third));
const rssRatio = lastThird / middle;
const rssFlat = rssSamples.length >= 3 && rssRatio <= 1.1;
const requests = totals.requests;

log('');
log(
  `Totals over ${elapsedSeconds.toFixed(1)} s: ${requests} requests (${(requests / elapsedSeconds).toFixed(0)}/s: ${totals.reads} reads, ` +
    `${totals.writes} writes of which ${totals.rateChanges} exchange-rate changes), ${totals.errors} errors`,
);
log(
  `  reads:  p50 ${percentile(totals.readLatencies, 50).toFixed(1)} ms, p99 ${percentile(totals.readLatencies, 99).toFixed(1)} ms, max ${(totals.readLatencies.at(-1) ?? 0).toFixed(1)} ms`,
);
log(
  `  writes: p50 ${percentile(totals.writeLatencies, 50).toFixed(1)} ms, p99 ${percentile(totals.writeLatencies, 99).toFixed(1)} ms, max ${(totals.writeLatencies.at(-1) ?? 0).toFixed(1)} ms`,
);
log(
  `  deliveries: ${receiver.state.deliveries} received, ${receiver.state.invalid} with a bad signature; backlog drained ${drainedMs} ms after the load ` +
    `(${left.outbox + left.unfinished} left); ${changes.length - unseen} of ${changes.length} changes recorded during the soak reached the receiver`,
);
log(
  `  RSS: first ${((rssSamples[0]?.kib ?? 0) / 1024).toFixed(1)} MiB, middle third ${(middle / 1024).toFixed(1)} MiB, ` +
    `last third ${(lastThird / 1024).toFixed(1)} MiB (x${rssRatio.toFixed(3)}), at the end ${((finalRss ?? 0) / 1024).toFixed(1)} MiB`,
);
log(
  `  the service's /metrics: ${servedRequests} requests counted, ${served5xx} answered 5xx; deliveries ${JSON.stringify(deliveriesByOutcome)}; ` +
    `feed lag at most ${maxFeedLag.toFixed(1)} s at the reports, ${feedLagAfterDrain} s after the drain`,
);
log(`  SIGTERM: exited ${exitedCleanly ? 'with 0' : `with ${service.child.exitCode ?? service.child.signalCode}`} in ${stopMs} ms`);
log(
  `  full recompute: ${consistency.payloadsCompared} payloads, ${consistency.changes} changes, ${consistency.deliveriesCovered} outbox/delivery pairs, ${consistency.problemCount} problems`,
);
for (const problem of consistency.problems.slice(0, 5)) log(`    ${problem}`);
const verdicts = [
  [`errors: ${totals.errors} (target 0)`, totals.errors === 0],
  [`5xx counted by the service's /metrics: ${served5xx} (target 0)`, served5xx === 0],
  [
    `deliveries the service counted as succeeded equal those received: ${deliveriesByOutcome.succeeded} / ${receiver.state.deliveries}`,
    deliveriesByOutcome.succeeded === receiver.state.deliveries,
  ],
  [`RSS ${rssFlat ? 'flat' : 'growing'}: last third / middle third = ${rssRatio.toFixed(3)} (target <= 1.10)`, rssFlat],
  [`every change delivered at least once: ${unseen === 0 ? 'yes' : `${unseen} not`}`, unseen === 0 && receiver.state.invalid === 0],
  [`consistent with a full recompute: ${consistency.problemCount === 0 ? 'yes' : 'no'}`, consistency.problemCount === 0],
  [`clean shutdown on SIGTERM: ${exitedCleanly ? 'yes' : 'no'}`, exitedCleanly],
] as const;
log('Verdict:');
for (const [text, ok] of verdicts) log(`  ${ok ? 'PASS' : 'FAIL'} ${text}`);
fs.rmSync(dir, { recursive: true, force: true });
process.exit(verdicts.every(([, ok]) => ok) ? 0 : 1);
