// The receiver kit (spec 5, webhook authenticity): verify a delivery's signature over the raw
// body, in constant time, within a timestamp tolerance, and get the typed payload back.
//
//   import { verifyWebhook, WebhookVerificationError } from 'catalog-publishing-client/webhooks';
//   const payload = verifyWebhook({ secret, headers: req.headers, rawBody });
//   // during a secret rotation: verifyWebhook({ secret: [oldSecret, newSecret], ... })
//
// Node-only (node:crypto), so it is its own subpath and the client itself stays runtime-neutral.
// The headers and the payload are checked by the registry generated from the document's
// `webhooks:` section (standalone: the package ships it without a schema library).
import { createHmac, timingSafeEqual } from 'node:crypto';
import {
  WEBHOOK_HEADERS, webhookPayloadErrors, type WebhookHeaderName, type WebhookPayload, type WebhookSchemaError,
} from '../generated/public-webhooks.js';

export { WEBHOOK_EVENTS, WEBHOOKS, type WebhookEvent } from '../generated/public-webhooks.js';
export type { WebhookPayload, WebhookSchemaError };

export type WebhookVerificationFailure =
  | 'missing_header' | 'malformed_header' | 'timestamp_out_of_tolerance' | 'signature_mismatch' | 'invalid_payload';

/** Why a delivery was rejected; answer 400 to it (the reference receivers do). */
export class WebhookVerificationError extends Error {
  override readonly name = 'WebhookVerificationError';

  constructor(
    readonly reason: WebhookVerificationFailure,
    message: string,
    /** For `invalid_payload` on a JSON body: where and how it breaks the document's payload schema. */
    readonly schemaErrors: WebhookSchemaError[] = [],
  ) {
    super(message);
  }
}

export interface VerifyWebhookOptions {
  /**
   * The endpoint's signing secret, `whsec_…`, exactly as shown at creation or rotation; or, while
   * a rotation is pending, the old and the new one: a signature made with any of them verifies.
   */
  secret: string | readonly string[];
  /** The request headers: a Fetch `Headers`, or Node's `req.headers`. */
  headers: Headers | Record<string, string | string[] | undefined>;
  /** The exact bytes of the body, before any parsing or re-serialization. */
  rawBody: string | Uint8Array;
  /** Reject signatures older (or further in the future) than this; default 300 s. */
  toleranceSeconds?: number;
  /** The receiver's clock, for tests. */
  now?: () => Date;
}

function header(headers: VerifyWebhookOptions['headers'], name: WebhookHeaderName): string | undefined {
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? undefined;
  const record = headers as Record<string, string | string[] | undefined>;
  const value = record[name] ?? record[name.toLowerCase()] ?? Object.entries(record).find(([k]) => k.toLowerCase() === name.toLowerCase())?.[1];
  return Array.isArray(value) ? value[0] : value;
}

/**
 * Verifies a delivery as spec 5 says — HMAC-SHA256 over `{timestamp}.{raw_body}`, `sha256=` +
 * lowercase hex, compared in constant time — checks the timestamp is within the tolerance, and
 * returns the typed payload. Throws WebhookVerificationError otherwise. During a secret rotation
 * pass both secrets, `[oldSecret, newSecret]`: whichever signs, the delivery verifies.
 */
export function verifyWebhook({ secret, headers, rawBody, toleranceSeconds = 300, now = () => new Date() }: VerifyWebhookOptions): WebhookPayload {
  const secrets: readonly string[] = typeof secret === 'string' ? [secret] : secret;
  // A receiver with no secret configured must not look like one whose deliveries are forged.
  if (secrets.length === 0 || secrets.some((s) => typeof s !== 'string' || s === '')) {
    throw new TypeError('verifyWebhook: `secret` must be a non-empty string or a non-empty list of them');
  }
  // The headers the webhooks declare, each present and matching its pattern.
  const missing = WEBHOOK_HEADERS.filter((h) => h.required && !header(headers, h.name)).map((h) => h.name);
  if (missing.length) throw new WebhookVerificationError('missing_header', `${WEBHOOK_HEADERS.map((h) => h.name).join(' and ')} are required (missing: ${missing.join(', ')}).`);
  const malformed = WEBHOOK_HEADERS.find((h) => {
    const value = header(headers, h.name);
    return value !== undefined && !h.pattern.test(value);
  });
  if (malformed) throw new WebhookVerificationError('malformed_header', `${malformed.name} must match ${malformed.pattern.source}.`);
  const timestamp = header(headers, 'X-Service-Timestamp')!;
  const signature = header(headers, 'X-Service-Signature')!;
  const presented = Buffer.from(signature.slice('sha256='.length), 'hex');
  // Every secret is compared, in constant time, whichever matches: the time taken tells nothing.
  let matched = false;
  for (const key of secrets) {
    const expected = createHmac('sha256', key).update(`${timestamp}.`).update(rawBody).digest();
    if (timingSafeEqual(expected, presented)) matched = true;
  }
  if (!matched) throw new WebhookVerificationError('signature_mismatch', `The signature does not match the body${secrets.length > 1 ? ' with any of the secrets' : ''}.`);
  // Checked after the signature, so an attacker learns nothing from which check failed first.
  const age = Math.abs(now().getTime() / 1000 - Number(timestamp));
  if (age > toleranceSeconds) throw new WebhookVerificationError('timestamp_out_of_tolerance', `The delivery was signed ${Math.round(age)} s ago (tolerance ${toleranceSeconds} s).`);
  let payload: unknown;
  try {
    payload = JSON.parse(typeof rawBody === 'string' ? rawBody : Buffer.from(rawBody).toString('utf8'));
  } catch {
    throw new WebhookVerificationError('invalid_payload', 'The body is not JSON.');
  }
  const errors = webhookPayloadErrors(payload);
  if (errors.length) {
    const detail = errors.map((e) => `${e.instancePath || '/'} ${e.message}`).join('; ');
    throw new WebhookVerificationError('invalid_payload', `The body is not a webhook delivery payload: ${detail}.`, errors);
  }
  return payload as WebhookPayload;
}
