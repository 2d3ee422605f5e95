// Deliveries that carry the data: an endpoint with `payload: full` gets, beside the spec's fields
// unchanged, the changed products as GET /v1/products/{id} answers them (`products`) and the ids it
// leaves out (`products_omitted`), within CPS_WEBHOOK_FULL_PAYLOAD_BYTES; a `removed` carries ids
// only; both signature schemes sign the body as sent; a retry reads the products again. A thin
// endpoint (the default) gets the spec's payload alone. Real receivers on 127.0.0.1, both engines.
import { Webhook } from 'standardwebhooks';
import { afterEach, describe, expect, it } from 'vitest';
import { createMerchant } from '../support/admin-http.js';
import { runCli } from '../support/cli.js';
import { answers } from '../support/receiver.js';
import { startTestService } from '../support/service.js';
import { publicContract } from '../support/contract.js';
import { SECOND, startWebhookWorld, type WebhookWorld } from './harness.js';

const SPEC_FIELDS = ['event', 'store_id', 'product_ids', 'occurred_at'];

let world: WebhookWorld | undefined;
afterEach(async () => {
  await world?.close();
  world = undefined;
});

/** The products as the public API answers them for the world's store `de`. */
async function publicProducts(w: WebhookWorld, ids: number[]): Promise<unknown[]> {
  const key = await w.service.keyFor(w.merchant.id);
  return Promise.all(
    ids.map(async (id) => {
      const response = await w.service.api(`/v1/products/${id}?store=de`, key);
      expect(response.status, response.text).toBe(200);
      return response.body.data;
    }),
  );
}

describe('payload: full', () => {
  it("carries the changed products as GET /v1/products/{id} answers them beside the spec's fields; thin stays the spec's payload", async () => {
    const w = await startWebhookWorld({ stores: ['de'], start: new Date().toISOString() });
    world = w;
    const thin = await w.receiver();
    const full = await w.receiver();
    const thinEndpoint = await w.register(thin, { store: 'de' });
    const fullEndpoint = await w.register(full, { store: 'de', payload: 'full', standard_webhooks: true });
    expect(thinEndpoint.payload).toBe('thin');
    expect(fullEndpoint.payload).toBe('full');
    expect((await w.endpoint(fullEndpoint.id)).payload).toBe('full');
    const a = await w.putProduct('A', { cost: '11.00' });
    const b = await w.putProduct('B', { cost: '12.00' });
    await w.after(2 * SECOND);

    for (const payload of thin.payloads) expect(Object.keys(payload)).toEqual(SPEC_FIELDS);
    expect(full.count).toBe(thin.count);
    for (const [i, request] of full.requests.entries()) {
      const payload = request.payload as Record<string, unknown>;
      // The spec's fields exactly as a thin endpoint gets them, then the products.
      expect(Object.keys(payload)).toEqual([...SPEC_FIELDS, 'products', 'products_omitted']);
      expect(Object.fromEntries(SPEC_FIELDS.map((f) => [f, payload[f]]))).toEqual(thin.payloads[i]);
      expect(payload.products_omitted).toEqual([]);
      const ids = payload.product_ids as number[];
      expect(ids.slice().sort()).toEqual([a, b].sort());
      expect(payload.products).toEqual(await publicProducts(w, ids));
      for (const product of payload.products as unknown[]) publicContract.validateSchema('/components/schemas/Product', product);
      // Signed as sent in both schemes: X-Service-Signature (the receiver checked it) and webhook-signature.
      expect(request.verifiedWith).toBe(fullEndpoint.secret);
      const headers = Object.fromEntries(Object.entries(request.headers).map(([name, value]) => [name, String(value)]));
      expect(new Webhook(fullEndpoint.secret).verify(request.rawBody.toString('utf8'), headers)).toEqual(payload);
    }
    // The admin API shows the body as sent.
    const [sent] = await w.deliveries(fullEndpoint.id, '&status=succeeded');
    const detail = await w.delivery(fullEndpoint.id, sent!.id);
    expect(full.requests.map((r) => r.rawBody.toString('utf8'))).toContain(detail.body);

    // A removed carries ids only; turned thin, the endpoint gets the spec's payload from then on.
    await w.deleteProduct('A');
    await w.after(2 * SECOND);
    const removed = full.requests.at(-1)!.payload as Record<string, unknown>;
    expect(removed).toMatchObject({ event: 'removed', product_ids: [a] });
    expect(Object.keys(removed)).toEqual(SPEC_FIELDS);
    const patched = await w.service.adminApi('PATCH', `${w.merchant.base}/webhook-endpoints/${fullEndpoint.id}`, { payload: 'thin' });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.body.payload).toBe('thin');
    await w.putProduct('B', { cost: '13.00' });
    await w.after(2 * SECOND);
    expect(Object.keys(full.payloads.at(-1)!)).toEqual(SPEC_FIELDS);
  });

  it('leaves out the products beyond CPS_WEBHOOK_FULL_PAYLOAD_BYTES and lists them by id in products_omitted', async () => {
    const w = await startWebhookWorld({ stores: ['de'], webhooks: { fullPayloadBytes: 4096 } });
    world = w;
    const receiver = await w.receiver();
    await w.register(receiver, { store: 'de', events: ['content'], payload: 'full' });
    const ids: number[] = [];
    // Each product over 600 bytes (titles are at most 500 characters): not all eight fit in 4 KiB.
    for (let i = 0; i < 8; i++) ids.push(await w.putProduct(`LONG-${i}`, { title: `${'Wanderrucksack '.repeat(32)}${i}` }));
    await w.after(2 * SECOND);
    const [request] = receiver.requests;
    expect(receiver.count).toBe(1);
    expect(request!.rawBody.length).toBeLessThanOrEqual(4096);
    const payload = request!.payload as unknown as { product_ids: number[]; products: { id: number }[]; products_omitted: number[] };
    expect(payload.product_ids).toEqual(ids);
    expect(payload.products.length).toBeGreaterThan(0);
    expect(payload.products_omitted.length).toBeGreaterThan(0);
    // Every listed id is either carried or omitted, in the order of product_ids.
    expect([...payload.products.map((p) => p.id), ...payload.products_omitted].sort((x, y) => x - y)).toEqual(ids);
    expect(payload.products.map((p) => p.id)).toEqual(ids.filter((id) => !payload.products_omitted.includes(id)));
    expect(payload.products).toEqual(
      await publicProducts(
        w,
        payload.products.map((p) => p.id),
      ),
    );
  });

  it('reads the products again for a retry: the same webhook-id carries them as they are then', async () => {
    const w = await startWebhookWorld({ stores: ['de'], webhooks: { backoffSeconds: [30] } });
    world = w;
    let seen = 0;
    const receiver = await w.receiver({ behaviour: () => (seen++ === 0 ? answers.serverError : answers.ok) });
    const endpoint = await w.register(receiver, { store: 'de', events: ['price'], payload: 'full' });
    const id = await w.putProduct('A', { cost: '11.00' });
    await w.after(2 * SECOND);
    const [first] = receiver.requests;
    const before = await publicProducts(w, [id]);
    expect((first!.payload as { products: unknown[] }).products).toEqual(before);
    // A new cost before the retry: the retry carries the product as published then (and the new
    // cost's own delivery follows with a webhook-id of its own).
    await w.putProduct('A', { cost: '19.00' });
    const after = await publicProducts(w, [id]);
    expect(after).not.toEqual(before);
    await w.after(31 * SECOND);
    const retry = receiver.requests.find((r, i) => i > 0 && r.headers['webhook-id'] === first!.headers['webhook-id'])!;
    expect(retry.payload).toMatchObject({ product_ids: [id], occurred_at: first!.payload.occurred_at });
    expect((retry.payload as { products: unknown[] }).products).toEqual(after);
    expect((await w.deliveries(endpoint.id)).every((d) => d.status === 'succeeded')).toBe(true);
  });
});

describe('the CLI', () => {
  it('registers an endpoint with --payload full and turns it thin with webhooks update --payload thin', async () => {
    const service = await startTestService();
    try {
      const merchant = await createMerchant(service, 'Command Line Outfitters');
      const env = { ...service.database.env, CPS_DEMO_ON_EMPTY: 'false' };
      const merchantArgs = ['--merchant', String(merchant.id), '--json'];
      const created = await runCli(
        ['webhooks', 'create', ...merchantArgs, '--url', 'https://hooks.outfitters-shop.com/c', '--payload', 'full'],
        env,
      );
      expect(created.code, created.stderr).toBe(0);
      const endpoint = JSON.parse(created.stdout) as { id: number; payload: string };
      expect(endpoint.payload).toBe('full');
      const updated = await runCli(['webhooks', 'update', ...merchantArgs, '--endpoint', String(endpoint.id), '--payload', 'thin'], env);
      expect(updated.code, updated.stderr).toBe(0);
      expect(JSON.parse(updated.stdout).payload).toBe('thin');
      const refused = await runCli(['webhooks', 'update', ...merchantArgs, '--endpoint', String(endpoint.id), '--payload', 'fat'], env);
      expect(refused.code).not.toBe(0);
      expect(refused.stderr).toContain('payload');
    } finally {
      await service.close();
    }
  });
});
