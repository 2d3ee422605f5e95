// How a claim shares a dispatcher's free slots, on every engine: merchants take
// turns, then each merchant's endpoints, and no merchant gets more than its share of the
// process's slots, counting what the process already sends to any of its endpoints.
import { describe, expect, it } from 'vitest';
import type { CatalogStorage, DeliveryClaim } from '../../src/storage/port.js';
import { storagePerTest, TEST_ENGINE } from '../support/engine.js';

const AT = '2026-11-26T08:00:00.000Z';
let storage: CatalogStorage;
storagePerTest('claim-turns', (fresh) => ({ storage } = fresh));

const claimAt = (patch: Partial<DeliveryClaim>): DeliveryClaim => ({
  now: () => new Date(AT),
  leaseMs: 60_000,
  limit: 10,
  perEndpoint: 10,
  inFlightByEndpoint: new Map(),
  ...patch,
});

/** A merchant with endpoints, each with `due` pending deliveries due at `dueAt` + i seconds. */
async function merchantWithEndpoints(name: string, endpoints: { due: number; dueAt: string }[]) {
  const merchant = await storage.createMerchant({ name, sku_pattern: null, owner_emails: [], created_at: AT });
  const result: { id: number; deliveries: number[] }[] = [];
  for (const [n, { due, dueAt }] of endpoints.entries()) {
    const endpoint = await storage.createWebhookEndpoint({
      merchant_id: merchant.id,
      url: `https://hooks.example/${name}/${n}`,
      store_id: null,
      events: ['price'],
      secret: 's',
      created_at: AT,
    });
    const deliveries: number[] = [];
    for (let i = 0; i < due; i++) {
      const at = new Date(Date.parse(dueAt) + i * 1000).toISOString();
      deliveries.push(
        (
          await storage.insertDelivery({
            endpoint_id: endpoint.id,
            event: 'price',
            store_id: null,
            product_ids: [i + 1],
            occurred_at: null,
            status: 'pending',
            attempts: 0,
            next_attempt_at: at,
            created_at: at,
          })
        ).id,
      );
    }
    result.push({ id: endpoint.id, deliveries });
  }
  return result;
}

describe(`a claim's turns on ${TEST_ENGINE}`, () => {
  it("lets merchants take turns, then each merchant's endpoints, whoever has the older backlog", async () => {
    // Merchant A's three endpoints have waited longer than merchant B's one.
    const [a1, a2, a3] = await merchantWithEndpoints('a', [
      { due: 3, dueAt: '2026-11-26T07:50:00.000Z' },
      { due: 3, dueAt: '2026-11-26T07:51:00.000Z' },
      { due: 3, dueAt: '2026-11-26T07:52:00.000Z' },
    ]);
    const [b1] = await merchantWithEndpoints('b', [{ due: 3, dueAt: '2026-11-26T07:59:00.000Z' }]);
    const claimed = await storage.claimDueDeliveries(claimAt({ limit: 4 }));
    // A's first (its oldest endpoint's), B's first, A's second (its next endpoint's), B's second.
    expect(claimed.map((d) => d.id).sort((x, y) => x - y)).toEqual(
      [a1!.deliveries[0]!, a2!.deliveries[0]!, b1!.deliveries[0]!, b1!.deliveries[1]!].sort((x, y) => x - y),
    );
    // Then A's third endpoint gets its first turn before A's others their second.
    const next = await storage.claimDueDeliveries(claimAt({ limit: 2 }));
    expect(next.map((d) => d.id).sort((x, y) => x - y)).toEqual([a3!.deliveries[0]!, b1!.deliveries[2]!].sort((x, y) => x - y));
  });

  it('gives a merchant at most its share, counting what this process sends to any of its endpoints', async () => {
    // A already has 3 deliveries in flight in this process, to an endpoint with nothing more due.
    const [busy, a1, a2] = await merchantWithEndpoints('a', [
      { due: 0, dueAt: AT },
      { due: 4, dueAt: '2026-11-26T07:50:00.000Z' },
      { due: 4, dueAt: '2026-11-26T07:51:00.000Z' },
    ]);
    const [b1] = await merchantWithEndpoints('b', [{ due: 4, dueAt: '2026-11-26T07:59:00.000Z' }]);
    const inFlightByEndpoint = new Map([[busy!.id, 3]]);
    const claimed = await storage.claimDueDeliveries(claimAt({ limit: 10, perEndpoint: 4, perMerchant: 4, inFlightByEndpoint }));
    // A: one more (4 - 3), its oldest; B: its share of 4, all it has due.
    expect(claimed.map((d) => d.id).sort((x, y) => x - y)).toEqual([a1!.deliveries[0]!, ...b1!.deliveries].sort((x, y) => x - y));
    // Once A's sends ended, A takes turns again, its endpoints in turn, within the share.
    const later = await storage.claimDueDeliveries(claimAt({ limit: 10, perEndpoint: 4, perMerchant: 4 }));
    expect(later.map((d) => d.id).sort((x, y) => x - y)).toEqual(
      [a1!.deliveries[1]!, a1!.deliveries[2]!, a2!.deliveries[0]!, a2!.deliveries[1]!].sort((x, y) => x - y),
    );
  });

  it('claims ahead for an endpoint that has all its turns and only this process leases, and never beside another process', async () => {
    const [a1] = await merchantWithEndpoints('a', [{ due: 12, dueAt: '2026-11-26T07:50:00.000Z' }]);
    const ids = a1!.deliveries;
    // This process sends 3 to it: one slot is free; the claim takes it and 2 ahead (beyond its limit and share).
    const first = await storage.claimDueDeliveries(
      claimAt({ limit: 1, perEndpoint: 2, perMerchant: 2, ahead: 2, inFlightByEndpoint: new Map([[a1!.id, 1]]) }),
    );
    expect(first.map((d) => d.id)).toEqual(ids.slice(0, 3));
    // Those 3 leased and held by this process (1 in flight, 2 waiting), plus the one in flight before
    // the claim that has no lease here: its 4 turns are taken, nothing more.
    const waitingByEndpoint = new Map([[a1!.id, 2]]);
    const full = await storage.claimDueDeliveries(
      claimAt({ limit: 5, perEndpoint: 2, ahead: 2, inFlightByEndpoint: new Map([[a1!.id, 2]]), waitingByEndpoint }),
    );
    expect(full).toEqual([]);
    // Another process (nothing of its own in flight) sees the 3 leases: no turn, let alone one ahead.
    expect(await storage.claimDueDeliveries(claimAt({ limit: 5, perEndpoint: 4, ahead: 4 }))).toMatchObject([{ id: ids[3] }]);
  });
});
