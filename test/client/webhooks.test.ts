// The receiver kit: verifyWebhook checks a delivery exactly as spec 5 says, and the example
// receiver of docs/client.md (400 on a bad signature, deduplication on event + product ids) works
// against real signed requests over HTTP.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyWebhook, verifyWebhookDelivery, WebhookVerificationError, type WebhookPayload } from '../../src/client/webhooks.js';
import { signedHeaders } from '../../src/webhooks/signing.js';

// The test vector published in the document (openapi/openapi.yaml, "Verifying a delivery").
const SECRET = 'whsec_4cG9t2VnQx8LrW7bYh3KpZ5mJd6FsA1e';
const TIMESTAMP = '1741944415';
const BODY = '{"event":"price","store_id":1,"product_ids":[1042,1043],"occurred_at":"2025-03-14T09:26:55Z"}';
const SIGNATURE = 'sha256=06cd5f65b57f194271ad2d43c750e5f544986e637b59150c440ea72ba5e20d7b';
const signedAt = () => new Date(Number(TIMESTAMP) * 1000 + 10_000);

const headers = (overrides: Record<string, string | undefined> = {}) => ({
  'content-type': 'application/json',
  'x-service-timestamp': TIMESTAMP,
  'x-service-signature': SIGNATURE,
  ...overrides,
});

describe('verifyWebhook', () => {
  it('accepts the published test vector and returns the typed payload', () => {
    const payload = verifyWebhook({ secret: SECRET, headers: headers(), rawBody: BODY, now: signedAt });
    expect(payload).toEqual({ event: 'price', store_id: 1, product_ids: [1042, 1043], occurred_at: '2025-03-14T09:26:55Z' });
  });

  it('accepts Fetch Headers and a raw body given as bytes', () => {
    const payload = verifyWebhook({
      secret: SECRET,
      headers: new Headers(headers()),
      rawBody: new TextEncoder().encode(BODY),
      now: signedAt,
    });
    expect(payload.event).toBe('price');
  });

  it.each([
    ['a body changed by one byte', { rawBody: BODY.replace('1043', '1044') }, 'signature_mismatch'],
    ['the same body re-serialized', { rawBody: JSON.stringify(JSON.parse(BODY), null, 1) }, 'signature_mismatch'],
    ['another secret', { secret: 'whsec_another' }, 'signature_mismatch'],
    [
      'a timestamp other than the signed one',
      { headers: headers({ 'x-service-timestamp': String(Number(TIMESTAMP) + 1) }) },
      'signature_mismatch',
    ],
    ['no signature header', { headers: headers({ 'x-service-signature': undefined }) }, 'missing_header'],
    ['no timestamp header', { headers: headers({ 'x-service-timestamp': undefined }) }, 'missing_header'],
    [
      'an uppercase hex signature',
      { headers: headers({ 'x-service-signature': SIGNATURE.toUpperCase().replace('SHA256', 'sha256') }) },
      'malformed_header',
    ],
    ['a timestamp in milliseconds form', { headers: headers({ 'x-service-timestamp': '1741944415.5' }) }, 'malformed_header'],
  ] as const)('rejects %s', (_name, change, reason) => {
    const attempt = () => verifyWebhook({ secret: SECRET, headers: headers(), rawBody: BODY, now: signedAt, ...change });
    expect(attempt).toThrow(WebhookVerificationError);
    try {
      attempt();
    } catch (error) {
      expect((error as WebhookVerificationError).reason).toBe(reason);
    }
  });

  it('rejects a timestamp older than the tolerance (300 s by default), and one as far in the future', () => {
    const at = (seconds: number) => () => new Date((Number(TIMESTAMP) + seconds) * 1000);
    expect(verifyWebhook({ secret: SECRET, headers: headers(), rawBody: BODY, now: at(300) }).event).toBe('price');
    for (const seconds of [301, -301]) {
      expect(() => verifyWebhook({ secret: SECRET, headers: headers(), rawBody: BODY, now: at(seconds) })).toThrow(
        expect.objectContaining({ reason: 'timestamp_out_of_tolerance' }),
      );
    }
    expect(verifyWebhook({ secret: SECRET, headers: headers(), rawBody: BODY, now: at(900), toleranceSeconds: 1000 }).event).toBe('price');
  });

  it.each([
    ["101 product ids (the document's maxItems is 100)", { product_ids: Array.from({ length: 101 }, (_, i) => i + 1) }, '/product_ids'],
    ['a dispatch time that is not an RFC 3339 date-time', { occurred_at: '14.03.2025 09:26' }, '/occurred_at'],
    ['a dispatch time without a time zone', { occurred_at: '2025-03-14T09:26:55' }, '/occurred_at'],
    ['a property the document does not state', { retry: 1 }, ''],
  ])('rejects a correctly signed payload with %s, saying where', (_name, change, instancePath) => {
    const body = JSON.stringify({ ...JSON.parse(BODY), ...change });
    const signed = signedHeaders({ signing: SECRET, webhookId: 'dlv_7' }, body, new Date());
    expect(() => verifyWebhook({ secret: SECRET, headers: signed, rawBody: body })).toThrow(
      expect.objectContaining({ reason: 'invalid_payload', schemaErrors: [expect.objectContaining({ instancePath })] }),
    );
  });

  it('rejects a correctly signed body that is not a delivery payload', () => {
    const body = '{"event":"deleted","product_ids":[1]}';
    const signed = signedHeaders({ signing: SECRET, webhookId: 'dlv_7' }, body, new Date());
    expect(() => verifyWebhook({ secret: SECRET, headers: signed, rawBody: body })).toThrow(
      expect.objectContaining({ reason: 'invalid_payload' }),
    );
  });
});

describe('verifyWebhook with a list of secrets (a secret rotation)', () => {
  const NEW_SECRET = 'whsec_YSblkhYwROlOXCJgBiLVYBUAHj75YekNFWd6cGv7AyA';
  const body = '{"event":"content","store_id":2,"product_ids":[7],"occurred_at":"2026-11-25T10:00:00Z"}';

  it('accepts a delivery signed with any of the secrets, in either order', () => {
    for (const signedWith of [SECRET, NEW_SECRET]) {
      const signed = signedHeaders({ signing: signedWith, webhookId: 'dlv_7' }, body, new Date());
      for (const secret of [
        [SECRET, NEW_SECRET],
        [NEW_SECRET, SECRET],
      ]) {
        expect(verifyWebhook({ secret, headers: signed, rawBody: body })).toEqual(JSON.parse(body));
      }
      expect(verifyWebhook({ secret: [signedWith], headers: signed, rawBody: body }).event).toBe('content');
    }
    // The published test vector, with the old secret first.
    expect(verifyWebhook({ secret: [SECRET, NEW_SECRET], headers: headers(), rawBody: BODY, now: signedAt }).event).toBe('price');
  });

  it('rejects a delivery that none of the secrets signed, a tampered body and a stale timestamp as with one secret', () => {
    const signed = signedHeaders({ signing: 'whsec_another', webhookId: 'dlv_7' }, body, new Date());
    expect(() => verifyWebhook({ secret: [SECRET, NEW_SECRET], headers: signed, rawBody: body })).toThrow(
      expect.objectContaining({ reason: 'signature_mismatch' }),
    );
    const genuine = signedHeaders({ signing: NEW_SECRET, webhookId: 'dlv_7' }, body, new Date());
    expect(() => verifyWebhook({ secret: [SECRET, NEW_SECRET], headers: genuine, rawBody: body.replace('7', '8') })).toThrow(
      expect.objectContaining({ reason: 'signature_mismatch' }),
    );
    expect(() =>
      verifyWebhook({ secret: [SECRET, NEW_SECRET], headers: genuine, rawBody: body, now: () => new Date(Date.now() + 301_000) }),
    ).toThrow(expect.objectContaining({ reason: 'timestamp_out_of_tolerance' }));
  });

  it('refuses an empty list or an empty secret with a TypeError, whatever the delivery', () => {
    const signed = signedHeaders({ signing: SECRET, webhookId: 'dlv_7' }, body, new Date());
    for (const secret of [[], [''], [SECRET, ''], '']) {
      expect(() => verifyWebhook({ secret, headers: signed, rawBody: body })).toThrow(TypeError);
    }
  });
});

describe('verifyWebhookDelivery', () => {
  const body = '{"event":"price","store_id":1,"product_ids":[1042],"occurred_at":"2025-03-14T09:26:55Z"}';
  const STANDARD = 'whsec_4cG9t2VnQx8LrW7bYh3KpZ5mJd6FsA1eQ2m9Rb7Xk3Lp';

  it('verifies the Standard Webhooks scheme when the delivery carries it, and returns the id, what it replaces and the scheme', () => {
    const signed = signedHeaders(
      { signing: STANDARD, webhookId: 'dlv_81723', replaces: 'dlv_81690', standardWebhooks: true },
      body,
      new Date(),
    );
    expect(signed['webhook-signature']).toMatch(/^v1,/);
    const verified = verifyWebhookDelivery({ secret: STANDARD, headers: signed, rawBody: body });
    expect(verified).toMatchObject({
      id: 'dlv_81723',
      replaces: 'dlv_81690',
      scheme: 'standard',
      timestamp: Number(signed['X-Service-Timestamp']),
    });
    expect(verified.payload.product_ids).toEqual([1042]);
    // Either scheme on request; the service scheme alone when no webhook-signature came.
    expect(verifyWebhookDelivery({ secret: STANDARD, headers: signed, rawBody: body, scheme: 'service' }).scheme).toBe('service');
    const { 'webhook-signature': _s, 'webhook-timestamp': _t, ...serviceOnly } = signed;
    expect(verifyWebhookDelivery({ secret: STANDARD, headers: serviceOnly, rawBody: body }).scheme).toBe('service');
    expect(() => verifyWebhookDelivery({ secret: STANDARD, headers: serviceOnly, rawBody: body, scheme: 'standard' })).toThrow(
      expect.objectContaining({ reason: 'missing_header' }),
    );
    // The standard signature covers the id: another id does not verify; without one it cannot be checked.
    expect(() => verifyWebhookDelivery({ secret: STANDARD, headers: { ...signed, 'webhook-id': 'dlv_1' }, rawBody: body })).toThrow(
      expect.objectContaining({ reason: 'signature_mismatch' }),
    );
    const { 'webhook-id': _id, ...withoutId } = signed;
    expect(() => verifyWebhookDelivery({ secret: STANDARD, headers: withoutId, rawBody: body })).toThrow(
      expect.objectContaining({ reason: 'missing_header' }),
    );
    // The spec's scheme does not need the id (it does not sign it): a sender of only the spec's headers verifies.
    const { 'webhook-id': _i2, ...specOnly } = serviceOnly;
    expect(verifyWebhookDelivery({ secret: STANDARD, headers: specOnly, rawBody: body })).toMatchObject({ id: null, scheme: 'service' });
  });

  it('accepts a webhook-signature of two during a rotation with either secret, and refuses a malformed one', () => {
    const NEW = 'whsec_Q2m9Rb7Xk3Lp4cG9t2VnQx8LrW7bYh3KpZ5mJd6FsA1e';
    const signed = signedHeaders({ signing: STANDARD, pending: NEW, webhookId: 'dlv_5', standardWebhooks: true }, body, new Date());
    expect(signed['webhook-signature']!.split(' ')).toHaveLength(2);
    for (const secret of [STANDARD, NEW, [STANDARD, NEW]]) {
      expect(verifyWebhookDelivery({ secret, headers: signed, rawBody: body }).scheme).toBe('standard');
    }
    expect(() => verifyWebhookDelivery({ secret: 'whsec_someone_else', headers: signed, rawBody: body })).toThrow(
      expect.objectContaining({ reason: 'signature_mismatch' }),
    );
    expect(() => verifyWebhookDelivery({ secret: STANDARD, headers: { ...signed, 'webhook-signature': 'v2,abc' }, rawBody: body })).toThrow(
      expect.objectContaining({ reason: 'malformed_header' }),
    );
  });
});

describe('the example receiver', () => {
  // As in docs/client.md: verify, answer 400 on a bad signature, deduplicate on the webhook-id.
  const processed: WebhookPayload[] = [];
  const seen = new Set<string>();
  // docs/client.md's WEBHOOK_SECRETS during a rotation: the old secret and the new one.
  const ROTATED = 'whsec_YSblkhYwROlOXCJgBiLVYBUAHj75YekNFWd6cGv7AyA';
  const secrets = `${SECRET},${ROTATED}`.split(',');
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      try {
        const { id, payload } = verifyWebhookDelivery({ secret: secrets, headers: req.headers, rawBody: Buffer.concat(chunks) });
        if (!seen.has(id!)) {
          seen.add(id!);
          processed.push(payload);
        }
        res.writeHead(204).end();
      } catch (error) {
        if (!(error instanceof WebhookVerificationError)) throw error;
        res.writeHead(400, { 'Content-Type': 'application/json' }).end(JSON.stringify({ error: error.reason }));
      }
    });
  });
  let url: string;
  beforeAll(
    () =>
      new Promise<void>((resolve) =>
        server.listen(0, '127.0.0.1', () => {
          url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;
          resolve();
        }),
      ),
  );
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  const post = (body: string, extra: Record<string, string> = {}) =>
    fetch(url, {
      method: 'POST',
      headers: { ...signedHeaders({ signing: SECRET, webhookId: 'dlv_7' }, body, new Date()), ...extra },
      body,
    });

  it('acknowledges a signed delivery, and processes a re-sent one only once', async () => {
    const body = '{"event":"content","store_id":2,"product_ids":[7,3],"occurred_at":"2026-11-25T10:00:00Z"}';
    expect((await post(body)).status).toBe(204);
    expect((await post(body)).status).toBe(204);
    expect(processed.filter((p) => p.event === 'content')).toHaveLength(1);
  });

  it('acknowledges a delivery signed with either secret during a rotation', async () => {
    const body = '{"event":"removed","store_id":2,"product_ids":[11],"occurred_at":"2026-11-25T10:00:00Z"}';
    for (const secret of [SECRET, ROTATED]) {
      const response = await fetch(url, {
        method: 'POST',
        headers: signedHeaders({ signing: secret, webhookId: 'dlv_7' }, body, new Date()),
        body,
      });
      expect(response.status).toBe(204);
    }
    const other = await fetch(url, {
      method: 'POST',
      headers: signedHeaders({ signing: 'whsec_someone_else', webhookId: 'dlv_7' }, body, new Date()),
      body,
    });
    expect(other.status).toBe(400);
  });

  it('answers 400 to a bad signature and processes nothing', async () => {
    const before = processed.length;
    const body = '{"event":"price","store_id":1,"product_ids":[9],"occurred_at":"2026-11-25T10:00:00Z"}';
    const response = await post(body, { 'X-Service-Signature': `sha256=${'0'.repeat(64)}` });
    expect(response.status).toBe(400);
    expect(await response.json()).toEqual({ error: 'signature_mismatch' });
    expect(processed).toHaveLength(before);
  });
});
