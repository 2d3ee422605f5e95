// Storms a receiver can take: an endpoint's `max_per_second`, honoured by every
// dispatcher on the database (a claim reserves the endpoint's slots, one claim at a time), with
// changes that arrive while deliveries wait filling them up to their batch size; the merchant's
// other endpoints are not held back. Over the admin API with real receivers on 127.0.0.1, the
// dispatcher driven by hand on a fake clock (a delivery waiting for its slot moves the clock).
import { afterEach, describe, expect, it } from 'vitest';
import { importNdjson, simpleProduct } from '../support/admin-http.js';
import { severalConnections } from '../support/engine.js';
import { SECOND, startWebhookWorld, type WebhookWorld } from './harness.js';

let world: WebhookWorld | undefined;
afterEach(async () => {
  await world?.close();
  world = undefined;
});

const products = (from: number, count: number) => Array.from({ length: count }, (_, i) => simpleProduct(`STORM-${from + i}`));

describe('max_per_second', () => {
  it("spaces an endpoint's deliveries by its rate, fills the waiting ones up to the batch size, and holds back none of the merchant's other endpoints", async () => {
    const w = await startWebhookWorld({ stores: ['de'], webhooks: { batchSize: 5 } });
    world = w;
    const limitedReceiver = await w.receiver();
    const freeReceiver = await w.receiver();
    const limited = await w.register(limitedReceiver, { events: ['content'], max_per_second: 1 });
    expect(limited.max_per_second).toBe(1);
    const free = await w.register(freeReceiver, { events: ['content'] });

    // 12 products: three deliveries each (5, 5, 2 ids).
    expect((await importNdjson(w.service, w.merchant.id, products(1, 12))).status).toBe(200);
    const start = w.clock.ms;
    await w.after(2 * SECOND);
    // The free endpoint gets all three at once; the limited one the first, its next slot a second on.
    expect(freeReceiver.count).toBe(3);
    expect(limitedReceiver.count).toBe(1);

    // Three more products while two deliveries wait: the newest waiting one (2 ids) takes them.
    expect((await importNdjson(w.service, w.merchant.id, products(13, 3))).status).toBe(200);
    await w.after(2 * SECOND);
    expect(freeReceiver.count).toBe(4);
    expect(limitedReceiver.count).toBe(2);
    await w.after(1 * SECOND);
    await w.after(1 * SECOND);
    expect(limitedReceiver.count).toBe(3);

    // Every product once, in three full deliveries; none lost, none made for the later changes.
    const payloads = limitedReceiver.payloads;
    expect(payloads.map((p) => p.product_ids.length)).toEqual([5, 5, 5]);
    const ids = payloads.flatMap((p) => p.product_ids);
    expect(new Set(ids).size).toBe(15);
    expect(await w.deliveries(limited.id)).toHaveLength(3);
    expect(new Set(freeReceiver.payloads.flatMap((p) => p.product_ids))).toEqual(new Set(ids));

    // At most one attempt a second, by the attempt log's times; the free endpoint's first three
    // were all made in the first round, before the limited one's second.
    const attemptTimes = async (endpointId: number) => {
      const deliveries = await w.deliveries(endpointId);
      const details = await Promise.all(deliveries.map((d) => w.delivery(endpointId, d.id)));
      return details.flatMap((d) => d.attempts.map((a) => Date.parse(a.at))).sort((a, b) => a - b);
    };
    const limitedTimes = await attemptTimes(limited.id);
    expect(limitedTimes).toHaveLength(3);
    for (let i = 1; i < limitedTimes.length; i++) expect(limitedTimes[i]! - limitedTimes[i - 1]!).toBeGreaterThanOrEqual(1000);
    const freeTimes = await attemptTimes(free.id);
    expect(freeTimes.slice(0, 3).every((t) => t < limitedTimes[1]!)).toBe(true);
    expect(freeTimes[0]! - start).toBeLessThan(limitedTimes[1]! - start);
  });

  it('is set at registration, edited and removed over the admin API, bounded by the document (1 to 1000)', async () => {
    const w = await startWebhookWorld({ stores: ['de'] });
    world = w;
    const receiver = await w.receiver();
    const created = await w.register(receiver, { events: ['price'], max_per_second: 5 });
    const path = `${w.merchant.base}/webhook-endpoints/${created.id}`;
    expect((await w.endpoint(created.id)).max_per_second).toBe(5);
    for (const bad of [0, 1001, 2.5, '5']) {
      const refused = await w.service.adminApi('PATCH', path, { max_per_second: bad });
      expect(refused.status, `max_per_second ${JSON.stringify(bad)}`).toBe(400);
      expect(refused.body.invalid_params?.[0]?.name).toBe('/max_per_second');
    }
    const refusedAtRegistration = await w.service.adminApi('POST', `${w.merchant.base}/webhook-endpoints`, {
      url: receiver.url,
      max_per_second: 0,
    });
    expect(refusedAtRegistration.status).toBe(400);
    expect((await w.endpoint(created.id)).max_per_second).toBe(5);
    const edited = await w.service.adminApi('PATCH', path, { max_per_second: 20 });
    expect(edited.body.max_per_second).toBe(20);
    const removed = await w.service.adminApi('PATCH', path, { max_per_second: null });
    expect(removed.body.max_per_second).toBeNull();
    const audit = (await w.service.adminApi('GET', `${w.merchant.base}/audit-log?limit=20`)).body.data as {
      action: string;
      detail: string;
    }[];
    expect(audit.map((e) => e.detail)).toEqual(
      expect.arrayContaining([
        expect.stringContaining('at most 5/s'),
        expect.stringContaining('rate at most 20/s'),
        expect.stringContaining('rate unlimited'),
      ]),
    );
  });
});

describe('max_per_second across processes', () => {
  severalConnections.it(
    'gives each slot of the rate to one claim, whichever process claims: slots 1000 / max_per_second ms (and 5%) apart',
    async () => {
      const w = await startWebhookWorld({ stores: ['de'], webhooks: { batchSize: 1 } });
      world = w;
      const receiver = await w.receiver();
      const endpoint = await w.register(receiver, { events: ['content'], max_per_second: 4 });
      await importNdjson(w.service, w.merchant.id, products(1, 20));
      w.clock.advance(2 * SECOND);
      expect(await w.dispatcher.coalesce()).toBe(20);
      const claim = { now: w.clock.now, leaseMs: 40 * SECOND, limit: 20, perEndpoint: 20, inFlightByEndpoint: new Map<number, number>() };
      // Another process on the same database: its own storage.
      const other = await w.service.database.open();
      try {
        const start = w.clock.ms;
        const [first, second] = await Promise.all([w.service.storage.claimDueDeliveries(claim), other.claimDueDeliveries(claim)]);
        // The slots of the next second: four, between the two claims, never the same one twice.
        const firstSecond = [...first, ...second];
        expect(firstSecond).toHaveLength(4);
        expect(new Set(firstSecond.map((d) => d.id)).size).toBe(4);
        expect(firstSecond.map((d) => Date.parse(d.send_at!) - start).sort((a, b) => a - b)).toEqual([0, 262, 525, 787]);
        // Nothing more within that second, from either process.
        expect(await other.claimDueDeliveries(claim)).toEqual([]);
        expect(await w.service.storage.claimDueDeliveries(claim)).toEqual([]);
        // A second on, the next four, from where the last claim left off.
        w.clock.advance(SECOND);
        const next = await other.claimDueDeliveries(claim);
        expect(next.map((d) => Date.parse(d.send_at!) - start)).toEqual([1050, 1312, 1575, 1837]);
        // An endpoint without a rate is claimed as before: at once, send_at null.
        await w.service.adminApi('PATCH', `${w.merchant.base}/webhook-endpoints/${endpoint.id}`, { max_per_second: null });
        const unlimited = await w.service.storage.claimDueDeliveries(claim);
        expect(unlimited.length).toBeGreaterThan(4);
        expect(unlimited.every((d) => d.send_at === null)).toBe(true);
      } finally {
        await other.close();
      }
    },
  );
});
