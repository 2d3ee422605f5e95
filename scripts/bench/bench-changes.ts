// `npm run bench:changes`: the costs of change tracking, measured side by side in one run.
// 1. Feed window latency against history size: one merchant with two stores, one with 10k change
//    rows of history and one with 1M, served by the real server in a child process; the latency
//    of one full feed window (1000 changes) from a cursor in the middle of each history,
//    interleaved. Target: 1M / 10k <= 1.3 (the cost follows the window, not the history).
// 2. An exchange-rate change that re-prices 100k products (in the stores priced in either of its
//    currencies) and records their changes, in one transaction. Target: <= 30 s here.
import { fork } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildDemoCatalog } from '../../src/admin/demo.js';
import { loadConfig } from '../../src/config.js';
import { WEBHOOK_EVENTS } from '../../src/generated/public-webhooks.js';
import { createService } from '../../src/service.js';
import type { SqliteStorage } from '../../src/storage/sqlite/index.js';
import { wholeSecondIso } from '../../src/shared/time.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const SMALL = Number(process.env.BENCH_SMALL_HISTORY ?? 10_000);
const LARGE = Number(process.env.BENCH_LARGE_HISTORY ?? 1_000_000);
const REQUESTS = Number(process.env.BENCH_FEED_REQUESTS ?? 300);
const PRODUCTS = Number(process.env.BENCH_PRODUCTS ?? 100_000);

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const p99 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * 0.99)]!;

/** Appends `count` changes to a store's history: distinct products, many per second. */
function fillHistory(storage: SqliteStorage, merchantId: number, storeId: number, count: number, start: Date): void {
  const insert = storage.db.prepare(
    'INSERT INTO changes (merchant_id, id, store_id, product_id, change_type, created_at) VALUES (?, ?, ?, ?, ?, ?)',
  );
  const kinds = WEBHOOK_EVENTS;
  // Straight into the table, on the write connection: building a history, not recording changes;
  // the merchant's sequencer row goes on from the ids written (ChangeStore.recordChanges).
  storage.db.transaction(() => {
    const sequence = storage.db.prepare('SELECT last_id FROM change_sequences WHERE merchant_id = ?').pluck().get(merchantId) as
      | number
      | undefined;
    let id = sequence ?? 0;
    let at = '';
    for (let i = 0; i < count; i++) {
      // 500 changes per second of history; product ids cycle so a window holds 1000 distinct ones.
      at = wholeSecondIso(start.getTime() + Math.floor(i / 500) * 1000);
      insert.run(merchantId, ++id, storeId, 1 + (i % 50_000), kinds[i % kinds.length], at);
    }
    storage.db
      .prepare(`INSERT INTO change_sequences (merchant_id, last_id, last_at) VALUES (?, ?, ?)
      ON CONFLICT (merchant_id) DO UPDATE SET last_id = excluded.last_id, last_at = max(last_at, excluded.last_at)`)
      .run(merchantId, id, at);
  })();
}

async function feedLatency(dir: string): Promise<void> {
  const databasePath = path.join(dir, 'feed.db');
  const service = createService(loadConfig({}, { databasePath }));
  const { admin } = service;
  const storage = service.storage as SqliteStorage;
  const merchant = await admin.createMerchant({ name: 'Feed bench' });
  const small = await admin.upsertStore(merchant.id, 'small', {
    name: 'Small history',
    locale: 'en-GB',
    currency: 'EUR',
    is_default: true,
    active: true,
    exclude_out_of_stock: false,
  });
  const large = await admin.upsertStore(merchant.id, 'large', {
    name: 'Large history',
    locale: 'en-GB',
    currency: 'EUR',
    is_default: false,
    active: true,
    exclude_out_of_stock: false,
  });
  console.log(`feed: writing ${SMALL} and ${LARGE} change rows of history ...`);
  const start = new Date('2026-11-01T00:00:00Z');
  fillHistory(storage, merchant.id, small.id, SMALL, start);
  fillHistory(storage, merchant.id, large.id, LARGE, start);
  const { key } = await admin.createApiKey(merchant.id, 'bench');
  // A cursor in the middle of each history: the next window is full.
  const cursorOf = (storeId: number, count: number) =>
    storage.db
      .prepare('SELECT created_at AS since, id FROM changes WHERE store_id = ? ORDER BY created_at, id LIMIT 1 OFFSET ?')
      .get(storeId, Math.floor(count / 2)) as { since: string; id: number };
  const cursors = { small: cursorOf(small.id, SMALL), large: cursorOf(large.id, LARGE) };
  await service.close();

  const child = fork(path.join(here, 'bench-server.ts'), [databasePath], { execArgv: ['--import', 'tsx'], stdio: 'inherit' });
  const port: number = await new Promise((resolve) => child.once('message', (m: { port: number }) => resolve(m.port)));
  const headers = { Authorization: `Bearer ${key}` };
  const url = (store: 'small' | 'large') =>
    `http://127.0.0.1:${port}/v1/changes?store=${store}&since=${cursors[store].since}&since_id=${cursors[store].id}`;
  try {
    const times: Record<'small' | 'large', number[]> = { small: [], large: [] };
    for (let i = 0; i < REQUESTS + 20; i++) {
      for (const store of ['small', 'large'] as const) {
        const t = performance.now();
        const response = await fetch(url(store), { headers });
        const body = (await response.json()) as { changes: unknown[] };
        const elapsed = performance.now() - t;
        if (response.status !== 200 || body.changes.length !== 1000)
          throw new Error(`${store}: ${response.status}, ${body.changes.length} changes`);
        if (i >= 20) times[store].push(elapsed); // the first 20 rounds warm up
      }
    }
    const [s, l] = [median(times.small), median(times.large)];
    console.log(`feed window of 1000 changes, ${REQUESTS} requests each, interleaved:`);
    console.log(`  history ${SMALL}: median ${s.toFixed(2)} ms, p99 ${p99(times.small).toFixed(2)} ms`);
    console.log(`  history ${LARGE}: median ${l.toFixed(2)} ms, p99 ${p99(times.large).toFixed(2)} ms`);
    console.log(`  ratio ${LARGE} / ${SMALL} = ${(l / s).toFixed(2)}  (target <= 1.3)`);
  } finally {
    child.kill();
  }
}

async function exchangeRateRepricing(dir: string): Promise<void> {
  const service = createService(loadConfig({}, { databasePath: path.join(dir, 'reprice.db') }));
  const { admin } = service;
  const storage = service.storage as SqliteStorage;
  console.log(`re-pricing: building ${PRODUCTS} products in 3 stores ...`);
  const { merchant_id: merchantId } = await buildDemoCatalog(admin, PRODUCTS);
  const before = storage.db.prepare('SELECT count(*) FROM changes').pluck().get() as number;
  const started = performance.now();
  await admin.upsertExchangeRate(merchantId, { base: 'EUR', quote: 'PLN', rate: '4.3120' });
  const seconds = (performance.now() - started) / 1000;
  const recorded = (storage.db.prepare('SELECT count(*) FROM changes').pluck().get() as number) - before;
  const stores = (await storage.listStores(merchantId)).filter((s) => ['EUR', 'PLN'].includes(s.currency)).length;
  console.log(
    `exchange-rate change EUR/PLN: re-resolved ${PRODUCTS} products in the ${stores} stores priced in EUR or PLN and recorded ${recorded} changes in ${seconds.toFixed(1)} s (target <= 30 s)`,
  );
  await service.close();
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-bench-changes-'));
try {
  await feedLatency(dir);
  await exchangeRateRepricing(dir);
} finally {
  fs.rmSync(dir, { recursive: true, force: true });
}
