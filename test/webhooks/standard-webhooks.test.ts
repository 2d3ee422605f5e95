// Standard Webhooks beside the spec's headers: every delivery carries a `webhook-id`
// that stays the same across its retries (a resend has its own and names the one it replaces), and
// an endpoint that chooses them also gets `webhook-timestamp` and `webhook-signature`, which the
// Standard Webhooks npm package's own verifier accepts. Over the admin API, with real receivers on
// 127.0.0.1 and the dispatcher driven by hand on a clock that starts now (the package checks
// timestamps against the real time).
import { Webhook, WebhookVerificationError as StandardVerificationError } from 'standardwebhooks';
import { afterEach, describe, expect, it } from 'vitest';
import { verifyWebhookDelivery, WebhookVerificationError } from '../../src/client/webhooks.js';
import { newSigningSecret, suitsStandardWebhooks } from '../../src/webhooks/signing.js';
import { answers, type ReceivedRequest } from '../support/receiver.js';
import { SECOND, startWebhookWorld, type WebhookWorld } from './harness.js';

let world: WebhookWorld | undefined;
afterEach(async () => {
  await world?.close();
  world = undefined;
});

/** A world whose clock starts at the real time, with store `de` and one receiver. */
async function standardWorld() {
  const w = await startWebhookWorld({ stores: ['de'], start: new Date().toISOString(), webhooks: { backoffSeconds: [30] } });
  world = w;
  return w;
}

/** The request's headers as the standardwebhooks package takes them (plain strings). */
const plainHeaders = (request: ReceivedRequest) =>
  Object.fromEntries(
    Object.entries(request.headers).map(([name, value]) => [name, Array.isArray(value) ? value.join(', ') : String(value)]),
  );

describe('webhook-id', () => {
  it('is the same on every retry of a delivery, its webhook_id in the attempt log; a resend has its own and names the one it replaces', async () => {
    const w = await standardWorld();
    // The first attempt fails, every later one succeeds.
    let seen = 0;
    const receiver = await w.receiver({ behaviour: () => (seen++ === 0 ? answers.serverError : answers.ok) });
    const created = await w.register(receiver, { events: ['price'] });
    await w.putProduct('A', { cost: '11.00' });
    await w.after(2 * SECOND);
    await w.after(31 * SECOND);
    expect(receiver.count).toBe(2);
    const [first, retry] = receiver.requests;
    const [delivery] = await w.deliveries(created.id);
    expect(first!.headers['webhook-id']).toBe(delivery!.webhook_id);
    expect(retry!.headers['webhook-id']).toBe(first!.headers['webhook-id']);
    // Each attempt signed anew, the id unchanged; no resend header on an original delivery.
    expect(retry!.timestamp).not.toBe(first!.timestamp);
    expect(first!.headers['x-service-replaces']).toBeUndefined();
    // The attempt log keeps the id as sent.
    const detail = await w.delivery(created.id, delivery!.id);
    expect(detail.attempts.map((a) => a.request_headers?.['webhook-id'])).toEqual([delivery!.webhook_id, delivery!.webhook_id]);

    const resent = await w.post(`/webhook-endpoints/${created.id}/deliveries/${delivery!.id}/resend`);
    expect(resent.status, resent.text).toBe(202);
    await w.deliverDue();
    const again = receiver.requests.at(-1)!;
    expect(again.headers['webhook-id']).toBe(resent.body.webhook_id);
    expect(again.headers['webhook-id']).not.toBe(first!.headers['webhook-id']);
    expect(again.headers['x-service-replaces']).toBe(delivery!.webhook_id);
    // The receiver kit exposes both, whichever scheme verified.
    const verified = verifyWebhookDelivery({ secret: created.secret, headers: again.headers, rawBody: again.rawBody, now: w.clock.now });
    expect(verified).toMatchObject({ id: resent.body.webhook_id, replaces: delivery!.webhook_id, scheme: 'service' });
    // Without the choice, no Standard Webhooks signature is sent.
    expect(again.headers['webhook-signature']).toBeUndefined();
    expect(again.headers['webhook-timestamp']).toBeUndefined();
  });
});

describe('the Standard Webhooks headers', () => {
  it("are sent to an endpoint that chose them, beside the spec's, and verify with the standardwebhooks package and the receiver kit", async () => {
    const w = await standardWorld();
    const receiver = await w.receiver();
    const created = await w.register(receiver, { events: ['price'], standard_webhooks: true });
    expect(created).toMatchObject({ standard_webhooks: true, max_per_second: null });
    // A secret issued now: 48 letters and digits, which the package's base64 decoder takes.
    expect(created.secret).toMatch(/^whsec_[A-Za-z0-9]{48}$/);
    await w.putProduct('A', { cost: '12.00' });
    await w.after(2 * SECOND);
    expect(receiver.count).toBe(1);
    const request = receiver.requests[0]!;
    // The spec's headers as they were (the receiver checked X-Service-Signature), and the standard ones.
    expect(request.verifiedWith).toBe(created.secret);
    expect(request.headers['webhook-timestamp']).toBe(request.timestamp);
    expect(request.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
    const payload = new Webhook(created.secret).verify(request.rawBody.toString('utf8'), plainHeaders(request));
    expect(payload).toEqual(request.payload);
    // The package refuses a changed id or body: the id is signed.
    expect(() =>
      new Webhook(created.secret).verify(request.rawBody.toString('utf8'), { ...plainHeaders(request), 'webhook-id': 'dlv_999' }),
    ).toThrow(StandardVerificationError);
    expect(() => new Webhook(created.secret).verify(`${request.rawBody.toString('utf8')} `, plainHeaders(request))).toThrow(
      StandardVerificationError,
    );
    // The receiver kit verifies the standard scheme when present, and either one when asked.
    const headers = request.headers as Record<string, string>;
    const kit = verifyWebhookDelivery({ secret: created.secret, headers, rawBody: request.rawBody, now: w.clock.now });
    expect(kit).toMatchObject({ scheme: 'standard', id: request.headers['webhook-id'], replaces: null, payload: request.payload });
    expect(
      verifyWebhookDelivery({ secret: created.secret, headers, rawBody: request.rawBody, now: w.clock.now, scheme: 'service' }).scheme,
    ).toBe('service');
    expect(() =>
      verifyWebhookDelivery({
        secret: created.secret,
        headers: { ...headers, 'webhook-id': 'dlv_999' },
        rawBody: request.rawBody,
        now: w.clock.now,
      }),
    ).toThrow(WebhookVerificationError);
  });

  it("carry one signature per secret during a rotation's grace period, so the package verifies with the old or the new one", async () => {
    const w = await standardWorld();
    const receiver = await w.receiver();
    const created = await w.register(receiver, { events: ['price'], standard_webhooks: true });
    const rotated = await w.post(`/webhook-endpoints/${created.id}/rotate-secret`);
    expect(rotated.status, rotated.text).toBe(200);
    await w.putProduct('A', { cost: '14.00' });
    await w.after(2 * SECOND);
    const request = receiver.requests.at(-1)!;
    const signatures = String(request.headers['webhook-signature']).split(' ');
    expect(signatures).toHaveLength(2);
    const body = request.rawBody.toString('utf8');
    expect(new Webhook(created.secret).verify(body, plainHeaders(request))).toEqual(request.payload);
    expect(new Webhook(rotated.body.secret).verify(body, plainHeaders(request))).toEqual(request.payload);
    expect(() => new Webhook(newSigningSecret()).verify(body, plainHeaders(request))).toThrow(StandardVerificationError);
    // The spec's header keeps exactly one signature, by the old secret, until the grace period ends.
    expect(request.verifiedWith).toBe(created.secret);
  });

  it('are turned on and off by an edit; an endpoint whose secret predates them and holds - or _ answers 409 until it is rotated', async () => {
    const w = await standardWorld();
    const receiver = await w.receiver();
    const created = await w.register(receiver, { events: ['price'] });
    const path = `${w.merchant.base}/webhook-endpoints/${created.id}`;
    // A secret as issued before (base64url of 32 bytes), with a character the package cannot decode.
    const legacy = `whsec_${'Ab-_'.repeat(10)}xyz`;
    expect(suitsStandardWebhooks(legacy)).toBe(false);
    expect(() => new Webhook(legacy)).toThrow();
    await w.service.storage.updateWebhookEndpoint(created.id, { secret: legacy });
    receiver.secret = legacy;
    const refused = await w.service.adminApi('PATCH', path, { standard_webhooks: true });
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({ code: 'conflict' });
    expect(refused.body.detail).toContain('Rotate the secret first');
    expect((await w.endpoint(created.id)).standard_webhooks).toBe(false);
    // Rotated: the new secret suits them (it signs the standard scheme at once, the old one the spec's).
    const rotated = await w.post(`/webhook-endpoints/${created.id}/rotate-secret`);
    expect(suitsStandardWebhooks(rotated.body.secret)).toBe(true);
    receiver.secrets = [legacy, rotated.body.secret];
    const on = await w.service.adminApi('PATCH', path, { standard_webhooks: true });
    expect(on.status, on.text).toBe(200);
    expect(on.body.standard_webhooks).toBe(true);
    await w.putProduct('A', { cost: '15.00' });
    await w.after(2 * SECOND);
    const request = receiver.requests.at(-1)!;
    expect(String(request.headers['webhook-signature']).split(' ')).toHaveLength(1);
    expect(new Webhook(rotated.body.secret).verify(request.rawBody.toString('utf8'), plainHeaders(request))).toEqual(request.payload);
    // Off again: only the spec's headers and webhook-id.
    const off = await w.service.adminApi('PATCH', path, { standard_webhooks: false });
    expect(off.body.standard_webhooks).toBe(false);
    await w.putProduct('A', { cost: '16.00' });
    await w.after(2 * SECOND);
    const last = receiver.requests.at(-1)!;
    expect(last.headers['webhook-signature']).toBeUndefined();
    expect(last.headers['webhook-id']).toMatch(/^dlv_[0-9a-f]{32}$/);
    // Both changes are in the audit log, in plain words.
    const audit = (await w.service.adminApi('GET', `${w.merchant.base}/audit-log?limit=20`)).body.data as {
      action: string;
      detail: string;
    }[];
    expect(audit.filter((e) => e.action === 'endpoint.update').map((e) => e.detail)).toEqual(
      expect.arrayContaining([
        expect.stringContaining('Standard Webhooks headers on'),
        expect.stringContaining('Standard Webhooks headers off'),
      ]),
    );
  });
});

describe('secrets issued now', () => {
  it('are 48 letters and digits, unbiased, and decode to the 36-byte key the package derives', () => {
    const counts = new Map<string, number>();
    for (let i = 0; i < 400; i++) {
      const secret = newSigningSecret();
      expect(secret).toMatch(/^whsec_[A-Za-z0-9]{48}$/);
      expect(suitsStandardWebhooks(secret)).toBe(true);
      for (const ch of secret.slice(6)) counts.set(ch, (counts.get(ch) ?? 0) + 1);
    }
    // 19,200 characters over 62: each about 310 times; a biased draw would show far off.
    expect(counts.size).toBe(62);
    for (const n of counts.values()) expect(n).toBeGreaterThan(200);
    // The package signs, the receiver kit verifies: the same key from the same secret.
    const secret = newSigningSecret();
    const body = '{"event":"price","store_id":null,"product_ids":[1],"occurred_at":"2025-03-14T09:26:55Z"}';
    const at = new Date(1741944415000);
    const headers = {
      'webhook-id': 'dlv_5',
      'webhook-timestamp': '1741944415',
      'webhook-signature': new Webhook(secret).sign('dlv_5', at, body),
    };
    expect(verifyWebhookDelivery({ secret, rawBody: body, headers, now: () => at })).toMatchObject({ id: 'dlv_5', scheme: 'standard' });
    expect(() => verifyWebhookDelivery({ secret: newSigningSecret(), rawBody: body, headers, now: () => at })).toThrow(
      WebhookVerificationError,
    );
  });
});
