// The snapshot handoff as a property: writers change prices and content (and stock,
// products, a merchant-wide rate) while exports of a store are taken over real HTTP, each read in
// steps of 1 product with the event loop free between them, so the writes commit in the middle of
// its reads. For every export:
// - it is one consistent state: the store exactly as it was after some prefix of the writes, and its
//   trailer cursor is the merchant's feed position after exactly that prefix (so the feed after it
//   holds only changes the snapshot does not show);
// - the snapshot plus the feed from its cursor, applied as spec 4.4 says, equals a fresh read of the
//   store once the writes are done (no change missed).
// On either engine (the postgres project runs it on a real PostgreSQL server).
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ProductSourceInput } from '../../src/catalog/product-sources.js';
import { importNdjson } from '../../src/admin/import.js';
import type { StoreInputRecord } from '../../src/catalog/model.js';
import { startTestService, type TestService } from '../support/service.js';

interface Product {
  id: number;
}
interface Trailer {
  store: string;
  count: number;
  next_since: string;
  next_id: number;
}

const DE: StoreInputRecord = {
  name: 'Deutschland',
  locale: 'de-DE',
  currency: 'EUR',
  is_default: true,
  active: true,
  exclude_out_of_stock: false,
};
// Out-of-stock products are excluded here: a stock change flips `excluded`, a content change.
const PL: StoreInputRecord = {
  name: 'Polska',
  locale: 'pl-PL',
  currency: 'PLN',
  is_default: false,
  active: true,
  exclude_out_of_stock: true,
};
const INITIAL = 30;

type Write =
  | { kind: 'price'; product: number; cost: string }
  | { kind: 'title'; product: number; title: string }
  | { kind: 'stock'; product: number; quantity: number }
  | { kind: 'delete'; product: number }
  | { kind: 'create' }
  | { kind: 'rate'; rate: string };

const productIndex = fc.nat({ max: INITIAL + 3 });
const write: fc.Arbitrary<Write> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant('price' as const),
      product: productIndex,
      cost: fc.constantFrom('9.99', '12.00', '31.50', '100.00'),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('title' as const),
      product: productIndex,
      title: fc.constantFrom('Zelt', 'Kocher', 'Lampe', 'Rucksack'),
    }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('stock' as const), product: productIndex, quantity: fc.constantFrom(0, 3, 40) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('delete' as const), product: productIndex }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('create' as const) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('rate' as const), rate: fc.constantFrom('4.25', '4.31', '3.98') }) },
);

interface Source {
  title: string;
  cost: string;
  quantity: number;
}

function sourceInput({ title, cost, quantity }: Source): ProductSourceInput {
  return {
    content: { de: { title, description: null }, pl: { title: `${title} PL`, description: null } },
    offers: [{ supplier_ref: 'alpine', quantity, cost, currency: 'EUR' }],
  };
}

describe('snapshot handoff under concurrent writes', () => {
  let service: TestService;
  let merchantId: number;
  let key: string;
  /** The merchant's products as the test last wrote them, by ref (absent: deleted). */
  const sources = new Map<string, Source>();
  let created = 0;

  beforeAll(async () => {
    // Steps of 1 product: an export of ~30 products is thirty reads with writes committing between them.
    service = await startTestService({ config: { exports: { stepRows: 1 }, changes: { feedWindow: 7 } } });
    const admin = service.admin;
    merchantId = (await admin.createMerchant({ name: 'Handoff Outdoor' })).id;
    await admin.upsertStore(merchantId, 'de', DE);
    await admin.upsertStore(merchantId, 'pl', PL);
    const group = await admin.createCustomerGroup(merchantId, 'retail');
    await admin.upsertExchangeRate(merchantId, { base: 'EUR', quote: 'PLN', rate: '4.25' });
    await admin.upsertSupplier(merchantId, 'alpine', 'Alpine AG');
    await admin.createPricingRule(merchantId, {
      priority: 10,
      customer_group_id: group.id,
      store_id: null,
      manufacturer: null,
      min_cost: null,
      max_cost: null,
      markup_percent: '25',
      markup_amount: '0',
      price_ending: null,
    });
    const lines: string[] = [];
    for (let i = 0; i < INITIAL; i++) {
      const ref = `R${i}`;
      sources.set(ref, { title: `Produkt ${i}`, cost: '10.00', quantity: 5 });
      lines.push(JSON.stringify({ op: 'upsert_product', product: { ref, ...sourceInput(sources.get(ref)!) } }));
    }
    await importNdjson(admin, merchantId, `${lines.join('\n')}\n`);
    key = await service.keyFor(merchantId);
  });
  afterAll(() => service.close());

  /** The store now, in one read (one page: the store stays under 200 products). */
  async function freshRead(store: string): Promise<Product[]> {
    const page = await service.api(`/v1/products?store=${store}&per_page=200`, key);
    expect(page.status, page.text).toBe(200);
    expect(page.body.meta.last_page).toBe(1);
    return page.body.data;
  }

  async function exportOf(store: string): Promise<{ products: Product[]; trailer: Trailer }> {
    const response = await service.api(`/v1/products/export?store=${store}`, key);
    expect(response.status, response.text).toBe(200);
    const lines = response.text
      .trimEnd()
      .split('\n')
      .map((line) => JSON.parse(line) as Product | Trailer);
    const trailer = lines.pop() as Trailer;
    expect(trailer).toMatchObject({ store, count: lines.length });
    return { products: lines as Product[], trailer };
  }

  /** The snapshot with the feed after its cursor applied (spec 4.4 rules 4 and 5): removed products go, the others are fetched by id. */
  async function snapshotPlusFeed(store: string, snapshot: { products: Product[]; trailer: Trailer }): Promise<Product[]> {
    const replica = new Map(snapshot.products.map((p) => [p.id, p]));
    let cursor = { since: snapshot.trailer.next_since, since_id: snapshot.trailer.next_id };
    for (;;) {
      const page = await service.api(
        `/v1/changes?store=${store}&since=${encodeURIComponent(cursor.since)}&since_id=${cursor.since_id}`,
        key,
      );
      expect(page.status, page.text).toBe(200);
      cursor = { since: page.body.next_since, since_id: page.body.next_id };
      const changes = page.body.changes as { product_id: number; change_type: string }[];
      if (changes.length === 0) break;
      const fetchIds = changes.filter((c) => c.change_type !== 'removed').map((c) => c.product_id);
      const fetched = fetchIds.length
        ? ((await service.api(`/v1/products?store=${store}&ids=${fetchIds.join(',')}`, key)).body.data as Product[])
        : [];
      for (const change of changes) replica.delete(change.product_id);
      for (const product of fetched) replica.set(product.id, product);
    }
    return [...replica.values()].sort((a, b) => a.id - b.id);
  }

  async function apply(op: Write): Promise<void> {
    const admin = service.admin;
    const refs = [...sources.keys()];
    const ref = 'product' in op ? refs[op.product % refs.length] : undefined;
    switch (op.kind) {
      case 'price':
      case 'title':
      case 'stock': {
        const next = {
          ...sources.get(ref!)!,
          ...(op.kind === 'price' ? { cost: op.cost } : op.kind === 'title' ? { title: op.title } : { quantity: op.quantity }),
        };
        sources.set(ref!, next);
        await admin.upsertProduct(merchantId, ref!, sourceInput(next));
        break;
      }
      case 'delete':
        if (refs.length <= 2) return;
        sources.delete(ref!);
        await admin.deleteProduct(merchantId, ref!);
        break;
      case 'create': {
        const newRef = `N${++created}`;
        sources.set(newRef, { title: `Neu ${created}`, cost: '20.00', quantity: 2 });
        await admin.upsertProduct(merchantId, newRef, sourceInput(sources.get(newRef)!));
        break;
      }
      case 'rate':
        await admin.upsertExchangeRate(merchantId, { base: 'EUR', quote: 'PLN', rate: op.rate });
        break;
    }
  }

  it('every export is the store after some prefix of the writes, with the feed position of that prefix; with the feed after it, the store as it is now', async () => {
    /**
     * Exports during whose reading a write committed: the case the property is about (a snapshot
     * whose later steps must not see it). Counted from the clock, not from the snapshot's prefix:
     * under load an export's snapshot may open before every write, and that is still this case.
     */
    let interleaved = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(write, { minLength: 2, maxLength: 10 }),
        fc.constantFrom('de', 'pl'),
        fc.nat(),
        fc.nat(),
        async (writes, store, first, second) => {
          // The states the store went through (before any write of this run, then after each) and the merchant's feed positions.
          const states: string[] = [JSON.stringify(await freshRead(store))];
          const positions: string[] = [
            JSON.stringify((await service.storage.latestFeedPosition(merchantId)) ?? { at: '1970-01-01T00:00:00Z', id: 0 }),
          ];
          const startAt = new Set([first % writes.length, second % writes.length]);
          const exports: { at: number; startedAt: number; read: Promise<{ products: Product[]; trailer: Trailer; endedAt: number }> }[] =
            [];
          const committedAt: number[] = [];
          for (const [index, op] of writes.entries()) {
            // An export starts right before a write: its steps and the writes that follow interleave.
            if (startAt.has(index)) {
              exports.push({
                at: index,
                startedAt: performance.now(),
                read: exportOf(store).then((r) => ({ ...r, endedAt: performance.now() })),
              });
            }
            await apply(op);
            committedAt.push(performance.now());
            states.push(JSON.stringify(await freshRead(store)));
            positions.push(JSON.stringify(await service.storage.latestFeedPosition(merchantId)));
          }
          const now = await freshRead(store);
          for (const { at, startedAt, read } of exports) {
            const snapshot = await read;
            if (committedAt.some((t) => t > startedAt && t < snapshot.endedAt)) interleaved++;
            const cursor = JSON.stringify({ at: snapshot.trailer.next_since, id: snapshot.trailer.next_id });
            const products = JSON.stringify(snapshot.products);
            // One consistent state, and its own feed position: not a mix of two, not a cursor from before or after it.
            // (The last such prefix: a write that changed nothing leaves the state and the position as they were.)
            const prefix = states.findLastIndex((state, k) => state === products && positions[k] === cursor);
            expect(
              prefix,
              `export started before write ${at}: no state the store went through has these products at this cursor`,
            ).toBeGreaterThanOrEqual(at);
            expect(await snapshotPlusFeed(store, snapshot)).toEqual(now);
          }
        },
      ),
      { numRuns: 15 },
    );
    expect(interleaved).toBeGreaterThan(0);
  });
});
