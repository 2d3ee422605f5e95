// Claiming due deliveries: one atomic claim leases them, so several dispatchers
// on one database (several processes, each with its own connections) never send a delivery twice.
import { afterEach, describe, expect } from 'vitest';
import { OwnerNotifier } from '../../src/webhooks/notifier.js';
import { WebhookDispatcher } from '../../src/webhooks/dispatcher.js';
import { HttpDeliverySender } from '../../src/webhooks/sender.js';
import { AddressGuard } from '../../src/outbound/address-guard.js';
import { importNdjson, simpleProduct } from '../support/admin-http.js';
import { severalConnections } from '../support/engine.js';
import { HOUR, SECOND, startWebhookWorld, type WebhookWorld } from './harness.js';

let world: WebhookWorld;
afterEach(async () => {
  await world?.close();
});

describe('several dispatchers on one database', () => {
  severalConnections.it('send every due delivery exactly once when they claim at the same time', async () => {
    // Small batches: many deliveries, so the two dispatchers' claims interleave. The endpoint takes
    // more at once than one dispatcher sends (per-endpoint concurrency counts both processes' leases).
    // A claim another process is making is retried for up to a poll interval: long here, so a slow
    // machine cannot turn the second dispatcher's first claim into "nothing due".
    world = await startWebhookWorld({
      stores: ['de'],
      webhooks: { batchSize: 5, perEndpointConcurrency: 8, overallConcurrency: 4, pollIntervalMs: 30 * SECOND },
    });
    // The first 8 requests are answered only once all 8 are in: one dispatcher has at most 4 in
    // flight (overallConcurrency), so both must be sending at once, however the machine schedules
    // them (a first dispatcher answered at once could otherwise send all 40 before the second's
    // first claim). After 20 s they are answered anyway, and the assertions below say what happened.
    let arrived = 0;
    let release = () => {};
    const together = new Promise<void>((resolve) => {
      release = resolve;
      setTimeout(resolve, 20 * SECOND).unref();
    });
    const receiver = await world.receiver({
      behaviour: () => {
        arrived++;
        if (arrived > 8) return { status: 200 };
        if (arrived === 8) release();
        return { status: 200, after: together };
      },
    });
    await world.register(receiver, { events: ['content'] });
    const imported = await importNdjson(
      world.service,
      world.merchant.id,
      Array.from({ length: 200 }, (_, i) => simpleProduct(`CLAIM-${i}`)),
    );
    expect(imported.status).toBe(200);
    world.clock.advance(2 * SECOND);
    const created = await world.dispatcher.coalesce();
    expect(created).toBe(40);

    // A second dispatcher as another process would run it: its own storage on the same database.
    const other = await world.service.database.open();
    const second = new WebhookDispatcher(other, world.service.config.webhooks, {
      now: world.clock.now,
      sender: new HttpDeliverySender(new AddressGuard(['127.0.0.1']), { timeoutMs: world.service.config.webhooks.timeoutMs }),
      notifier: new OwnerNotifier(other, { url: null, from: 'x' }, world.clock.now),
    });
    try {
      const [sentByFirst, sentBySecond] = await Promise.all([world.dispatcher.sendDue(), second.sendDue()]);
      expect(sentByFirst + sentBySecond).toBe(40);
      expect(sentByFirst).toBeGreaterThan(0);
      expect(sentBySecond).toBeGreaterThan(0);
    } finally {
      await second.stop();
      await other.close();
    }

    // Each delivery reached the receiver once, every product once, and each has one attempt.
    expect(receiver.count).toBe(40);
    const ids = receiver.payloads.flatMap((p) => p.product_ids);
    expect(new Set(ids).size).toBe(200);
    expect(ids).toHaveLength(200);
    const deliveries = await world.service.storage.listDeliveries(
      (await world.service.storage.listWebhookEndpoints(world.merchant.id))[0]!.id,
      { limit: 100 },
    );
    expect(deliveries).toHaveLength(40);
    expect(deliveries.every((d) => d.status === 'succeeded' && d.attempts === 1)).toBe(true);
  });

  severalConnections.it(
    'hold per-endpoint concurrency across processes: a lease counts until its attempt is recorded or it expires',
    async () => {
      world = await startWebhookWorld({ stores: ['de'], webhooks: { batchSize: 1, perEndpointConcurrency: 1 } });
      const receiver = await world.receiver();
      await world.register(receiver, { events: ['content'] });
      await importNdjson(world.service, world.merchant.id, [simpleProduct('ONE'), simpleProduct('TWO')]);
      expect(await world.dispatcher.coalesce()).toBe(2);
      const claim = {
        now: world.clock.now,
        leaseMs: 40 * SECOND,
        limit: 10,
        perEndpoint: 1,
        inFlightByEndpoint: new Map<number, number>(),
      };

      // Another process on the same file: its claim sees this one's lease, though its own count is 0.
      const other = await world.service.database.open();
      try {
        const [first] = await world.service.storage.claimDueDeliveries(claim);
        expect(first).toBeDefined();
        expect(await other.claimDueDeliveries(claim)).toEqual([]);
        // The attempt recorded (here: failed, retry later), the endpoint has a free slot again.
        await world.service.storage.updateDelivery(first!.id, {
          status: 'failed',
          attempts: 1,
          next_attempt_at: new Date(world.clock.now().getTime() + HOUR).toISOString(),
        });
        const [second] = await other.claimDueDeliveries(claim);
        expect(second?.id).not.toBe(first!.id);
        expect(await world.service.storage.claimDueDeliveries(claim)).toEqual([]);
        // An expired lease (its dispatcher died) frees its slot, and its delivery is due again.
        world.clock.advance(41 * SECOND);
        expect((await world.service.storage.claimDueDeliveries(claim)).map((d) => d.id)).toEqual([second!.id]);
      } finally {
        await other.close();
      }
    },
  );
});
