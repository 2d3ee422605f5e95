// An endpoint's success-rate charts count its attempts per UTC hour and outcome. A
// trigger on the attempt log keeps those counts as attempts are recorded (migration 36), however
// they are recorded (one at a time, several in one statement, straight into the table), and a chart
// reads them in one statement over a primary-key range: on both engines its plan searches that key
// for the endpoint's window only (SQLite: SEARCH ... USING PRIMARY KEY; PostgreSQL: an index scan
// reading the window's rows, never the endpoint's older hours nor another endpoint's), however many
// attempts the log holds, and the counts are exact. Attempts recorded before migration 36 are
// counted by it, and notifications recorded before it end at their endpoint's first success after them.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { CatalogStorage } from '../../src/storage/port.js';
import type { AttemptHourRecord, AttemptOutcomeKind, NewAttempt } from '../../src/webhooks/model.js';
import { PgConnection } from '../../src/storage/postgres/connection.js';
import { SqliteConnection } from '../../src/storage/sqlite/connection.js';
import { attemptStatsRange, attemptWindows } from '../../src/webhooks/attempt-stats.js';
import { createTestDatabase, onPglite, TEST_ENGINE, type TestDatabase } from '../support/engine.js';

const AT = '2026-11-01T00:00:00.000Z';
const NOW = new Date('2026-11-26T09:30:00.000Z');
/**
 * What the statement must not read, in a log's usual proportions (it keeps weeks of history of many
 * endpoints): the charted endpoint's older attempts (one every 5 minutes for 69 days), and other
 * endpoints' attempts, a tenth of them inside the window.
 */
const OLDER = 20_000;
const OTHERS = 10;
const OTHERS_EACH = 2000;
/** The charted endpoint's attempts in the window: one every 30 minutes back from NOW. */
const CHARTED = 300;

let dir: string;
let database: TestDatabase;
let storage: CatalogStorage;
let merchantId: number;
let charted: number;
const expected: { at: string; outcome: AttemptOutcomeKind; latency: number }[] = [];

/** Runs SQL on the test database from another connection (SQLite `?`, PostgreSQL `$n` placeholders). */
async function raw(statement: string, params: unknown[] = [], location = database.location): Promise<Record<string, unknown>[]> {
  if (TEST_ENGINE === 'sqlite') {
    const db = new Database(location);
    try {
      const prepared = db.prepare(statement);
      if (prepared.reader) return prepared.all(...params) as Record<string, unknown>[];
      prepared.run(...params);
      return [];
    } finally {
      db.close();
    }
  }
  const client = new pg.Client(location);
  await client.connect();
  try {
    return (await client.query(statement, params)).rows;
  } finally {
    await client.end();
  }
}

/** `count` attempts of one delivery, `step` seconds apart from `from`, straight into the table (the trigger counts them). */
async function seedAttempts(endpointId: number, from: string, count: number, step = 300): Promise<void> {
  const delivery = await storage.insertDelivery({
    endpoint_id: endpointId,
    event: 'price',
    store_id: null,
    product_ids: [1],
    occurred_at: from,
    status: 'succeeded',
    attempts: 1,
    next_attempt_at: null,
    created_at: from,
  });
  if (TEST_ENGINE === 'sqlite') {
    await raw(
      `WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < ? - 1)
      INSERT INTO webhook_attempts (delivery_id, at, status_code, error, latency_ms)
      SELECT ?, strftime('%Y-%m-%dT%H:%M:%fZ', ?, '+' || (i * ?) || ' seconds'), 200, NULL, 10 FROM n`,
      [count, delivery.id, from, step],
    );
  } else {
    await raw(
      `INSERT INTO webhook_attempts (delivery_id, at, status_code, error, latency_ms)
      SELECT $1, to_char(($2::timestamptz + i * $4::integer * interval '1 second') AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), 200, NULL, 10
      FROM generate_series(0, $3::integer - 1) AS i`,
      [delivery.id, from, count, step],
    );
  }
}

const OUTCOMES: { outcome: AttemptOutcomeKind; status_code: number | null; error: string | null }[] = [
  ...Array.from({ length: 7 }, () => ({ outcome: 'succeeded' as const, status_code: 204, error: null })),
  { outcome: 'failed', status_code: 503, error: 'http_status' },
  { outcome: 'failed', status_code: 200, error: 'recording_failed' },
  { outcome: 'no_response', status_code: null, error: 'timeout' },
];

/** The hours and outcomes the charted endpoint's attempts in [from, to) add up to, as storage should count them. */
function expectedHours(from: string, to: string): AttemptHourRecord[] {
  const groups = new Map<string, AttemptHourRecord>();
  for (const a of expected.filter((e) => e.at >= from && e.at < to)) {
    const key = `${a.at.slice(0, 13)} ${a.outcome}`;
    const group = groups.get(key) ?? { hour: a.at.slice(0, 13), outcome: a.outcome, attempts: 0, latencySumMs: 0, latencyMaxMs: 0 };
    group.attempts += 1;
    group.latencySumMs += a.latency;
    group.latencyMaxMs = Math.max(group.latencyMaxMs, a.latency);
    groups.set(key, group);
  }
  return [...groups.values()].sort((x, y) => (x.hour === y.hour ? x.outcome.localeCompare(y.outcome) : x.hour.localeCompare(y.hour)));
}

/** The SQL attemptsPerHour runs (captured as the engine prepares or sends it). */
async function statementOfAttemptsPerHour(from: string, to: string): Promise<string> {
  const seen: string[] = [];
  const spy =
    TEST_ENGINE === 'sqlite'
      ? vi.spyOn(SqliteConnection.prototype, 'stmt').mockImplementation(function (this: SqliteConnection, sql: string) {
          seen.push(sql);
          return realStmt.call(this, sql);
        })
      : vi.spyOn(PgConnection.prototype, 'rows').mockImplementation(function (this: PgConnection, sql: string, values: unknown[] = []) {
          seen.push(sql);
          return realRows.call(this, sql, values);
        });
  try {
    await storage.attemptsPerHour(charted, from, to);
  } finally {
    spy.mockRestore();
  }
  const statements = seen.filter((sql) => /FROM webhook_attempt_hours/.test(sql));
  expect(statements).toHaveLength(1);
  return statements[0]!;
}
// The spies call these with their connection as `this` (realStmt.call(this, …)).
// eslint-disable-next-line @typescript-eslint/unbound-method -- called with its `this`, above
const realStmt = SqliteConnection.prototype.stmt;
// eslint-disable-next-line @typescript-eslint/unbound-method -- called with its `this`, above
const realRows = PgConnection.prototype.rows;

describe(`the attempt log per endpoint and hour (${TEST_ENGINE})`, () => {
  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-attempt-stats-'));
    database = await createTestDatabase(dir);
    storage = await database.open();
    merchantId = (await storage.createMerchant({ name: 'Charts', sku_pattern: null, owner_emails: [], created_at: AT })).id;
    const endpoint = () =>
      storage.createWebhookEndpoint({
        merchant_id: merchantId,
        url: 'https://hooks.example/catalog',
        store_id: null,
        events: ['price'],
        secret: 'whsec_x',
        created_at: AT,
      });
    charted = (await endpoint()).id;
    // What the statement must not read: the charted endpoint's older attempts, the other endpoints' attempts.
    await seedAttempts(charted, '2026-09-01T00:00:00.000Z', OLDER);
    for (let i = 0; i < OTHERS; i++) {
      const other = (await endpoint()).id;
      await seedAttempts(other, '2026-10-01T00:00:00.000Z', OTHERS_EACH * 0.9);
      await seedAttempts(other, '2026-11-24T00:00:00.000Z', OTHERS_EACH * 0.1);
    }
    // The charted endpoint's window, recorded as the dispatcher records attempts: one at a time, and several together.
    const outcomes: Parameters<CatalogStorage['recordAttemptOutcomes']>[0] = [];
    await storage.transaction(async (tx) => {
      for (let i = 0; i < CHARTED; i++) {
        const at = new Date(NOW.getTime() - i * 30 * 60_000).toISOString();
        const { outcome, status_code, error } = OUTCOMES[i % OUTCOMES.length]!;
        const latency = 5 + 10 * (i % 7);
        expected.push({ at, outcome, latency });
        const delivery = await tx.insertDelivery({
          endpoint_id: charted,
          event: 'price',
          store_id: null,
          product_ids: [i + 1],
          occurred_at: at,
          status: 'pending',
          attempts: 0,
          next_attempt_at: at,
          created_at: at,
        });
        const attempt: NewAttempt = { at, status_code, error, latency_ms: latency, response_snippet: null };
        if (i % 2 === 0) await tx.recordAttempt(delivery.id, attempt);
        else
          outcomes.push({ deliveryId: delivery.id, attempt, status: error ? 'failed' : 'succeeded', attempts: 1, next_attempt_at: null });
      }
      await tx.recordAttemptOutcomes(outcomes);
    });
    await raw(TEST_ENGINE === 'postgres' ? 'VACUUM ANALYZE webhook_attempt_hours' : 'ANALYZE');
  }, 120_000);

  afterAll(async () => {
    vi.restoreAllMocks();
    await storage?.close();
    await database?.drop();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it("counts the endpoint's attempts of the window per UTC hour and outcome, with their latency, whichever way they were recorded", async () => {
    const { from, to } = attemptStatsRange(NOW);
    expect({ from, to }).toEqual({ from: '2026-11-19T12:00:00.000Z', to: '2026-11-26T12:00:00.000Z' });
    const hours = await storage.attemptsPerHour(charted, from, to);
    expect(hours).toEqual(expectedHours(from, to));
    expect(hours.reduce((n, h) => n + h.attempts, 0)).toBe(expected.filter((e) => e.at >= from).length);
    expect(new Set(hours.map((h) => h.outcome))).toEqual(new Set(['succeeded', 'failed', 'no_response']));
  });

  it("cuts the hours into the day's 24 hourly buckets and the week's 28 six-hour buckets, aligned to UTC", async () => {
    const { from, to } = attemptStatsRange(NOW);
    const [day, week] = attemptWindows(await storage.attemptsPerHour(charted, from, to), NOW);
    expect(day!.buckets).toHaveLength(24);
    expect(day!.buckets[0]!.from).toBe('2026-11-25T10:00:00.000Z');
    expect(day!.buckets[23]!.to).toBe('2026-11-26T10:00:00.000Z');
    expect(week!.buckets).toHaveLength(28);
    expect(week!.buckets[0]!.from).toBe('2026-11-19T12:00:00.000Z');
    for (const [window, start] of [
      [day!, '2026-11-25T10:00:00.000Z'],
      [week!, '2026-11-19T12:00:00.000Z'],
    ] as const) {
      const inside = expected.filter((e) => e.at >= start);
      const count = (outcome: AttemptOutcomeKind) => inside.filter((e) => e.outcome === outcome).length;
      expect(window.total.attempts).toBe(inside.length);
      expect(window.total.byOutcome).toEqual({ succeeded: count('succeeded'), failed: count('failed'), no_response: count('no_response') });
      expect(window.total.latencyMaxMs).toBe(Math.max(...inside.map((e) => e.latency)));
      expect(window.total.latencyAvgMs).toBe(Math.round(inside.reduce((n, e) => n + e.latency, 0) / inside.length));
      expect(window.buckets.reduce((n, b) => n + b.attempts, 0)).toBe(inside.length);
    }
    // The current hour holds NOW's attempt (09:30) and the one at 09:00.
    expect(day!.buckets[23]!.attempts).toBe(2);
  });

  it("reads only the window's counts of that endpoint, from their primary key, whatever the size of the log", async () => {
    const { from, to } = attemptStatsRange(NOW);
    const sql = await statementOfAttemptsPerHour(from, to);
    const windowRows = (await storage.attemptsPerHour(charted, from, to)).length;
    if (TEST_ENGINE === 'sqlite') {
      const db = new Database(database.location, { readonly: true });
      const plan = (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(charted, from.slice(0, 13), to.slice(0, 13)) as { detail: string }[])
        .map((r) => r.detail)
        .join('\n');
      db.close();
      expect(plan).toMatch(/SEARCH webhook_attempt_hours USING PRIMARY KEY \(endpoint_id=\? AND hour>\? AND hour<\?\)/);
      expect(plan).not.toMatch(/SCAN|TEMP B-TREE/);
      return;
    }
    if (onPglite()) return;
    const [
      {
        'QUERY PLAN': [explained],
      },
    ] = (await raw(`EXPLAIN (ANALYZE, FORMAT JSON) ${sql}`, [charted, from.slice(0, 13), to.slice(0, 13)])) as [
      { 'QUERY PLAN': [{ Plan: Record<string, unknown> }] },
    ];
    const scans: Record<string, unknown>[] = [];
    const walk = (node: Record<string, unknown>) => {
      if (/Scan/.test(String(node['Node Type']))) scans.push(node);
      for (const child of (node.Plans as Record<string, unknown>[] | undefined) ?? []) walk(child);
    };
    walk(explained.Plan);
    // An index scan of the key, or a bitmap of it and its rows: never a sequential scan.
    expect(scans.map((s) => s['Node Type'])).not.toContain('Seq Scan');
    expect(scans.filter((s) => s['Index Name'] === 'webhook_attempt_hours_pkey')).toHaveLength(1);
    for (const scan of scans) {
      const read =
        Number(scan['Actual Rows']) + Number(scan['Rows Removed by Filter'] ?? 0) + Number(scan['Rows Removed by Index Recheck'] ?? 0);
      expect(read, String(scan['Node Type'])).toBe(windowRows);
    }
  });

  it("keeps the counts with the attempt log: a delivery's endpoint deleted takes its counts with it", async () => {
    const gone = await storage.createWebhookEndpoint({
      merchant_id: merchantId,
      url: 'https://hooks.example/gone',
      store_id: null,
      events: ['price'],
      secret: 'whsec_x',
      created_at: AT,
    });
    await seedAttempts(gone.id, '2026-11-26T08:00:00.000Z', 10, 1);
    const { from, to } = attemptStatsRange(NOW);
    expect(await storage.attemptsPerHour(gone.id, from, to)).toEqual([
      { hour: '2026-11-26T08', outcome: 'succeeded', attempts: 10, latencySumMs: 100, latencyMaxMs: 10 },
    ]);
    await storage.deleteWebhookEndpoint(gone.id);
    expect(
      await raw(
        TEST_ENGINE === 'sqlite'
          ? 'SELECT count(*) AS n FROM webhook_attempt_hours WHERE endpoint_id = ?'
          : 'SELECT count(*)::integer AS n FROM webhook_attempt_hours WHERE endpoint_id = $1',
        [gone.id],
      ),
    ).toEqual([{ n: 0 }]);
  });
});

describe.skipIf(onPglite())(`what was recorded before migration 36 (${TEST_ENGINE})`, () => {
  let older: TestDatabase;
  let olderDir: string;
  let reopened: CatalogStorage | undefined;

  afterAll(async () => {
    await reopened?.close();
    await older?.drop();
    if (olderDir) fs.rmSync(olderDir, { recursive: true, force: true });
  });

  it("counts the older attempts per hour and outcome, and ends the older notifications at their endpoint's first success after them", async () => {
    olderDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-before-36-'));
    older = await createTestDatabase(olderDir);
    const before = await older.open();
    const merchant = await before.createMerchant({ name: 'Before', sku_pattern: null, owner_emails: [], created_at: AT });
    const endpoint = await before.createWebhookEndpoint({
      merchant_id: merchant.id,
      url: 'https://hooks.example/catalog',
      store_id: null,
      events: ['price'],
      secret: 'whsec_x',
      created_at: AT,
    });
    const delivery = await before.insertDelivery({
      endpoint_id: endpoint.id,
      event: 'price',
      store_id: null,
      product_ids: [1],
      occurred_at: AT,
      status: 'succeeded',
      attempts: 2,
      next_attempt_at: null,
      created_at: AT,
    });
    const attempt = (at: string, error: string | null): NewAttempt => ({
      at,
      status_code: error ? 503 : 204,
      error,
      latency_ms: 40,
      response_snippet: null,
    });
    await before.recordAttempt(delivery.id, attempt('2026-11-25T08:00:00.000Z', 'http_status'));
    const notify = (created_at: string) =>
      before.insertNotification({
        merchant_id: merchant.id,
        endpoint_id: endpoint.id,
        kind: 'failing',
        subject: 's',
        body: 'b',
        created_at,
      });
    const recovered = await notify('2026-11-25T08:00:01.000Z');
    await before.recordAttempt(delivery.id, attempt('2026-11-25T08:00:30.000Z', 'http_status'));
    await before.recordAttempt(delivery.id, attempt('2026-11-25T08:10:00.000Z', null));
    await before.recordAttempt(delivery.id, attempt('2026-11-25T08:20:00.000Z', null));
    const lasting = await notify('2026-11-25T09:00:00.000Z');
    await before.close();
    // The database as it was before migration 36.
    for (const statement of [
      ...(TEST_ENGINE === 'sqlite'
        ? ['DROP TRIGGER webhook_attempt_hours_counted']
        : ['DROP TRIGGER webhook_attempt_hours_counted ON webhook_attempts', 'DROP FUNCTION webhook_attempt_hours_counted()']),
      'DROP TABLE webhook_attempt_hours',
      'DROP INDEX notifications_open',
      'ALTER TABLE notifications DROP COLUMN ended_at',
      'ALTER TABLE api_keys DROP COLUMN last_used_at',
      'DELETE FROM schema_migrations WHERE id = 36',
    ])
      await raw(statement, [], older.location);

    reopened = await older.open();
    const hours = await reopened.attemptsPerHour(endpoint.id, '2026-11-25T00:00:00.000Z', '2026-11-26T00:00:00.000Z');
    expect(hours.map((h) => [h.hour, h.outcome, h.attempts])).toEqual([
      ['2026-11-25T08', 'failed', 2],
      ['2026-11-25T08', 'succeeded', 2],
    ]);
    const ended = new Map((await reopened.listNotifications(merchant.id, 10)).map((n) => [n.id, n.ended_at]));
    expect(ended.get(recovered.id)).toBe('2026-11-25T08:10:00.000Z');
    expect(ended.get(lasting.id)).toBeNull();
  });
});
