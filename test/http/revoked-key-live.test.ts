// docs/decisions.md#api-keys: revoking a key ends its open event streams and long-polls of
// `GET /v1/changes`. Revoked through this process's admin API, at once: a stream's body closes and
// carries nothing of the changes made after the revocation, a waiting long-poll answers 401. Revoked
// by another process on the same database, at this process's next re-check of its held keys
// (every CPS_API_KEY_CACHE_MS); the key is then refused here too. Real HTTP, the project's engine.
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { ProductSourceInput } from '../../src/catalog/product-sources.js';
import { createService, type Service } from '../../src/service.js';
import { fakeClock } from '../support/clock.js';
import { publicContract } from '../support/contract.js';
import { severalConnections } from '../support/engine.js';
import { startTestService, type TestService } from '../support/service.js';

interface ChangePage {
  changes: { product_id: number; change_type: string }[];
  next_since: string;
  next_id: number;
}

let service: TestService | undefined;
let other: Service | undefined;
afterEach(async () => {
  await other?.close();
  other = undefined;
  await service?.close();
  service = undefined;
});

async function started(apiKeyCacheMs: number): Promise<TestService> {
  // The clock stands still: no remembered key expires by itself, only a revocation ends one.
  service = await startTestService({
    now: fakeClock().now,
    config: { apiKeyCacheMs, changes: { heartbeatSeconds: 1, maxWaitSeconds: 60, livePollIntervalMs: 500 } },
  });
  return service;
}

const source = (cost: string): ProductSourceInput => ({
  content: { de: { title: 'Zelt', description: null } },
  offers: [{ supplier_ref: 'alpine', quantity: 4, cost, currency: 'EUR' }],
});

/** A merchant with store `de`, one product and an API key; `change()` re-prices the product (one change). */
async function shop(s: TestService, name: string) {
  const { admin } = s;
  const merchant = await admin.createMerchant({ name });
  await admin.upsertStore(merchant.id, 'de', {
    name: 'DE',
    locale: 'de-DE',
    currency: 'EUR',
    is_default: true,
    active: true,
    exclude_out_of_stock: false,
  });
  await admin.upsertSupplier(merchant.id, 'alpine', 'Alpine');
  await admin.createCustomerGroup(merchant.id, 'retail');
  let cost = 10;
  const product = await admin.upsertProduct(merchant.id, 'tent', source(`${cost}.00`));
  const key = await admin.createApiKey(merchant.id, 'live');
  let cursor = (await s.api('/v1/changes?store=de', key.key)).body as ChangePage;
  while (cursor.changes.length > 0) cursor = (await s.api(`/v1/changes?store=de&${at(cursor)}`, key.key)).body as ChangePage;
  return {
    id: merchant.id,
    productId: product.id,
    key: key.key,
    keyId: key.id,
    /** The feed's position once caught up. */
    cursor,
    change: () => admin.upsertProduct(merchant.id, 'tent', source(`${++cost}.00`)),
    revokeOverAdminApi: async () => {
      expect((await s.adminApi('DELETE', `/admin/v1/merchants/${merchant.id}/api-keys/${key.id}`)).status).toBe(204);
    },
  };
}

const at = (page: Pick<ChangePage, 'next_since' | 'next_id'>) => `since=${encodeURIComponent(page.next_since)}&since_id=${page.next_id}`;

/** Resolves once `count` clients wait in the service's live feed. */
const waiting = (s: TestService, count: number) => expect.poll(() => s.service.liveFeed.waitingClients, { timeout: 5000 }).toBe(count);

/** An open event stream: its windows as they come, and whether its body ended. */
async function openStream(s: TestService, key: string, cursor: ChangePage) {
  const url = `${s.url}/v1/changes?store=de&${at(cursor)}`;
  const response = await fetch(url, { headers: { Authorization: `Bearer ${key}`, Accept: 'text/event-stream' } });
  publicContract.validateResponse('GET', url, response.status, response.headers, '');
  expect(response.status).toBe(200);
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
  let text = '';
  const windows = () => [...text.matchAll(/^data: (.*)$/gm)].map((m) => JSON.parse(m[1]!) as ChangePage);
  return {
    /** Reads until `count` windows arrived (or the body ended); the windows so far. */
    async windows(count: number): Promise<ChangePage[]> {
      while (windows().length < count) {
        const { done, value } = await reader.read();
        if (done) break;
        text += value;
      }
      return windows();
    },
    /** The client goes away. */
    close: () => reader.cancel(),
    /** Reads to the end of the body (the test times out if it never ends); every window it carried. */
    async untilEnded(): Promise<ChangePage[]> {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return windows();
        text += value;
      }
    },
  };
}

/** The 401 a revoked key gets: problem+json, `WWW-Authenticate` naming the invalid token. */
function expectRevokedKeyAnswer(response: { status: number; headers: Headers; body: { code?: string } }) {
  expect(response.status).toBe(401);
  expect(response.headers.get('content-type')).toContain('application/problem+json');
  expect(response.headers.get('www-authenticate')).toBe('Bearer realm="catalog", error="invalid_token"');
  expect(response.body.code).toBe('unauthorized');
}

describe("revoked through this process's admin API (cache time a minute: only the revocation itself can end them)", () => {
  it('ends an open stream at once: its body closes with no event for the changes after the revocation, and a reconnect gets 401', async () => {
    const s = await started(60_000);
    const merchant = await shop(s, 'Streaming Outfitters');
    const stream = await openStream(s, merchant.key, merchant.cursor);
    await waiting(s, 1);
    await merchant.change();
    // The stream works: the change before the revocation arrives.
    const before = await stream.windows(1);
    expect(before.flatMap((w) => w.changes.map((c) => c.product_id))).toEqual([merchant.productId]);
    await merchant.revokeOverAdminApi();
    await merchant.change();
    await merchant.change();
    expect(await stream.untilEnded()).toEqual(before);
    expect(s.service.liveFeed.connections).toBe(0);
    expect(s.service.heldApiKeys.keys).toBe(0);
    expectRevokedKeyAnswer(
      await s.api(`/v1/changes?store=de&${at(before[0]!)}`, merchant.key, { headers: { Accept: 'text/event-stream' } }),
    );
  });

  it('answers a waiting long-poll 401 at once, not the change made after the revocation', async () => {
    const s = await started(60_000);
    const merchant = await shop(s, 'Polling Outfitters');
    const answer = s.api(`/v1/changes?store=de&${at(merchant.cursor)}&wait=60`, merchant.key);
    await waiting(s, 1);
    await merchant.revokeOverAdminApi();
    await merchant.change();
    expectRevokedKeyAnswer(await answer);
    expect(s.service.liveFeed.connections).toBe(0);
    expect(s.service.heldApiKeys.keys).toBe(0);
  });

  it("leaves the merchant's other keys' streams open", async () => {
    const s = await started(60_000);
    const merchant = await shop(s, 'Two Key Outfitters');
    const spare = await s.admin.createApiKey(merchant.id, 'spare');
    const kept = await openStream(s, spare.key, merchant.cursor);
    const ended = await openStream(s, merchant.key, merchant.cursor);
    await waiting(s, 2);
    await merchant.revokeOverAdminApi();
    expect(await ended.untilEnded()).toEqual([]);
    await waiting(s, 1);
    await merchant.change();
    expect((await kept.windows(1)).flatMap((w) => w.changes.map((c) => c.product_id))).toEqual([merchant.productId]);
    await kept.close();
  });
});

describe('revoked by another process on the same database (cache time 200 ms)', () => {
  /** A second service on the database: what another `serve` process revoking the key looks like to this one. */
  async function otherProcess(s: TestService): Promise<Service> {
    other = createService(s.config, { storage: await s.database.open() });
    return other;
  }

  severalConnections.it('ends an open stream at the next re-check of held keys, and the key is then refused here too', async () => {
    const s = await started(200);
    const merchant = await shop(s, 'Far Revoked Outfitters');
    const stream = await openStream(s, merchant.key, merchant.cursor);
    await waiting(s, 1);
    const checks = s.service.heldApiKeys.checks;
    await (await otherProcess(s)).admin.revokeApiKey(merchant.id, merchant.keyId);
    expect(await stream.untilEnded()).toEqual([]);
    expect(s.service.heldApiKeys.checks).toBeGreaterThan(checks);
    expect(s.service.liveFeed.connections).toBe(0);
    // This process's clock stands still, so only the re-check can have forgotten the remembered key.
    expectRevokedKeyAnswer(await s.api('/v1/stores', merchant.key));
  });

  severalConnections.it('answers a waiting long-poll 401 at the next re-check of held keys', async () => {
    const s = await started(200);
    const merchant = await shop(s, 'Far Polling Outfitters');
    const answer = s.api(`/v1/changes?store=de&${at(merchant.cursor)}&wait=60`, merchant.key);
    await waiting(s, 1);
    await (await otherProcess(s)).admin.revokeApiKey(merchant.id, merchant.keyId);
    expectRevokedKeyAnswer(await answer);
    expect(s.service.liveFeed.connections).toBe(0);
  });

  severalConnections.it('keeps the streams while re-checks fail, and ends them at the first one that finds the revocation', async () => {
    const s = await started(200);
    const merchant = await shop(s, 'Flaky Outfitters');
    const stream = await openStream(s, merchant.key, merchant.cursor);
    await waiting(s, 1);
    const recheck = vi.spyOn(s.storage, 'activeApiKeyIds').mockRejectedValue(new Error('database is locked'));
    await (await otherProcess(s)).admin.revokeApiKey(merchant.id, merchant.keyId);
    recheck.mockClear();
    await expect.poll(() => recheck.mock.calls.length, { timeout: 30_000 }).toBeGreaterThanOrEqual(2);
    // The lookups failed after the revocation: nothing is known, so nothing is ended.
    expect(s.service.liveFeed.connections).toBe(1);
    recheck.mockRestore();
    expect(await stream.untilEnded()).toEqual([]);
    expect(s.service.heldApiKeys.keys).toBe(0);
  });
});
