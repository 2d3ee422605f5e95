// A delivery's JSON body, checked against the document before anything is signed or sent.
import { WEBHOOKS, type WebhookPayload, type WebhookSchemaError } from '../generated/public-webhooks.js';
import type { DeliveryRecord } from './model.js';

/** A delivery's JSON body, or why its payload breaks the document and must not be sent. */
export type DeliveryBody = { ok: true; body: string } | { ok: false; errors: WebhookSchemaError[] };

/**
 * The JSON body of a delivery (spec 2.7), in the spec's field order, checked before it is signed
 * against its event's payload schema in the document's `webhooks:` section (the generated
 * registry): what no receiver could accept is never signed nor sent.
 */
export function deliveryBody(delivery: Pick<DeliveryRecord, 'event' | 'store_id' | 'product_ids'>, occurredAt: string): DeliveryBody {
  const payload = {
    event: delivery.event,
    store_id: delivery.store_id,
    product_ids: delivery.product_ids,
    occurred_at: occurredAt,
  } satisfies WebhookPayload;
  const errors = WEBHOOKS[payload.event].validate(payload);
  return errors.length ? { ok: false, errors } : { ok: true, body: JSON.stringify(payload) };
}

/** The attempt log's error for a payload the document rejects: a bug of ours, never retried. */
export const INVALID_PAYLOAD = 'invalid_payload';
