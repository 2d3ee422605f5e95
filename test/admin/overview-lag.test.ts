// The overview's feed lag is the merchant's own (docs/panel.md#pages, "Overview"): the age of its oldest change
// not yet attempted for one of its active endpoints, from its outbox rows and its pending
// deliveries without an attempt (counted from the oldest change each carries), read by one storage
// query scoped to the merchant, however long its backlog. Other merchants, paused endpoints and
// deliveries waiting for a retry do not count. Time comes from a fake clock.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MerchantOverview } from '../../src/admin/overview.js';
import type { WebhookEndpointRecord } from '../../src/webhooks/model.js';
import { fakeClock, HOUR, MINUTE } from '../support/clock.js';
import { startTestService, type TestService } from '../support/service.js';
import { operatorCookie } from '../panel/sign-in.js';

const clock = fakeClock('2026-03-02T12:00:00.000Z');
const ago = (ms: number) => new Date(clock.ms - ms).toISOString();
let service: TestService;
let overview: MerchantOverview;

beforeAll(async () => {
  service = await startTestService({ now: clock.now });
  overview = new MerchantOverview(service.admin, service.service.endpoints, clock.now);
});
afterAll(() => service?.close());

async function merchantWithEndpoint(name: string): Promise<{ merchantId: number; endpoint: WebhookEndpointRecord }> {
  const merchantId = (await service.admin.createMerchant({ name })).id;
  const endpoint = await service.storage.createWebhookEndpoint({
    merchant_id: merchantId,
    url: 'http://127.0.0.1:9/hooks',
    store_id: null,
    events: ['price', 'content', 'removed'],
    secret: 'whsec_test',
    created_at: ago(10 * HOUR),
  });
  return { merchantId, endpoint };
}

const outboxRow = (endpointId: number, at: string) => ({
  endpointId,
  event: 'price' as const,
  storeId: null,
  productIds: [1],
  createdAt: at,
});

function pendingDelivery(endpointId: number, createdAt: string) {
  return {
    endpoint_id: endpointId,
    event: 'price' as const,
    store_id: null,
    product_ids: [1],
    occurred_at: null,
    status: 'pending' as const,
    attempts: 0,
    next_attempt_at: createdAt,
    created_at: createdAt,
  };
}

describe("the overview's feed lag", () => {
  it('is null when nothing of the merchant waits', async () => {
    const { merchantId } = await merchantWithEndpoint('Quiet');
    expect(await service.storage.oldestWaitingChangeAt(merchantId)).toBeNull();
    expect((await overview.overview(merchantId)).feedLagSeconds).toBeNull();
  });

  it('counts a pending delivery from the oldest change it carries, not from when it was batched', async () => {
    const { merchantId, endpoint } = await merchantWithEndpoint('Batched');
    await service.storage.insertDelivery(pendingDelivery(endpoint.id, ago(1 * MINUTE)), ago(40 * MINUTE));
    await service.storage.insertOutbox([outboxRow(endpoint.id, ago(30 * MINUTE))]);
    expect(await service.storage.oldestWaitingChangeAt(merchantId)).toBe(ago(40 * MINUTE));
    expect((await overview.overview(merchantId)).feedLagSeconds).toBe(40 * 60);
  });

  it('finds the oldest waiting delivery behind a backlog of newer ones', async () => {
    const { merchantId, endpoint } = await merchantWithEndpoint('Backlogged');
    await service.storage.insertDelivery(pendingDelivery(endpoint.id, ago(3 * HOUR)));
    for (let i = 600; i > 0; i--) await service.storage.insertDelivery(pendingDelivery(endpoint.id, ago(i * 1000)));
    expect((await overview.overview(merchantId)).feedLagSeconds).toBe(3 * 60 * 60);
  });

  it('leaves out other merchants, paused endpoints and deliveries already attempted', async () => {
    const { merchantId, endpoint } = await merchantWithEndpoint('Scoped');
    const paused = (await merchantWithEndpoint('unused')).endpoint;
    const ownPaused = await service.storage.createWebhookEndpoint({
      merchant_id: merchantId,
      url: 'http://127.0.0.1:9/paused',
      store_id: null,
      events: ['price'],
      secret: 'whsec_p',
      created_at: ago(HOUR),
    });
    await service.storage.updateWebhookEndpoint(ownPaused.id, { status: 'paused' });
    const other = await merchantWithEndpoint('Other merchant');
    await service.storage.insertOutbox([
      outboxRow(other.endpoint.id, ago(5 * HOUR)),
      outboxRow(ownPaused.id, ago(4 * HOUR)),
      outboxRow(paused.id, ago(6 * HOUR)),
    ]);
    await service.storage.insertDelivery({ ...pendingDelivery(endpoint.id, ago(2 * HOUR)), status: 'failed', attempts: 1 });
    await service.storage.insertOutbox([outboxRow(endpoint.id, ago(7 * MINUTE))]);
    expect(await service.storage.oldestWaitingChangeAt(merchantId)).toBe(ago(7 * MINUTE));
    expect(await service.storage.oldestWaitingChangeAt(other.merchantId)).toBe(ago(5 * HOUR));
  });

  it('shows on the overview page', async () => {
    const { merchantId, endpoint } = await merchantWithEndpoint('Shown');
    await service.storage.insertDelivery(pendingDelivery(endpoint.id, ago(MINUTE)), ago(2 * HOUR + 5 * MINUTE));
    const cookie = await operatorCookie(service.url);
    const html = await (await fetch(`${service.url}/panel/merchants/${merchantId}`, { headers: { Cookie: cookie } })).text();
    expect(html).toMatch(/<strong id="feed-lag">2 h 5 min<\/strong>/);
  });
});
