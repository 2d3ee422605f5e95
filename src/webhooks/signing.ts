// Webhook authenticity (spec 5): `sha256=` + hex(HMAC_SHA256(secret, `${timestamp}.${raw_body}`)).
import { createHmac, randomBytes } from 'node:crypto';
import type { WebhookHeaderName } from '../generated/public-webhooks.js';

/** The delivery headers the spec's `webhooks:` section declares (the generated registry: one set for every event). */
export type DeliveryHeaders = { [Name in WebhookHeaderName]: string } & { 'Content-Type': 'application/json' };

export const SECRET_PREFIX = 'whsec_';

/** A new signing secret: `whsec_` + 32 random bytes (product decisions: at least 24). */
export function newSigningSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(32).toString('base64url')}`;
}

/** The X-Service-Signature value for a body signed at `timestamp` (Unix seconds, as sent). */
export function signatureFor(secret: string, timestamp: string, rawBody: string | Uint8Array): string {
  const hmac = createHmac('sha256', secret);
  hmac.update(`${timestamp}.`);
  hmac.update(rawBody);
  return `sha256=${hmac.digest('hex')}`;
}

/** The headers of a delivery signed now (spec 4.5). */
export function signedHeaders(secret: string, body: string, now: Date): DeliveryHeaders {
  const timestamp = String(Math.floor(now.getTime() / 1000));
  return {
    'Content-Type': 'application/json',
    'X-Service-Timestamp': timestamp,
    'X-Service-Signature': signatureFor(secret, timestamp, body),
  };
}
