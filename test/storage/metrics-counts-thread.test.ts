// /metrics' database gauges (storage `operationalCounts`) under `serve` with its workers in threads
// (the default): the workers thread reads them for each scrape on its own connections, so the
// thread that answers requests runs none of their statements, however many images wait behind a
// down origin (counting them visits up to CPS_METRICS_COUNT_MAX index entries). With
// CPS_WORKERS=inline the serving thread reads them itself. Which thread ran a statement shows in
// the slow-statement log: a worker thread's lines carry its `thread` name.
import Database from 'better-sqlite3';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterEach, describe, expect } from 'vitest';
import { freePort, ServiceProcess, until } from '../faults/harness.js';
import { createTestDatabase, severalConnections, type TestDatabase } from '../support/engine.js';
import { sample } from '../support/metrics.js';

const ADMIN_TOKEN = 'adm_metrics_counts_thread';
const ORIGIN = 'https://img.example.test';
/** Enough pending images that counting them takes well over CPS_SLOW_STATEMENT_MS=1 on either engine. */
const WAITING = 40_000;

let service: ServiceProcess | undefined;
let database: TestDatabase | undefined;
let dir: string | undefined;

afterEach(async () => {
  await service?.stop('SIGKILL');
  service = undefined;
  await database?.drop();
  database = undefined;
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

/** Runs SQL on the database from this process (another connection than the serve's). */
async function execute(db: TestDatabase, sql: string): Promise<void> {
  if (db.engine === 'sqlite') {
    const connection = new Database(db.location);
    try {
      connection.pragma('busy_timeout = 10000');
      connection.exec(sql);
    } finally {
      connection.close();
    }
    return;
  }
  const client = new pg.Client({ connectionString: db.location });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/** A serve on a fresh database with a merchant whose WAITING pending images are on a down origin; returns its base URL. */
async function serveWithDownOrigin(workers: 'thread' | 'inline'): Promise<string> {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-metrics-counts-'));
  database = await createTestDatabase(dir);
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  service = await ServiceProcess.start({
    ...database.env,
    CPS_MEDIA_DIR: path.join(dir, 'media'),
    CPS_PORT: String(port),
    CPS_HOST: '127.0.0.1',
    CPS_ADMIN_TOKEN: ADMIN_TOKEN,
    CPS_DEMO_ON_EMPTY: 'false',
    CPS_WORKERS: workers,
    CPS_METRICS_COUNT_MAX: String(10 * WAITING),
    CPS_SLOW_STATEMENT_MS: '1',
  });
  await until(
    () => service!.output.includes('"msg":"listening"'),
    15_000,
    () => service!.output,
  );
  const response = await fetch(`${base}/admin/v1/merchants`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${ADMIN_TOKEN}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ name: 'Down Origin Outfitters' }),
  });
  expect(response.status).toBe(201);
  const merchantId = ((await response.json()) as { id: number }).id;
  // Pending images of the origin (not listed by a product: they wait all the same), and the origin
  // marked down with its next probe an hour away (nothing of it is attempted meanwhile).
  const at = new Date().toISOString();
  const probe = new Date(Date.now() + 3_600_000).toISOString();
  await execute(
    database,
    `INSERT INTO image_mirrors (merchant_id, url, state, updated_at, origin, next_attempt_at)
     WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${WAITING})
     SELECT ${merchantId}, '${ORIGIN}/' || i || '.jpg', 'pending', '${at}', '${ORIGIN}', '${probe}' FROM n;
     INSERT INTO image_origins (merchant_id, origin, failures, down_since, next_probe_at, probe_ms, last_error)
     VALUES (${merchantId}, '${ORIGIN}', 20, '${at}', '${probe}', 3600000, 'blocked_address');`,
  );
  return base;
}

/** The slow-statement log lines of the operational counts, as parsed JSON. */
const countLines = () =>
  service!.output
    .split('\n')
    .filter((line) => line.includes('"msg":"slow statement"') && line.includes('"statement":"storage.operationalCounts"'))
    .map((line) => JSON.parse(line) as { thread?: string });

describe("/metrics' database gauges under serve's worker threads", () => {
  severalConnections.it(
    'are read by the workers thread: the serving thread runs none of their statements, however many images wait on a down origin',
    async () => {
      const base = await serveWithDownOrigin('thread');
      for (let scrape = 0; scrape < 3; scrape++) {
        const metrics = await (await fetch(`${base}/metrics`)).text();
        // The counts mean what they meant: every waiting image, the origin down.
        expect(sample(metrics, 'cps_images_waiting_on_down_origins')).toBe(WAITING);
        expect(sample(metrics, 'cps_image_origins', { state: 'down' })).toBe(1);
      }
      // The count of 40,000 index entries is logged as slow (> 1 ms) wherever it ran: in the thread.
      await until(
        () => countLines().length > 0,
        5000,
        () => service!.output.slice(-3000),
      );
      expect(countLines().every((line) => line.thread === 'workers')).toBe(true);
    },
    60_000,
  );

  severalConnections.it(
    'are read by the serving thread with CPS_WORKERS=inline (what the workers thread takes off it)',
    async () => {
      const base = await serveWithDownOrigin('inline');
      const metrics = await (await fetch(`${base}/metrics`)).text();
      expect(sample(metrics, 'cps_images_waiting_on_down_origins')).toBe(WAITING);
      expect(countLines().length).toBeGreaterThan(0);
      expect(countLines().every((line) => line.thread === undefined)).toBe(true);
    },
    60_000,
  );
});
