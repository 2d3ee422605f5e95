// Big writes do not stall reads: while a merchant-wide re-pricing runs, reads are
// answered. The re-pricing commits a chunk of products at a time (catalog/publish-runs.ts):
// a read meanwhile shows each product whole, at its price before or after, and once the call has
// answered every product is re-priced. Ordering, not timing: how fast is measured by
// `npm run bench:writes` and `npm run bench:scale`.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDemoCatalog } from '../../src/admin/demo.js';
import { scopeToMerchant } from '../../src/storage/merchant-scope.js';
import { ADMIN_TOKEN, startTestService, type TestService } from '../support/service.js';

let service: TestService;
let key: string;
let merchantId: number;

beforeAll(async () => {
  // Small steps, so the re-pricing spans many turns of the event loop.
  service = await startTestService({ config: { limits: { publishChunk: 100 } } });
  const demo = await buildDemoCatalog(service.admin, 5000);
  key = demo.api_key;
  merchantId = demo.merchant_id;
}, 120_000);
afterAll(() => service.close());

describe('a re-pricing of the whole catalog', () => {
  it('lets reads through while it runs, each product whole at its price before or after, every one re-priced when it answers', async () => {
    const page = () =>
      fetch(`${service.url}/v1/products?store=uk&per_page=100&page=30`, { headers: { Authorization: `Bearer ${key}` } }).then(
        async (response) => ({ status: response.status, body: (await response.json()) as { data: { id: number }[] } }),
      );
    const all = async () => {
      const products = new Map<number, string>();
      for (let n = 1; ; n++) {
        const response = await fetch(`${service.url}/v1/products?store=uk&per_page=200&page=${n}`, {
          headers: { Authorization: `Bearer ${key}` },
        });
        const body = (await response.json()) as { data: { id: number }[] };
        for (const product of body.data) products.set(product.id, JSON.stringify(product));
        if (body.data.length < 200) return products;
      }
    };
    const before = await all();
    expect(before.size).toBe(5000);

    let repricingDone = false;
    const repricing = fetch(`${service.url}/admin/v1/merchants/${merchantId}/exchange-rates/EUR/GBP`, {
      method: 'PUT',
      headers: { Authorization: `Bearer ${ADMIN_TOKEN}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ rate: '0.9123' }),
    }).then((response) => {
      repricingDone = true;
      return response.status;
    });

    // Reads one after another until the re-pricing answers: every one started before it had.
    const during: { status: number; body: { data: { id: number }[] } }[] = [];
    while (!repricingDone) {
      const read = await page();
      if (!repricingDone) during.push(read);
    }
    expect(await repricing).toBe(200);
    expect(during.length).toBeGreaterThan(1);

    const after = await all();
    expect(after.size).toBe(5000);
    // Every product was re-published at the new rate: re-publishing again changes nothing.
    expect([...after].filter(([id, product]) => product !== before.get(id)).length).toBeGreaterThan(1000);
    const again = await service.storage.transaction((tx) => service.admin.publisher.publishAll(tx, scopeToMerchant(tx, merchantId)));
    expect(again).toEqual({ resolved: 5000 * 3, changes: 0 });
    for (const read of during) {
      expect(read.status).toBe(200);
      for (const product of read.body.data) expect([before.get(product.id), after.get(product.id)]).toContain(JSON.stringify(product));
    }
    // No run is left behind.
    expect(await service.storage.stalledPublishRuns('9999-01-01T00:00:00.000Z', 10)).toEqual([]);
  }, 120_000);
});
