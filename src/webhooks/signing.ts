// Webhook authenticity (spec 5): `sha256=` + hex(HMAC_SHA256(secret, `${timestamp}.${raw_body}`)),
// and, for endpoints that choose them, the Standard Webhooks headers beside it: `webhook-signature`
// = `v1,` + base64(HMAC_SHA256(key, `${id}.${timestamp}.${raw_body}`)), the key being what the
// secret's part after `whsec_` decodes to as base64 (as the Standard Webhooks libraries derive it).
import { createHmac, createSecretKey, type KeyObject, randomBytes } from 'node:crypto';
import type { WebhookOptionalHeaderName, WebhookRequiredHeaderName } from '../generated/public-webhooks.js';
import type { WebhookEndpointRecord } from './model.js';

/** The delivery headers the spec's `webhooks:` section declares (the generated registry). */
export type DeliveryHeaders = { [Name in WebhookRequiredHeaderName]: string } & { [Name in WebhookOptionalHeaderName]?: string } & {
  'Content-Type': 'application/json';
};

export const SECRET_PREFIX = 'whsec_';

const ALPHANUMERIC = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/** Letters and digits after `whsec_` in a secret issued now. */
export const SECRET_CHARACTERS = 48;

/**
 * A new signing secret: `whsec_` + 48 letters and digits drawn without bias from
 * crypto.randomBytes (about 285 bits; docs/decisions.md#signing-secrets: at least 24 bytes). Letters and digits
 * only, in a multiple of four, so the part after `whsec_` is base64 in both alphabets, unpadded:
 * the 36-byte key the Standard Webhooks libraries derive from it.
 */
export function newSigningSecret(): string {
  let out = '';
  while (out.length < SECRET_CHARACTERS) {
    for (const byte of randomBytes(64)) {
      // 248 = 4 * 62: bytes above it would favour the first characters.
      if (byte < 248 && out.length < SECRET_CHARACTERS) out += ALPHANUMERIC[byte % 62];
    }
  }
  return `${SECRET_PREFIX}${out}`;
}

/**
 * Whether the Standard Webhooks libraries can derive a key from `secret`: the part after `whsec_`
 * is base64 of the standard alphabet. Every secret issued now is; one issued before may hold the
 * base64url `-` or `_`, which they refuse.
 */
export function suitsStandardWebhooks(secret: string): boolean {
  const encoded = secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret;
  return /^[A-Za-z0-9+/]+={0,2}$/.test(encoded) && encoded.length % 4 !== 1;
}

/** The key the Standard Webhooks scheme signs with: the secret's part after `whsec_`, base64-decoded. */
export function standardWebhooksKey(secret: string): Buffer {
  return Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, 'base64');
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
 * The secret that signs at `now`, and the rotation still pending then (docs/decisions.md#signing-secrets:
 * the old secret signs for a grace period or until the merchant confirms the new one). A rotation whose
 * grace period has ended signs with its new secret whether or not a write has settled it yet.
 */
export function secretsAt(endpoint: EndpointSecrets, now: Date): { signing: string; pending: PendingSecret | null } {
  const { secret, pending_secret: pending, secret_rotated_at: rotatedAt, pending_secret_until: until } = endpoint;
  if (pending === null || rotatedAt === null || until === null) return { signing: secret, pending: null };
  if (now.getTime() >= Date.parse(until)) return { signing: pending, pending: null };
  return { signing: secret, pending: { secret: pending, rotatedAt, until } };
}

/** Secrets' HMAC keys kept at most: more endpoints than this sign with keys made again as they come. */
export const SIGNING_KEYS_KEPT = 1024;

/**
 * HMAC keys made once per secret rather than per send (createHmac with a string key encodes and
 * imports it each time), for the service's own scheme (the secret's UTF-8) and for the Standard
 * Webhooks one (its base64 part decoded). Looked up by the secret itself, so a rotated or new secret
 * never signs with an old key: the old one is simply no longer asked for, and the map, emptied
 * when it reaches SIGNING_KEYS_KEPT, never holds more than that.
 */
class SigningKeys {
  private readonly keys = new Map<string, KeyObject>();

  constructor(private readonly derive: (secret: string) => Buffer) {}

  of(secret: string): KeyObject {
    let key = this.keys.get(secret);
    if (key === undefined) {
      if (this.keys.size >= SIGNING_KEYS_KEPT) this.keys.clear();
      key = createSecretKey(this.derive(secret));
      this.keys.set(secret, key);
    }
    return key;
  }

  get size(): number {
    return this.keys.size;
  }
}

const serviceKeys = new SigningKeys((secret) => Buffer.from(secret, 'utf8'));
const standardKeys = new SigningKeys(standardWebhooksKey);

/** How many secrets' keys are kept now, per scheme (tests). */
export const signingKeysKept = () => ({ service: serviceKeys.size, standard: standardKeys.size });

/** The X-Service-Signature value for a body signed at `timestamp` (Unix seconds, as sent). */
export function signatureFor(secret: string, timestamp: string, rawBody: string | Uint8Array): string {
  const hmac = createHmac('sha256', serviceKeys.of(secret));
  hmac.update(`${timestamp}.`);
  hmac.update(rawBody);
  return `sha256=${hmac.digest('hex')}`;
}

/** One `v1,` signature of the Standard Webhooks scheme. */
export function standardSignatureFor(secret: string, id: string, timestamp: string, rawBody: string | Uint8Array): string {
  const hmac = createHmac('sha256', standardKeys.of(secret));
  hmac.update(`${id}.${timestamp}.`);
  hmac.update(rawBody);
  return `v1,${hmac.digest('base64')}`;
}

export interface DeliverySigning {
  /** The secret that signs `X-Service-Signature` now (secretsAt). */
  signing: string;
  /** During a rotation's grace period, the new secret: `webhook-signature` carries its signature too. */
  pending?: string | null;
  /** The delivery's `webhook-id` (storage/delivery-ids.ts), the same on every attempt. */
  webhookId: string;
  /** The `webhook-id` of the delivery a resend re-sends (`X-Service-Replaces`). */
  replaces?: string | null;
  /** Whether the endpoint also receives `webhook-timestamp` and `webhook-signature`. */
  standardWebhooks?: boolean;
  /** A test delivery (or a resend of one): `X-Service-Test: true`, so the receiver can tell. */
  test?: boolean;
}

/**
 * The headers of a delivery signed now (spec 4.5, plus `webhook-id`, a resend's
 * `X-Service-Replaces`, a test's `X-Service-Test` and, when the endpoint chose them, the Standard
 * Webhooks headers). `webhook-signature` holds one signature per secret in
 * effect that suits the scheme: the signing one and, during a rotation, the new one.
 */
export function signedHeaders(options: DeliverySigning, body: string, now: Date): DeliveryHeaders {
  const timestamp = String(Math.floor(now.getTime() / 1000));
  const id = options.webhookId;
  const headers: DeliveryHeaders = {
    'Content-Type': 'application/json',
    'X-Service-Timestamp': timestamp,
    'X-Service-Signature': signatureFor(options.signing, timestamp, body),
    'webhook-id': id,
  };
  if (options.replaces) headers['X-Service-Replaces'] = options.replaces;
  if (options.test) headers['X-Service-Test'] = 'true';
  if (options.standardWebhooks) {
    const secrets = [options.signing, options.pending].filter((s): s is string => !!s && suitsStandardWebhooks(s));
    if (secrets.length > 0) {
      headers['webhook-timestamp'] = timestamp;
      headers['webhook-signature'] = secrets.map((s) => standardSignatureFor(s, id, timestamp, body)).join(' ');
    }
  }
  return headers;
}
