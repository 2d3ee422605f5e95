// A delivery's claim and its outcome find their rows by key, however long the backlog, and before
// the tables have statistics (autovacuum's ANALYZE comes a minute after a burst at best): 20,000
// deliveries of one endpoint waiting in tables never analyzed, then a claim of 16 and the recording
// of their successes and of failures. On SQLite each statement's plan scans neither the deliveries
// nor the attempt log; on PostgreSQL each statement reads at most a claim's rows (EXPLAIN ANALYZE,
// rolled back), and the statements inside it (the claim's candidate function, the attempt log's
// hourly-count trigger) scan neither table whole (auto_explain's nested plans).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { AttemptOutcome, CatalogStorage } from '../../src/storage/port.js';
import type { DeliveryClaim } from '../../src/storage/records.js';
import { postgresNestedPlans, postgresRowsRead, recordStatements, sqlitePlan, statementsOf, type Ran } from '../support/statement-plans.js';
import { createTestDatabase, onPglite, TEST_ENGINE, type TestDatabase } from '../support/engine.js';

const AT = '2026-11-26T08:00:00.000Z';
// Below ~5,000 rows PostgreSQL's planner, guessing a never-analyzed table's rows from its pages,
// reads the whole (small) table rather than probe the key 16 times: its choice, cheap at that size.
const BACKLOG = 20_000;
/** Rows a statement may read: a claim's window and its endpoint's row, never the backlog. */
const ROWS_READ_MAX = 200;
const CLAIM: DeliveryClaim = {
  now: () => new Date('2026-11-26T09:00:00.000Z'),
  leaseMs: 40_000,
  limit: 16,
  perEndpoint: 4,
  ahead: 12,
  inFlightByEndpoint: new Map(),
  perMerchant: 8,
};

let dir: string;
let database: TestDatabase;
let storage: CatalogStorage;
let endpointId: number;
/** The first claim's deliveries, recorded by the second test. */
let claimed: { id: number; endpoint_id: number }[] = [];

/** The statements' plans scan neither the deliveries nor the attempt log, and read a bounded number of rows. */
async function expectByKey(ran: Ran[]): Promise<void> {
  expect(ran.length).toBeGreaterThan(0);
  let nestedPlans = 0;
  for (const statement of ran) {
    if (TEST_ENGINE === 'sqlite') {
      const plan = sqlitePlan(database.location, statement);
      expect
        .soft(
          plan.filter((line) => /^SCAN (webhook_deliveries|webhook_attempts)\b/.test(line)),
          `${statement.sql}\n${plan.join('\n')}`,
        )
        .toEqual([]);
      continue;
    }
    expect.soft(await postgresRowsRead(database.location, statement), statement.sql).toBeLessThanOrEqual(ROWS_READ_MAX);
    const nested = await postgresNestedPlans(database.location, statement);
    for (const plan of nested) expect.soft(plan, statement.sql).not.toMatch(/Seq Scan on (webhook_deliveries|webhook_attempts)\b/);
    nestedPlans += nested.length;
  }
  // PostgreSQL: the claim's candidate function and the attempt log's trigger were looked inside.
  if (TEST_ENGINE === 'postgres') expect(nestedPlans).toBeGreaterThan(0);
}

const outcome = (deliveryId: number, status: 'succeeded' | 'failed'): AttemptOutcome => ({
  deliveryId,
  attempt: {
    at: '2026-11-26T09:00:01.000Z',
    status_code: status === 'succeeded' ? 200 : 503,
    error: status === 'succeeded' ? null : 'http_503',
    latency_ms: 12,
    response_snippet: '',
    request_url: 'https://hooks.example/catalog',
    request_headers: {},
  },
  status,
  attempts: 1,
  next_attempt_at: status === 'succeeded' ? null : '2026-11-26T09:01:00.000Z',
});

describe.skipIf(onPglite())(
  `a delivery's claim and outcome, ${BACKLOG.toLocaleString('en')} waiting, before any statistics (${TEST_ENGINE})`,
  () => {
    beforeAll(async () => {
      recordStatements();
      dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-delivery-statements-'));
      database = await createTestDatabase(dir);
      storage = await database.open();
      const merchantId = (await storage.createMerchant({ name: 'Big', sku_pattern: null, owner_emails: [], created_at: AT })).id;
      endpointId = (
        await storage.createWebhookEndpoint({
          merchant_id: merchantId,
          url: 'https://hooks.example/catalog',
          store_id: null,
          events: ['price', 'content'],
          secret: 'whsec_x',
          created_at: AT,
        })
      ).id;
      await storage.insertCoalescedDeliveries(
        Array.from({ length: BACKLOG }, (_, i) => ({
          delivery: {
            endpoint_id: endpointId,
            event: 'price' as const,
            store_id: null,
            product_ids: [i + 1],
            occurred_at: null,
            status: 'pending' as const,
            attempts: 0,
            next_attempt_at: AT,
            created_at: AT,
          },
          oldestChangeAt: AT,
        })),
      );
    }, 120_000);

    afterAll(async () => {
      vi.restoreAllMocks();
      await storage?.close();
      await database?.drop();
      if (dir) fs.rmSync(dir, { recursive: true, force: true });
    });

    it('claims the oldest due deliveries and leases them by key, reading a claim window, not the backlog', async () => {
      const ran = await statementsOf(async () => {
        claimed = await storage.claimDueDeliveries(CLAIM);
      });
      expect(claimed.length).toBeGreaterThan(0);
      expect(claimed.length).toBeLessThanOrEqual(CLAIM.limit);
      expect(new Set(claimed.map((d) => d.endpoint_id))).toEqual(new Set([endpointId]));
      await expectByKey(ran);
    });

    it("records a claim's successes and its failures by key, the attempt log's hourly counts by their key", async () => {
      expect(claimed.length).toBeGreaterThanOrEqual(2);
      const [failed, ...succeeded] = claimed;
      const ran = await statementsOf(async () => {
        const at = '2026-11-26T09:00:01.000Z';
        const written = await storage.recordSuccessfulAttempts?.(
          succeeded.map((d) => outcome(d.id, 'succeeded')),
          [{ id: endpointId, lastSuccessAt: at }],
        );
        if (!written) await storage.recordAttemptOutcomes(succeeded.map((d) => outcome(d.id, 'succeeded')));
        await storage.recordAttemptOutcomes([outcome(failed!.id, 'failed')]);
      });
      await expectByKey(ran);
      expect((await storage.getDelivery(succeeded[0]!.id))?.status).toBe('succeeded');
      expect(await storage.getDelivery(failed!.id)).toMatchObject({ status: 'failed', attempts: 1 });
      const hours = await storage.attemptsPerHour(endpointId, '2026-11-26T09:00:00.000Z', '2026-11-26T10:00:00.000Z');
      expect(hours.map((h) => [h.outcome, h.attempts]).sort()).toEqual(
        [
          ['failed', 1],
          ['succeeded', succeeded.length],
        ].sort(),
      );
    });
  },
);
