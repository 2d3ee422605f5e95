// Several dispatchers on one PostgreSQL database: each a service with its own
// pool, as separate processes run them, sending to one real receiver on 127.0.0.1.
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { DeliveryRecord } from '../../src/webhooks/model.js';
import type { AttemptOutcome } from '../../src/storage/port.js';
import type { DeliveryClaim } from '../../src/storage/records.js';
import { adminOk, createMerchant, importNdjson, simpleProduct, type MerchantHandle } from '../support/admin-http.js';
import { Receiver } from '../support/receiver.js';
import { startTestPostgres, type TestPostgres } from '../storage/pg-server.js';
import { startPgServices, type PgServices } from './pg-services.js';
import type { ConfigOverrides } from '../../src/config.js';

let postgres: TestPostgres;
let world: PgServices | undefined;
const receivers: Receiver[] = [];

beforeAll(async () => {
  postgres = await startTestPostgres();
}, 60_000);
afterAll(async () => {
  await postgres?.stop();
});
afterEach(async () => {
  await world?.close();
  world = undefined;
  for (const receiver of receivers.splice(0)) await receiver.close();
});

const tick = () => new Promise<void>((resolve) => setTimeout(resolve, 5));

/** A claim of up to `limit` due deliveries, `perEndpoint` per endpoint, now, with nothing in flight here. */
const claimNow = (perEndpoint: number, limit = 10, busy?: DeliveryClaim['busy']): DeliveryClaim => ({
  now: () => new Date(),
  leaseMs: 60_000,
  limit,
  perEndpoint,
  inFlightByEndpoint: new Map(),
  perMerchant: 10,
  busy,
});

/** The lock requests of the database that wait for another transaction's lock. */
const lockWaits = async () => (await world!.storages[0]!.pool.query('SELECT locktype FROM pg_locks WHERE NOT granted')).rows;

/** Two services on one fresh database, a merchant with store `de`, and an endpoint for a receiver. */
async function twoDispatchers(webhooks: ConfigOverrides['webhooks'], answer?: Parameters<Receiver['answer']>[0]) {
  world = await startPgServices(postgres, 2, { webhooks: { coalesceMs: 0, ...webhooks } });
  const merchant: MerchantHandle = await createMerchant(world.admin, 'Dispatch Outfitters');
  await adminOk(world.admin, 'PUT', `${merchant.base}/stores/de`, { name: 'Store de', locale: 'de-DE', currency: 'EUR' });
  await adminOk(world.admin, 'PUT', `${merchant.base}/suppliers/alpine`, { name: 'Alpine Wholesale AG' });
  const receiver = await Receiver.start(answer ? { behaviour: answer } : {});
  receivers.push(receiver);
  const endpoint = await adminOk(
    world.admin,
    'POST',
    `${merchant.base}/webhook-endpoints`,
    { url: receiver.url, events: ['content'] },
    201,
  );
  receiver.secret = endpoint.secret;
  const [a, b] = world.services as [PgServices['services'][0], PgServices['services'][0]];
  const deliveries = async (): Promise<DeliveryRecord[]> => a.storage.listDeliveries(endpoint.id, { limit: 10_000 });
  return { merchant, receiver, endpointId: endpoint.id as number, a, b, deliveries };
}

async function importProducts(merchant: MerchantHandle, refs: string[]) {
  const response = await importNdjson(
    world!.admin,
    merchant.id,
    refs.map((ref) => simpleProduct(ref)),
  );
  expect(response.status, response.text).toBe(200);
}

describe('several dispatchers on one PostgreSQL database', () => {
  it('deliver every change once, and never put one outbox row into two deliveries, while both coalesce during the writes', async () => {
    const { merchant, receiver, a, b, deliveries } = await twoDispatchers({
      batchSize: 3,
      perEndpointConcurrency: 4,
      overallConcurrency: 4,
    });
    const refs = Array.from({ length: 120 }, (_, i) => `ONCE-${i}`);
    let writing = true;
    const dispatching = async (service: typeof a) => {
      while (writing || (await service.storage.operationalCounts()).outboxDepth > 0) {
        await service.dispatcher.tick();
        await tick();
      }
      while ((await service.dispatcher.sendDue()) > 0);
    };
    const both = Promise.all([dispatching(a), dispatching(b)]);
    for (let i = 0; i < refs.length; i += 10) await importProducts(merchant, refs.slice(i, i + 10));
    writing = false;
    await both;
    await Promise.all([a.dispatcher.sendDue(), b.dispatcher.sendDue()]);

    const all = await deliveries();
    const carried = all.flatMap((d) => d.product_ids);
    // Each product changed once: its one outbox row went into exactly one delivery.
    expect(carried).toHaveLength(refs.length);
    expect(new Set(carried).size).toBe(refs.length);
    expect(all.every((d) => d.status === 'succeeded' && d.attempts === 1)).toBe(true);
    // ... and each delivery reached the receiver once.
    expect(receiver.count).toBe(all.length);
    expect(receiver.payloads.flatMap((p) => p.product_ids).sort()).toEqual([...carried].sort());
  });

  it('count concurrent failed attempts to one endpoint exactly (the endpoint row is locked for its health update)', async () => {
    const { merchant, receiver, endpointId, a, b, deliveries } = await twoDispatchers(
      { batchSize: 1, perEndpointConcurrency: 8, overallConcurrency: 4 },
      { status: 500, delayMs: 30 },
    );
    await importProducts(
      merchant,
      Array.from({ length: 8 }, (_, i) => `FAIL-${i}`),
    );
    expect(await a.dispatcher.coalesce()).toBe(8);
    // Both dispatchers send at once (the second claims while the first one's four are in flight):
    // attempts end, and record their failure, at the same moments.
    const first = a.dispatcher.sendDue();
    await vi.waitFor(() => expect(receiver.inFlightNow).toBeGreaterThan(0), { timeout: 5000, interval: 1 });
    const [byA, byB] = await Promise.all([first, b.dispatcher.sendDue()]);
    expect(byA + byB).toBe(8);
    expect(byA).toBeGreaterThan(0);
    expect(byB).toBeGreaterThan(0);
    expect(receiver.count).toBe(8);
    const all = await deliveries();
    expect(all.every((d) => d.status === 'failed' && d.attempts === 1)).toBe(true);
    const endpoint = await a.storage.getWebhookEndpoint(endpointId);
    expect(endpoint?.consecutive_failures).toBe(8);
  });

  it('hold per-endpoint concurrency 1 across two dispatchers', async () => {
    const { merchant, receiver, a, b, deliveries } = await twoDispatchers(
      { batchSize: 1, perEndpointConcurrency: 1, overallConcurrency: 4 },
      { status: 200, delayMs: 40 },
    );
    await importProducts(
      merchant,
      Array.from({ length: 10 }, (_, i) => `ONE-AT-A-TIME-${i}`),
    );
    expect(await a.dispatcher.coalesce()).toBe(10);
    let sentByA = 0;
    let sentByB = 0;
    while ((await deliveries()).some((d) => d.status !== 'succeeded')) {
      const [byA, byB] = await Promise.all([a.dispatcher.sendDue(), b.dispatcher.sendDue()]);
      sentByA += byA;
      sentByB += byB;
      await tick();
    }
    expect(sentByA + sentByB).toBe(10);
    expect(receiver.count).toBe(10);
    expect(receiver.maxInFlight).toBe(1);
  });

  it('skips an endpoint another process is claiming without waiting for it, says so, and leases the rest once that claim committed', async () => {
    const { merchant, endpointId, a, b, deliveries } = await twoDispatchers({ batchSize: 1 });
    await importProducts(merchant, ['SKIP-1', 'SKIP-2', 'SKIP-3']);
    expect(await a.dispatcher.coalesce()).toBe(3);
    const busy: number[][] = [];
    let first: DeliveryRecord | undefined;
    await a.storage.transaction(async (tx) => {
      // A's claim leases one of the three and holds the endpoint's claim lock to its COMMIT.
      [first] = await tx.claimDueDeliveries(claimNow(2, 1));
      expect(first).toBeDefined();
      // B's claim meanwhile neither waits nor leases: the endpoint is reported busy.
      expect(await b.storage.claimDueDeliveries(claimNow(2, 10, (ids) => busy.push(ids)))).toEqual([]);
      expect(busy).toEqual([[endpointId]]);
      expect(await lockWaits()).toEqual([]);
    });
    // Committed: B's claim counts A's lease (two per endpoint in all) and leases one more, not busy.
    const claimed = await b.storage.claimDueDeliveries(claimNow(2, 10, (ids) => busy.push(ids)));
    expect(claimed).toHaveLength(1);
    expect(busy).toHaveLength(1);
    const leased = (await deliveries()).filter((d) => d.next_attempt_at! > new Date().toISOString());
    expect(leased.map((d) => d.id).sort()).toEqual([first!.id, claimed[0]!.id].sort());
  });

  it('claims again soon after skipping a busy endpoint, not at its next poll, and sends each delivery once', async () => {
    const { merchant, receiver, a, b, deliveries } = await twoDispatchers({ batchSize: 1, pollIntervalMs: 60_000 });
    await importProducts(merchant, ['SOON-1', 'SOON-2', 'SOON-3', 'SOON-4']);
    expect(await a.dispatcher.coalesce()).toBe(4);
    let sending: Promise<number> | undefined;
    await a.storage.transaction(async (tx) => {
      // Another process's claim holds the endpoint (it leases nothing: a limit of 0) for 200 ms ...
      expect(await tx.claimDueDeliveries(claimNow(4, 0))).toEqual([]);
      sending = b.dispatcher.sendDue();
      await new Promise<void>((resolve) => setTimeout(resolve, 200));
      // ... while B's claims skip it without waiting: nothing sent yet.
      expect(await lockWaits()).toEqual([]);
      expect(receiver.count).toBe(0);
    });
    // Once it committed, B's next claim (ms later, not a minute's poll) takes and sends all four.
    expect(await sending).toBe(4);
    expect(receiver.count).toBe(4);
    expect(new Set(receiver.payloads.flatMap((p) => p.product_ids)).size).toBe(4);
    expect((await deliveries()).every((d) => d.status === 'succeeded' && d.attempts === 1)).toBe(true);
  });

  it('gives the outbox rows of a group to one coalescer: another transaction meanwhile gets none of them', async () => {
    const { merchant, a, b } = await twoDispatchers({ batchSize: 100 });
    await importProducts(merchant, ['ROW-1', 'ROW-2', 'ROW-3']);
    const [group] = await a.storage.outboxGroups();
    expect(group?.count).toBe(3);
    await a.storage.transaction(async (tx) => {
      expect(await tx.outboxRows(group!, 100)).toHaveLength(3);
      // Another process's coalescer, while this one holds them: skips them rather than waiting.
      expect(await b.storage.transaction((other) => other.outboxRows(group!, 100))).toEqual([]);
    });
    expect(await b.storage.transaction((other) => other.outboxRows(group!, 100))).toHaveLength(3);
  });

  it("holds a window's rows for one coalescer: another transaction meanwhile is given none of them, nor the rows it deleted", async () => {
    const { merchant, a, b } = await twoDispatchers({ batchSize: 100 });
    // Three writes: three rows (a write's products share one).
    for (const sku of ['HOLD-1', 'HOLD-2', 'HOLD-3']) await importProducts(merchant, [sku]);
    const rows = (await a.storage.outboxWindow(100)).flatMap((g) => g.rows);
    const ids = rows.map((r) => r.id);
    expect(ids).toHaveLength(3);
    await a.storage.transaction(async (tx) => {
      expect(await tx.holdOutboxRows(rows)).toHaveLength(3);
      // Another process's coalescer, while this one holds them: skips them rather than waiting.
      expect(await b.storage.transaction((other) => other.holdOutboxRows(rows))).toEqual([]);
      await tx.deleteOutboxRows([ids[0]!]);
    });
    // Once that pass has committed, the row it batched is gone for the other one; the rest are its.
    const heldByB = await b.storage.transaction((other) => other.holdOutboxRows(rows));
    expect(heldByB.map((r) => r.id).sort((x, y) => x - y)).toEqual(ids.slice(1).sort((x, y) => x - y));
  });

  it('holds a row another coalescer trimmed after the window was read with the products that one left, not those it batched', async () => {
    const { merchant, a, b } = await twoDispatchers({ batchSize: 100 });
    // One write of five products: one row carrying all five.
    await importProducts(merchant, ['TRIM-1', 'TRIM-2', 'TRIM-3', 'TRIM-4', 'TRIM-5']);
    // B's pass reads the window first...
    const seenByB = (await b.storage.outboxWindow(100)).flatMap((g) => g.rows);
    expect(seenByB).toHaveLength(1);
    const [row] = seenByB as [(typeof seenByB)[0]];
    expect(row.productIds).toHaveLength(5);
    // ... then A's pass batches the first three of the row's products and leaves it the other two.
    await a.storage.transaction(async (tx) => {
      const [held] = await tx.holdOutboxRows([row]);
      expect(held!.productIds).toEqual(row.productIds);
      await tx.trimOutboxRows([{ id: row.id, productIds: row.productIds.slice(3) }]);
    });
    // B holds the row as it is now: the two products A left, none of the three A batched.
    const heldByB = await b.storage.transaction((tx) => tx.holdOutboxRows(seenByB));
    expect(heldByB).toEqual([{ ...row, productIds: row.productIds.slice(3) }]);
  });

  it("records successes to a healthy endpoint in one statement, and nothing when another process's failure made it failing meanwhile", async () => {
    const { merchant, endpointId, a, b, deliveries } = await twoDispatchers({ batchSize: 1 });
    await importProducts(merchant, ['SUCCESS-1', 'SUCCESS-2']);
    expect(await a.dispatcher.coalesce()).toBe(2);
    const [first, second] = await a.storage.claimDueDeliveries(claimNow(2));
    const success = (deliveryId: number, at: string): AttemptOutcome => ({
      deliveryId,
      attempt: {
        at,
        status_code: 204,
        error: null,
        latency_ms: 3,
        response_snippet: '',
        request_url: 'http://127.0.0.1/r',
        request_headers: {},
      },
      status: 'succeeded',
      attempts: 1,
      next_attempt_at: null,
    });
    const firstAt = new Date().toISOString();
    expect(await a.storage.recordSuccessfulAttempts!([success(first!.id, firstAt)], [{ id: endpointId, lastSuccessAt: firstAt }])).toBe(
      true,
    );
    expect(await a.storage.listAttempts(first!.id)).toEqual([expect.objectContaining({ at: firstAt, status_code: 204, error: null })]);
    expect(await a.storage.getDelivery(first!.id)).toMatchObject({ status: 'succeeded', attempts: 1, next_attempt_at: null });
    expect(await a.storage.getWebhookEndpoint(endpointId)).toMatchObject({
      status: 'active',
      consecutive_failures: 0,
      last_success_at: firstAt,
    });

    // The other process records a failure under the endpoint's row lock; the statement waits for
    // it, then finds the endpoint failing: it writes nothing, and the caller records the usual way.
    const failedAt = new Date(Date.now() + 1000).toISOString();
    const secondAt = new Date(Date.now() + 2000).toISOString();
    let recorded: Promise<boolean> | undefined;
    await b.storage.transaction(async (tx) => {
      const endpoint = (await tx.getWebhookEndpoint(endpointId))!;
      recorded = a.storage.recordSuccessfulAttempts!([success(second!.id, secondAt)], [{ id: endpointId, lastSuccessAt: secondAt }]);
      await vi.waitFor(async () => expect(await lockWaits()).not.toEqual([]), { timeout: 5000, interval: 5 });
      await tx.updateWebhookEndpointsHealth([
        {
          id: endpointId,
          health: { ...endpoint, consecutive_failures: 1, failure_streak_started_at: failedAt, last_failure_at: failedAt },
        },
      ]);
    });
    expect(await recorded).toBe(false);
    expect(await a.storage.listAttempts(second!.id)).toEqual([]);
    expect((await deliveries()).find((d) => d.id === second!.id)).toMatchObject({ status: 'pending', attempts: 0 });
    expect(await a.storage.getWebhookEndpoint(endpointId)).toMatchObject({ consecutive_failures: 1, last_success_at: firstAt });
  });

  it("coalesces while an attempt's health update holds the endpoint's row, and claims without waiting for that row", async () => {
    const { merchant, endpointId, a, b, deliveries } = await twoDispatchers({ batchSize: 1 });
    await importProducts(merchant, ['HELD-1', 'HELD-2']);
    await a.storage.transaction(async (tx) => {
      // An attempt's health update holds the endpoint's row (to its COMMIT, below).
      await tx.getWebhookEndpoint(endpointId);
      // The other process's pass does not wait for it (it would wait for this transaction, which
      // waits for it): the pass lock it holds is not the row.
      expect(await b.dispatcher.coalesce()).toBe(2);
      expect(await b.storage.outboxGroups()).toEqual([]);
      // A claim takes its per-endpoint lock of its own (an advisory lock), not the row: it leases at once.
      const claimed = await b.storage.claimDueDeliveries(claimNow(2));
      expect(claimed.map((d) => d.endpoint_id)).toEqual([endpointId, endpointId]);
    });
    expect((await deliveries()).map((d) => d.status)).toEqual(['pending', 'pending']);
  });

  it('drops the deliveries a pass under way makes: the drop waits for the pass, and a pass meanwhile finds the endpoint busy', async () => {
    const { merchant, endpointId, a, b, deliveries } = await twoDispatchers({ batchSize: 1 });
    const at = new Date().toISOString();
    const pending = {
      endpoint_id: endpointId,
      event: 'price' as const,
      store_id: null,
      product_ids: [1],
      occurred_at: null,
      status: 'pending' as const,
      attempts: 0,
      next_attempt_at: at,
      created_at: at,
    };
    let dropped: Promise<number> | null = null;
    let dropEnded = false;
    await b.storage.transaction(async (pass) => {
      // A pass holds the endpoint (read active) and makes a delivery; an attempt that pauses the
      // endpoint drops its pending deliveries meanwhile, in another process.
      expect(await pass.coalescingEndpoint(endpointId)).toMatchObject({ id: endpointId, status: 'active' });
      await pass.insertDelivery(pending);
      dropped = a.storage.transaction((tx) => tx.dropPendingDeliveries(endpointId));
      void dropped.then(() => (dropEnded = true));
      await new Promise<void>((resolve) => setTimeout(resolve, 200));
      expect(dropEnded).toBe(false);
    });
    // The pass committed: the drop went on, and its statement saw the pass's delivery.
    expect(await dropped!).toBe(1);
    expect((await deliveries()).map((d) => d.status)).toEqual(['dropped']);
    // While a drop holds the endpoint, a pass leaves its rows for the next one.
    await importProducts(merchant, ['BUSY-1']);
    await a.storage.transaction(async (tx) => {
      await tx.dropPendingDeliveries(endpointId);
      expect(await b.storage.transaction((pass) => pass.coalescingEndpoint(endpointId))).toBe('busy');
      expect(await b.dispatcher.coalesce()).toBe(0);
    });
    expect(await b.dispatcher.coalesce()).toBe(1);
  });

  it('wakes a dispatcher on a commit in another process (NOTIFY) long before its poll interval', async () => {
    const { merchant, receiver, b } = await twoDispatchers({ batchSize: 1, pollIntervalMs: 60_000 });
    // Only the second service dispatches, and it polls once a minute; the first one takes the write.
    b.dispatcher.start();
    await world!.storages[1]!.listening();
    const started = Date.now();
    await importProducts(merchant, ['WAKE-1']);
    await vi.waitFor(() => expect(receiver.count).toBe(1), { timeout: 10_000, interval: 10 });
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(receiver.payloads[0]!.product_ids).toHaveLength(1);
  });
});
