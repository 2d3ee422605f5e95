// An idle dispatcher's fallback poll backs off while wake-ups are heard (shared/idle-poll.ts): it
// counts its delivery claims, is woken at once by a write (on PostgreSQL from another process's
// connection, NOTIFY; on SQLite by this process's commit), sends a retry no later than the cap after
// it is due, and polls at its fast interval while PostgreSQL's listening connection is down.
import pg from 'pg';
import { describe, expect, it, vi } from 'vitest';
import { OwnerNotifier } from '../../src/webhooks/notifier.js';
import { WebhookDispatcher, type WebhookConfig } from '../../src/webhooks/dispatcher.js';
import { HttpDeliverySender } from '../../src/webhooks/sender.js';
import { AddressGuard } from '../../src/outbound/address-guard.js';
import { adminOk } from '../support/admin-http.js';
import { postgresOnly, severalConnections, TEST_ENGINE } from '../support/engine.js';
import { backedOff, cleanupsAfterEach, listeningStorage, sleep, timingCalls } from '../support/idle-worker.js';
import { SECOND, startWebhookWorld, type WebhookWorld } from './harness.js';

let world: WebhookWorld | undefined;
const cleanups = cleanupsAfterEach(async () => {
  await world?.close();
  world = undefined;
});

/**
 * A started dispatcher of its own on `storage` (on PostgreSQL another process's: its own pool and
 * listening connection), counting its delivery claims with the time of each.
 */
async function idleDispatcher(w: WebhookWorld, webhooks: Partial<WebhookConfig>, otherConnection: boolean) {
  const storage = await listeningStorage(w.service, otherConnection, cleanups);
  const claims: number[] = [];
  const counted = timingCalls(storage, 'claimDueDeliveries', claims);
  const config = { ...w.service.config.webhooks, ...webhooks };
  const dispatcher = new WebhookDispatcher(counted, config, {
    now: w.clock.now,
    sender: new HttpDeliverySender(new AddressGuard(['127.0.0.1']), { timeoutMs: config.timeoutMs }),
    notifier: new OwnerNotifier(counted, { url: null, from: 'x' }, w.clock.now),
    random: () => 0.5,
  });
  dispatcher.start();
  cleanups.push(() => dispatcher.stop());
  return { claims, storage };
}

/** On PostgreSQL the dispatcher runs on another process's connection; SQLite's wake-ups are its own process's. */
const otherProcess = TEST_ENGINE === 'postgres';

describe('an idle dispatcher', () => {
  it('claims at most 14 times in 1.2 s while wake-ups are heard (60 at its 20 ms interval), with waits growing to the cap', async () => {
    world = await startWebhookWorld({ stores: ['de'] });
    const { claims } = await idleDispatcher(world, { pollIntervalMs: 20, idlePollMaxMs: 250 }, false);
    await sleep(1200);
    expect(claims.length).toBeGreaterThanOrEqual(4);
    expect(claims.length).toBeLessThanOrEqual(14);
    const gaps = claims.slice(1).map((at, i) => at - claims[i]!);
    expect(Math.max(...gaps)).toBeGreaterThanOrEqual(200);
  });

  severalConnections.it(
    'is woken at once by a write that creates work (on PostgreSQL from another process), and polls fast again',
    async () => {
      world = await startWebhookWorld({ stores: ['de'], webhooks: { coalesceMs: 0 } });
      const receiver = await world.receiver();
      await world.register(receiver, { events: ['content'] });
      const { claims } = await idleDispatcher(world, { pollIntervalMs: 20, idlePollMaxMs: 60_000, coalesceMs: 0 }, otherProcess);
      // Backed off: the last wait at least 600 ms, so the next timed poll is at least 1.2 s after the last.
      await backedOff(claims);
      const lastIdleClaim = claims.at(-1)!;
      const claimsBefore = claims.length;
      await world.putProduct('WOKEN-1');
      await vi.waitFor(() => expect(receiver.count).toBe(1), { timeout: 5000, interval: 5 });
      const arrived = performance.now();
      // Long before the timed poll (>= 1.2 s after the last one): the wake-up sent it.
      expect(arrived - lastIdleClaim).toBeLessThan(1000);
      // The fast interval again: waits of 20, 20, 40, 80 ms after the wake-up.
      await sleep(300);
      expect(claims.filter((at) => at > arrived).length).toBeGreaterThanOrEqual(3);
      expect(claims.length).toBeGreaterThan(claimsBefore);
    },
  );

  it('sends a retry due at T by T + the cap while backed off', async () => {
    const CAP_MS = 400;
    world = await startWebhookWorld({ stores: ['de'], webhooks: { coalesceMs: 0, backoffSeconds: [30, 60] } });
    const receiver = await world.receiver({ behaviour: { status: 500 } });
    await world.register(receiver, { events: ['content'] });
    await idleDispatcher(world, { pollIntervalMs: 20, idlePollMaxMs: CAP_MS, coalesceMs: 0, backoffSeconds: [30, 60] }, false);
    await world.putProduct('RETRY-1');
    await vi.waitFor(() => expect(receiver.count).toBe(1), { timeout: 5000, interval: 5 });
    receiver.answer({ status: 200 });
    // Idle until the waits reach the cap; then the retry's time comes (30 s on the injected clock).
    await sleep(1000);
    world.clock.advance(30 * SECOND);
    const due = performance.now();
    await vi.waitFor(() => expect(receiver.count).toBe(2), { timeout: 5000, interval: 5 });
    // The cap, and the time the attempt itself takes on a loaded machine.
    expect(performance.now() - due).toBeLessThan(CAP_MS + 300);
  });

  postgresOnly.it('polls at its fast interval at once when the listening connection drops', async () => {
    world = await startWebhookWorld({ stores: ['de'] });
    const { claims, storage } = await idleDispatcher(world, { pollIntervalMs: 20, idlePollMaxMs: 60_000 }, true);
    await backedOff(claims);
    expect(storage.wakeupsLive?.()).toBe(true);
    const client = new pg.Client({ connectionString: world.service.database.env.CPS_DATABASE_URL });
    await client.connect();
    cleanups.push(() => client.end());
    const dropped = performance.now();
    // Every listening connection on the database (the dispatcher's among them) ends.
    await client.query(
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN%' AND pid <> pg_backend_pid()",
    );
    await vi.waitFor(() => expect(claims.filter((at) => at > dropped).length).toBeGreaterThanOrEqual(1), { timeout: 500, interval: 5 });
    // A poll at once (its loss woke the dispatcher), long before the backed-off timed one.
    expect(claims.find((at) => at > dropped)! - dropped).toBeLessThan(400);
    // Reconnected within ~100 ms: the back-off starts again from the fast interval.
    await vi.waitFor(() => expect(storage.wakeupsLive?.()).toBe(true), { timeout: 5000, interval: 10 });
    await sleep(200);
    expect(claims.filter((at) => at > dropped).length).toBeGreaterThanOrEqual(3);
  });

  severalConnections.it(
    'is woken by the writes that make deliveries due without a new one: an endpoint enabled again, a delivery handed back at a stop',
    async () => {
      world = await startWebhookWorld({ stores: ['de'], webhooks: { coalesceMs: 0 } });
      const receiver = await world.receiver({ behaviour: { status: 500 } });
      const endpoint = await world.register(receiver, { events: ['content'] });
      await world.putProduct('HANDED-1');
      await world.deliverDue();
      const [delivery] = await world.deliveries(endpoint.id);
      // Failed once, due again in 30 s.
      expect(delivery).toMatchObject({ attempts: 1 });
      // On PostgreSQL another process listens (NOTIFY); on SQLite this process's commits wake.
      const listening = await listeningStorage(world.service, otherProcess, cleanups);
      let woken = 0;
      const unsubscribe = listening.onWork!('deliveries', () => woken++);
      cleanups.push(async () => unsubscribe());
      const wakes = async (write: () => Promise<unknown>) => {
        const before = woken;
        await write();
        await vi.waitFor(() => expect(woken).toBeGreaterThan(before), { timeout: 2000, interval: 5 });
      };
      await wakes(() =>
        world!.service.storage.transaction((tx) => tx.updateDelivery(delivery!.id, { next_attempt_at: world!.clock.now().toISOString() })),
      );
      const base = `${world.merchant.base}/webhook-endpoints/${endpoint.id}`;
      await adminOk(world.service, 'PATCH', base, { status: 'paused' });
      await wakes(() => adminOk(world!.service, 'PATCH', base, { status: 'active' }));
    },
  );
});
