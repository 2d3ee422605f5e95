// `npx tsx scripts/bench/bench-delivery-statements.ts [--deliveries N (2400)] [--explain]`: the database's
// CPU per delivery of the claim-and-record path on PostgreSQL, without HTTP or a dispatcher around it.
// A throwaway server (scripts/dev/postgres-server.ts, pg_stat_statements loaded) migrated by the storage,
// one endpoint with N pending deliveries in a table never analyzed (as bench:cost's delivery unit
// finds it), then claims of up to 16 (4 per endpoint and 12 ahead, as the dispatcher's defaults
// claim) each followed by its successes recorded in one statement, until none is left. Prints the
// server's CPU per delivery (its processes, /proc) and its statements by total time (nested ones
// included: a function's and a trigger's statements appear on their own lines too). With --explain
// every statement over 1 ms is logged with its plan (auto_explain) in the server's log, kept.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { dataDirOf, startPostgresServer } from '../dev/postgres-server.js';
import { postgresServerCpu } from './process-sampler.js';
import { openPostgresStorage } from '../../src/storage/postgres/index.js';

const { values: flags } = parseArgs({ options: { deliveries: { type: 'string', default: '2400' }, explain: { type: 'boolean' } } });
const DELIVERIES = Number(flags.deliveries);
const explain = flags.explain
  ? [
      'auto_explain.log_min_duration=1',
      'auto_explain.log_analyze=on',
      'auto_explain.log_buffers=on',
      'auto_explain.log_nested_statements=on',
    ]
  : [];

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-delivery-statements-'));
// PostgreSQL runs as `postgres` when this process is root: it has to reach its folder in here.
fs.chmodSync(dir, 0o777);
const server = await startPostgresServer({
  dir,
  durable: false,
  settings: ['shared_preload_libraries=pg_stat_statements,auto_explain', 'pg_stat_statements.track=all', ...explain],
});
try {
  const storage = openPostgresStorage(server.url, { poolSize: 4 });
  await storage.ready;
  const client = new pg.Client(server.url);
  await client.connect();
  const q = (sql: string, values: unknown[] = []) => client.query(sql, values);
  await q('CREATE EXTENSION pg_stat_statements');
  const merchant = (await q(`INSERT INTO merchants (name, created_at) VALUES ('m', '2026-01-01T00:00:00Z') RETURNING id`)).rows[0].id;
  const endpoint = (
    await q(
      `INSERT INTO webhook_endpoints (merchant_id, url, events, secret, created_at)
      VALUES ($1, 'http://127.0.0.1:1/receiver', '["content"]', 'secret', '2026-01-01T00:00:00Z') RETURNING id`,
      [merchant],
    )
  ).rows[0].id as number;
  await q(
    `INSERT INTO webhook_deliveries (endpoint_id, event, store_id, product_ids, status, attempts, next_attempt_at, created_at)
    SELECT $1, 'content', NULL, '[1,2,3]', 'pending', 0, '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z' FROM generate_series(1, $2)`,
    [endpoint, DELIVERIES],
  );
  await q('SELECT pg_stat_statements_reset()');
  const cpu0 = postgresServerCpu(dataDirOf(server.dir));
  const started = performance.now();
  let delivered = 0;
  let claims = 0;
  for (;;) {
    const claimed = await storage.claimDueDeliveries({
      now: () => new Date(),
      leaseMs: 40_000,
      limit: 16,
      perEndpoint: 4,
      ahead: 12,
      inFlightByEndpoint: new Map(),
      perMerchant: 8,
    });
    if (claimed.length === 0) break;
    claims++;
    const at = new Date().toISOString();
    await storage.recordSuccessfulAttempts!(
      claimed.map((d) => ({
        deliveryId: d.id,
        attempt: {
          at,
          status_code: 200,
          error: null,
          latency_ms: 1,
          response_snippet: '',
          request_url: 'http://127.0.0.1:1/receiver',
          request_headers: {},
        },
        status: 'succeeded' as const,
        attempts: 1,
        next_attempt_at: null,
      })),
      [{ id: endpoint, lastSuccessAt: at }],
    );
    delivered += claimed.length;
  }
  const ms = performance.now() - started;
  const cpuMs = (postgresServerCpu(dataDirOf(server.dir)) - cpu0) / 1000;
  console.log(
    `${delivered} deliveries (${claims} claims) in ${ms.toFixed(0)} ms: database ${cpuMs.toFixed(0)} ms CPU, ${(cpuMs / delivered).toFixed(3)} ms a delivery`,
  );
  const { rows } = await q(
    `SELECT calls, total_exec_time AS ms, left(regexp_replace(query, '\\s+', ' ', 'g'), 100) AS query
    FROM pg_stat_statements WHERE calls > 0 AND query NOT LIKE '%pg_stat_statements%' ORDER BY total_exec_time DESC LIMIT 10`,
  );
  console.log('  calls  ms/call  statement');
  for (const r of rows) console.log(`  ${String(r.calls).padStart(5)}  ${(r.ms / r.calls).toFixed(3).padStart(7)}  ${r.query}`);
  await client.end();
  await storage.close();
} finally {
  await server.stop('immediate');
  if (flags.explain) console.log(`the server's log, with the plans: ${path.join(dir, 'log')}`);
  else fs.rmSync(dir, { recursive: true, force: true });
}
