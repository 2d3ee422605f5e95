// The dispatcher checks each outgoing payload against its event's schema in the document's
// `webhooks:` section (the generated registry) before signing: a payload no receiver could
// accept is never signed nor sent, and the operator sees why in the attempt log.
import { afterEach, describe, expect, it } from 'vitest';
import { WEBHOOK_PRODUCT_IDS_MAX_ITEMS } from '../../src/generated/public-limits.js';
import { deliveryBody } from '../../src/webhooks/delivery-body.js';
import { startWebhookWorld, type WebhookWorld } from './harness.js';

let world: WebhookWorld | undefined;
afterEach(async () => {
  await world?.close();
  world = undefined;
});

const OCCURRED_AT = '2026-11-25T12:00:00Z';

describe('the payload check before signing', () => {
  it("builds the body of a payload the document accepts, in the spec's field order", () => {
    const body = deliveryBody({ event: 'removed', store_id: null, product_ids: [3, 7] }, OCCURRED_AT);
    expect(body).toEqual({
      ok: true,
      body: '{"event":"removed","store_id":null,"product_ids":[3,7],"occurred_at":"2026-11-25T12:00:00Z"}',
    });
  });

  it("refuses more product ids than the document's maxItems, and a dispatch time that is not an RFC 3339 date-time", () => {
    const ids = Array.from({ length: WEBHOOK_PRODUCT_IDS_MAX_ITEMS + 1 }, (_, i) => i + 1);
    expect(deliveryBody({ event: 'price', store_id: 1, product_ids: ids }, OCCURRED_AT)).toEqual({
      ok: false,
      errors: [{ instancePath: '/product_ids', message: 'must NOT have more than 100 items' }],
    });
    expect(deliveryBody({ event: 'content', store_id: 1, product_ids: [1] }, '2026-11-25 12:00')).toEqual({
      ok: false,
      errors: [{ instancePath: '/occurred_at', message: 'must match format "date-time"' }],
    });
  });

  it('gives up a delivery whose payload breaks the document without sending it, and keeps the endpoint healthy', async () => {
    world = await startWebhookWorld({ stores: ['de'] });
    const receiver = await world.receiver();
    const endpoint = await world.register(receiver);
    const at = world.clock.now().toISOString();
    const tooMany = Array.from({ length: WEBHOOK_PRODUCT_IDS_MAX_ITEMS + 1 }, (_, i) => i + 1);
    const storage = world.service.storage;
    const invalid = await storage.transaction(async (tx) => {
      const inserted = await tx.insertDelivery({
        endpoint_id: endpoint.id,
        event: 'price',
        store_id: world!.stores.de!.id,
        product_ids: tooMany,
        occurred_at: null,
        status: 'pending',
        attempts: 0,
        next_attempt_at: at,
        created_at: at,
      });
      await tx.insertDelivery({
        endpoint_id: endpoint.id,
        event: 'content',
        store_id: world!.stores.de!.id,
        product_ids: [1, 2],
        occurred_at: null,
        status: 'pending',
        attempts: 0,
        next_attempt_at: at,
        created_at: at,
      });
      return inserted;
    });
    await world.deliverDue();

    // Only the valid one reached the receiver (which checks every request against the document).
    // Read from storage: the admin API's Delivery cannot show more than 100 ids either.
    expect(receiver.payloads.map((p) => p.event)).toEqual(['content']);
    expect(await storage.getDelivery(invalid.id)).toMatchObject({ status: 'given_up', attempts: 1, next_attempt_at: null });
    expect(await storage.listAttempts(invalid.id)).toEqual([
      expect.objectContaining({ status_code: null, error: 'invalid_payload', response_snippet: null }),
    ]);
    const health = await world.endpoint(endpoint.id);
    expect(health).toMatchObject({ status: 'active', consecutive_failures: 0 });
  });
});
