// Webhook delivery (spec 2.7, 4.5, 6; docs/decisions.md#webhook-delivery): what a change sends
// to which endpoint, coalescing, and the payload's dispatch time. Every request the receivers get
// is checked against the `webhooks:` section and its signature verified (test/support/receiver.ts).
import { afterEach, describe, expect, it, vi } from 'vitest';
import { importNdjson, simpleProduct } from '../support/admin-http.js';
import { answers } from '../support/receiver.js';
import type { WebhookPayload } from '../support/receiver.js';
import { coalescePassGapMs } from '../../src/webhooks/coalescer.js';
import { WebhookDispatcher } from '../../src/webhooks/dispatcher.js';
import { OwnerNotifier } from '../../src/webhooks/notifier.js';
import type { DeliverySender, SendResult } from '../../src/webhooks/sender.js';
import type { AttemptOutcome, CatalogStorage, StorageTx } from '../../src/storage/port.js';
import type { Config } from '../../src/config.js';
import { SECOND, startWebhookWorld, type WebhookWorld } from './harness.js';

let world: WebhookWorld;
afterEach(async () => {
  await world?.close();
});

/** Payloads without occurred_at, in a stable order, for comparisons. */
const summary = (payloads: WebhookPayload[]) =>
  payloads
    .map(({ event, store_id, product_ids }) => ({ event, store_id, product_ids }))
    .sort((a, b) => `${a.event}:${a.store_id}`.localeCompare(`${b.event}:${b.store_id}`));

describe('what a change delivers', () => {
  it("delivers a product upsert as signed price and content deliveries carrying each store's id to an all-stores endpoint", async () => {
    world = await startWebhookWorld({ stores: ['de', 'pl'] });
    const receiver = await world.receiver();
    await world.register(receiver);
    const id = await world.putProduct('BP-40');
    await world.after(2 * SECOND);

    const { de, pl } = world.stores;
    expect(summary(receiver.payloads)).toEqual(
      summary([
        { event: 'price', store_id: de!.id, product_ids: [id], occurred_at: '' },
        { event: 'content', store_id: de!.id, product_ids: [id], occurred_at: '' },
        { event: 'price', store_id: pl!.id, product_ids: [id], occurred_at: '' },
        { event: 'content', store_id: pl!.id, product_ids: [id], occurred_at: '' },
      ]),
    );
    for (const request of receiver.requests) {
      expect(request.headers['content-type']).toBe('application/json');
      expect(request.timestamp).toBe(String(Math.floor(world.clock.ms / 1000)));
    }
    // The store ids are the ones the public API lists for the merchant.
    const stores = await world.service.api('/v1/stores', world.merchant.key);
    expect(stores.body.data.map((s: { id: number }) => s.id).sort()).toEqual([de!.id, pl!.id].sort());
  });

  it("delivers a product delete as one `removed` delivery with store_id null to an all-stores endpoint and with the store's id to a store-scoped one", async () => {
    world = await startWebhookWorld({ stores: ['de', 'pl'] });
    const allStores = await world.receiver();
    const plOnly = await world.receiver();
    await world.register(allStores);
    await world.register(plOnly, { store: 'pl' });
    const id = await world.putProduct('BP-40');
    await world.after(2 * SECOND);
    const before = { all: allStores.count, pl: plOnly.count };

    await world.deleteProduct('BP-40');
    await world.after(2 * SECOND);
    expect(summary(allStores.payloads.slice(before.all))).toEqual([{ event: 'removed', store_id: null, product_ids: [id] }]);
    expect(summary(plOnly.payloads.slice(before.pl))).toEqual([{ event: 'removed', store_id: world.stores.pl!.id, product_ids: [id] }]);
  });

  it('sends a store-scoped endpoint only the changes of its store', async () => {
    world = await startWebhookWorld({ stores: ['de', 'pl', 'cz'] });
    const receiver = await world.receiver();
    const endpoint = await world.register(receiver, { store: 'de' });
    expect(endpoint.store).toBe('de');
    const first = await world.putProduct('A');
    const second = await world.putProduct('B');
    await world.after(2 * SECOND);
    expect(summary(receiver.payloads)).toEqual([
      { event: 'content', store_id: world.stores.de!.id, product_ids: [first, second] },
      { event: 'price', store_id: world.stores.de!.id, product_ids: [first, second] },
    ]);
  });

  it('sends an endpoint only the events it subscribed to', async () => {
    world = await startWebhookWorld({ stores: ['de'] });
    const prices = await world.receiver();
    const removals = await world.receiver();
    await world.register(prices, { events: ['price'] });
    await world.register(removals, { events: ['removed'] });
    const de = world.stores.de!.id;

    const id = await world.putProduct('A');
    await world.after(2 * SECOND);
    await world.putProduct('A', { title: 'A new title' });
    await world.after(2 * SECOND);
    await world.putProduct('A', { title: 'A new title', cost: '12.00' });
    await world.after(2 * SECOND);
    await world.deleteProduct('A');
    await world.after(2 * SECOND);

    expect(prices.payloads.map(({ event, store_id, product_ids }) => ({ event, store_id, product_ids }))).toEqual([
      { event: 'price', store_id: de, product_ids: [id] },
      { event: 'price', store_id: de, product_ids: [id] },
    ]);
    expect(summary(removals.payloads)).toEqual([{ event: 'removed', store_id: null, product_ids: [id] }]);
  });

  it.each([200, 202, 204])('takes a %i answer as success', async (status) => {
    world = await startWebhookWorld({ stores: ['de'] });
    const receiver = await world.receiver({ behaviour: { status } });
    const endpoint = await world.register(receiver, { events: ['price'] });
    await world.putProduct('A');
    await world.after(2 * SECOND);
    const [delivery] = await world.deliveries(endpoint.id);
    expect(delivery).toMatchObject({ status: 'succeeded', attempts: 1, next_attempt_at: null });
    expect(await world.endpoint(endpoint.id)).toMatchObject({
      status: 'active',
      consecutive_failures: 0,
      last_success_at: world.clock.now().toISOString(),
      last_failure_at: null,
    });
  });

  it('records nothing to deliver for changes made before the endpoint was registered', async () => {
    world = await startWebhookWorld({ stores: ['de'] });
    await world.putProduct('EARLY');
    const receiver = await world.receiver();
    await world.register(receiver);
    await world.after(10 * SECOND);
    expect(receiver.count).toBe(0);
  });
});

describe('coalescing (up to 2 s or 100 product ids)', () => {
  /** A world whose dispatcher counts, per coalescing pass that read an endpoint, the endpoint reads and the endpoint writes. */
  async function countingPasses() {
    const passes: { reads: number; writes: number }[] = [];
    world = await startWebhookWorld({
      stores: ['de', 'at'],
      dispatcherStorage: (storage) =>
        new Proxy(storage, {
          get(target, key, receiver) {
            if (key === 'transaction') {
              return <T>(fn: (tx: StorageTx) => Promise<T>) =>
                target.transaction((tx) => {
                  const pass = { reads: 0, writes: 0 };
                  const counting = new Proxy(tx, {
                    get(t, k, r) {
                      const value = Reflect.get(t, k, r) as unknown;
                      if (typeof value !== 'function') return value;
                      if (k === 'coalescingEndpoint') pass.reads++;
                      if (k === 'updateWebhookEndpoint') pass.writes++;
                      return (value as (...a: unknown[]) => unknown).bind(t);
                    },
                  });
                  return fn(counting).finally(() => {
                    if (pass.reads > 0) passes.push(pass);
                  });
                });
            }
            const value = Reflect.get(target, key, receiver) as unknown;
            return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
          },
        }),
    });
    const receiver = await world.receiver();
    const endpoint = await world.register(receiver);
    return { passes, receiver, endpoint };
  }

  it("reads an endpoint once a pass for all of its groups (each event and store's)", async () => {
    const { passes, receiver } = await countingPasses();
    // A new product: price and content in each of the 2 stores, 4 groups of the one endpoint.
    await world.putProduct('A');
    await world.after(2 * SECOND);
    expect(receiver.count).toBe(4);
    expect(passes).toEqual([{ reads: 1, writes: 0 }]);
  });

  it("resumes a paused endpoint whose cooldown is over once in a pass, and delivers every group's changes", async () => {
    const { passes, receiver, endpoint } = await countingPasses();
    await world.service.storage.updateWebhookEndpoint(endpoint.id, { status: 'paused', paused_until: world.clock.now().toISOString() });
    await world.putProduct('A');
    await world.after(2 * SECOND);
    expect(receiver.count).toBe(4);
    expect(passes).toEqual([{ reads: 1, writes: 1 }]);
    for (const delivery of await world.deliveries(endpoint.id)) expect(delivery.status).toBe('succeeded');
    expect((await world.endpoint(endpoint.id)).status).toBe('active');
  });

  it('batches 150 product changes into deliveries of at most 100 ids per event and store', async () => {
    world = await startWebhookWorld({ stores: ['de', 'pl'] });
    const receiver = await world.receiver();
    await world.register(receiver);
    const imported = await importNdjson(
      world.service,
      world.merchant.id,
      Array.from({ length: 150 }, (_, i) => simpleProduct(`P-${i}`)),
    );
    expect(imported.status, imported.text).toBe(200);

    // 100 ids are waiting in each (event, store): those leave at once, without waiting.
    await world.deliverDue();
    expect(receiver.count).toBe(4);
    expect(receiver.payloads.every((p) => p.product_ids.length === 100)).toBe(true);
    // The remaining 50 per group wait for the window ...
    await world.after(2 * SECOND - 1);
    expect(receiver.count).toBe(4);
    // ... and leave when it has elapsed.
    await world.after(1);
    expect(receiver.count).toBe(8);

    const ids = new Map<string, number[]>();
    for (const payload of receiver.payloads) {
      expect(payload.product_ids.length).toBeLessThanOrEqual(100);
      const key = `${payload.event}:${payload.store_id}`;
      ids.set(key, [...(ids.get(key) ?? []), ...payload.product_ids]);
    }
    const { de, pl } = world.stores;
    expect([...ids.keys()].sort()).toEqual([`content:${de!.id}`, `content:${pl!.id}`, `price:${de!.id}`, `price:${pl!.id}`].sort());
    const products = (await world.service.api('/v1/products?per_page=200', world.merchant.key)).body.data.map((p: { id: number }) => p.id);
    expect(products).toHaveLength(150);
    for (const group of ids.values()) expect([...group].sort((a, b) => a - b)).toEqual(products);
  });

  it('holds a change until the coalescing window has elapsed', async () => {
    world = await startWebhookWorld({ stores: ['de'] });
    const receiver = await world.receiver();
    await world.register(receiver, { events: ['price'] });
    const first = await world.putProduct('A');
    await world.deliverDue();
    await world.after(SECOND);
    const second = await world.putProduct('B');
    await world.after(SECOND - 1);
    expect(receiver.count).toBe(0);
    // 2 s after the oldest waiting change, both leave in one delivery.
    await world.after(1);
    expect(receiver.payloads.map((p) => p.product_ids)).toEqual([[first, second]]);
  });
});

describe('a running dispatcher (a stream of small commits)', () => {
  it('starts a coalescing pass at most once per coalescePassGapMs however many commits wake it, and still delivers every change', async () => {
    // Every product its own batch (batchSize 1): deliveries are created at the first pass after the change.
    world = await startWebhookWorld({ stores: ['de'], webhooks: { coalesceMs: 1000, batchSize: 1, pollIntervalMs: 60_000 } });
    const gapMs = coalescePassGapMs(1000);
    expect(gapMs).toBe(100);
    const receiver = await world.receiver();
    await world.register(receiver, { events: ['price'] });
    const passes: number[] = [];
    const coalesce = world.dispatcher.coalesce.bind(world.dispatcher);
    world.dispatcher.coalesce = () => {
      passes.push(performance.now());
      return coalesce();
    };
    world.dispatcher.start();
    const commits = 12;
    // Sent at once: each commit wakes the dispatcher (and each pass's own deliveries wake it again).
    await Promise.all(Array.from({ length: commits }, (_, i) => world.putProduct(`P-${i}`)));
    await receiver.waitFor(commits, 15_000);
    // However many wake-ups (and however slowly a loaded machine commits), passes are gapMs apart.
    expect(passes.length).toBeGreaterThan(0);
    for (let i = 1; i < passes.length; i++) expect(passes[i]! - passes[i - 1]!).toBeGreaterThanOrEqual(gapMs - 1);
    expect(receiver.payloads.flatMap((p) => p.product_ids)).toHaveLength(commits);
  });
});

describe('a running dispatcher during a long coalescing pass (a backlog of millions of outbox rows)', () => {
  it('sends the deliveries already due while the pass goes on, rather than after it', async () => {
    world = await startWebhookWorld({ stores: ['de'], webhooks: { coalesceMs: 0, batchSize: 1, pollIntervalMs: 20 } });
    const receiver = await world.receiver();
    await world.register(receiver, { events: ['price'] });
    await world.putProduct('DUE-1');
    // The first pass makes the delivery; the next one does not end until the test says so.
    expect(await world.dispatcher.coalesce()).toBe(1);
    let endPass!: () => void;
    const passEnds = new Promise<void>((resolve) => {
      endPass = resolve;
    });
    let passes = 0;
    world.dispatcher.coalesce = async () => {
      passes++;
      await passEnds;
      return 0;
    };
    world.dispatcher.start();
    try {
      // The poll started the pass, and the next poll (20 ms on) a round of sends beside it.
      await receiver.waitFor(1, 5000);
      expect(passes).toBe(1);
      expect(receiver.payloads.flatMap((p) => p.product_ids)).toHaveLength(1);
    } finally {
      endPass();
    }
  });
});

describe('occurred_at (spec 6 rule 2: the dispatch time)', () => {
  it('is the time of the first dispatch and stays the same on a retry, which is signed anew', async () => {
    world = await startWebhookWorld({ stores: ['de'], start: '2025-03-14T09:00:00.250Z' });
    const receiver = await world.receiver({ behaviour: answers.serverError });
    const endpoint = await world.register(receiver, { events: ['price'] });
    await world.putProduct('A');
    await world.after(2 * SECOND);
    receiver.answer(answers.ok);
    await world.after(30 * SECOND);

    const [first, retry] = receiver.requests;
    expect(first!.payload.occurred_at).toBe('2025-03-14T09:00:02Z');
    expect(retry!.payload).toEqual(first!.payload);
    expect(Number(retry!.timestamp) - Number(first!.timestamp)).toBe(30);
    const [delivery] = await world.deliveries(endpoint.id);
    expect(delivery).toMatchObject({ status: 'succeeded', attempts: 2, occurred_at: '2025-03-14T09:00:02Z' });
  });
});

describe('connections and concurrency', () => {
  it('reuses one keep-alive connection for consecutive deliveries to a receiver', async () => {
    world = await startWebhookWorld({ stores: ['de'] });
    const receiver = await world.receiver();
    await world.register(receiver, { events: ['price'] });
    for (const cost of ['11.00', '12.00', '13.00']) {
      await world.putProduct('A', { cost });
      await world.after(2 * SECOND);
    }
    expect(receiver.count).toBe(3);
    expect(new Set(receiver.requests.map((r) => r.remotePort)).size).toBe(1);
  });

  it("keeps an endpoint's concurrent deliveries on at most 4 keep-alive connections, each reused", async () => {
    world = await startWebhookWorld({ stores: ['de'] });
    const receiver = await world.receiver({ behaviour: { status: 204, delayMs: 5 } });
    const endpoint = await world.register(receiver);
    for (let i = 0; i < 24; i++) expect((await world.post(`/webhook-endpoints/${endpoint.id}/test`)).status).toBe(202);
    await world.deliverDue();
    expect(receiver.count).toBe(24);
    // Counted by the receiver: the client ports its 24 requests came from.
    const connections = new Set(receiver.requests.map((r) => r.remotePort));
    expect(connections.size).toBeLessThanOrEqual(4);
    expect(receiver.requests.length / connections.size).toBeGreaterThanOrEqual(6);
  });

  it('records the attempts to an endpoint that end within a few turns of the event loop in one transaction, not one each', async () => {
    world = await startWebhookWorld({ stores: ['de'] });
    /** Per transaction (or statement that is one: PostgreSQL's successes to a healthy endpoint) that recorded outcomes, how many. */
    const recorded: number[] = [];
    const storage = new Proxy(world.service.storage, {
      get(target, key, receiver) {
        if (key === 'recordSuccessfulAttempts' && target.recordSuccessfulAttempts) {
          return async (outcomes: AttemptOutcome[], endpoints: { id: number; lastSuccessAt: string }[]) => {
            const done = await target.recordSuccessfulAttempts!(outcomes, endpoints);
            if (done) recorded.push(outcomes.length);
            return done;
          };
        }
        if (key === 'transaction') {
          return <T>(fn: (tx: StorageTx) => Promise<T>) =>
            target.transaction((tx) => {
              let outcomes = 0;
              const counting = new Proxy(tx, {
                get(t, k, r) {
                  const value = Reflect.get(t, k, r) as unknown;
                  if (typeof value !== 'function') return value;
                  if (k === 'recordAttemptOutcomes' || k === 'recordAttemptOutcomesWithHealth')
                    return (written: unknown[], ...rest: unknown[]) => {
                      outcomes += written.length;
                      return (value as (...a: unknown[]) => unknown).call(t, written, ...rest);
                    };
                  return (value as (...a: unknown[]) => unknown).bind(t);
                },
              });
              return fn(counting).finally(() => {
                if (outcomes > 0) recorded.push(outcomes);
              });
            });
        }
        const value = Reflect.get(target, key, receiver) as unknown;
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
    // A receiver's 4 answers arrive one per turn of the event loop, as from a real receiver a
    // fraction of a millisecond apart (each attempt was recorded in a transaction of its own on SQLite).
    const waiting: (() => void)[] = [];
    const sender: DeliverySender = {
      send: () =>
        new Promise<SendResult>((resolve) => {
          waiting.push(() => resolve({ statusCode: 204, error: null, latencyMs: 1, responseSnippet: '', retryAfter: null }));
          if (waiting.length < 4) return;
          const answers = waiting.splice(0);
          const next = () => {
            answers.shift()?.();
            if (answers.length > 0) setImmediate(next);
          };
          next();
        }),
      close: async () => {},
    };
    const dispatcher = new WebhookDispatcher(storage, world.service.config.webhooks, {
      now: world.clock.now,
      sender,
      notifier: new OwnerNotifier(world.service.storage, { url: null, from: 'x' }, world.clock.now),
    });
    const endpoint = await world.register(await world.receiver());
    for (let i = 0; i < 16; i++) expect((await world.post(`/webhook-endpoints/${endpoint.id}/test`)).status).toBe(202);
    await dispatcher.tick();
    await dispatcher.stop();
    expect(recorded.reduce((a, b) => a + b, 0)).toBe(16);
    // Gathered: their slots freed by the answers, the next four are sent while the first are
    // recorded and may be recorded with them (how many each time depends on the machine's load).
    expect(recorded.length).toBeLessThan(16 / 2);
    for (const delivery of await world.deliveries(endpoint.id)) expect(delivery.status).toBe('succeeded');
  });

  it('sends at most 4 deliveries at once to one endpoint', async () => {
    world = await startWebhookWorld({ stores: ['de'] });
    const receiver = await world.receiver({ behaviour: { status: 204, delayMs: 50 } });
    const endpoint = await world.register(receiver);
    await world.putProduct('A');
    for (let i = 0; i < 10; i++) {
      const queued = await world.post(`/webhook-endpoints/${endpoint.id}/test`);
      expect(queued.status).toBe(202);
    }
    await world.deliverDue();
    expect(receiver.count).toBe(10);
    expect(receiver.maxInFlight).toBe(4);
  });

  /**
   * `count` test deliveries to one receiver answering `status`, one at a time (per-endpoint
   * concurrency 1), sendDue running, and nothing recorded until `recordingOpen()`: the
   * dispatcher's transactions and PostgreSQL's one-statement record of successes wait; claims do not.
   */
  async function sentWhileRecordingHeldBack(status: number, count: number) {
    let open = () => {};
    const gate = new Promise<void>((resolve) => (open = resolve));
    world = await startWebhookWorld({
      stores: ['de'],
      webhooks: { perEndpointConcurrency: 1 },
      dispatcherStorage: (storage) =>
        new Proxy(storage, {
          get(target, key, receiver) {
            const value = Reflect.get(target, key, receiver) as unknown;
            if (typeof value !== 'function') return value;
            if (key === 'transaction' || key === 'recordSuccessfulAttempts')
              return async (...args: unknown[]) => {
                await gate;
                return (value as (...a: unknown[]) => unknown).apply(target, args);
              };
            return (value as (...a: unknown[]) => unknown).bind(target);
          },
        }),
    });
    const receiver = await world.receiver({ behaviour: { status } });
    const endpoint = await world.register(receiver);
    for (let i = 0; i < count; i++) expect((await world.post(`/webhook-endpoints/${endpoint.id}/test`)).status).toBe(202);
    return { receiver, endpoint, sending: world.dispatcher.sendDue(), recordingOpen: open };
  }

  it("sends an endpoint's next delivery while the last one's success is recorded: a 2xx answer frees its slot", async () => {
    const { receiver, endpoint, sending, recordingOpen } = await sentWhileRecordingHeldBack(204, 3);
    // Each answered before the one before it is recorded, one at a time.
    await vi.waitFor(() => expect(receiver.count).toBe(3), { timeout: 5000, interval: 5 });
    expect(receiver.maxInFlight).toBe(1);
    recordingOpen();
    expect(await sending).toBe(3);
    for (const delivery of await world.deliveries(endpoint.id)) expect(delivery).toMatchObject({ status: 'succeeded', attempts: 1 });
  });

  it("holds an endpoint's slot until a failure is recorded: the endpoint's health is known before its next delivery", async () => {
    const { receiver, sending, recordingOpen } = await sentWhileRecordingHeldBack(500, 2);
    await vi.waitFor(() => expect(receiver.count).toBe(1), { timeout: 5000, interval: 5 });
    await new Promise<void>((resolve) => setTimeout(resolve, 200));
    expect(receiver.count).toBe(1);
    recordingOpen();
    expect(await sending).toBe(2);
    expect(receiver.count).toBe(2);
  });

  /** `count` test deliveries to one receiver answering after 20 ms, delivered; the size of each claim that took any. */
  async function claimsOfABacklog(count: number, webhooks: Partial<Config['webhooks']> = {}) {
    const claims: number[] = [];
    world = await startWebhookWorld({
      stores: ['de'],
      webhooks,
      dispatcherStorage: (storage) =>
        new Proxy(storage, {
          get(target, key, receiver) {
            if (key === 'claimDueDeliveries') {
              return async (claim: Parameters<CatalogStorage['claimDueDeliveries']>[0]) => {
                const claimed = await target.claimDueDeliveries(claim);
                if (claimed.length > 0) claims.push(claimed.length);
                return claimed;
              };
            }
            const value = Reflect.get(target, key, receiver);
            return typeof value === 'function' ? value.bind(target) : value;
          },
        }),
    });
    const receiver = await world.receiver({ behaviour: { status: 204, delayMs: 20 } });
    const endpoint = await world.register(receiver);
    for (let i = 0; i < count; i++) expect((await world.post(`/webhook-endpoints/${endpoint.id}/test`)).status).toBe(202);
    await world.deliverDue();
    expect(receiver.count).toBe(count);
    expect(receiver.maxInFlight).toBe(4);
    return claims;
  }

  it('claims ahead for an endpoint with a backlog: its 4 slots and 12 more per claim (3 rounds: the 30 s lease margin over the 10 s time-out), never more than 4 at once', async () => {
    const claims = await claimsOfABacklog(40);
    // 4 in flight and 12 ahead, then more ahead as the waiting ones have started: a claim per ~12
    // attempts however apart they end (without claims ahead, a claim for each attempt that ends alone).
    expect(claims[0]).toBe(16);
    expect(claims.reduce((a, b) => a + b, 0)).toBe(40);
    expect(claims.length).toBeLessThanOrEqual(4);
  });

  it('claims one round ahead when the lease margin holds a single time-out', async () => {
    const claims = await claimsOfABacklog(16, { timeoutMs: 10_000, leaseMarginMs: 10_000 });
    expect(claims[0]).toBe(8);
    expect(claims.reduce((a, b) => a + b, 0)).toBe(16);
  });

  /** 8 test deliveries to one slow receiver, sendDue running: 4 in flight, 4 claimed ahead behind them. */
  async function fourSentFourClaimedAhead() {
    world = await startWebhookWorld({ stores: ['de'] });
    const receiver = await world.receiver({ behaviour: { status: 204, delayMs: 100 } });
    const endpoint = await world.register(receiver);
    for (let i = 0; i < 8; i++) expect((await world.post(`/webhook-endpoints/${endpoint.id}/test`)).status).toBe(202);
    const sending = world.dispatcher.sendDue();
    while (receiver.inFlightNow < 4) await new Promise((resolve) => setTimeout(resolve, 5));
    return { receiver, endpoint, sending };
  }

  it('hands the deliveries claimed ahead back at stop: due again at once, for any process', async () => {
    const { receiver, endpoint, sending } = await fourSentFourClaimedAhead();
    await world.dispatcher.stop();
    await sending;
    expect(receiver.count).toBe(4);
    // Another dispatcher on the same database claims the other 4 at once (no lease to wait for).
    const claimed = await world.service.storage.claimDueDeliveries({
      now: world.clock.now,
      leaseMs: 60_000,
      limit: 10,
      perEndpoint: 4,
      inFlightByEndpoint: new Map(),
    });
    expect(claimed).toHaveLength(4);
    expect(new Set(claimed.map((d) => d.endpoint_id))).toEqual(new Set([endpoint.id]));
  });

  it('hands back a delivery claimed ahead whose lease ran short while it waited, and the same round sends it', async () => {
    const { receiver, sending } = await fourSentFourClaimedAhead();
    // 4 in flight, 4 claimed ahead behind them; while they wait, their leases (the time-out, 10 s,
    // plus the margin, 30 s) come within an attempt's time-out of their end, and have not ended.
    world.clock.advance(35 * SECOND);
    const sent = await sending;
    // Handed back when their turn came, and claimed again by the same round with a new lease: not
    // left leased until the lease ran out.
    expect(sent).toBe(8);
    expect(receiver.count).toBe(8);
    expect(new Set(receiver.requests.map((r) => r.headers['webhook-id'])).size).toBe(8);
  });

  it("does not hold back other endpoints behind one endpoint's backlog", async () => {
    // Small bounds, so that the backlog is larger than what one round reads (16 x overall).
    world = await startWebhookWorld({ stores: ['de', 'pl'], webhooks: { overallConcurrency: 2, perEndpointConcurrency: 1 } });
    const busy = await world.receiver({ behaviour: { status: 204, delayMs: 20 } });
    const other = await world.receiver();
    const backlogged = await world.register(busy, { store: 'de' });
    await world.register(other, { store: 'pl' });
    await world.putProduct('A');
    for (let i = 0; i < 40; i++) expect((await world.post(`/webhook-endpoints/${backlogged.id}/test`)).status).toBe(202);
    world.clock.advance(2 * SECOND);
    await world.dispatcher.tick();
    // The other endpoint's deliveries are not queued behind the backlog.
    expect(busy.count).toBeGreaterThan(0);
    expect(busy.maxInFlight).toBe(1);
    expect(other.payloads.map((p) => p.event).sort()).toEqual(['content', 'price']);
    const backlogDone = busy.requests.at(-1)!.receivedAt;
    // Timestamps in whole milliseconds: two requests in the same one are not in order.
    for (const request of other.requests) expect(request.receivedAt).toBeLessThanOrEqual(backlogDone);
  });

  it('keeps delivering to other endpoints while one receiver hangs until the time-out', async () => {
    world = await startWebhookWorld({ stores: ['de', 'pl'], webhooks: { coalesceMs: 0, pollIntervalMs: 10, timeoutMs: 3000 } });
    const hanging = await world.receiver({ behaviour: answers.hang });
    const other = await world.receiver();
    await world.register(hanging, { store: 'de', events: ['price'] });
    await world.register(other, { store: 'pl', events: ['price'] });
    world.dispatcher.start();
    await world.putProduct('A');
    await hanging.waitFor(1, 2000);
    await other.waitFor(1, 2000);
    // While the first receiver still hangs, the next change reaches the other one promptly.
    const started = Date.now();
    await world.putProduct('A', { cost: '11.00' });
    await other.waitFor(2, 2000);
    expect(Date.now() - started).toBeLessThan(1000);
  });
});
