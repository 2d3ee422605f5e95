// The client's feed helpers against the real server (spec 4.4; GET /v1/changes "Initial sync, and
// resync after 410"): pollChanges, fetchProductsByIds and syncStore (from a snapshot export and its
// cursor), with an injected server clock and a feed window of 5 so that one second holds
// many windows.
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CatalogAdmin } from '../../src/admin/catalog-admin.js';
import { normalizeSource, type ProductSourceInput } from '../../src/catalog/product-sources.js';
import { pruneExpiredChanges } from '../../src/changes/retention.js';
import {
  CatalogApiError,
  createCatalogClient,
  cursorFromDateHeader,
  fetchProductsByIds,
  IncompleteExportError,
  iterateProducts,
  mapReplica,
  pollChanges,
  syncStore,
  type CatalogClient,
  type ChangeCursor,
  type ChangeWindow,
  type Product,
} from '../../src/client/index.js';
import { startTestService, type TestService } from '../support/service.js';

const FEED_WINDOW = 5;
const DAY = 24 * 60 * 60 * 1000;

/** A test service whose clock the test moves (forward only, like a deployment's change clock). */
interface ClockedService {
  service: TestService;
  now: () => Date;
  advance(ms: number): void;
}

async function startClockedService(start: string): Promise<ClockedService> {
  let clock = Date.parse(start);
  const now = () => new Date(clock);
  const service = await startTestService({
    now,
    config: { changes: { feedWindow: FEED_WINDOW, retentionDays: 30, pruneIntervalSeconds: 3600 } },
  });
  return { service, now, advance: (ms) => void (clock += ms) };
}

/**
 * A client of a merchant whose requests pass the contract harness, and a log of their URLs. A
 * deployment stamps its changes and its `Date` header from one clock; the test server injects its
 * clock into change recording only (Node writes `Date` from the wall clock), so the `Date` the
 * client sees is set here from that same injected clock.
 */
function clientOf({ service, now }: ClockedService, key: string): { client: CatalogClient; requests: URL[] } {
  const requests: URL[] = [];
  const client = createCatalogClient({
    baseUrl: service.url,
    apiKey: key,
    fetch: async (request) => {
      requests.push(new URL(request.url));
      const response = await service.fetch(request);
      const headers = new Headers(response.headers);
      headers.set('Date', now().toUTCString());
      return new Response(response.body, { status: response.status, statusText: response.statusText, headers });
    },
  });
  return { client, requests };
}

/** A merchant with two stores (`a` default EUR, `b` PLN excluding out-of-stock), two groups with a rule each. */
async function buildShop(admin: CatalogAdmin, keyFor: (merchantId: number) => Promise<string>, name: string) {
  const merchant = await admin.createMerchant({ name, sku_pattern: 'S-{ref}' });
  const id = merchant.id;
  const stores = {
    a: { name: 'Shop A', locale: 'de-DE', currency: 'EUR', is_default: true, active: true, exclude_out_of_stock: false },
    b: { name: 'Shop B', locale: 'pl-PL', currency: 'PLN', is_default: false, active: true, exclude_out_of_stock: true },
  };
  await admin.upsertStore(id, 'a', stores.a);
  await admin.upsertStore(id, 'b', stores.b);
  const groups = [await admin.createCustomerGroup(id, 'retail'), await admin.createCustomerGroup(id, 'wholesale')];
  await admin.upsertExchangeRate(id, { base: 'EUR', quote: 'PLN', rate: '4.25' });
  await admin.upsertSupplier(id, 'alpine', 'Alpine Wholesale');
  const ruleInput = (groupId: number, priority: number, markup: string) => ({
    priority,
    customer_group_id: groupId,
    store_id: null,
    manufacturer: null,
    min_cost: null,
    max_cost: null,
    markup_percent: markup,
    markup_amount: '0',
    price_ending: null,
  });
  const rules: { input: ReturnType<typeof ruleInput>; id: number }[] = [];
  for (const input of [ruleInput(groups[0]!.id, 20, '40'), ruleInput(groups[1]!.id, 10, '10')]) {
    rules.push({ input, id: (await admin.createPricingRule(id, input)).id });
  }
  return { id, key: await keyFor(id), stores, rules };
}

function productSource({
  title,
  cost,
  quantity,
  excludedFrom,
}: {
  title: string;
  cost: string;
  quantity: number;
  excludedFrom?: 'a' | 'b';
}): ProductSourceInput {
  return {
    content: { de: { title, description: null }, pl: { title: `${title} PL`, description: null } },
    offers: [{ supplier_ref: 'alpine', quantity, cost, currency: 'EUR' }],
    excluded_stores: excludedFrom ? [excludedFrom] : [],
  };
}

/** The store as the server has it now, read fresh (id -> product). */
async function catalogOf(client: CatalogClient, store: string): Promise<Map<number, Product>> {
  const products = new Map<number, Product>();
  for await (const product of iterateProducts(client, { store })) products.set(product.id, product);
  return products;
}

async function allWindows(windows: AsyncGenerator<ChangeWindow, ChangeCursor>): Promise<{ windows: ChangeWindow[]; end: ChangeCursor }> {
  const seen: ChangeWindow[] = [];
  for (;;) {
    const next = await windows.next();
    if (next.done) return { windows: seen, end: next.value };
    seen.push(next.value);
  }
}

const query = (url: URL) => Object.fromEntries(url.searchParams);

describe('client feed helpers', () => {
  let clocked: ClockedService;
  let admin: CatalogAdmin;
  let keyFor: (merchantId: number) => Promise<string>;

  beforeAll(async () => {
    clocked = await startClockedService('2025-03-14T09:26:53.250Z');
    admin = clocked.service.admin;
    keyFor = clocked.service.keyFor;
  });
  afterAll(() => clocked.service.close());

  describe('pollChanges', () => {
    it('yields every window once, in order, and resumes exactly after any window within one second', async () => {
      const shop = await buildShop(admin, keyFor, 'Poll One Second');
      // 12 products in one second: several windows of 5 recorded changes, all with one created_at.
      const ids: number[] = [];
      for (let i = 0; i < 12; i++) {
        ids.push((await admin.upsertProduct(shop.id, `P${i}`, productSource({ title: `Product ${i}`, cost: '10.00', quantity: 3 }))).id);
      }
      const { client, requests } = clientOf(clocked, shop.key);

      const { windows, end } = await allWindows(pollChanges(client, { store: 'b' }));
      expect(windows.length).toBeGreaterThan(2);
      expect(windows.every((w) => w.store === 'b' && w.changes.length > 0 && w.changes.length <= FEED_WINDOW)).toBe(true);
      expect(new Set(windows.flatMap((w) => w.changes.map((c) => c.product_id)))).toEqual(new Set(ids));
      expect(new Set(windows.flatMap((w) => w.changes.map((c) => c.created_at)))).toEqual(new Set(['2025-03-14T09:26:53Z']));
      // One request per window, plus the empty one that ends the iteration with the caught-up cursor.
      expect(requests).toHaveLength(windows.length + 1);
      expect(end).toEqual(windows.at(-1)!.cursor);
      expect(query(requests[0]!)).toEqual({ store: 'b' });
      expect(query(requests[1]!)).toEqual({ store: 'b', since: windows[0]!.cursor.since, since_id: String(windows[0]!.cursor.since_id) });

      // Stopping after any window and resuming from its cursor yields exactly the windows after it.
      for (let k = 0; k < windows.length; k++) {
        const resumed = await allWindows(pollChanges(client, { store: 'b', cursor: windows[k]!.cursor }));
        expect(resumed.windows).toEqual(windows.slice(k + 1));
        expect(resumed.end).toEqual(end);
      }
    });

    it('ends at once when caught up, returning the cursor it was given', async () => {
      const shop = await buildShop(admin, keyFor, 'Poll Caught Up');
      const { client, requests } = clientOf(clocked, shop.key);
      const { end } = await allWindows(pollChanges(client, { store: 'a' }));
      const again = await allWindows(pollChanges(client, { store: 'a', cursor: end }));
      expect(again).toEqual({ windows: [], end });
      expect(requests).toHaveLength(2);
    });

    it('reads the default store when none is given, and stays on it', async () => {
      const shop = await buildShop(admin, keyFor, 'Poll Default');
      for (let i = 0; i < 7; i++)
        await admin.upsertProduct(shop.id, `D${i}`, productSource({ title: `D ${i}`, cost: '5.00', quantity: 1 }));
      const { client, requests } = clientOf(clocked, shop.key);
      const { windows } = await allWindows(pollChanges(client));
      expect(windows.length).toBeGreaterThan(1);
      expect(windows.every((w) => w.store === 'a')).toBe(true);
      expect(requests.map((r) => r.searchParams.get('store'))).toEqual([null, ...windows.map(() => 'a')]);
    });

    it('sees writes that arrive between polls in the same second, after the cursor it was left at', async () => {
      const shop = await buildShop(admin, keyFor, 'Poll Between');
      const first = (await admin.upsertProduct(shop.id, 'X1', productSource({ title: 'X1', cost: '10.00', quantity: 3 }))).id;
      const { client } = clientOf(clocked, shop.key);
      const before = await allWindows(pollChanges(client, { store: 'a' }));
      expect(before.windows.flatMap((w) => w.changes.map((c) => c.product_id))).toEqual([first]);

      const later: number[] = [];
      for (const n of [2, 3, 4, 5, 6, 7]) {
        later.push((await admin.upsertProduct(shop.id, `X${n}`, productSource({ title: `X${n}`, cost: '10.00', quantity: 3 }))).id);
      }
      await admin.upsertProduct(shop.id, 'X1', productSource({ title: 'X1 renamed', cost: '10.00', quantity: 3 }));
      const after = await allWindows(pollChanges(client, { store: 'a', cursor: before.end }));
      // A product's content and price rows can fall into two windows: then it is in both.
      expect(new Set(after.windows.flatMap((w) => w.changes.map((c) => c.product_id)))).toEqual(new Set([first, ...later]));
      expect(after.windows.flatMap((w) => w.changes).find((c) => c.product_id === first)?.change_type).toBe('content');
    });

    it('with follow, long-polls while caught up: one request waits on the server and yields the next window when it is recorded', async () => {
      const shop = await buildShop(admin, keyFor, 'Poll Follow Live');
      const { client, requests } = clientOf(clocked, shop.key);
      const { end } = await allWindows(pollChanges(client, { store: 'a' }));
      requests.length = 0;

      const controller = new AbortController();
      // A poll interval far beyond the test: only the server's answer to the waiting request can yield the window.
      const windows = pollChanges(client, { store: 'a', cursor: end, follow: true, pollIntervalMs: 600_000, signal: controller.signal });
      const pending = windows.next();
      await expect.poll(() => clocked.service.service.liveFeed.waitingClients).toBe(1);
      expect(requests.map(query)).toEqual([{ store: 'a', since: end.since, since_id: String(end.since_id), wait: '30' }]);
      const id = (await admin.upsertProduct(shop.id, 'L1', productSource({ title: 'L1', cost: '10.00', quantity: 3 }))).id;
      const next = await pending;
      expect(next.done).toBe(false);
      expect((next.value as ChangeWindow).changes.map((c) => c.product_id)).toEqual([id]);
      expect(requests).toHaveLength(1);

      // The next poll waits again; aborting it rejects, and the server stops waiting for it.
      const again = windows.next();
      await expect.poll(() => clocked.service.service.liveFeed.waitingClients).toBe(1);
      controller.abort();
      await expect(again).rejects.toMatchObject({ name: 'AbortError' });
      await expect.poll(() => clocked.service.service.liveFeed.waitingClients).toBe(0);
    });

    it('with follow and waitSeconds 0, polls every pollIntervalMs while caught up, yields the next window when it comes, and stops on abort', async () => {
      const shop = await buildShop(admin, keyFor, 'Poll Follow');
      const { client, requests } = clientOf(clocked, shop.key);
      const { end } = await allWindows(pollChanges(client, { store: 'a' }));
      requests.length = 0;

      const controller = new AbortController();
      const windows = pollChanges(client, {
        store: 'a',
        cursor: end,
        follow: true,
        waitSeconds: 0,
        pollIntervalMs: 5,
        signal: controller.signal,
      });
      const pending = windows.next();
      await expect.poll(() => requests.length).toBeGreaterThanOrEqual(3); // caught up, waiting and polling again
      const id = (await admin.upsertProduct(shop.id, 'F1', productSource({ title: 'F1', cost: '10.00', quantity: 3 }))).id;
      const next = await pending;
      expect(next.done).toBe(false);
      expect((next.value as ChangeWindow).changes.map((c) => c.product_id)).toEqual([id]);
      expect(requests.slice(0, -1).every((r) => query(r).since === end.since && query(r).since_id === String(end.since_id))).toBe(true);

      controller.abort();
      await expect(windows.next()).rejects.toMatchObject({ name: 'AbortError' });
    });

    it('throws CatalogApiError for an unknown store', async () => {
      const shop = await buildShop(admin, keyFor, 'Poll Unknown');
      const { client } = clientOf(clocked, shop.key);
      const error = await pollChanges(client, { store: 'zz' })
        .next()
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(CatalogApiError);
      expect((error as CatalogApiError).problem.code).toBe('store_not_found');
    });
  });

  describe('fetchProductsByIds', () => {
    it('fetches 450 ids in 3 requests of at most 200, returning the products in the catalog and skipping the rest', async () => {
      const shop = await buildShop(admin, keyFor, 'Batches');
      const other = await buildShop(admin, keyFor, 'Batches Elsewhere');
      const otherId = (await admin.upsertProduct(other.id, 'O1', productSource({ title: 'O', cost: '1.00', quantity: 1 }))).id;
      await admin.applyProductBatch(
        shop.id,
        Array.from({ length: 430 }, (_, i) => ({
          op: 'upsert_product' as const,
          ref: `B${i}`,
          source: normalizeSource(productSource({ title: `B${i}`, cost: '2.00', quantity: i % 3 })),
        })),
      );
      const { client, requests } = clientOf(clocked, shop.key);
      const catalog = await catalogOf(client, 'b');
      expect(catalog.size).toBe(430);
      const deleted = [...catalog.keys()][5]!;
      await admin.deleteProduct(shop.id, 'B5');
      requests.length = 0;

      // 430 of the store (one deleted since), another merchant's product, and 19 ids never issued.
      const never = Array.from({ length: 19 }, (_, i) => 900_000_000 + i);
      const asked = [...[...catalog.keys()].reverse(), otherId, ...never];
      expect(asked).toHaveLength(450);
      const products = await fetchProductsByIds(client, [...asked, ...asked.slice(0, 10)], { store: 'b' });

      expect(requests.map((r) => r.searchParams.get('ids')!.split(',').length)).toEqual([200, 200, 50]);
      expect(requests.map((r) => query(r).store)).toEqual(['b', 'b', 'b']);
      expect(requests[0]!.search).toMatch(/^\?store=b&ids=\d+(,\d+){199}$/);
      catalog.delete(deleted);
      expect(new Map(products.map((p) => [p.id, p]))).toEqual(catalog);
      expect(products).toHaveLength(429);
    });

    it('sends no request for no ids', async () => {
      const shop = await buildShop(admin, keyFor, 'No Ids');
      const { client, requests } = clientOf(clocked, shop.key);
      expect(await fetchProductsByIds(client, [])).toEqual([]);
      expect(requests).toEqual([]);
    });
  });

  describe('syncStore', () => {
    it('reads the store from one snapshot export, then applies only the feed after the cursor of that snapshot: no margin, nothing twice', async () => {
      const shop = await buildShop(admin, keyFor, 'Sync Basic');
      for (let i = 0; i < 8; i++)
        await admin.upsertProduct(shop.id, `S${i}`, productSource({ title: `S${i}`, cost: '10.00', quantity: i % 2 }));
      const { client, requests } = clientOf(clocked, shop.key);
      const replica = mapReplica(new Map([[999_999_999, { id: 999_999_999 } as Product]]));

      const cursor = await syncStore(client, { store: 'b', replica });
      // The export, then one poll from its cursor that finds nothing: the changes recorded before the
      // snapshot (every product's creation, in this very second) are not reported again.
      expect(requests.map((r) => `${r.pathname} ${Object.keys(query(r)).join(',')}`)).toEqual([
        '/v1/products/export store',
        '/v1/changes store,since,since_id',
      ]);
      const position = (await clocked.service.storage.latestFeedPosition(shop.id))!;
      expect(query(requests[1]!)).toEqual({ store: 'b', since: position.at, since_id: String(position.id) });
      expect(cursor).toEqual({ since: position.at, since_id: position.id });
      expect(replica.products).toEqual(await catalogOf(client, 'b'));
      expect(replica.products.has(999_999_999)).toBe(false);

      clocked.advance(2000);
      const ids = [...replica.products.keys()];
      await admin.upsertProduct(shop.id, 'S1', productSource({ title: 'S1 new', cost: '12.00', quantity: 5 }));
      await admin.deleteProduct(shop.id, 'S2');
      requests.length = 0;
      const next = await syncStore(client, { store: 'b', replica, cursor });
      expect(requests.map((r) => `${r.pathname} ${r.searchParams.get('ids') ?? ''}`)).toEqual([
        '/v1/changes ',
        `/v1/products ${ids[1]}`,
        '/v1/changes ',
      ]);
      expect(next).toEqual({ since: cursorFromDateHeader(clocked.now().toUTCString())!.since, since_id: expect.any(Number) });
      expect(replica.products.has(ids[2]!)).toBe(false);
      expect(replica.products.get(ids[1]!)).toMatchObject({ title: 'S1 new PL', stock: 5, excluded: false });
      expect(replica.products).toEqual(await catalogOf(client, 'b'));
    });

    it('pins the default store for the whole sync when no store is given', async () => {
      const shop = await buildShop(admin, keyFor, 'Sync Default');
      await admin.upsertProduct(shop.id, 'D1', productSource({ title: 'D1', cost: '10.00', quantity: 1 }));
      const { client, requests } = clientOf(clocked, shop.key);
      const replica = mapReplica();
      await syncStore(client, { replica });
      expect(requests.slice(1).every((r) => r.searchParams.get('store') === 'a')).toBe(true);
      expect(replica.products).toEqual(await catalogOf(client, 'a'));
    });

    it('keeps a replica of each of two stores equal to the catalog, whatever writes and polls interleave', async () => {
      const refs = ['R0', 'R1', 'R2', 'R3', 'R4', 'R5'];
      const store = fc.constantFrom('a' as const, 'b' as const);
      const op = fc.oneof(
        {
          weight: 5,
          arbitrary: fc.record({
            kind: fc.constant('upsert' as const),
            ref: fc.constantFrom(...refs),
            title: fc.constantFrom('Tent', 'Stove', 'Lamp'),
            cost: fc.constantFrom('9.99', '10.00', '25.50'),
            quantity: fc.constantFrom(0, 0, 3, 40),
            excludedFrom: fc.option(store, { nil: undefined }),
          }),
        },
        { weight: 2, arbitrary: fc.record({ kind: fc.constant('delete' as const), ref: fc.constantFrom(...refs) }) },
        { weight: 1, arbitrary: fc.record({ kind: fc.constant('rate' as const), rate: fc.constantFrom('4.25', '4.30', '3.90') }) },
        {
          weight: 1,
          arbitrary: fc.record({
            kind: fc.constant('markup' as const),
            rule: fc.constantFrom(0, 1),
            markup: fc.constantFrom('0', '10', '40', '55.5'),
          }),
        },
        { weight: 1, arbitrary: fc.record({ kind: fc.constant('store' as const), store, excludeOutOfStock: fc.boolean() }) },
        { weight: 3, arbitrary: fc.record({ kind: fc.constant('sync' as const), store }) },
      );
      // Mostly no time at all (many changes in one second), sometimes seconds, now and then a day.
      const step = fc.record({
        op,
        advanceMs: fc.oneof(fc.constant(0), fc.constant(0), fc.integer({ min: 1, max: 3000 }), fc.constant(DAY)),
      });
      let run = 0;
      let mostWindowsInOneSync = 0;

      await fc.assert(
        fc.asyncProperty(fc.array(step, { maxLength: 30, size: 'max' }), async (steps) => {
          const shop = await buildShop(admin, keyFor, `Property ${++run}`);
          const { client, requests } = clientOf(clocked, shop.key);
          const replicas = { a: mapReplica(), b: mapReplica() };
          const cursors: Partial<Record<'a' | 'b', ChangeCursor>> = {};
          const existing = new Set<string>();
          const sync = async (store: 'a' | 'b') => {
            requests.length = 0;
            cursors[store] = await syncStore(client, { store, replica: replicas[store], cursor: cursors[store] });
            const windows = requests.filter((r) => r.pathname === '/v1/changes').length - 1;
            mostWindowsInOneSync = Math.max(mostWindowsInOneSync, windows);
          };

          for (const { op, advanceMs } of steps) {
            clocked.advance(advanceMs);
            switch (op.kind) {
              case 'upsert':
                await admin.upsertProduct(shop.id, op.ref, productSource(op));
                existing.add(op.ref);
                break;
              case 'delete':
                if (existing.delete(op.ref)) await admin.deleteProduct(shop.id, op.ref);
                break;
              case 'rate':
                await admin.upsertExchangeRate(shop.id, { base: 'EUR', quote: 'PLN', rate: op.rate });
                break;
              case 'markup': {
                const rule = shop.rules[op.rule]!;
                await admin.updatePricingRule(shop.id, rule.id, { ...rule.input, markup_percent: op.markup });
                break;
              }
              case 'store':
                await admin.upsertStore(shop.id, op.store, { ...shop.stores[op.store], exclude_out_of_stock: op.excludeOutOfStock });
                break;
              case 'sync':
                await sync(op.store);
                break;
            }
          }
          for (const store of ['a', 'b'] as const) {
            await sync(store);
            expect(replicas[store].products).toEqual(await catalogOf(client, store));
          }
        }),
        { numRuns: 100 },
      );
      // The generated histories do exceed the window of 5 (several windows in one sync).
      expect(mostWindowsInOneSync).toBeGreaterThan(2);
    });
  });
});

describe('syncStore after the cursor expired', () => {
  let clocked: ClockedService;
  beforeAll(async () => {
    clocked = await startClockedService('2025-03-14T09:26:53.000Z');
  });
  afterAll(() => clocked.service.close());

  it('answers 410 cursor_expired with a full resync and returns a cursor that keeps working', async () => {
    const { service } = clocked;
    const shop = await buildShop(service.admin, service.keyFor, 'Expired');
    for (let i = 0; i < 6; i++)
      await service.admin.upsertProduct(shop.id, `E${i}`, productSource({ title: `E${i}`, cost: '10.00', quantity: 2 }));
    const { client, requests } = clientOf(clocked, shop.key);
    const replica = mapReplica();
    const cursor = await syncStore(client, { store: 'a', replica });
    const [e0, e1] = [...replica.products.keys()];

    // An hour later the replica's owner stops polling; these changes are later deleted by retention.
    clocked.advance(60 * 60 * 1000);
    await service.admin.deleteProduct(shop.id, 'E0');
    await service.admin.upsertProduct(shop.id, 'E1', productSource({ title: 'E1 renamed', cost: '11.00', quantity: 2 }));
    clocked.advance(31 * DAY);
    await service.admin.upsertProduct(shop.id, 'E6', productSource({ title: 'E6', cost: '10.00', quantity: 2 }));
    expect(await pruneExpiredChanges(service.storage, clocked.now(), 30)).toBeGreaterThan(0);
    const expired = await client.GET('/v1/changes', { params: { query: { store: 'a', ...cursor } } });
    expect(expired.response.status).toBe(410);
    expect(expired.error).toMatchObject({ code: 'cursor_expired' });

    requests.length = 0;
    const resynced = await syncStore(client, { store: 'a', replica, cursor });
    expect(requests.map((r) => r.pathname)).toEqual(['/v1/changes', '/v1/products/export', '/v1/changes']);
    expect(resynced).toMatchObject({ since: '2025-04-14T10:26:53Z' });
    expect(replica.products.has(e0!)).toBe(false);
    expect(replica.products.get(e1!)?.title).toBe('E1 renamed');
    expect(replica.products).toEqual(await catalogOf(client, 'a'));

    clocked.advance(5000);
    await service.admin.deleteProduct(shop.id, 'E6');
    requests.length = 0;
    await syncStore(client, { store: 'a', replica, cursor: resynced });
    expect(requests.map((r) => r.pathname)).toEqual(['/v1/changes', '/v1/changes']);
    expect(replica.products).toEqual(await catalogOf(client, 'a'));
  });
});

describe('syncStore on the real clock', () => {
  let service: TestService;
  beforeAll(async () => {
    service = await startTestService({ config: { changes: { feedWindow: FEED_WINDOW, retentionDays: 30, pruneIntervalSeconds: 3600 } } });
  });
  afterAll(() => service.close());

  it('starts the feed at the cursor the export ends with, and a write right after the sync is applied by the next', async () => {
    const shop = await buildShop(service.admin, service.keyFor, 'Wall Clock');
    for (let i = 0; i < 4; i++)
      await service.admin.upsertProduct(shop.id, `W${i}`, productSource({ title: `W${i}`, cost: '10.00', quantity: 2 }));
    const exchanges: { url: URL; headers: Headers }[] = [];
    const client = createCatalogClient({
      baseUrl: service.url,
      apiKey: shop.key,
      fetch: async (request) => {
        const response = await service.fetch(request);
        exchanges.push({ url: new URL(request.url), headers: response.headers });
        return response;
      },
    });
    const replica = mapReplica();
    const cursor = await syncStore(client, { store: 'b', replica });
    const [exported, firstPoll] = exchanges;
    expect(exported!.url.pathname).toBe('/v1/products/export');
    expect(query(firstPoll!.url)).toEqual({
      store: 'b',
      since: exported!.headers.get('x-next-since'),
      since_id: exported!.headers.get('x-next-id'),
    });
    expect(cursor).toEqual({ since: exported!.headers.get('x-next-since'), since_id: Number(exported!.headers.get('x-next-id')) });

    // Written right after the sync, most likely within the second of the export's cursor.
    await service.admin.upsertProduct(shop.id, 'W1', productSource({ title: 'W1 renamed', cost: '10.00', quantity: 2 }));
    await service.admin.deleteProduct(shop.id, 'W2');
    await syncStore(client, { store: 'b', replica, cursor });
    expect(replica.products).toEqual(await catalogOf(client, 'b'));
  });

  it('throws IncompleteExportError for an export cut short before its trailer, and removes nothing from the replica', async () => {
    const shop = await buildShop(service.admin, service.keyFor, 'Cut Short');
    for (let i = 0; i < 3; i++)
      await service.admin.upsertProduct(shop.id, `C${i}`, productSource({ title: `C${i}`, cost: '10.00', quantity: 2 }));
    const client = createCatalogClient({
      baseUrl: service.url,
      apiKey: shop.key,
      fetch: async (request) => {
        const response = await service.fetch(request);
        if (!request.url.includes('/v1/products/export')) return response;
        // The connection breaks after two lines: the trailer never comes.
        const text = await response.text();
        const cut = text.split('\n').slice(0, 2).join('\n') + '\n';
        return new Response(cut, { status: 200, headers: response.headers });
      },
    });
    const kept = { id: 999_999_998 } as Product;
    const replica = mapReplica(new Map([[kept.id, kept]]));
    await expect(syncStore(client, { store: 'a', replica })).rejects.toBeInstanceOf(IncompleteExportError);
    expect(replica.products.get(kept.id)).toBe(kept);
    expect(replica.products.size).toBe(3);
  });
});

describe('cursorFromDateHeader', () => {
  it('turns an HTTP date into the RFC 3339 second with since_id 0, and anything else into undefined', () => {
    expect(cursorFromDateHeader('Fri, 14 Mar 2025 09:26:53 GMT')).toEqual({ since: '2025-03-14T09:26:53Z', since_id: 0 });
    expect(cursorFromDateHeader(null)).toBeUndefined();
    expect(cursorFromDateHeader('yesterday')).toBeUndefined();
  });
});
