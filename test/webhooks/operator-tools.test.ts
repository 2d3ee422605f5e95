// Operator tools over the admin API (openapi/admin.yaml; docs/webhooks.md#endpoints, "Operator tools"): the
// attempt log, resend, a test event, recovery of failed deliveries since a time, the owners'
// notifications, and 409 for sending tools on a paused or disabled endpoint.
import { afterEach, describe, expect, it } from 'vitest';
import { adminOk } from '../support/admin-http.js';
import { answers } from '../support/receiver.js';
import { HOUR, MINUTE, SECOND, startWebhookWorld, type WebhookWorld } from './harness.js';

let world: WebhookWorld | undefined;
afterEach(async () => {
  await world?.close();
  world = undefined;
});

async function setUp(options: Parameters<typeof startWebhookWorld>[0] = {}, body: Record<string, unknown> = { events: ['price'] }) {
  const w = await startWebhookWorld({ stores: ['de'], ...options });
  world = w;
  const receiver = await w.receiver();
  const endpoint = await w.register(receiver, body);
  return { w, receiver, endpoint, path: `/webhook-endpoints/${endpoint.id}` };
}

describe('the attempt log', () => {
  it('records each attempt with its time, status, error, latency and the first 4096 characters of the answer', async () => {
    const { w, receiver, endpoint } = await setUp();
    const large = Array.from({ length: 1000 }, (_, i) => `line ${String(i).padStart(4, '0')}\n`).join('');
    expect(large.length).toBeGreaterThan(4096);
    receiver.answer({ status: 500, headers: { 'Content-Type': 'text/plain' }, body: large });
    await w.putProduct('A');
    await w.after(2 * SECOND);
    const firstAt = w.clock.now().toISOString();
    receiver.answer({ status: 200, body: 'thanks' });
    await w.after(30 * SECOND);

    const [delivery] = await w.deliveries(endpoint.id);
    const detail = await w.delivery(endpoint.id, delivery!.id);
    expect(detail).toMatchObject({ id: delivery!.id, endpoint_id: endpoint.id, event: 'price', status: 'succeeded' });
    expect(detail.attempts).toHaveLength(2);
    const [failed, succeeded] = detail.attempts;
    expect(failed).toMatchObject({ at: firstAt, status_code: 500, error: 'http_status', response_snippet: large.slice(0, 4096) });
    expect(succeeded).toMatchObject({ at: w.clock.now().toISOString(), status_code: 200, error: null, response_snippet: 'thanks' });
    for (const attempt of detail.attempts) {
      expect(attempt.latency_ms).toBeGreaterThanOrEqual(0);
      expect(attempt.latency_ms).toBeLessThan(5000);
    }
  });

  it('bounds the snippet of a multi-byte answer to 4 KiB decoded as UTF-8', async () => {
    const { w, receiver, endpoint } = await setUp();
    receiver.answer({ status: 503, body: '€'.repeat(3000) });
    await w.putProduct('A');
    await w.after(2 * SECOND);
    const [delivery] = await w.deliveries(endpoint.id);
    const [attempt] = (await w.delivery(endpoint.id, delivery!.id)).attempts;
    expect(attempt!.response_snippet!.length).toBeLessThanOrEqual(4096);
    expect(Buffer.byteLength(attempt!.response_snippet!.replace(/\uFFFD+$/, ''))).toBeLessThanOrEqual(4096);
    expect(attempt!.response_snippet!.startsWith('€'.repeat(1365))).toBe(true);
  });

  it('lists deliveries newest first, by status, paged with before_id', async () => {
    const { w, endpoint } = await setUp();
    for (const cost of ['11.00', '12.00', '13.00', '14.00']) {
      await w.putProduct('A', { cost });
      await w.after(2 * SECOND);
    }
    const all = await w.deliveries(endpoint.id);
    expect(all).toHaveLength(4);
    expect(all.map((d) => d.id)).toEqual([...all.map((d) => d.id)].sort((a, b) => b - a));
    const base = `${w.merchant.base}/webhook-endpoints/${endpoint.id}/deliveries`;
    const page1 = (await adminOk(w.service, 'GET', `${base}?limit=3`)).data;
    const page2 = (await adminOk(w.service, 'GET', `${base}?limit=3&before_id=${page1[2].id}`)).data;
    expect([...page1, ...page2].map((d: { id: number }) => d.id)).toEqual(all.map((d) => d.id));
    expect((await adminOk(w.service, 'GET', `${base}?status=succeeded`)).data).toHaveLength(4);
    expect((await adminOk(w.service, 'GET', `${base}?status=failed`)).data).toEqual([]);
    expect((await w.service.adminApi('GET', `${base}?status=lost`)).status).toBe(400);
    expect((await w.service.adminApi('GET', `${base}/999999`)).status).toBe(404);
  });
});

describe('resend', () => {
  it('queues a new delivery with the same event, store and product ids; the original stays as it is', async () => {
    const { w, receiver, endpoint, path } = await setUp();
    const id = await w.putProduct('A');
    await w.after(2 * SECOND);
    const [original] = await w.deliveries(endpoint.id);
    const firstOccurredAt = original!.occurred_at;
    w.clock.advance(MINUTE);

    const response = await w.post(`${path}/deliveries/${original!.id}/resend`);
    expect(response.status).toBe(202);
    expect(response.body).toMatchObject({
      endpoint_id: endpoint.id,
      event: 'price',
      store_id: original!.store_id,
      product_ids: [id],
      status: 'pending',
      attempts: 0,
      occurred_at: null,
      next_attempt_at: w.clock.now().toISOString(),
    });
    expect(response.body.id).toBeGreaterThan(original!.id);
    await w.deliverDue();
    expect(receiver.count).toBe(2);
    const [first, again] = receiver.payloads;
    expect({ ...again, occurred_at: undefined }).toEqual({ ...first, occurred_at: undefined });
    expect(again!.occurred_at).toBe(`${w.clock.now().toISOString().slice(0, 19)}Z`);
    expect(await w.delivery(endpoint.id, original!.id)).toMatchObject({ status: 'succeeded', occurred_at: firstOccurredAt });
    expect((await w.post(`${path}/deliveries/999999/resend`)).status).toBe(404);
  });
});

describe('what a resend replaces', () => {
  it('names the original, which names it; an original waiting for a retry is dropped, so the receiver gets the payload once', async () => {
    const { w, receiver, endpoint, path } = await setUp();
    receiver.answer(answers.serverError);
    await w.putProduct('A');
    await w.after(2 * SECOND);
    const [original] = await w.deliveries(endpoint.id);
    expect(original).toMatchObject({ status: 'failed', attempts: 1, replaces: null, replaced_by: null, test: false });
    receiver.answer(answers.ok);

    const resent = (await w.post(`${path}/deliveries/${original!.id}/resend`)).body;
    expect(resent).toMatchObject({ replaces: original!.id, replaced_by: null, test: false, status: 'pending' });
    expect(await w.delivery(endpoint.id, original!.id)).toMatchObject({ status: 'dropped', next_attempt_at: null, replaced_by: resent.id });
    await w.deliverDue();
    // The original's retries never come: one delivery of the payload after the failed attempt.
    for (const wait of [30 * SECOND, 2 * MINUTE, 10 * MINUTE, HOUR, 6 * HOUR]) await w.after(wait);
    expect(receiver.count).toBe(2);
    expect(await w.delivery(endpoint.id, resent.id)).toMatchObject({ status: 'succeeded', replaces: original!.id });
    expect((await w.delivery(endpoint.id, original!.id)).attempts).toHaveLength(1);
  });

  it('keeps a succeeded original as it is (the receiver gets the payload twice), and a resend of a test is a test', async () => {
    const { w, endpoint, path } = await setUp();
    await w.putProduct('A');
    const test = (await w.post(`${path}/test`)).body;
    expect(test).toMatchObject({ test: true, replaces: null });
    await w.after(2 * SECOND);
    const resent = (await w.post(`${path}/deliveries/${test.id}/resend`)).body;
    expect(resent).toMatchObject({ test: true, replaces: test.id });
    expect(await w.delivery(endpoint.id, test.id)).toMatchObject({ status: 'succeeded', replaced_by: resent.id });
    const changes = (await w.deliveries(endpoint.id)).filter((d) => !d.test);
    expect(changes).toHaveLength(1);
    expect(changes[0]).toMatchObject({ test: false, replaces: null, replaced_by: null });
  });
});

describe('the request a delivery sent', () => {
  it('shows the exact body and, per attempt, the URL and headers as the receiver got them, signature included', async () => {
    const { w, receiver, endpoint } = await setUp();
    receiver.answer(answers.serverError);
    await w.putProduct('A');
    // Batched but not sent yet: no body until the first attempt fixes occurred_at.
    w.clock.advance(2 * SECOND);
    await w.dispatcher.coalesce();
    const [waiting] = await w.deliveries(endpoint.id);
    expect(await w.delivery(endpoint.id, waiting!.id)).toMatchObject({ occurred_at: null, body: null, attempts: [] });
    await w.deliverDue();
    receiver.answer(answers.ok);
    await w.after(30 * SECOND);
    const [delivery] = await w.deliveries(endpoint.id);
    const detail = await w.delivery(endpoint.id, delivery!.id);
    expect(detail.attempts).toHaveLength(2);
    expect(receiver.requests).toHaveLength(2);
    for (const [i, attempt] of detail.attempts.entries()) {
      const got = receiver.requests[i]!;
      expect(detail.body).toBe(got.rawBody.toString('utf8'));
      expect(attempt.request_url).toBe(receiver.url);
      expect(attempt.request_headers).toEqual({
        'Content-Type': got.headers['content-type'],
        'X-Service-Timestamp': got.timestamp,
        'X-Service-Signature': got.signature,
        'webhook-id': got.headers['webhook-id'],
      });
    }
    // Two attempts, two timestamps, two signatures over the same bytes.
    expect(detail.attempts[0]!.request_headers!['X-Service-Timestamp']).not.toBe(
      detail.attempts[1]!.request_headers!['X-Service-Timestamp'],
    );
  });
});

describe('a test event', () => {
  it("queues a real-shaped content delivery for the smallest product id and the default store, whatever the endpoint's events", async () => {
    const { w, receiver, endpoint, path } = await setUp({ stores: ['de', 'pl'] });
    const first = await w.putProduct('A');
    await w.putProduct('B');
    await w.after(2 * SECOND);
    const sent = receiver.count;

    const response = await w.post(`${path}/test`);
    expect(response.status).toBe(202);
    expect(response.body).toMatchObject({
      endpoint_id: endpoint.id,
      event: 'content',
      store_id: w.stores.de!.id,
      product_ids: [first],
      status: 'pending',
      attempts: 0,
    });
    await w.deliverDue();
    expect(receiver.payloads.slice(sent).map(({ event, store_id, product_ids }) => ({ event, store_id, product_ids }))).toEqual([
      { event: 'content', store_id: w.stores.de!.id, product_ids: [first] },
    ]);
    expect(await w.delivery(endpoint.id, response.body.id)).toMatchObject({ status: 'succeeded' });
  });

  it("uses the endpoint's store, and product id 1 when the merchant has no products", async () => {
    const { w, receiver, path } = await setUp({ stores: ['de', 'pl'] }, { store: 'pl' });
    const response = await w.post(`${path}/test`);
    expect(response.body).toMatchObject({ event: 'content', store_id: w.stores.pl!.id, product_ids: [1] });
    await w.deliverDue();
    expect(receiver.payloads).toHaveLength(1);
  });

  it("counts for the endpoint's health like any delivery", async () => {
    const { w, receiver, endpoint, path } = await setUp();
    receiver.answer(answers.serverError);
    await w.post(`${path}/test`);
    await w.deliverDue();
    expect(await w.endpoint(endpoint.id)).toMatchObject({ consecutive_failures: 1 });
    const [delivery] = await w.deliveries(endpoint.id);
    expect(delivery).toMatchObject({ status: 'failed', attempts: 1 });
  });
});

describe('recover', () => {
  it('re-sends every failed or given-up delivery created since a time, as new deliveries naming the originals; a failed original stops retrying', async () => {
    const { w, receiver, endpoint, path } = await setUp();
    receiver.answer(answers.serverError);
    await w.putProduct('OLD');
    await w.after(2 * SECOND);
    w.clock.advance(MINUTE);
    const since = w.clock.now().toISOString();
    const givenUp = await w.putProduct('GIVEN-UP');
    await w.after(2 * SECOND);
    for (const wait of [30 * SECOND, 2 * MINUTE, 10 * MINUTE, HOUR, 6 * HOUR]) await w.after(wait);
    const failing = await w.putProduct('FAILING');
    await w.after(2 * SECOND);
    receiver.answer(answers.ok);
    await w.putProduct('OK');
    await w.after(2 * SECOND);
    const statuses = Object.fromEntries((await w.deliveries(endpoint.id)).map((d) => [d.product_ids[0], d.status]));
    expect(Object.values(statuses).sort()).toEqual(['failed', 'given_up', 'given_up', 'succeeded']);
    const sent = receiver.count;

    const response = await w.post(`${path}/recover`, { since });
    expect(response.status).toBe(202);
    expect(response.body).toEqual({ resent: 2 });
    const pending = (await adminOk(w.service, 'GET', `${w.merchant.base}${path}/deliveries?status=pending`)).data;
    expect(pending.map((d: { product_ids: number[] }) => d.product_ids[0]).sort()).toEqual([givenUp, failing].sort());
    await w.deliverDue();
    expect(
      receiver.payloads
        .slice(sent)
        .map((p) => p.product_ids[0])
        .sort(),
    ).toEqual([givenUp, failing].sort());
    // Each resend names its original, which names it; the failed original makes no further attempt.
    expect(statuses[failing]).toBe('failed');
    for (const product of [givenUp, failing]) {
      const [original, resend] = (await w.deliveries(endpoint.id)).filter((d) => d.product_ids[0] === product).sort((x, y) => x.id - y.id);
      expect(resend).toMatchObject({ status: 'succeeded', replaces: original!.id, replaced_by: null, test: false });
      expect(original).toMatchObject({
        replaced_by: resend!.id,
        status: product === failing ? 'dropped' : 'given_up',
        next_attempt_at: null,
      });
    }
    const delivered = receiver.count;
    for (const wait of [30 * SECOND, 2 * MINUTE, 10 * MINUTE, HOUR, 6 * HOUR]) await w.after(wait);
    expect(receiver.count).toBe(delivered);
    // Recovered once: a second recovery finds nothing left to re-send.
    expect((await w.post(`${path}/recover`, { since })).body).toEqual({ resent: 0 });
  });

  it('re-sends the deliveries dropped while the endpoint was disabled, once it is re-enabled', async () => {
    const { w, receiver, endpoint, path } = await setUp();
    const since = w.clock.now().toISOString();
    receiver.answer(answers.gone);
    const a = await w.putProduct('A');
    await w.after(2 * SECOND);
    const b = await w.putProduct('B');
    await w.after(2 * SECOND);
    expect((await w.deliveries(endpoint.id)).map((d) => d.status)).toEqual(['dropped', 'dropped']);
    await adminOk(w.service, 'PATCH', `${w.merchant.base}${path}`, { status: 'active' });
    receiver.answer(answers.ok);
    expect((await w.post(`${path}/recover`, { since })).body).toEqual({ resent: 2 });
    await w.deliverDue();
    expect(
      receiver.payloads
        .slice(1)
        .map((p) => p.product_ids[0])
        .sort(),
    ).toEqual([a, b].sort());
  });
});

describe("the owners' notifications", () => {
  it('lists them newest first with the endpoint, kind, subject and body', async () => {
    const { w, receiver, endpoint } = await setUp();
    receiver.answer(answers.serverError);
    for (let i = 0; i < 5; i++) {
      await w.putProduct('A', { cost: `${20 + i}.00` });
      await w.after(2 * SECOND);
    }
    const failingAt = w.clock.now().toISOString();
    receiver.answer(answers.gone);
    await w.after(30 * SECOND);
    const notifications = await w.notifications();
    expect(notifications.map((n) => ({ kind: n.kind, endpoint_id: n.endpoint_id }))).toEqual([
      { kind: 'disabled', endpoint_id: endpoint.id },
      { kind: 'failing', endpoint_id: endpoint.id },
    ]);
    expect(notifications[1]).toMatchObject({ created_at: failingAt, emailed_at: null });
    for (const notification of notifications) {
      expect(notification.subject).toContain(endpoint.url);
      expect(notification.body.length).toBeGreaterThan(0);
    }
    const limited = await adminOk(w.service, 'GET', `${w.merchant.base}/notifications?limit=1`);
    expect(limited.data.map((n: { kind: string }) => n.kind)).toEqual(['disabled']);
    expect((await w.service.adminApi('GET', '/admin/v1/merchants/999/notifications')).status).toBe(404);
  });
});

describe('bodyless operations', () => {
  // Known bug, outside the webhook code: src/http/admin-api.ts answers 400 "body is required" to
  // every POST without a Content-Type, also to operations the admin document gives no request
  // body ("No request body is needed"). Turn this into `it` once that middleware exempts them.
  it('accepts test, resend, rotate-secret and confirm-secret with no request body at all', async () => {
    const { w, endpoint } = await setUp();
    await w.putProduct('A');
    await w.after(2 * SECOND);
    const [delivery] = await w.deliveries(endpoint.id);
    const base = `${w.merchant.base}/webhook-endpoints/${endpoint.id}`;
    expect((await w.service.adminApi('POST', `${base}/test`)).status).toBe(202);
    expect((await w.service.adminApi('POST', `${base}/deliveries/${delivery!.id}/resend`)).status).toBe(202);
    expect((await w.service.adminApi('POST', `${base}/rotate-secret`)).status).toBe(200);
    expect((await w.service.adminApi('POST', `${base}/confirm-secret`)).status).toBe(200);
  });
});

describe('sending tools need an active endpoint', () => {
  it.each(['paused', 'disabled'] as const)('answer 409 to test, resend and recover on a %s endpoint', async (state) => {
    const { w, receiver, endpoint, path } = await setUp({ webhooks: { pauseAfterFailures: 2, pauseMinStreakMinutes: 0 } });
    receiver.answer(state === 'paused' ? answers.serverError : answers.gone);
    await w.putProduct('A');
    await w.after(2 * SECOND);
    if (state === 'paused') await w.after(30 * SECOND);
    expect((await w.endpoint(endpoint.id)).status).toBe(state);
    const [delivery] = await w.deliveries(endpoint.id);
    const before = (await w.deliveries(endpoint.id)).length;

    for (const [operation, body] of [
      ['/test', undefined],
      [`/deliveries/${delivery!.id}/resend`, undefined],
      ['/recover', { since: '2025-01-01T00:00:00Z' }],
    ] as const) {
      const response = await w.post(`${path}${operation}`, body);
      expect(response.status, operation).toBe(409);
      expect(response.body).toMatchObject({ code: 'conflict' });
      expect(response.body.detail).toContain(state);
    }
    expect(await w.deliveries(endpoint.id)).toHaveLength(before);
  });
});
