// Webhook authenticity (spec 5): `sha256=` + hex(HMAC_SHA256(secret, `${timestamp}.${raw_body}`)).
import { createHmac, randomBytes } from 'node:crypto';
import type { WebhookHeaderName } from '../generated/public-webhooks.js';
import type { WebhookEndpointRecord } from '../storage/port.js';

/** The delivery headers the spec's `webhooks:` section declares (the generated registry: one set for every event). */
export type DeliveryHeaders = { [Name in WebhookHeaderName]: string } & { 'Content-Type': 'application/json' };

export const SECRET_PREFIX = 'whsec_';

/** A new signing secret: `whsec_` + 32 random bytes (product decisions: at least 24). */
export function newSigningSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(32).toString('base64url')}`;
}

/** A rotation in its grace period: the new secret, waiting to sign. */
export interface PendingSecret {
  secret: string;
  rotatedAt: string;
  /** Until then the old secret signs; from then on the new one. */
  until: string;
}

type EndpointSecrets = Pick<WebhookEndpointRecord, 'secret' | 'pending_secret' | 'secret_rotated_at' | 'pending_secret_until'>;

/**
 * The secret that signs at `now`, and the rotation still pending then (product decisions: the old
 * secret signs for a grace period or until the merchant confirms the new one). A rotation whose
 * grace period has ended signs with its new secret whether or not a write has settled it yet.
 */
export function secretsAt(endpoint: EndpointSecrets, now: Date): { signing: string; pending: PendingSecret | null } {
  const { secret, pending_secret: pending, secret_rotated_at: rotatedAt, pending_secret_until: until } = endpoint;
  if (pending === null || rotatedAt === null || until === null) return { signing: secret, pending: null };
  if (now.getTime() >= Date.parse(until)) return { signing: pending, pending: null };
  return { signing: secret, pending: { secret: pending, rotatedAt, until } };
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
