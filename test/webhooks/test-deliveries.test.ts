// A test delivery ("Send test", `POST .../test`) is one a receiver can tell: it carries
// `X-Service-Test: true`, declared in the `webhooks:` section (the receiver checks every header it
// gets against it), and so does a resend of it; a delivery of changes never does. Over the admin
// API with real receivers on 127.0.0.1, on both engines.
import { Webhook } from 'standardwebhooks';
import { afterEach, describe, expect, it } from 'vitest';
import { verifyWebhookDelivery } from '../../src/client/webhooks.js';
import { SECOND, startWebhookWorld, type WebhookWorld } from './harness.js';

let world: WebhookWorld | undefined;
afterEach(async () => {
  await world?.close();
  world = undefined;
});

describe('a test delivery', () => {
  it('carries X-Service-Test: true, as does its resend; a delivery of changes does not', async () => {
    const w = await startWebhookWorld({ stores: ['de'], start: new Date().toISOString() });
    world = w;
    const receiver = await w.receiver();
    const created = await w.register(receiver, { events: ['price'], standard_webhooks: true });
    await w.putProduct('A', { cost: '11.00' });
    await w.after(2 * SECOND);
    const queued = await w.post(`/webhook-endpoints/${created.id}/test`);
    expect(queued.status, queued.text).toBe(202);
    expect(queued.body.test).toBe(true);
    await w.deliverDue();
    const resent = await w.post(`/webhook-endpoints/${created.id}/deliveries/${queued.body.id}/resend`);
    expect(resent.status, resent.text).toBe(202);
    await w.deliverDue();

    const [change, test, resend] = receiver.requests;
    expect(receiver.count).toBe(3);
    expect(change!.headers['x-service-test']).toBeUndefined();
    expect(test!.headers['x-service-test']).toBe('true');
    expect(test!.headers['webhook-id']).toBe(queued.body.webhook_id);
    expect(resend!.headers['x-service-test']).toBe('true');
    expect(resend!.headers['x-service-replaces']).toBe(queued.body.webhook_id);
    // Signed as any delivery: both schemes verify (the receiver checked X-Service-Signature).
    expect(test!.verifiedWith).toBe(created.secret);
    const headers = Object.fromEntries(Object.entries(test!.headers).map(([name, value]) => [name, String(value)]));
    expect(new Webhook(created.secret).verify(test!.rawBody.toString('utf8'), headers)).toEqual(test!.payload);
    expect(verifyWebhookDelivery({ secret: created.secret, headers, rawBody: test!.rawBody, now: w.clock.now }).payload).toEqual(
      test!.payload,
    );
    // The attempt log records the header as sent.
    const detail = await w.delivery(created.id, queued.body.id);
    expect(detail.attempts[0]!.request_headers?.['X-Service-Test']).toBe('true');
    const [original] = (await w.deliveries(created.id)).filter((d) => !d.test);
    expect((await w.delivery(created.id, original!.id)).attempts[0]!.request_headers).not.toHaveProperty('X-Service-Test');
  });
});
