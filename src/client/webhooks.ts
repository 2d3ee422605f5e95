// The receiver kit (spec 5, webhook authenticity): verify a delivery's signature over the raw
// body, in constant time, within a timestamp tolerance, and get the typed payload back.
//
//   import { verifyWebhook, WebhookVerificationError } from 'catalog-publishing-client/webhooks';
//   const payload = verifyWebhook({ secret, headers: req.headers, rawBody });
//
// Node-only (node:crypto), so it is its own subpath and the client itself stays runtime-neutral.
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { WebhookPayload } from './types.js';

export type { WebhookPayload };

export type WebhookVerificationFailure =
  | 'missing_header' | 'malformed_header' | 'timestamp_out_of_tolerance' | 'signature_mismatch' | 'invalid_payload';

/** Why a delivery was rejected; answer 400 to it (the reference receivers do). */
export class WebhookVerificationError extends Error {
  override readonly name = 'WebhookVerificationError';

  constructor(readonly reason: WebhookVerificationFailure, message: string) {
    super(message);
  }
}

export interface VerifyWebhookOptions {
  /** The endpoint's signing secret, `whsec_…`, exactly as shown at creation or rotation. */
  secret: string;
  /** The request headers: a Fetch `Headers`, or Node's `req.headers`. */
  headers: Headers | Record<string, string | string[] | undefined>;
  /** The exact bytes of the body, before any parsing or re-serialization. */
  rawBody: string | Uint8Array;
  /** Reject signatures older (or further in the future) than this; default 300 s. */
  toleranceSeconds?: number;
  /** The receiver's clock, for tests. */
  now?: () => Date;
}

function header(headers: VerifyWebhookOptions['headers'], name: string): string | undefined {
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? undefined;
  const record = headers as Record<string, string | string[] | undefined>;
  const value = record[name] ?? record[name.toLowerCase()] ?? Object.entries(record).find(([k]) => k.toLowerCase() === name.toLowerCase())?.[1];
  return Array.isArray(value) ? value[0] : value;
}

const EVENTS = new Set(['price', 'content', 'removed']);

function isPayload(value: unknown): value is WebhookPayload {
  const v = value as Record<string, unknown>;
  return typeof v === 'object' && v !== null
    && typeof v.event === 'string' && EVENTS.has(v.event)
    && (v.store_id === null || Number.isInteger(v.store_id))
    && Array.isArray(v.product_ids) && v.product_ids.length > 0 && v.product_ids.every(Number.isInteger)
    && typeof v.occurred_at === 'string';
}

/**
 * Verifies a delivery as spec 5 says — HMAC-SHA256 over `{timestamp}.{raw_body}`, `sha256=` +
 * lowercase hex, compared in constant time — checks the timestamp is within the tolerance, and
 * returns the typed payload. Throws WebhookVerificationError otherwise.
 */
export function verifyWebhook({ secret, headers, rawBody, toleranceSeconds = 300, now = () => new Date() }: VerifyWebhookOptions): WebhookPayload {
  const timestamp = header(headers, 'X-Service-Timestamp');
  const signature = header(headers, 'X-Service-Signature');
  if (!timestamp || !signature) throw new WebhookVerificationError('missing_header', 'X-Service-Timestamp and X-Service-Signature are required.');
  if (!/^\d+$/.test(timestamp)) throw new WebhookVerificationError('malformed_header', 'X-Service-Timestamp must be Unix seconds.');
  if (!/^sha256=[0-9a-f]{64}$/.test(signature)) throw new WebhookVerificationError('malformed_header', 'X-Service-Signature must be sha256= and 64 lowercase hex digits.');
  const expected = createHmac('sha256', secret).update(`${timestamp}.`).update(rawBody).digest();
  const presented = Buffer.from(signature.slice('sha256='.length), 'hex');
  if (!timingSafeEqual(expected, presented)) throw new WebhookVerificationError('signature_mismatch', 'The signature does not match the body.');
  // Checked after the signature, so an attacker learns nothing from which check failed first.
  const age = Math.abs(now().getTime() / 1000 - Number(timestamp));
  if (age > toleranceSeconds) throw new WebhookVerificationError('timestamp_out_of_tolerance', `The delivery was signed ${Math.round(age)} s ago (tolerance ${toleranceSeconds} s).`);
  let payload: unknown;
  try {
    payload = JSON.parse(typeof rawBody === 'string' ? rawBody : Buffer.from(rawBody).toString('utf8'));
  } catch {
    throw new WebhookVerificationError('invalid_payload', 'The body is not JSON.');
  }
  if (!isPayload(payload)) throw new WebhookVerificationError('invalid_payload', 'The body is not a webhook delivery payload.');
  return payload;
}
