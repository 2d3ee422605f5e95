// A delivery's JSON body, checked against the document before anything is signed or sent; for an
// endpoint with `payload: full`, with the changed products as the store publishes them.
import { WEBHOOKS, type WebhookPayload, type WebhookSchemaError } from '../generated/public-webhooks.js';
import type { DeliveryRecord } from './model.js';

/** A delivery's JSON body, or why its payload breaks the document and must not be sent. */
export type DeliveryBody = { ok: true; body: string } | { ok: false; errors: WebhookSchemaError[] };

/**
 * The changed products a full delivery may carry: the store's published payloads (JSON text, as
 * `GET /v1/products/{id}` answers them) by product id, and the bound on the body's bytes.
 */
export interface FullProducts {
  published: ReadonlyMap<number, string>;
  maxBytes: number;
}

const bytesOf = (text: string) => Buffer.byteLength(text, 'utf8');

/**
 * The JSON body of a delivery (spec 2.7), in the spec's field order, checked before it is signed
 * against its event's payload schema in the document's `webhooks:` section (the generated
 * registry): what no receiver could accept is never signed nor sent. With `full` (an endpoint
 * with `payload: full`, a `content` or `price` delivery), the spec's fields are followed by
 * `products`, those of `product_ids` in their order while the body stays within `maxBytes`, and
 * `products_omitted`, the rest (over the bound, or not published now).
 */
export function deliveryBody(
  delivery: Pick<DeliveryRecord, 'event' | 'store_id' | 'product_ids'>,
  occurredAt: string,
  full?: FullProducts,
): DeliveryBody {
  const payload = {
    event: delivery.event,
    store_id: delivery.store_id,
    product_ids: delivery.product_ids,
    occurred_at: occurredAt,
  } satisfies WebhookPayload;
  const errors = WEBHOOKS[payload.event].validate(payload);
  if (errors.length) return { ok: false, errors };
  const thin = JSON.stringify(payload);
  if (!full || !carriesProducts(delivery)) return { ok: true, body: thin };
  // The products are the store's own published payloads, spliced in as stored: the fields the
  // registry checks are the spec's; the products are what GET /v1/products/{id} serves.
  const omitted = delivery.product_ids.filter((id) => !full.published.has(id));
  const carried: string[] = [];
  // The body with every id omitted is the largest it gets without products; each product carried
  // adds its bytes and a comma, and takes at least two bytes (a digit and a comma) off the list.
  let size = bytesOf(thin) + bytesOf(`,"products":[],"products_omitted":${JSON.stringify(delivery.product_ids)}`);
  for (const id of delivery.product_ids) {
    const product = full.published.get(id);
    if (product === undefined) continue;
    const added = bytesOf(product) + 1;
    if (size + added > full.maxBytes) omitted.push(id);
    else {
      carried.push(product);
      size += added;
    }
  }
  const order = new Map(delivery.product_ids.map((id, i) => [id, i]));
  omitted.sort((a, b) => order.get(a)! - order.get(b)!);
  const body = `${thin.slice(0, -1)},"products":[${carried.join(',')}],"products_omitted":${JSON.stringify(omitted)}}`;
  return { ok: true, body };
}

/** Whether a delivery to a full endpoint carries products: a `removed` carries ids only; a store's products need the store. */
export const carriesProducts = (
  delivery: Pick<DeliveryRecord, 'event' | 'store_id'>,
): delivery is { event: 'content' | 'price'; store_id: number } => delivery.event !== 'removed' && delivery.store_id !== null;

/**
 * The published payloads of the listed products, by id, from the store's `?ids=` read (payloads
 * ascending, joined by commas): one statement whatever the number of products.
 */
export function publishedById(joined: Uint8Array): Map<number, string> {
  const text = Buffer.from(joined.buffer, joined.byteOffset, joined.byteLength).toString('utf8');
  const published = new Map<number, string>();
  if (text === '') return published;
  for (const product of JSON.parse(`[${text}]`) as { id: number }[]) published.set(product.id, JSON.stringify(product));
  return published;
}

/** The attempt log's error for a payload the document rejects: a bug of ours, never retried. */
export const INVALID_PAYLOAD = 'invalid_payload';
