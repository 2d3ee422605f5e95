// The receiver kit (spec 5, webhook authenticity): verify a delivery's signature over the raw
// body, in constant time, within a timestamp tolerance, and get the typed payload back; with
// verifyWebhookDelivery, also the delivery's `webhook-id` to deduplicate on. Either signature
// scheme a delivery carries verifies: the spec's `X-Service-Signature`, or the Standard Webhooks
// `webhook-signature` of an endpoint that chose those headers.
//
//   import { verifyWebhook, verifyWebhookDelivery, WebhookVerificationError } from 'catalog-publishing-client/webhooks';
//   const payload = verifyWebhook({ secret, headers: req.headers, rawBody });
//   const { id, payload } = verifyWebhookDelivery({ secret, headers: req.headers, rawBody });
//   // during a secret rotation: verifyWebhook({ secret: [oldSecret, newSecret], ... })
//
// Node-only (node:crypto), so it is its own subpath and the client itself stays runtime-neutral.
// The headers and the payload are checked by the registry generated from the document's
// `webhooks:` section (standalone: the package ships it without a schema library).
import { createHmac, timingSafeEqual } from 'node:crypto';
import {
  WEBHOOK_HEADERS,
  webhookPayloadErrors,
  type WebhookHeaderName,
  type WebhookPayload,
  type WebhookSchemaError,
} from '../generated/public-webhooks.js';

export { WEBHOOK_EVENTS, WEBHOOKS, type WebhookEvent } from '../generated/public-webhooks.js';
export type { WebhookPayload, WebhookSchemaError };

export type WebhookVerificationFailure =
  | 'missing_header'
  | 'malformed_header'
  | 'timestamp_out_of_tolerance'
  | 'signature_mismatch'
  | 'invalid_payload';

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

/** Which signature verified a delivery. */
export type WebhookSignatureScheme = 'service' | 'standard';

export interface VerifyWebhookDeliveryOptions extends VerifyWebhookOptions {
  /**
   * The scheme to verify: `service` (`X-Service-Signature`), `standard` (`webhook-signature`,
   * Standard Webhooks) or `any` (the default): `standard` when the delivery carries
   * `webhook-signature`, else `service`.
   */
  scheme?: WebhookSignatureScheme | 'any';
}

/** A verified delivery. */
export interface VerifiedWebhookDelivery {
  /**
   * `webhook-id`: the delivery's id, the same on every retry of it; deduplicate on it. Under the
   * `service` scheme the signature does not cover it; under `standard` it does. null when the
   * delivery carried none.
   */
  id: string | null;
  /** `X-Service-Replaces`: on a resend, the `webhook-id` of the delivery it re-sends; else null. */
  replaces: string | null;
  /** The scheme whose signature verified. */
  scheme: WebhookSignatureScheme;
  /** The signed timestamp, Unix seconds. */
  timestamp: number;
  payload: WebhookPayload;
}

function header(headers: VerifyWebhookOptions['headers'], name: WebhookHeaderName): string | undefined {
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? undefined;
  const record = headers as Record<string, string | string[] | undefined>;
  const value =
    record[name] ?? record[name.toLowerCase()] ?? Object.entries(record).find(([k]) => k.toLowerCase() === name.toLowerCase())?.[1];
  return Array.isArray(value) ? value[0] : value;
}

/**
 * Verifies a delivery as spec 5 says — HMAC-SHA256 over `{timestamp}.{raw_body}`, `sha256=` +
 * lowercase hex, compared in constant time — or, when it carries `webhook-signature`, as the
 * Standard Webhooks specification says; checks the timestamp is within the tolerance, and returns
 * the typed payload. Throws WebhookVerificationError otherwise. During a secret rotation pass both
 * secrets, `[oldSecret, newSecret]`: whichever signs, the delivery verifies.
 */
export function verifyWebhook(options: VerifyWebhookOptions): WebhookPayload {
  return verifyWebhookDelivery(options).payload;
}

const SCHEME_HEADERS = {
  service: { timestamp: 'X-Service-Timestamp', signature: 'X-Service-Signature' },
  standard: { timestamp: 'webhook-timestamp', signature: 'webhook-signature' },
} as const satisfies Record<WebhookSignatureScheme, { timestamp: WebhookHeaderName; signature: WebhookHeaderName }>;

/** The Standard Webhooks key of a secret: what follows `whsec_`, base64-decoded (either alphabet). */
const standardKey = (secret: string) => Buffer.from(secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret, 'base64');

/**
 * verifyWebhook, returning the delivery's `webhook-id` (to deduplicate on), what a resend
 * replaces, the scheme that verified and the timestamp beside the payload.
 */
export function verifyWebhookDelivery({
  secret,
  headers,
  rawBody,
  toleranceSeconds = 300,
  now = () => new Date(),
  scheme = 'any',
}: VerifyWebhookDeliveryOptions): VerifiedWebhookDelivery {
  const secrets: readonly string[] = typeof secret === 'string' ? [secret] : secret;
  // A receiver with no secret configured must not look like one whose deliveries are forged.
  if (secrets.length === 0 || secrets.some((s) => typeof s !== 'string' || s === '')) {
    throw new TypeError('verifyWebhook: `secret` must be a non-empty string or a non-empty list of them');
  }
  const used: WebhookSignatureScheme =
    scheme === 'any' ? (header(headers, 'webhook-signature') !== undefined ? 'standard' : 'service') : scheme;
  const names = SCHEME_HEADERS[used];
  // The headers the scheme signs with, each present; every header the webhooks declare matching its pattern.
  const needed: WebhookHeaderName[] =
    used === 'standard' ? ['webhook-id', names.timestamp, names.signature] : [names.timestamp, names.signature];
  const missing = needed.filter((name) => !header(headers, name));
  if (missing.length)
    throw new WebhookVerificationError('missing_header', `${needed.join(' and ')} are required (missing: ${missing.join(', ')}).`);
  const malformed = WEBHOOK_HEADERS.find((h) => {
    const value = header(headers, h.name);
    return value !== undefined && !h.pattern.test(value);
  });
  if (malformed) throw new WebhookVerificationError('malformed_header', `${malformed.name} must match ${malformed.pattern.source}.`);
  const id = header(headers, 'webhook-id') ?? null;
  const timestamp = header(headers, names.timestamp)!;
  const signature = header(headers, names.signature)!;
  // Every secret is compared with every signature presented, in constant time, whichever matches:
  // the time taken tells nothing.
  let matched = false;
  if (used === 'service') {
    const presented = Buffer.from(signature.slice('sha256='.length), 'hex');
    for (const key of secrets) {
      const expected = createHmac('sha256', key).update(`${timestamp}.`).update(rawBody).digest();
      if (timingSafeEqual(expected, presented)) matched = true;
    }
  } else {
    const presented = signature.split(' ').map((s) => Buffer.from(s.slice('v1,'.length), 'base64'));
    for (const key of secrets) {
      const expected = createHmac('sha256', standardKey(key)).update(`${id}.${timestamp}.`).update(rawBody).digest();
      for (const candidate of presented) if (candidate.length === expected.length && timingSafeEqual(expected, candidate)) matched = true;
    }
  }
  if (!matched)
    throw new WebhookVerificationError(
      'signature_mismatch',
      `The signature does not match the body${secrets.length > 1 ? ' with any of the secrets' : ''}.`,
    );
  // Checked after the signature, so an attacker learns nothing from which check failed first.
  const age = Math.abs(now().getTime() / 1000 - Number(timestamp));
  if (age > toleranceSeconds)
    throw new WebhookVerificationError(
      'timestamp_out_of_tolerance',
      `The delivery was signed ${Math.round(age)} s ago (tolerance ${toleranceSeconds} s).`,
    );
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
  return {
    id,
    replaces: header(headers, 'X-Service-Replaces') ?? null,
    scheme: used,
    timestamp: Number(timestamp),
    payload: payload as WebhookPayload,
  };
}
