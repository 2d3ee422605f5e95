// Health that shows failure. An active endpoint whose last attempts failed is `failing`
// in the admin API's endpoint view (with how many since when, and the last success), not merely
// `active`; one 2xx makes it `healthy` again. The owners' notifications say when their condition
// ended: a `failing` one with the next success, a `paused` one when a change resumes the endpoint
// after the cooldown, a `disabled` one when the endpoint is re-enabled. Driven with a fake clock.
import { afterEach, describe, expect, it } from 'vitest';
import { answers, type Receiver } from '../support/receiver.js';
import { HOUR, MINUTE, SECOND, startWebhookWorld, type Endpoint, type WebhookWorld } from './harness.js';

let world: WebhookWorld;
afterEach(async () => {
  await world?.close();
});

const now = () => world.clock.now().toISOString();

async function priceEndpoint(): Promise<{ receiver: Receiver; endpoint: Endpoint }> {
  world = await startWebhookWorld({ stores: ['de'] });
  const receiver = await world.receiver({ behaviour: answers.ok });
  const created = await world.register(receiver, { events: ['price'] });
  return { receiver, endpoint: await world.endpoint(created.id) };
}

let costs = 10;
/** A price change of one product, delivered once the coalescing window has passed. */
async function priceChange(ref = 'A'): Promise<void> {
  costs += 1;
  await world.putProduct(ref, { cost: `${costs}.00` });
  await world.after(2 * SECOND);
}

const notificationsByKind = async () => Object.fromEntries((await world.notifications()).map((n) => [n.kind, n]));

describe("an endpoint's health in the admin API", () => {
  it('is healthy when registered, failing (still active) from its first failed attempt with the count since when and the last success, healthy again after one 2xx', async () => {
    const { receiver, endpoint } = await priceEndpoint();
    expect(endpoint).toMatchObject({ status: 'active', health: 'healthy', failing_since: null, consecutive_failures: 0 });
    await priceChange();
    const lastSuccess = now();

    receiver.answer(answers.serverError);
    await priceChange();
    const firstFailure = now();
    for (let i = 0; i < 6; i++) await priceChange();
    const failing = await world.endpoint(endpoint.id);
    expect(failing).toMatchObject({
      status: 'active',
      health: 'failing',
      consecutive_failures: receiver.count - 1,
      failing_since: firstFailure,
      last_success_at: lastSuccess,
    });
    expect(failing.consecutive_failures).toBeGreaterThanOrEqual(5);
    // The list says the same.
    const listed = (await world.service.adminApi('GET', `${world.merchant.base}/webhook-endpoints`)).body.data;
    expect(listed).toEqual([failing]);

    receiver.answer(answers.noContent);
    await priceChange();
    expect(await world.endpoint(endpoint.id)).toMatchObject({
      status: 'active',
      health: 'healthy',
      consecutive_failures: 0,
      failing_since: null,
      last_success_at: now(),
    });
  });
});

describe('a notification says when its condition ended', () => {
  it("ends a failing notification with the next successful attempt, and a later streak's notification stays open", async () => {
    const { receiver } = await priceEndpoint();
    receiver.answer(answers.serverError);
    for (let i = 0; i < 5; i++) await priceChange();
    const { failing } = await notificationsByKind();
    expect(failing).toMatchObject({ kind: 'failing', ended_at: null });

    world.clock.advance(7 * MINUTE);
    receiver.answer(answers.ok);
    await priceChange();
    const endedAt = now();
    expect((await world.notifications()).map((n) => [n.id, n.ended_at])).toEqual([[failing!.id, endedAt]]);

    // A new streak: a new notification, open; the ended one keeps its time.
    receiver.answer(answers.serverError);
    for (let i = 0; i < 5; i++) await priceChange();
    expect((await world.notifications()).map((n) => [n.kind, n.ended_at])).toEqual([
      ['failing', null],
      ['failing', endedAt],
    ]);
  });

  it('ends a paused notification when a change resumes the endpoint after the cooldown, while the failing one lasts until a success', async () => {
    const { receiver, endpoint } = await priceEndpoint();
    receiver.answer(answers.serverError);
    await priceChange();
    const streakStart = Date.parse(now());
    while (receiver.count < 21) await priceChange();
    world.clock.advance(streakStart + HOUR - world.clock.ms);
    await world.deliverDue();
    expect((await world.endpoint(endpoint.id)).health).toBe('paused');
    expect((await world.notifications()).map((n) => [n.kind, n.ended_at])).toEqual([
      ['paused', null],
      ['failing', null],
    ]);

    // After the cooldown the next change resumes the endpoint (as it is batched, before any attempt):
    // no longer paused, but still failing.
    world.clock.advance(HOUR + MINUTE);
    await world.putProduct('A', { cost: '99.00' });
    world.clock.advance(2 * SECOND);
    const resumedAt = now();
    await world.dispatcher.coalesce();
    expect(await world.endpoint(endpoint.id)).toMatchObject({ status: 'active', health: 'failing' });
    const afterResume = await notificationsByKind();
    expect(afterResume.paused!.ended_at).toBe(resumedAt);
    expect(afterResume.failing!.ended_at).toBeNull();

    world.clock.advance(MINUTE);
    receiver.answer(answers.ok);
    await world.deliverDue();
    expect(await world.endpoint(endpoint.id)).toMatchObject({ status: 'active', health: 'healthy' });
    expect((await world.notifications()).map((n) => [n.kind, n.ended_at])).toEqual([
      ['paused', resumedAt],
      ['failing', now()],
    ]);
  });

  it('ends a disabled notification when the endpoint is re-enabled', async () => {
    const { receiver, endpoint } = await priceEndpoint();
    receiver.answer(answers.gone);
    await priceChange();
    expect(await world.endpoint(endpoint.id)).toMatchObject({ status: 'disabled', health: 'disabled' });
    expect((await notificationsByKind()).disabled!.ended_at).toBeNull();

    world.clock.advance(3 * HOUR);
    const enabled = await world.service.adminApi('PATCH', `${world.merchant.base}/webhook-endpoints/${endpoint.id}`, { status: 'active' });
    expect(enabled.status).toBe(200);
    expect(enabled.body).toMatchObject({ status: 'active', health: 'healthy', consecutive_failures: 0, failing_since: null });
    expect((await notificationsByKind()).disabled!.ended_at).toBe(now());
  });
});
