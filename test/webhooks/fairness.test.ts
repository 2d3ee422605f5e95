// Fairness between tenants: receivers that hang hold only their own endpoints'
// connections and their merchant's share of the dispatcher's slots, so another merchant's healthy
// endpoint on the same host keeps getting its deliveries, with no failure recorded against it. The
// real dispatcher as `serve` runs it (createService: its sender, one pool per endpoint), on the real
// clock. A hang lasts longer than the test (the delivery time-out): a delivery of the healthy
// endpoint that waited for one of the hanging merchant's slots would never arrive while they hang,
// so "promptly" is measured by its cause (it arrived while every hanging request still held its
// slot), not by a wall-clock bound that a loaded machine stretches.
import { afterEach, describe, expect, it } from 'vitest';
import { adminOk, createMerchant, importNdjson, simpleProduct, type MerchantHandle } from '../support/admin-http.js';
import { answers, Receiver } from '../support/receiver.js';
import { startTestService, type TestService } from '../support/service.js';

const POLL_MS = 50;
const COALESCE_MS = 100;
// Longer than the test: no hanging request ends (and frees a slot) before the receiver closes.
const TIMEOUT_MS = 120_000;
/** The hanging merchant's share of the dispatcher's slots (CPS_WEBHOOK_MERCHANT_CONCURRENCY). */
const MERCHANT_SLOTS = 8;

let service: TestService | undefined;
let receiver: Receiver | undefined;
afterEach(async () => {
  // The receiver first: its hanging requests end (connections dropped), so the dispatcher stops at once.
  await receiver?.close();
  await service?.close();
  service = undefined;
  receiver = undefined;
});

async function merchantWithStore(test: TestService, name: string): Promise<MerchantHandle> {
  const merchant = await createMerchant(test, name);
  await adminOk(test, 'PUT', `${merchant.base}/stores/de`, { name: 'Deutschland', locale: 'de-DE', currency: 'EUR' });
  await adminOk(test, 'PUT', `${merchant.base}/suppliers/alpine`, { name: 'Alpine Wholesale AG' });
  return merchant;
}

/** Polls (real time) until `condition` holds. */
async function until(condition: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe('fairness between merchants', () => {
  it('delivers to a healthy endpoint promptly and without failures while ten endpoints of another merchant on the same host hang', async () => {
    service = await startTestService({
      config: {
        webhooks: {
          allowHosts: ['127.0.0.1'],
          timeoutMs: TIMEOUT_MS,
          pollIntervalMs: POLL_MS,
          coalesceMs: COALESCE_MS,
          batchSize: 5,
          // The defaults of the slots: 32 overall, 4 per endpoint, 8 per merchant.
          overallConcurrency: 32,
          perEndpointConcurrency: 4,
          perMerchantConcurrency: MERCHANT_SLOTS,
        },
      },
    });
    // One receiver (one origin) for both merchants: merchant A's endpoints never get an answer.
    const hooks = await Receiver.start({ behaviour: (request) => (request.path.includes('tenant=a') ? answers.hang : answers.noContent) });
    receiver = hooks;
    const a = await merchantWithStore(service, 'Hanging Receivers GmbH');
    const b = await merchantWithStore(service, 'Healthy Receiver AG');
    for (let n = 1; n <= 10; n++) {
      const created = await adminOk(
        service,
        'POST',
        `${a.base}/webhook-endpoints`,
        { url: `${hooks.url}?tenant=a&n=${n}`, events: ['content'] },
        201,
      );
      hooks.secrets.push(created.secret);
    }
    const healthy = await adminOk(
      service,
      'POST',
      `${b.base}/webhook-endpoints`,
      { url: `${hooks.url}?tenant=b`, events: ['content'] },
      201,
    );
    hooks.secrets.push(healthy.secret);
    const receivedByB = () => hooks.requests.filter((r) => r.path.includes('tenant=b'));

    service.service.dispatcher.start();
    // 60 new products of A: 12 deliveries (of 5 ids) for each of its 10 endpoints, more than all the slots.
    const imported = await importNdjson(
      service,
      a.id,
      Array.from({ length: 60 }, (_, i) => simpleProduct(`HANG-${i}`)),
    );
    expect(imported.status).toBe(200);
    const hanging = () => hooks.requests.filter((r) => r.path.includes('tenant=a'));
    await until(() => hooks.inFlightNow >= MERCHANT_SLOTS, `merchant A's receivers hang on its ${MERCHANT_SLOTS} slots`);
    await new Promise((resolve) => setTimeout(resolve, 2 * POLL_MS));
    const hangingAtStart = hanging().length;

    // Three changes of B while A's receivers hang: each arrives while every request of A still holds
    // its slot (none ended, none sent since), so it never waited for one of A's slots to free.
    const lags: number[] = [];
    for (let i = 1; i <= 3; i++) {
      const changedAt = Date.now();
      await adminOk(service, 'PUT', `${b.base}/products/HEALTHY`, {
        content: { de: { title: `Gesund ${i}`, description: null } },
        offers: [{ supplier_ref: 'alpine', quantity: 4, cost: '10.00', currency: 'EUR' }],
      });
      await until(() => receivedByB().length >= i, `B's change ${i} arrives`, 60_000);
      lags.push(receivedByB()[i - 1]!.receivedAt - changedAt);
      // A's eight, and B's own while it is being answered.
      expect([MERCHANT_SLOTS, MERCHANT_SLOTS + 1], `requests open when B's change ${i} arrived`).toContain(hooks.inFlightNow);
      expect(hanging().length, `A's requests sent by the time B's change ${i} arrived`).toBe(hangingAtStart);
    }
    // A's hanging receivers held exactly its share of the slots (8), B's request besides them: counted
    // while their client is there (test/support/receiver.ts), so what the dispatcher really had open.
    expect(hangingAtStart, `lags of B's deliveries: ${lags.join(', ')} ms`).toBe(MERCHANT_SLOTS);
    expect(hooks.maxInFlight).toBeLessThanOrEqual(MERCHANT_SLOTS + 1);

    // No failure recorded against B: one successful attempt per delivery, the endpoint healthy.
    // (The last one is recorded once its answer is: the dispatcher records after the response.)
    let deliveries = await service.storage.listDeliveries(healthy.id, { limit: 100 });
    for (const deadline = Date.now() + 10_000; deliveries.some((d) => d.status === 'pending') && Date.now() < deadline; ) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      deliveries = await service.storage.listDeliveries(healthy.id, { limit: 100 });
    }
    expect(deliveries.map((d) => [d.status, d.attempts])).toEqual([
      ['succeeded', 1],
      ['succeeded', 1],
      ['succeeded', 1],
    ]);
    const endpoint = await service.storage.getWebhookEndpoint(healthy.id);
    expect(endpoint).toMatchObject({ status: 'active', consecutive_failures: 0, last_failure_at: null });
  }, 60_000);
});
