// The test receiver's own checks (test/support/receiver.ts) must not be vacuous: a request that is
// not a valid, authentic delivery per spec 4.5 and 5 is answered 400 and fails whoever reads the log.
import { afterEach, describe, expect, it } from 'vitest';
import { Receiver, computeSignature } from '../support/receiver.js';

const SECRET = 'whsec_test_secret_for_the_receiver_checks_000000';
const NOW = new Date('2025-03-14T09:26:55Z');
const timestamp = String(Math.floor(NOW.getTime() / 1000));
const body = JSON.stringify({ event: 'price', store_id: 1, product_ids: [1042, 1043], occurred_at: '2025-03-14T09:26:55Z' });

let receiver: Receiver;
afterEach(async () => {
  await receiver.close().catch(() => undefined);
});

async function post(
  options: {
    body?: string;
    timestamp?: string;
    signature?: string;
    contentType?: string;
    webhookId?: string | null;
    headers?: Record<string, string>;
  } = {},
) {
  const raw = options.body ?? body;
  const ts = options.timestamp ?? timestamp;
  const response = await fetch(receiver.url, {
    method: 'POST',
    headers: {
      'Content-Type': options.contentType ?? 'application/json',
      'X-Service-Timestamp': ts,
      'X-Service-Signature': options.signature ?? computeSignature(SECRET, ts, raw),
      ...(options.webhookId === null ? {} : { 'webhook-id': options.webhookId ?? 'dlv_1' }),
      ...options.headers,
    },
    body: raw,
  });
  return response.status;
}

describe('the test receiver', () => {
  it('accepts a delivery signed as spec 5 says and logs its raw body', async () => {
    receiver = await Receiver.start({ now: () => NOW });
    receiver.secret = SECRET;
    expect(await post()).toBe(200);
    expect(receiver.requests[0]!.rawBody.toString()).toBe(body);
    expect(receiver.requests[0]!.verifiedWith).toBe(SECRET);
  });

  it('accepts the opaque webhook-id and a test delivery marked X-Service-Test: true', async () => {
    receiver = await Receiver.start({ now: () => NOW });
    receiver.secret = SECRET;
    expect(await post({ webhookId: `dlv_${'0a'.repeat(16)}`, headers: { 'X-Service-Test': 'true' } })).toBe(200);
    expect(receiver.requests[0]!.headers['x-service-test']).toBe('true');
  });

  it.each([
    ['a signature made with another secret', { signature: computeSignature('whsec_other', timestamp, body) }],
    ['an uppercase hex signature', { signature: computeSignature(SECRET, timestamp, body).toUpperCase().replace('SHA256=', 'sha256=') }],
    ['a body changed after signing', { signature: computeSignature(SECRET, timestamp, body), body: body.replace('1042', '1044') }],
    ['a timestamp more than 5 minutes old', { timestamp: String(Number(timestamp) - 301) }],
    ['a timestamp in milliseconds', { timestamp: String(NOW.getTime()) }],
    ['another content type', { contentType: 'text/plain' }],
    ['a delivery without webhook-id', { webhookId: null }],
    ['a webhook-id that is not dlv_ and a number or 32 hex digits', { webhookId: 'msg_1' }],
    ['a webhook-id of 31 hex digits', { webhookId: `dlv_${'a'.repeat(31)}` }],
    ['an X-Service-Test header that is not true', { headers: { 'X-Service-Test': 'yes' } }],
    ['a service header the webhooks: section does not declare', { headers: { 'X-Service-Sample': 'true' } }],
    [
      'a payload outside the webhooks: schema',
      { body: JSON.stringify({ event: 'price', store_id: 1, product_ids: [], occurred_at: '2025-03-14T09:26:55Z' }) },
    ],
    [
      'an event the spec does not have',
      { body: JSON.stringify({ event: 'test', store_id: 1, product_ids: [1], occurred_at: '2025-03-14T09:26:55Z' }) },
    ],
  ])('answers 400 to %s and fails the test that reads its log', async (_, options) => {
    receiver = await Receiver.start({ now: () => NOW });
    receiver.secret = SECRET;
    expect(await post(options)).toBe(400);
    expect(() => receiver.requests).toThrow(/invalid deliveries/);
    await expect(receiver.close()).rejects.toThrow(/invalid deliveries/);
  });
});
