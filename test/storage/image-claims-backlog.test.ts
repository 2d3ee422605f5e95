// A down origin's backlog costs a claim nothing (docs/operating.md#image-mirroring): with 200,000
// images pending on one origin marked down and a few on a live one, every statement of a claim reads
// from an index range that stops at its first entries (SQLite: its plan searches an index, scans no
// table, and returns at most a window; PostgreSQL: EXPLAIN ANALYZE, rolled back, reads at most a few
// dozen rows), in each of a claim's paths: due live work, nothing due (the hint settled), the probe,
// and the backlog's own time up. And once the probe is leased and nothing else is due, claims do not
// visit the merchant until its next probe: a quiet interval of polls, with an injected clock, runs
// one statement per claim.
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { CatalogStorage, ImageClaimFairness } from '../../src/storage/port.js';
import { PgConnection } from '../../src/storage/postgres/connection.js';
import { createTestDatabase, onPglite, TEST_ENGINE, type TestDatabase } from '../support/engine.js';
import { DOWN_ORIGIN, LIVE_ORIGIN, seedImageBacklog } from '../support/image-backlog.js';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const AT = '2026-11-26T08:00:00.000Z';
const DOWN_SINCE = '2026-11-26T08:01:00.000Z';
const PROBE_AT = '2026-11-26T09:05:00.000Z';
const BACKLOG = 200_000;
/** Rows a claim's statement may read on PostgreSQL: its window (perOrigin) and a few index probes. */
const ROWS_READ_MAX = 40;
const at = (ms: number) => new Date(Date.parse('2026-11-26T09:00:00.000Z') + ms).toISOString();
const fairness: ImageClaimFairness = { perMerchant: 16, perOrigin: 8, busy: [], deadAfterMs: 72 * 3600_000 };

interface Ran {
  sql: string;
  params: unknown[];
  returned?: number;
}

const statementClass = Object.getPrototypeOf(new Database(':memory:').prepare('SELECT 1')) as Record<
  string,
  (...args: unknown[]) => unknown
>;

let dir: string;
let database: TestDatabase;
let storage: CatalogStorage;
let merchant: number;
let recording: Ran[] | null = null;

function recordStatements(): void {
  if (TEST_ENGINE === 'sqlite') {
    for (const method of ['all', 'get', 'run'] as const) {
      const real = statementClass[method]!;
      vi.spyOn(statementClass, method as never).mockImplementation(function (this: { source: string }, ...args: unknown[]) {
        const result = real.apply(this, args);
        recording?.push({ sql: this.source, params: args, returned: Array.isArray(result) ? result.length : undefined });
        return result;
      });
    }
    return;
  }
  for (const method of ['rows', 'one', 'run'] as const) {
    // eslint-disable-next-line @typescript-eslint/unbound-method -- called with its connection as `this` (real.call(this, …))
    const real = PgConnection.prototype[method] as (...args: unknown[]) => unknown;
    (vi.spyOn(PgConnection.prototype, method) as unknown as { mockImplementation(f: unknown): void }).mockImplementation(function (
      this: PgConnection,
      sql: string,
      values: unknown[] = [],
    ) {
      recording?.push({ sql, params: values });
      return real.call(this, sql, values);
    });
  }
  // The hot statements, prepared under a name: recorded as their text and values.
  for (const method of ['preparedRows', 'preparedRun'] as const) {
    // eslint-disable-next-line @typescript-eslint/unbound-method -- called with its connection as `this` (real.call(this, …))
    const real = PgConnection.prototype[method] as (...args: unknown[]) => unknown;
    (vi.spyOn(PgConnection.prototype, method) as unknown as { mockImplementation(f: unknown): void }).mockImplementation(function (
      this: PgConnection,
      name: string,
      sql: string,
      values: unknown[],
    ) {
      recording?.push({ sql, params: values });
      return real.call(this, name, sql, values);
    });
  }
}

/** The statements of one claim at `now` (transaction control left out). */
async function claimStatements(now: string, leaseMs = 60_000) {
  const ran: Ran[] = [];
  recording = ran;
  let claimed: Awaited<ReturnType<CatalogStorage['claimDueImageMirrors']>>;
  try {
    claimed = await storage.claimDueImageMirrors(now, 16, new Date(Date.parse(now) + leaseMs).toISOString(), fairness);
  } finally {
    recording = null;
  }
  return { claimed, ran: ran.filter((r) => !/^\s*(BEGIN|COMMIT|ROLLBACK|SAVEPOINT|RELEASE|SELECT pg_notify|NOTIFY)/i.test(r.sql)) };
}

function sqlitePlan(ran: Ran): string[] {
  const db = new Database(database.location, { readonly: true });
  try {
    return (db.prepare(`EXPLAIN QUERY PLAN ${ran.sql}`).all(...ran.params) as { detail: string }[]).map((r) => r.detail);
  } finally {
    db.close();
  }
}

async function postgresRowsRead(ran: Ran): Promise<number> {
  const client = new pg.Client(database.location);
  await client.connect();
  try {
    await client.query('BEGIN');
    const { rows } = await client.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${ran.sql}`, ran.params);
    await client.query('ROLLBACK');
    let read = 0;
    const walk = (node: Record<string, unknown>) => {
      if (
        /Scan/.test(String(node['Node Type'])) &&
        !/Function Scan|CTE Scan|Subquery Scan|Values Scan|WorkTable Scan/.test(String(node['Node Type']))
      )
        read +=
          (Number(node['Actual Rows'] ?? 0) +
            Number(node['Rows Removed by Filter'] ?? 0) +
            Number(node['Rows Removed by Index Recheck'] ?? 0)) *
          Number(node['Actual Loops'] ?? 1);
      for (const child of (node.Plans as Record<string, unknown>[] | undefined) ?? []) walk(child);
    };
    walk((rows[0]['QUERY PLAN'] as { Plan: Record<string, unknown> }[])[0]!.Plan);
    return read;
  } finally {
    await client.end();
  }
}

/** Every statement of the claim reads a bounded range of an index, whatever the down origin's backlog. */
async function expectBacklogFree(ran: Ran[]): Promise<void> {
  expect(ran.length).toBeGreaterThan(0);
  for (const statement of ran) {
    if (TEST_ENGINE === 'sqlite') {
      const plan = sqlitePlan(statement);
      // No table scanned (but the merchant's failing origins, json parameters and the CTE's own rows),
      // and every search of image_mirrors pins its merchant and origin, or is the loose scan's min().
      expect
        .soft(
          plan.filter((line) => /^SCAN /.test(line) && !/^SCAN (json_each|o\b|origins\b|image_origins\b|\(subquery)/.test(line)),
          statement.sql,
        )
        .toEqual([]);
      expect.soft(statement.returned ?? 0, statement.sql).toBeLessThanOrEqual(ROWS_READ_MAX);
    } else {
      expect.soft(await postgresRowsRead(statement), statement.sql).toBeLessThanOrEqual(ROWS_READ_MAX);
    }
  }
}

async function probeOf(origin: string): Promise<string | null> {
  const rows = await storage.imageOrigins(merchant);
  return rows.find((o) => o.origin === origin)?.next_probe_at ?? null;
}

describe.skipIf(onPglite())(`image claims beside a down origin's ${BACKLOG.toLocaleString('en')} pending images (${TEST_ENGINE})`, () => {
  beforeAll(async () => {
    recordStatements();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-backlog-'));
    database = await createTestDatabase(dir);
    storage = await database.open();
    merchant = (await storage.createMerchant({ name: 'Backlog', sku_pattern: null, owner_emails: [], created_at: AT })).id;
    await seedImageBacklog(database.location, merchant, {
      down: BACKLOG,
      failed: 20,
      live: 3,
      at: AT,
      downSince: DOWN_SINCE,
      nextProbeAt: PROBE_AT,
    });
  }, 300_000);

  afterAll(async () => {
    vi.restoreAllMocks();
    await storage?.close();
    await database?.drop();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it("claims the live origin's images and settles the merchant to its next probe, each statement reading a bounded index range", async () => {
    const first = await claimStatements(at(0));
    expect(first.claimed.map((i) => i.origin)).toEqual([LIVE_ORIGIN, LIVE_ORIGIN, LIVE_ORIGIN]);
    await expectBacklogFree(first.ran);
    // Nothing due now (the live images are leased): the hint goes to the earliest of the lease's end and the probe.
    const empty = await claimStatements(at(1000));
    expect(empty.claimed).toEqual([]);
    await expectBacklogFree(empty.ran);
    // Polls until the lease ends: one statement each (the due merchants' index), the merchant not visited.
    for (let s = 2; s < 60; s += 7) {
      const poll = await claimStatements(at(s * 1000));
      expect(poll.claimed).toEqual([]);
      expect(poll.ran.map((r) => r.sql).filter((sql) => /image_mirrors|image_origins/.test(sql))).toEqual([]);
    }
    // The live images mirrored: only the down origin's backlog is left.
    for (const i of [1, 2, 3])
      await storage.updateImageMirror(merchant, `${LIVE_ORIGIN}/p/${i}.jpg`, {
        state: 'mirrored',
        mirrored_url: 'http://media/x',
        next_attempt_at: null,
        updated_at: at(2000),
      });
  });

  it('claims one probe of the down origin when it is due, then leaves the merchant alone until the next probe or the backlog’s own time', async () => {
    const probe = await claimStatements(PROBE_AT, 95_000);
    expect(probe.claimed.map((i) => [i.origin, i.probe])).toEqual([[DOWN_ORIGIN, true]]);
    await expectBacklogFree(probe.ran);
    expect(await probeOf(DOWN_ORIGIN)).toBe(new Date(Date.parse(PROBE_AT) + 95_000).toISOString());
    // A quiet interval of polls (one a second for 90 s) while the probe is leased: no claim visits the merchant.
    const visits: string[] = [];
    let statements = 0;
    for (let s = 1; s <= 90; s++) {
      const poll = await claimStatements(new Date(Date.parse(PROBE_AT) + s * 1000).toISOString());
      expect(poll.claimed).toEqual([]);
      statements += poll.ran.length;
      visits.push(...poll.ran.map((r) => r.sql).filter((sql) => /image_mirrors|image_origins/.test(sql)));
    }
    expect(visits).toEqual([]);
    expect(statements).toBe(90);
  });

  it("claims a window of the down origin's images once their own time is up, from index ranges", async () => {
    const expired = await claimStatements('2026-11-29T08:30:00.000Z');
    // A window of the images whose own time is up (and the probe, due again meanwhile, if the window leaves room).
    expect(expired.claimed.filter((i) => i.expired !== undefined).length).toBeGreaterThan(0);
    expect(expired.claimed.every((i) => i.expired !== undefined || i.probe === true)).toBe(true);
    expect(expired.claimed.every((i) => i.origin === DOWN_ORIGIN)).toBe(true);
    await expectBacklogFree(expired.ran);
  });
});
