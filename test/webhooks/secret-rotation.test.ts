// Secret rotation with overlap (docs/decisions.md#signing-secrets: "the old secret keeps
// signing for a grace period (default 24 h) or until the merchant confirms the new one"), over the admin API,
// with real receivers on 127.0.0.1 that verify every delivery, the dispatcher driven by hand and
// a fake clock. The wire format stays the spec's: one X-Service-Signature, keyed with one secret.
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { signatureMatches, answers, type Receiver } from '../support/receiver.js';
import { HOUR, SECOND, startWebhookWorld, type WebhookWorld } from './harness.js';

let world: WebhookWorld | undefined;
afterEach(async () => {
  await world?.close();
  world = undefined;
});

const SECRET = /^whsec_[A-Za-z0-9]{48}$/;
const prefix = (secret: string) => secret.slice(0, 12);
const plusHours = (iso: string, hours: number) => new Date(Date.parse(iso) + hours * HOUR).toISOString();

/** A world with store `de`, one receiver and an endpoint for `price` registered for it. */
async function rotationWorld(options: Parameters<typeof startWebhookWorld>[0] = {}) {
  const w = await startWebhookWorld({ stores: ['de'], ...options });
  world = w;
  const receiver = await w.receiver();
  const created = await w.register(receiver, { events: ['price'] });
  const path = `${w.merchant.base}/webhook-endpoints/${created.id}`;
  let cost = 10;
  /** One price change, delivered; returns the request the receiver got for it. */
  const deliverOne = async (to: Receiver = receiver) => {
    const before = to.count;
    cost += 1;
    await w.putProduct('A', { cost: `${cost}.00` });
    await w.after(2 * SECOND);
    expect(to.count).toBe(before + 1);
    return to.requests.at(-1)!;
  };
  const rotate = async () => {
    const response = await w.post(`/webhook-endpoints/${created.id}/rotate-secret`);
    expect(response.status, response.text).toBe(200);
    return response.body;
  };
  const confirm = () => w.post(`/webhook-endpoints/${created.id}/confirm-secret`);
  return { w, receiver, created, path, deliverOne, rotate, confirm };
}

describe('rotating the signing secret', () => {
  it('shows the new secret at once; a receiver that knows only the old one keeps verifying every delivery through the grace period', async () => {
    const { w, receiver, created, deliverOne, rotate } = await rotationWorld();
    const rotatedAt = w.clock.iso;
    const rotated = await rotate();
    expect(rotated.secret).toMatch(SECRET);
    expect(rotated.secret).not.toBe(created.secret);
    // The old secret still signs; the rotation shows the new one's prefix and until when.
    const pending = { new_secret_prefix: prefix(rotated.secret), rotated_at: rotatedAt, pending_until: plusHours(rotatedAt, 24) };
    expect(rotated).toMatchObject({ id: created.id, secret_prefix: created.secret_prefix, secret_rotation: pending });
    const shown = await w.endpoint(created.id);
    expect(shown).toMatchObject({ secret_prefix: created.secret_prefix, secret_rotation: pending });
    expect(JSON.stringify(shown)).not.toContain(rotated.secret);
    expect(JSON.stringify(shown)).not.toContain(created.secret);

    // The receiver has not deployed the new secret: every delivery still verifies with the old one.
    expect(receiver.secrets).toEqual([created.secret]);
    const first = await deliverOne();
    expect(first.verifiedWith).toBe(created.secret);
    expect(signatureMatches(rotated.secret, first.timestamp, first.rawBody, first.signature)).toBe(false);
    // The last attempt within it: one second before pending_until (deliverOne waits 2 s).
    w.clock.advance(Date.parse(pending.pending_until) - w.clock.ms - 3 * SECOND);
    const last = await deliverOne();
    expect(last.verifiedWith).toBe(created.secret);
    // One signature header, as the spec has it.
    expect(last.headers['x-service-signature']).toMatch(/^sha256=[0-9a-f]{64}$/);
    expect(w.clock.iso < pending.pending_until).toBe(true);
  });

  it('signs with the new secret from the end of the grace period on, a queued retry included; then no rotation is pending', async () => {
    const { w, receiver, created, path, deliverOne, rotate } = await rotationWorld({ webhooks: { backoffSeconds: [HOUR / SECOND] } });
    const rotated = await rotate();
    // The receiver deploys both secrets, as docs/webhooks.md#rotating-a-signing-secret says.
    receiver.secrets = [created.secret, rotated.secret];
    // A delivery fails just before the grace period ends; its retry comes after it.
    w.clock.advance(Date.parse(rotated.secret_rotation.pending_until) - w.clock.ms - 10 * SECOND);
    receiver.answer(answers.serverError);
    const failed = await deliverOne();
    expect(failed.verifiedWith).toBe(created.secret);
    receiver.answer(answers.ok);
    await w.after(HOUR);
    const retry = receiver.requests.at(-1)!;
    expect(retry.payload).toEqual(failed.payload);
    expect(retry.verifiedWith).toBe(rotated.secret);
    expect(signatureMatches(created.secret, retry.timestamp, retry.rawBody, retry.signature)).toBe(false);
    expect((await deliverOne()).verifiedWith).toBe(rotated.secret);

    const after = await w.endpoint(created.id);
    expect(after).toMatchObject({ secret_prefix: prefix(rotated.secret), secret_rotation: null });
    expect((await w.service.adminApi('GET', `${w.merchant.base}/webhook-endpoints`)).body.data[0]).toEqual(after);
    // Nothing is pending any more: confirming answers 409.
    const late = await w.post(`/webhook-endpoints/${created.id}/confirm-secret`);
    expect(late.status).toBe(409);
    expect(late.body).toMatchObject({ code: 'conflict', detail: expect.stringContaining('no secret rotation pending') });
    expect(await w.service.adminApi('GET', path).then((r) => r.body)).toEqual(after);
  });

  it('a second rotation during the grace period replaces the pending secret and restarts the grace period; the old secret keeps signing, the replaced one never signs', async () => {
    const { w, receiver, created, deliverOne, rotate } = await rotationWorld();
    const first = await rotate();
    w.clock.advance(20 * HOUR);
    const secondAt = w.clock.iso;
    const second = await rotate();
    expect(second.secret).not.toBe(first.secret);
    expect(second).toMatchObject({
      secret_prefix: created.secret_prefix,
      secret_rotation: { new_secret_prefix: prefix(second.secret), rotated_at: secondAt, pending_until: plusHours(secondAt, 24) },
    });
    // Past the first rotation's grace period, the old secret still signs.
    w.clock.advance(23 * HOUR);
    receiver.secrets = [created.secret, first.secret, second.secret];
    expect((await deliverOne()).verifiedWith).toBe(created.secret);
    // From the second rotation's end on, its secret signs; the first new secret never does.
    w.clock.advance(HOUR);
    const switched = await deliverOne();
    expect(switched.verifiedWith).toBe(second.secret);
    expect(signatureMatches(first.secret, switched.timestamp, switched.rawBody, switched.signature)).toBe(false);
    expect(await w.endpoint(created.id)).toMatchObject({ secret_prefix: prefix(second.secret), secret_rotation: null });
  });

  it('a rotation after the grace period has ended starts from the secret that signs then, which keeps signing', async () => {
    const { w, receiver, deliverOne, rotate } = await rotationWorld();
    const first = await rotate();
    w.clock.advance(25 * HOUR);
    const second = await rotate();
    expect(second).toMatchObject({ secret_prefix: prefix(first.secret), secret_rotation: { new_secret_prefix: prefix(second.secret) } });
    receiver.secrets = [first.secret];
    expect((await deliverOne()).verifiedWith).toBe(first.secret);
  });

  it('with CPS_WEBHOOK_SECRET_GRACE_HOURS=0 the new secret signs at once and nothing is pending', async () => {
    const { receiver, created, deliverOne, rotate, confirm } = await rotationWorld({ webhooks: { secretGraceHours: 0 } });
    const rotated = await rotate();
    expect(rotated).toMatchObject({ secret_prefix: prefix(rotated.secret), secret_rotation: null });
    receiver.secret = rotated.secret;
    const next = await deliverOne();
    expect(next.verifiedWith).toBe(rotated.secret);
    expect(signatureMatches(created.secret, next.timestamp, next.rawBody, next.signature)).toBe(false);
    expect((await confirm()).status).toBe(409);
  });
});

describe('confirming the new secret (sign with the new secret now)', () => {
  it('makes the new secret sign the next attempt, a queued retry included, before the grace period ends', async () => {
    const { w, receiver, created, deliverOne, rotate, confirm } = await rotationWorld();
    const rotated = await rotate();
    receiver.answer(answers.serverError);
    const failed = await deliverOne();
    expect(failed.verifiedWith).toBe(created.secret);

    const confirmed = await confirm();
    expect(confirmed.status, confirmed.text).toBe(200);
    expect(confirmed.body).toMatchObject({ id: created.id, secret_prefix: prefix(rotated.secret), secret_rotation: null });
    expect(confirmed.body).not.toHaveProperty('secret');
    expect(await w.endpoint(created.id)).toEqual(confirmed.body);

    // The receiver now knows only the new secret: the retry and new deliveries verify with it.
    receiver.secret = rotated.secret;
    receiver.answer(answers.ok);
    await w.after(30 * SECOND);
    const retry = receiver.requests.at(-1)!;
    expect(retry.payload).toEqual(failed.payload);
    expect(retry.verifiedWith).toBe(rotated.secret);
    expect((await deliverOne()).verifiedWith).toBe(rotated.secret);
  });

  it("answers 409 conflict and changes nothing when no rotation is pending; 404 for an unknown endpoint or another merchant's", async () => {
    const { w, receiver, created, deliverOne, confirm } = await rotationWorld();
    const before = await w.endpoint(created.id);
    const response = await confirm();
    expect(response.status).toBe(409);
    expect(response.headers.get('content-type')).toBe('application/problem+json');
    expect(response.body).toMatchObject({
      code: 'conflict',
      detail: `Webhook endpoint ${created.id} has no secret rotation pending: its secret (${created.secret_prefix}…) signs already. Rotate the secret first.`,
    });
    expect(await w.endpoint(created.id)).toEqual(before);
    expect((await deliverOne()).verifiedWith).toBe(created.secret);
    expect(receiver.secrets).toEqual([created.secret]);

    expect((await w.post('/webhook-endpoints/999999/confirm-secret')).status).toBe(404);
    const other = await w.service.adminApi('POST', '/admin/v1/merchants', { name: 'Other' });
    const foreign = await w.service.adminApi('POST', `/admin/v1/merchants/${other.body.id}/webhook-endpoints/${created.id}/confirm-secret`);
    expect(foreign.status).toBe(404);
  });
});

describe('the audit log', () => {
  it('records each rotation and each confirmation, by the operator, naming prefixes and never a secret', async () => {
    const { w, created, rotate, confirm } = await rotationWorld();
    const rotatedAt = w.clock.iso;
    const rotated = await rotate();
    w.clock.advance(HOUR);
    expect((await confirm()).status).toBe(200);
    const log = await w.service.adminApi('GET', `${w.merchant.base}/audit-log?limit=10`);
    expect(log.status).toBe(200);
    const entries = log.body.data.filter((e: { action: string }) => e.action.endsWith('_secret'));
    expect(entries.map((e: { action: string; actor: string; at: string }) => [e.action, e.actor, e.at])).toEqual([
      ['endpoint.confirm_secret', 'operator', w.clock.iso],
      ['endpoint.rotate_secret', 'operator', rotatedAt],
    ]);
    expect(entries[1].detail).toBe(
      `endpoint ${created.id} ${created.url}: new secret ${prefix(rotated.secret)}… signs from ${plusHours(rotatedAt, 24)}; ` +
        `${created.secret_prefix}… signs until then`,
    );
    expect(entries[0].detail).toBe(
      `endpoint ${created.id} ${created.url}: ${prefix(rotated.secret)}… signs now instead of ${created.secret_prefix}…`,
    );
    expect(log.text).not.toContain(rotated.secret);
    expect(log.text).not.toContain(created.secret);
  });

  it('records nothing for a refused confirmation', async () => {
    const { w, confirm } = await rotationWorld();
    expect((await confirm()).status).toBe(409);
    const log = await w.service.adminApi('GET', `${w.merchant.base}/audit-log?limit=10`);
    expect(log.body.data.filter((e: { action: string }) => e.action.endsWith('_secret'))).toEqual([]);
  });
});

describe('CPS_WEBHOOK_SECRET_GRACE_HOURS', () => {
  it('defaults to 24 hours, takes whole hours from 0 to 720, and refuses anything else naming the variable', () => {
    expect(loadConfig({}).webhooks.secretGraceHours).toBe(24);
    expect(loadConfig({ CPS_WEBHOOK_SECRET_GRACE_HOURS: '0' }).webhooks.secretGraceHours).toBe(0);
    expect(loadConfig({ CPS_WEBHOOK_SECRET_GRACE_HOURS: '720' }).webhooks.secretGraceHours).toBe(720);
    expect(() => loadConfig({ CPS_WEBHOOK_SECRET_GRACE_HOURS: '721' })).toThrow(/CPS_WEBHOOK_SECRET_GRACE_HOURS must be at most 720/);
    expect(() => loadConfig({ CPS_WEBHOOK_SECRET_GRACE_HOURS: '1.5' })).toThrow(
      /CPS_WEBHOOK_SECRET_GRACE_HOURS must be a non-negative integer/,
    );
  });

  it('sets the grace period of a rotation', async () => {
    const { w, rotate } = await rotationWorld({ webhooks: { secretGraceHours: 2 } });
    const rotatedAt = w.clock.iso;
    expect((await rotate()).secret_rotation.pending_until).toBe(plusHours(rotatedAt, 2));
  });
});
