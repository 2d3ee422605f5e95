// Failed deliveries and receiver endpoint health (spec 3, 4.5, 7;
// docs/decisions.md#endpoint-health): every failure kind counts, retries follow the backoff, then the delivery is given
// up; owners are notified after repeated failures, the endpoint pauses after sustained failures,
// resumes on the next change after the cooldown, and one 2xx clears everything; 410 disables it;
// Retry-After on 429/503 is honoured. Driven through every transition with a fake clock.
import { afterEach, describe, expect, it } from 'vitest';
import { AddressGuard } from '../../src/outbound/address-guard.js';
import { WebhookDispatcher } from '../../src/webhooks/dispatcher.js';
import { OwnerNotifier } from '../../src/webhooks/notifier.js';
import { HttpDeliverySender } from '../../src/webhooks/sender.js';
import { answers, type Behaviour, type Receiver } from '../support/receiver.js';
import { HOUR, MINUTE, SECOND, plus, startWebhookWorld, type Endpoint, type WebhookWorld } from './harness.js';

let world: WebhookWorld;
afterEach(async () => {
  await world?.close();
});

/** The backoff of docs/decisions.md#retries: 30 s, 2 min, 10 min, 1 h, 6 h (jitter fixed at ×1.0 by random 0.5). */
const BACKOFF_MS = [30 * SECOND, 2 * MINUTE, 10 * MINUTE, HOUR, 6 * HOUR];

const now = () => world.clock.now().toISOString();

/** A world with one store and a receiver registered for `price` events only: one delivery per change. */
async function priceEndpoint(options: Parameters<typeof startWebhookWorld>[0] = {}, behaviour: Behaviour = answers.serverError) {
  world = await startWebhookWorld({ stores: ['de'], ...options });
  const receiver = await world.receiver({ behaviour });
  const endpoint = await world.register(receiver, { events: ['price'] });
  return { receiver, endpoint };
}

let costs = 10;
/** A price change of one product, delivered once the coalescing window has passed. */
async function priceChange(ref = 'A'): Promise<void> {
  costs += 1;
  await world.putProduct(ref, { cost: `${costs}.00` });
  await world.after(2 * SECOND);
}

describe('a failed delivery (spec 3: non-2xx status or connection failure)', () => {
  describe.each([
    { failure: 'a 5xx answer', error: 'http_status', statusCode: 500, snippet: 'Internal Server Error' },
    { failure: 'a 3xx answer, which is not followed', error: 'redirect', statusCode: 302, snippet: '' },
    { failure: 'a refused connection', error: 'connection_refused', statusCode: null, snippet: null },
    { failure: 'no answer within the time-out', error: 'timeout', statusCode: null, snippet: null },
  ])('$failure', ({ error, statusCode, snippet }) => {
    it(`is a failed attempt (error ${error}) that counts one consecutive failure, retried after 30 s, 2 min, 10 min, 1 h and 6 h, then given up after the 6th`, async () => {
      const { receiver, endpoint } = await priceEndpoint({ webhooks: { timeoutMs: 300 } });
      const redirectTarget = await world.receiver();
      if (error === 'redirect') receiver.answer(answers.redirect(redirectTarget.url));
      if (error === 'connection_refused') await receiver.refuse();
      if (error === 'timeout') receiver.answer(answers.hang);
      await priceChange();
      const { id } = (await world.deliveries(endpoint.id))[0]!;
      const attempts = async () => (await world.delivery(endpoint.id, id)).attempts;

      for (let attempt = 1; attempt <= 6; attempt++) {
        expect(await attempts()).toHaveLength(attempt);
        expect(await world.endpoint(endpoint.id)).toMatchObject({
          status: 'active',
          consecutive_failures: attempt,
          last_failure_at: now(),
        });
        const delivery = (await world.deliveries(endpoint.id))[0]!;
        if (attempt === 6) {
          expect(delivery).toMatchObject({ id, status: 'given_up', attempts: 6, next_attempt_at: null });
          break;
        }
        expect(delivery).toMatchObject({ id, status: 'failed', attempts: attempt, next_attempt_at: plus(now(), BACKOFF_MS[attempt - 1]!) });
        // Not a moment before it is due.
        await world.after(BACKOFF_MS[attempt - 1]! - 1);
        expect(await attempts()).toHaveLength(attempt);
        await world.after(1);
      }
      // Given up: nothing more is sent, however long we wait.
      await world.after(48 * HOUR);
      const log = await attempts();
      expect(log).toHaveLength(6);
      for (const attempt of log) expect(attempt).toMatchObject({ status_code: statusCode, error, response_snippet: snippet });
      if (error === 'timeout') for (const attempt of log) expect(attempt.latency_ms).toBeGreaterThanOrEqual(290);
      expect(receiver.count).toBe(error === 'connection_refused' ? 0 : 6);
      expect(redirectTarget.count).toBe(0);
    });
  });

  it('refuses at connection time a host name that resolves to a loopback address (blocked_address), sending nothing', async () => {
    // Registration accepted the name (allowlisted there); the sender's guard checks what DNS returns.
    world = await startWebhookWorld({ stores: ['de'], webhooks: { allowHosts: ['127.0.0.1', 'localhost'] } });
    const receiver = await world.receiver();
    const endpoint = await world.register(receiver, { url: receiver.url.replace('127.0.0.1', 'localhost'), events: ['price'] });
    const guarded = new WebhookDispatcher(world.service.storage, world.service.config.webhooks, {
      now: world.clock.now,
      sender: new HttpDeliverySender(new AddressGuard([]), { timeoutMs: 1000 }),
      notifier: new OwnerNotifier(world.service.storage, { url: null, from: 'x' }, world.clock.now),
      random: () => 0.5,
    });
    try {
      await world.putProduct('A');
      world.clock.advance(2 * SECOND);
      await guarded.tick();
    } finally {
      await guarded.stop();
    }
    const [delivery] = await world.deliveries(endpoint.id);
    expect(delivery).toMatchObject({ status: 'failed', attempts: 1, next_attempt_at: plus(now(), 30 * SECOND) });
    expect((await world.delivery(endpoint.id, delivery!.id)).attempts[0]).toMatchObject({
      status_code: null,
      error: 'blocked_address',
      response_snippet: null,
    });
    expect((await world.endpoint(endpoint.id)).consecutive_failures).toBe(1);
    expect(receiver.count).toBe(0);
  });
});

describe('repeated failures: owners are notified (5 consecutive failed attempts)', () => {
  it('notifies once per failure streak at the 5th failure, again only after 24 h, and anew for a new streak', async () => {
    const { receiver, endpoint } = await priceEndpoint();
    await priceChange();
    for (const wait of BACKOFF_MS.slice(0, 3)) await world.after(wait);
    expect(receiver.count).toBe(4);
    expect(await world.notifications()).toEqual([]);
    await world.after(BACKOFF_MS[3]!);
    const notifiedAt = now();
    const [failing] = await world.notifications();
    expect(failing).toMatchObject({ endpoint_id: endpoint.id, kind: 'failing', created_at: notifiedAt, emailed_at: null });
    expect(failing!.subject).toContain(endpoint.url);

    // 6th failure (6 h later): the same streak, no second notification.
    await world.after(BACKOFF_MS[4]!);
    expect((await world.endpoint(endpoint.id)).consecutive_failures).toBe(6);
    expect(await world.notifications()).toHaveLength(1);
    // 23 h after the notification: still not.
    world.clock.advance(Date.parse(notifiedAt) + 23 * HOUR - world.clock.ms);
    await priceChange();
    expect((await world.endpoint(endpoint.id)).consecutive_failures).toBe(7);
    expect(await world.notifications()).toHaveLength(1);
    // 24 h after: the next failure notifies again.
    world.clock.advance(Date.parse(notifiedAt) + 24 * HOUR - world.clock.ms);
    await world.deliverDue();
    expect((await world.endpoint(endpoint.id)).consecutive_failures).toBe(8);
    expect((await world.notifications()).map((n) => n.kind)).toEqual(['failing', 'failing']);

    // One 2xx ends the streak; a new streak notifies at its own 5th failure.
    receiver.answer(answers.ok);
    await world.after(2 * MINUTE);
    expect(await world.endpoint(endpoint.id)).toMatchObject({ consecutive_failures: 0, last_success_at: now() });
    receiver.answer(answers.serverError);
    for (let i = 0; i < 4; i++) await priceChange();
    expect(await world.notifications()).toHaveLength(2);
    await priceChange();
    expect((await world.endpoint(endpoint.id)).consecutive_failures).toBe(5);
    expect(await world.notifications()).toHaveLength(3);
  });
});

describe('sustained failures: the endpoint pauses (20 consecutive failures spanning at least 1 h, 1 h cooldown)', () => {
  /** Failing changes 2 s apart (and the retries they cause) until 20 failures are counted; returns the first failure's time. */
  async function twentyFailures(receiver: Receiver, endpoint: Endpoint): Promise<string> {
    await priceChange();
    const streakStart = now();
    while (receiver.count < 20) await priceChange();
    // Every attempt the receiver saw was counted.
    expect((await world.endpoint(endpoint.id)).consecutive_failures).toBe(receiver.count);
    return streakStart;
  }

  it('pauses at 20 failures spanning 1 h: pending retries dropped, nothing sent, changes recorded as dropped deliveries; the next change after the cooldown resumes delivery', async () => {
    const { receiver, endpoint } = await priceEndpoint();
    const streakStart = await twentyFailures(receiver, endpoint);
    // 20 failures within a minute are not yet "sustained".
    expect(await world.endpoint(endpoint.id)).toMatchObject({ status: 'active', paused_until: null });

    // An hour after the streak began, the next failure pauses the endpoint.
    world.clock.advance(Date.parse(streakStart) + HOUR - world.clock.ms);
    await world.deliverDue();
    const pausedAt = now();
    const paused = await world.endpoint(endpoint.id);
    expect(paused).toMatchObject({ status: 'paused', paused_until: plus(pausedAt, HOUR) });
    expect(paused.consecutive_failures).toBe(receiver.count);
    expect((await world.notifications()).map((n) => n.kind)).toEqual(['paused', 'failing']);
    // Pending retries were dropped, including those of attempts in flight when it paused.
    const statuses = new Set((await world.deliveries(endpoint.id)).map((d) => d.status));
    expect([...statuses]).toEqual(['dropped']);

    // While paused nothing is sent; a change becomes a dropped delivery.
    const sent = receiver.count;
    receiver.answer(answers.ok);
    await priceChange();
    const [duringPause] = await world.deliveries(endpoint.id);
    expect(duringPause).toMatchObject({ status: 'dropped', attempts: 0, next_attempt_at: null });
    await world.after(HOUR - 2 * SECOND - 1);
    expect(receiver.count).toBe(sent);
    expect((await world.endpoint(endpoint.id)).status).toBe('paused');

    // The cooldown is over, but it takes the next change to resume.
    await world.after(1 + 10 * MINUTE);
    expect(await world.endpoint(endpoint.id)).toMatchObject({ status: 'paused', paused_until: plus(pausedAt, HOUR) });
    expect(receiver.count).toBe(sent);
    await priceChange();
    expect(receiver.count).toBe(sent + 1);
    const [resumed] = await world.deliveries(endpoint.id);
    expect(resumed).toMatchObject({ status: 'succeeded', attempts: 1 });
    expect(receiver.payloads.at(-1)!.product_ids).toEqual(resumed!.product_ids);
    expect(await world.endpoint(endpoint.id)).toMatchObject({
      status: 'active',
      consecutive_failures: 0,
      paused_until: null,
      last_success_at: now(),
    });
    // Only that change was sent: the dropped deliveries stay dropped.
    await world.after(24 * HOUR);
    expect(receiver.count).toBe(sent + 1);
  });

  it('is not paused while the 20 failures span less than 1 h', async () => {
    const { receiver, endpoint } = await priceEndpoint();
    const streakStart = await twentyFailures(receiver, endpoint);
    // A failure 1 ms short of an hour after the streak began ...
    world.clock.advance(Date.parse(streakStart) + HOUR - 2 * SECOND - 1 - world.clock.ms);
    await priceChange();
    expect(await world.endpoint(endpoint.id)).toMatchObject({
      status: 'active',
      paused_until: null,
      last_failure_at: plus(streakStart, HOUR - 1),
    });
    // ... and the next one, a full hour after.
    await priceChange();
    expect((await world.endpoint(endpoint.id)).status).toBe('paused');
  });

  it('clears the pause when an attempt in flight as the endpoint paused is answered 2xx (paused -> active, count reset)', async () => {
    const { receiver, endpoint } = await priceEndpoint();
    const streakStart = await twentyFailures(receiver, endpoint);
    world.clock.advance(Date.parse(streakStart) + HOUR - world.clock.ms);
    // Of the attempts now sent at once, the first is failed at once (pausing the endpoint) and
    // the second succeeds a moment later.
    let sentNow = 0;
    receiver.answer(() => (++sentNow === 2 ? { status: 200, delayMs: 200 } : answers.serverError));
    await world.deliverDue();
    const kinds = (await world.notifications()).map((n) => n.kind);
    expect(kinds[0]).toBe('paused');
    expect(await world.endpoint(endpoint.id)).toMatchObject({
      status: 'active',
      consecutive_failures: 0,
      paused_until: null,
      last_success_at: now(),
    });
    const statuses = (await world.deliveries(endpoint.id)).map((d) => d.status);
    expect(statuses.filter((s) => s === 'succeeded')).toHaveLength(1);
    expect(statuses.filter((s) => s !== 'succeeded' && s !== 'dropped')).toEqual([]);
  });
});

describe('one successful delivery (spec 3: any 2xx)', () => {
  it('resets the failure count to zero', async () => {
    const { receiver, endpoint } = await priceEndpoint();
    await priceChange();
    await world.after(30 * SECOND);
    await world.after(2 * MINUTE);
    expect((await world.endpoint(endpoint.id)).consecutive_failures).toBe(3);
    receiver.answer(answers.noContent);
    await world.after(10 * MINUTE);
    expect(await world.endpoint(endpoint.id)).toMatchObject({ status: 'active', consecutive_failures: 0, last_success_at: now() });
    expect((await world.deliveries(endpoint.id))[0]).toMatchObject({ status: 'succeeded', attempts: 4, next_attempt_at: null });
  });
});

describe('receiver-driven control', () => {
  it('disables the endpoint on 410 Gone, notifies the owners, drops pending deliveries and sends nothing after', async () => {
    const { receiver, endpoint } = await priceEndpoint();
    await priceChange('A');
    receiver.answer(answers.gone);
    await priceChange('B');
    expect(await world.endpoint(endpoint.id)).toMatchObject({ status: 'disabled', disabled_reason: 'gone', paused_until: null });
    expect((await world.notifications()).map((n) => n.kind)).toEqual(['disabled']);
    // A's pending retry and B's delivery are dropped.
    expect((await world.deliveries(endpoint.id)).map((d) => d.status)).toEqual(['dropped', 'dropped']);
    const sent = receiver.count;
    receiver.answer(answers.ok);
    await priceChange('C');
    await world.after(24 * HOUR);
    expect(receiver.count).toBe(sent);
    expect((await world.deliveries(endpoint.id))[0]).toMatchObject({ status: 'dropped', attempts: 0 });
    expect((await world.endpoint(endpoint.id)).status).toBe('disabled');
  });

  it('notifies the owners once when several attempts in flight answer 410', async () => {
    const { receiver, endpoint } = await priceEndpoint();
    for (const ref of ['A', 'B', 'C', 'D']) await priceChange(ref);
    expect((await world.endpoint(endpoint.id)).consecutive_failures).toBe(4);
    receiver.answer({ ...answers.gone, delayMs: 50 });
    // The four retries are due together and sent at once.
    await world.after(30 * SECOND);
    expect(receiver.maxInFlight).toBeGreaterThan(1);
    expect(await world.endpoint(endpoint.id)).toMatchObject({ status: 'disabled', disabled_reason: 'gone' });
    expect((await world.notifications()).map((n) => n.kind)).toEqual(['disabled']);
    expect(new Set((await world.deliveries(endpoint.id)).map((d) => d.status))).toEqual(new Set(['dropped']));
  });

  it.each([
    { status: 429, retryAfter: () => '120', waitMs: 120 * SECOND },
    { status: 503, retryAfter: () => new Date(world.clock.ms + 5 * MINUTE).toUTCString(), waitMs: 5 * MINUTE },
  ])('honours Retry-After on $status when it is longer than the backoff', async ({ status, retryAfter, waitMs }) => {
    const { receiver, endpoint } = await priceEndpoint();
    receiver.answer(() => answers.tooManyRequests(retryAfter(), status));
    await priceChange();
    const [delivery] = await world.deliveries(endpoint.id);
    expect(delivery).toMatchObject({ status: 'failed', attempts: 1, next_attempt_at: plus(now(), waitMs) });
    expect((await world.endpoint(endpoint.id)).consecutive_failures).toBe(1);
    receiver.answer(answers.ok);
    await world.after(30 * SECOND);
    expect(receiver.count).toBe(1);
    await world.after(waitMs - 30 * SECOND);
    expect(receiver.count).toBe(2);
    expect((await world.deliveries(endpoint.id))[0]).toMatchObject({ status: 'succeeded', attempts: 2 });
  });

  it('keeps the backoff when Retry-After is shorter', async () => {
    const { endpoint, receiver } = await priceEndpoint();
    receiver.answer(answers.tooManyRequests('5'));
    await priceChange();
    expect((await world.deliveries(endpoint.id))[0]).toMatchObject({ status: 'failed', next_attempt_at: plus(now(), 30 * SECOND) });
  });
});
