// The HMAC keys the signatures use are made once per secret and kept: a rotated secret signs with
// its own key from its first use, and the kept keys stay bounded however many secrets come.
import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  newSigningSecret,
  SIGNING_KEYS_KEPT,
  signatureFor,
  signedHeaders,
  signingKeysKept,
  standardSignatureFor,
  standardWebhooksKey,
} from '../../src/webhooks/signing.js';

const expected = (secret: string, timestamp: string, body: string) =>
  `sha256=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`;
const expectedStandard = (secret: string, id: string, timestamp: string, body: string) =>
  `v1,${createHmac('sha256', standardWebhooksKey(secret)).update(`${id}.${timestamp}.${body}`).digest('base64')}`;

describe('signing keys kept per secret', () => {
  it('signs with the rotated secret from its first use after signing with the old one many times, in both schemes', () => {
    const old = newSigningSecret();
    const rotated = newSigningSecret();
    const body = '{"event":"product.price_changed"}';
    for (let i = 0; i < 3; i++) {
      expect(signatureFor(old, '1700000000', body)).toBe(expected(old, '1700000000', body));
      expect(standardSignatureFor(old, 'dlv_1', '1700000000', body)).toBe(expectedStandard(old, 'dlv_1', '1700000000', body));
    }
    expect(signatureFor(rotated, '1700000001', body)).toBe(expected(rotated, '1700000001', body));
    expect(signatureFor(rotated, '1700000001', body)).not.toBe(expected(old, '1700000001', body));
    expect(standardSignatureFor(rotated, 'dlv_2', '1700000001', body)).toBe(expectedStandard(rotated, 'dlv_2', '1700000001', body));
    // During a grace period the headers carry the signing secret's and the new one's signatures.
    const headers = signedHeaders(
      { signing: old, pending: rotated, webhookId: 'dlv_3', standardWebhooks: true },
      body,
      new Date(1_700_000_002_000),
    );
    expect(headers['X-Service-Signature']).toBe(expected(old, '1700000002', body));
    expect(headers['webhook-signature']).toBe(
      `${expectedStandard(old, 'dlv_3', '1700000002', body)} ${expectedStandard(rotated, 'dlv_3', '1700000002', body)}`,
    );
  });

  it('keeps at most SIGNING_KEYS_KEPT keys and still signs correctly once it has let them go', () => {
    const first = newSigningSecret();
    signatureFor(first, '1', 'x');
    for (let i = 0; i < SIGNING_KEYS_KEPT + 10; i++) signatureFor(`whsec_${i.toString().padStart(8, '0')}`, '1', 'x');
    expect(signingKeysKept().service).toBeLessThanOrEqual(SIGNING_KEYS_KEPT);
    expect(signatureFor(first, '2', 'body')).toBe(expected(first, '2', 'body'));
  });
});
