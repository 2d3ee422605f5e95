// GET /v1/changes exactly as spec 4.4 and openapi/paths/v1_changes.yaml describe it: the latest
// change per product in a window after an exact two-part cursor, per store, with monotonic
// whole-second timestamps and retention. Real server on 127.0.0.1, real SQLite file, injected
// clock; every poll is compared with a model of the window computed from the `changes` table.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { ProductSourceInput } from '../../src/catalog/product-sources.js';
import { importNdjson } from '../../src/admin/import.js';
import { readChangeFeed } from '../../src/changes/feed.js';
import { pruneExpiredChanges } from '../../src/changes/retention.js';
import { loadConfig, type Config } from '../../src/config.js';
import { ProblemError } from '../../src/shared/problem.js';
import { isStatementTimed } from '../../src/operations/statements.js';
import type { PricingRuleRecord } from '../../src/catalog/model.js';
import type { StoreInputRecord } from '../../src/catalog/model.js';
import { adminOk } from '../support/admin-http.js';
import { severalConnections } from '../support/engine.js';
import { startTestService, type TestService } from '../support/service.js';

type ChangeType = 'price' | 'content' | 'removed';
interface ChangeEntry {
  product_id: number;
  change_type: ChangeType;
  created_at: string;
}
interface ChangePage {
  changes: ChangeEntry[];
  next_since: string;
  next_id: number;
  store: string;
}
interface StoredChange {
  id: number;
  product_id: number;
  change_type: ChangeType;
  created_at: string;
}
interface Cursor {
  since: string;
  id: number;
}
interface Clock {
  ms: number;
}

const WHOLE_SECOND_UTC = /^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$/;
const DAY = 24 * 60 * 60 * 1000;
const iso = (ms: number) => `${new Date(ms).toISOString().slice(0, 19)}Z`;
const changesConfig = (changes: Partial<Config['changes']>): Partial<Config> => ({ changes: { ...loadConfig({}).changes, ...changes } });
const cursorQuery = (cursor: Cursor) => `since=${encodeURIComponent(cursor.since)}&since_id=${cursor.id}`;

const DE: StoreInputRecord = {
  name: 'Deutschland',
  locale: 'de-DE',
  currency: 'EUR',
  is_default: true,
  active: true,
  exclude_out_of_stock: false,
};
const PL: StoreInputRecord = {
  name: 'Polska',
  locale: 'pl-PL',
  currency: 'PLN',
  is_default: false,
  active: true,
  exclude_out_of_stock: false,
};
const ARCHIVE: StoreInputRecord = {
  name: 'Old shop',
  locale: 'en-GB',
  currency: 'EUR',
  is_default: false,
  active: false,
  exclude_out_of_stock: false,
};

/** A merchant built through the domain: stores, one customer group with its own rule, products. */
interface Merchant {
  id: number;
  key: string;
  rule: PricingRuleRecord;
  refs: string[];
  markup: number;
}

async function buildMerchant(
  service: TestService,
  name: string,
  products: number,
  stores: Record<string, StoreInputRecord> = { de: DE, pl: PL },
): Promise<Merchant> {
  const admin = service.admin;
  const id = (await admin.createMerchant({ name })).id;
  for (const [slug, store] of Object.entries(stores)) await admin.upsertStore(id, slug, store);
  const group = await admin.createCustomerGroup(id, 'retail');
  await admin.upsertExchangeRate(id, { base: 'EUR', quote: 'PLN', rate: '4.25' });
  await admin.upsertSupplier(id, 'alpine', 'Alpine AG');
  const rule = await admin.createPricingRule(id, {
    priority: 10,
    customer_group_id: group.id,
    store_id: null,
    manufacturer: null,
    min_cost: null,
    max_cost: null,
    markup_percent: '10',
    markup_amount: '0',
    price_ending: null,
  });
  const refs = Array.from({ length: products }, (_, i) => `P-${String(i + 1).padStart(4, '0')}`);
  const lines = refs.map((ref, i) => JSON.stringify({ op: 'upsert_product', product: product(ref, `${10 + i}.00`) }));
  if (refs.length) await importNdjson(admin, id, `${lines.join('\n')}\n`);
  return { id, key: await service.keyFor(id), rule, refs, markup: 10 };
}

function product(ref: string, cost: string, title = `Produkt ${ref}`): ProductSourceInput & { ref: string } {
  return {
    ref,
    content: { de: { title, description: null }, pl: { title: `Produkt ${ref}`, description: null } },
    offers: [{ supplier_ref: 'alpine', quantity: 4, cost, currency: 'EUR' }],
  };
}

/** A markup change of the merchant's rule: a `price` change of every product in every store. */
async function reprice(service: TestService, merchant: Merchant): Promise<void> {
  merchant.markup += 1;
  await service.admin.updatePricingRule(merchant.id, merchant.rule.id, { ...merchant.rule, markup_percent: String(merchant.markup) });
}

async function storeId(service: TestService, merchant: Merchant, slug: string): Promise<number> {
  return (await service.storage.findStore(merchant.id, slug))!.id;
}

/** Every recorded change of the store, in position order, straight from storage (on either engine). */
async function storedChanges(service: TestService, store: number): Promise<StoredChange[]> {
  return service.storage.changesAfter(store, { at: '', id: 0 }, Number.MAX_SAFE_INTEGER);
}

/** Every recorded change of every store of the service. */
async function everyStoredChange(service: TestService): Promise<StoredChange[]> {
  const changes: StoredChange[] = [];
  for (const merchant of await service.storage.listMerchants()) {
    for (const store of await service.storage.listStores(merchant.id)) changes.push(...(await storedChanges(service, store.id)));
  }
  return changes;
}

const after = (row: StoredChange, cursor: Cursor) =>
  row.created_at > cursor.since || (row.created_at === cursor.since && row.id > cursor.id);
const entry = (row: StoredChange): ChangeEntry => ({
  product_id: row.product_id,
  change_type: row.change_type,
  created_at: row.created_at,
});

/** spec 4.4 and 6 rule 3: the window after a cursor, the latest change per product in position order. */
function expectedWindow(rows: StoredChange[], cursor: Cursor, window: number, store: string): ChangePage {
  const covered = rows.filter((row) => after(row, cursor)).slice(0, window);
  const latest = new Map<number, ChangeEntry>();
  for (const row of covered) {
    latest.delete(row.product_id);
    latest.set(row.product_id, entry(row));
  }
  const last = covered[covered.length - 1];
  return { changes: [...latest.values()], next_since: last?.created_at ?? cursor.since, next_id: last?.id ?? cursor.id, store };
}

const BEGINNING: Cursor = { since: '0000-01-01T00:00:00Z', id: 0 };

/** A client polling one store's feed, holding its cursor; every poll is checked against the model. */
class FeedReader {
  cursor: Cursor | undefined;
  polls = 0;
  /** Ids of the recorded changes the windows covered, in the order they were covered. */
  readonly covered: number[] = [];
  readonly read: ChangeEntry[] = [];

  constructor(
    private readonly service: TestService,
    private readonly key: string,
    private readonly slug: string,
    readonly store: number,
    private readonly window: number,
  ) {}

  async poll(): Promise<ChangePage> {
    const query = this.cursor ? `&${cursorQuery(this.cursor)}` : '';
    const response = await this.service.api(`/v1/changes?store=${this.slug}${query}`, this.key);
    expect(response.status, response.text).toBe(200);
    const page = response.body as ChangePage;
    const rows = await storedChanges(this.service, this.store);
    const from = this.cursor ?? BEGINNING;
    expect(page).toEqual(expectedWindow(rows, from, this.window, this.slug));
    for (const change of page.changes) expect(change.created_at).toMatch(WHOLE_SECOND_UTC);
    expect(page.next_since).toMatch(WHOLE_SECOND_UTC);
    this.covered.push(
      ...rows
        .filter((row) => after(row, from))
        .slice(0, this.window)
        .map((row) => row.id),
    );
    this.read.push(...page.changes);
    this.cursor = { since: page.next_since, id: page.next_id };
    this.polls++;
    return page;
  }

  /** Cursor rule 4: poll again right away while `changes` is not empty. */
  async drain(): Promise<ChangeEntry[]> {
    const start = this.read.length;
    while ((await this.poll()).changes.length > 0);
    return this.read.slice(start);
  }
}

describe('GET /v1/changes (spec 4.4)', () => {
  const WINDOW = 100;
  const T0 = Date.parse('2025-03-14T09:26:53Z');
  const clock: Clock = { ms: T0 };
  let service: TestService;
  /** The big catalog: 130 products, more than one window per re-pricing. */
  let big: Merchant;
  /** A small catalog of 3 products, with an inactive store. */
  let small: Merchant;
  let other: Merchant;
  let smallIds: number[];

  const reader = async (merchant: Merchant, slug = 'de') =>
    new FeedReader(service, merchant.key, slug, await storeId(service, merchant, slug), WINDOW);
  const poll = (merchant: Merchant, query: string) => service.api(`/v1/changes${query ? `?${query}` : ''}`, merchant.key);

  beforeAll(async () => {
    service = await startTestService({ now: () => new Date(clock.ms), config: changesConfig({ feedWindow: WINDOW }) });
    big = await buildMerchant(service, 'Big Outdoor', 130);
    small = await buildMerchant(service, 'Small Outdoor', 3, { de: DE, pl: PL, archive: ARCHIVE });
    other = await buildMerchant(service, 'Other Merchant', 2, { de: DE });
    smallIds = await Promise.all(small.refs.map(async (ref) => (await service.admin.product(small.id, ref)).id));
  });
  afterAll(() => service.close());

  /** Moves the clock to a second of its own, after everything recorded so far. */
  const nextSecond = () => {
    clock.ms = (Math.floor(clock.ms / 1000) + 10) * 1000;
    return iso(clock.ms);
  };
  const setCost = (merchant: Merchant, ref: string, cost: string, title?: string) =>
    service.admin.upsertProduct(merchant.id, ref, product(ref, cost, title));

  describe('first poll and the window', () => {
    it('starts at the beginning of the retained history when called with neither since nor since_id', async () => {
      const response = await poll(big, 'store=de');
      expect(response.status).toBe(200);
      const rows = await storedChanges(service, await storeId(service, big, 'de'));
      expect(rows.length).toBeGreaterThan(WINDOW);
      expect(response.body).toEqual(expectedWindow(rows, BEGINNING, WINDOW, 'de'));
      expect(response.body.changes[0].product_id).toBe(rows[0]!.product_id);
    });

    it('answers next_since and next_id: the position of the last change the window covered', async () => {
      const rows = await storedChanges(service, await storeId(service, big, 'de'));
      const first = (await poll(big, 'store=de')).body;
      expect({ since: first.next_since, id: first.next_id }).toEqual({ since: rows[WINDOW - 1]!.created_at, id: rows[WINDOW - 1]!.id });
      const second = (await poll(big, `store=de&${cursorQuery({ since: first.next_since, id: first.next_id })}`)).body;
      // The second window begins with the change right after the first window's last one.
      expect(second.changes[0].product_id).toBe(rows[WINDOW]!.product_id);
      expect({ since: second.next_since, id: second.next_id }).toEqual({
        since: rows[2 * WINDOW - 1]!.created_at,
        id: rows[2 * WINDOW - 1]!.id,
      });
    });

    it('reports only the latest change per product in the window, ordered by the position of that change', async () => {
      const feed = await reader(small);
      await feed.drain();
      const [a, b, c] = smallIds as [number, number, number];
      const [refA, refB, refC] = small.refs as [string, string, string];
      const s1 = nextSecond();
      await setCost(small, refA, '50.00'); // a: price
      const s2 = nextSecond();
      await setCost(small, refB, '60.00'); // b: price
      const s3 = nextSecond();
      await setCost(small, refA, '50.00', 'Neuer Titel'); // a: content
      const s4 = nextSecond();
      await setCost(small, refC, '70.00'); // c: price ...
      await service.admin.deleteProduct(small.id, refC); // ... then removed, in the same second
      const page = await feed.poll();
      expect(page.changes).toEqual([
        { product_id: b, change_type: 'price', created_at: s2 },
        { product_id: a, change_type: 'content', created_at: s3 },
        { product_id: c, change_type: 'removed', created_at: s4 },
      ]);
      expect(s1 < s2).toBe(true);
      const rows = await storedChanges(service, await storeId(service, small, 'de'));
      expect(page.next_id).toBe(rows[rows.length - 1]!.id);
      expect(page.next_since).toBe(s4);
      // The product stays removed for later tests: two products remain.
      smallIds = [a, b];
      small.refs = [refA, refB];
    });

    it('returns changes [] and the cursor it was sent when nothing follows the cursor', async () => {
      const feed = await reader(small);
      await feed.drain();
      const cursor = feed.cursor!;
      const response = await poll(small, `store=de&${cursorQuery(cursor)}`);
      expect(response.body).toEqual({ changes: [], next_since: cursor.since, next_id: cursor.id, store: 'de' });
      const future = { since: '2030-01-01T00:00:00Z', id: 7 };
      expect((await poll(small, `store=de&${cursorQuery(future)}`)).body).toEqual({
        changes: [],
        next_since: future.since,
        next_id: future.id,
        store: 'de',
      });
    });
  });

  describe('store', () => {
    it('reads the default store when store is omitted, and names it in store', async () => {
      const omitted = await poll(small, '');
      expect(omitted.status).toBe(200);
      expect(omitted.body.store).toBe('de');
      expect(omitted.body).toEqual((await poll(small, 'store=de')).body);
    });

    it('reads each store its own changes: a PLN rate change shows in the PLN store only', async () => {
      const de = await reader(small, 'de');
      const pl = await reader(small, 'pl');
      await de.drain();
      await pl.drain();
      nextSecond();
      await service.admin.upsertExchangeRate(small.id, { base: 'EUR', quote: 'PLN', rate: '4.40' });
      expect(await de.drain()).toEqual([]);
      expect((await pl.drain()).map((c) => [c.product_id, c.change_type])).toEqual(smallIds.map((id) => [id, 'price']));
      const response = await poll(small, `store=pl&${cursorQuery(pl.cursor!)}`);
      expect(response.body.store).toBe('pl');
    });

    it.each([
      ['an unknown store', 'nope'],
      ['an inactive store', 'archive'],
    ])('answers 404 store_not_found for %s', async (_what, slug) => {
      const response = await poll(small, `store=${slug}`);
      expect(response.status).toBe(404);
      expect(response.headers.get('content-type')).toContain('application/problem+json');
      expect(response.body).toMatchObject({ status: 404, code: 'store_not_found' });
    });
  });

  describe('cursor exactness (cursor rules 1-4)', () => {
    it('resumes exactly where the previous window ended within one second', async () => {
      const feed = await reader(big);
      await feed.drain();
      const ids = [...(await service.storage.publishedProductIds(await storeId(service, big, 'de')))];
      const second = nextSecond();
      const writes = 5;
      for (let i = 0; i < writes; i++) await reprice(service, big); // 650 changes, all inside one second
      const polls = feed.polls;
      const read = await feed.drain();
      // Every change exactly once, in order: the re-pricings' products in id order, five times.
      const expected = Array.from({ length: writes }, () =>
        ids.map((id) => ({ product_id: id, change_type: 'price', created_at: second })),
      ).flat();
      expect(read).toEqual(expected);
      expect(feed.polls - polls).toBe(Math.ceil((writes * ids.length) / WINDOW) + 1);
      // The recorded changes, straight from storage, are exactly the ones read.
      const rows = (await storedChanges(service, await storeId(service, big, 'de'))).filter((row) => row.created_at === second);
      expect(rows.map(entry)).toEqual(expected);
      expect(feed.cursor).toEqual({ since: second, id: rows[rows.length - 1]!.id });
    });

    it('reads every change exactly once while writes keep arriving between polls', async () => {
      const feed = await reader(big);
      await feed.drain();
      const ids = [...(await service.storage.publishedProductIds(await storeId(service, big, 'de')))];
      const start = feed.read.length;
      const expected: ChangeEntry[] = [];
      nextSecond();
      for (let i = 0; i < 12; i++) {
        // The first half inside one frozen second, then a second per write.
        if (i >= 6) clock.ms += 1000;
        await reprice(service, big);
        expected.push(...ids.map((id) => ({ product_id: id, change_type: 'price' as const, created_at: iso(clock.ms) })));
        for (let p = 0; p < i % 3; p++) await feed.poll();
      }
      await feed.drain();
      expect(feed.read.slice(start)).toEqual(expected);
    });

    it('covers every recorded change exactly once, in order, for any mix of writes and polls', async () => {
      const de = await reader(big, 'de');
      const pl = await reader(big, 'pl');
      await de.drain();
      await pl.drain();
      const firstNew = { de: (await storedChanges(service, de.store)).length, pl: (await storedChanges(service, pl.store)).length };
      const coveredBefore = { de: de.covered.length, pl: pl.covered.length };
      let seed = 20250314;
      const random = (n: number) => {
        seed = (seed * 1103515245 + 12345) % 2147483648;
        return seed % n;
      };
      let created = 0;
      for (let step = 0; step < 80; step++) {
        const refs = big.refs;
        const ref = refs[random(refs.length)]!;
        switch (random(7)) {
          case 0:
            await reprice(service, big);
            break;
          case 1:
            await setCost(big, ref, `${20 + random(50)}.${random(10)}0`);
            break;
          case 2:
            await setCost(big, ref, `${20 + random(50)}.00`, `Titel ${step}`);
            break;
          case 3:
            await service.admin.upsertProduct(big.id, ref, { ...product(ref, '33.00'), excluded_stores: ['pl'] });
            break;
          case 4:
            if (refs.length > WINDOW + 10) {
              await service.admin.deleteProduct(big.id, ref);
              big.refs = refs.filter((r) => r !== ref);
            }
            break;
          case 5: {
            const lines = Array.from({ length: 1 + random(150) }, () =>
              JSON.stringify({ op: 'upsert_product', product: product(`N-${++created}`, '12.30') }),
            );
            await importNdjson(service.admin, big.id, `${lines.join('\n')}\n`);
            big.refs = [...big.refs, ...Array.from({ length: lines.length }, (_, i) => `N-${created - lines.length + 1 + i}`)];
            break;
          }
          default:
            break;
        }
        if (random(3) === 0) clock.ms += 1000;
        for (let p = random(3); p > 0; p--) await (random(2) ? de : pl).poll();
      }
      await de.drain();
      await pl.drain();
      for (const [slug, feed] of [
        ['de', de],
        ['pl', pl],
      ] as const) {
        const rows = await storedChanges(service, feed.store);
        expect(rows.length - firstNew[slug]).toBeGreaterThan(3 * WINDOW);
        expect(feed.covered.slice(coveredBefore[slug])).toEqual(rows.slice(firstNew[slug]).map((row) => row.id));
      }
    });
  });

  describe('since (cursor halves)', () => {
    let second: string;
    let previous: string;
    let rows: StoredChange[];

    beforeAll(async () => {
      previous = nextSecond();
      await setCost(small, small.refs[0]!, '41.00');
      second = iso(clock.ms + 1000);
      clock.ms += 1000;
      await setCost(small, small.refs[0]!, '42.00');
      await setCost(small, small.refs[1]!, '43.00');
      rows = await storedChanges(service, await storeId(service, small, 'de'));
    });

    const window = (cursor: Cursor) => expectedWindow(rows, cursor, WINDOW, 'de');

    it('includes the changes of that second when since is sent alone (since_id 0)', async () => {
      const response = await poll(small, `since=${second}`);
      expect(response.body).toEqual(window({ since: second, id: 0 }));
      expect(response.body.changes.map((c: ChangeEntry) => c.product_id)).toEqual(smallIds);
      expect(response.body.changes.every((c: ChangeEntry) => c.created_at === second)).toBe(true);
      expect((await poll(small, `since=${second}&since_id=0`)).body).toEqual(response.body);
    });

    it('compares a since with an offset as an instant', async () => {
      const firstOfSecond = rows.find((row) => row.created_at === second)!;
      const z = (await poll(small, `since=${second}&since_id=${firstOfSecond.id}`)).body;
      expect(z).toEqual(window({ since: second, id: firstOfSecond.id }));
      expect(z.changes).toHaveLength(1);
      const ms = Date.parse(second);
      const plusOne = `${new Date(ms + 3600_000).toISOString().slice(0, 19)}+01:00`;
      const minusFive = `${new Date(ms - 5 * 3600_000).toISOString().slice(0, 19)}-05:00`;
      for (const since of [plusOne, minusFive]) {
        const response = await poll(small, `since=${encodeURIComponent(since)}&since_id=${firstOfSecond.id}`);
        expect(response.status, since).toBe(200);
        expect(response.body, since).toEqual(z);
      }
    });

    it('compares a since with fractional seconds as an instant', async () => {
      const ms = Date.parse(second);
      const at = (offsetMs: string) => `${new Date(ms).toISOString().slice(0, 19)}${offsetMs}Z`;
      const fromSecond = window({ since: second, id: 0 });
      const afterSecond = window({ since: iso(ms + 1000), id: 0 });
      expect(afterSecond.changes).toEqual([]);
      const cases: [string, ChangePage][] = [
        // Half a second before: the changes of that second are after it, the earlier ones are not.
        [`${previous.slice(0, 19)}.5Z`, fromSecond],
        [`${new Date(ms - 500).toISOString()}`, fromSecond],
        // Any instant inside the second is after the changes recorded at its start.
        [at('.5'), afterSecond],
        [at('.0001'), afterSecond],
        [at('.999999'), afterSecond],
      ];
      for (const [since, expected] of cases) {
        const response = await poll(small, `since=${encodeURIComponent(since)}`);
        expect(response.status, since).toBe(200);
        expect(response.body.changes, since).toEqual(expected.changes);
      }
      // A zero fraction is the whole second, and since_id still counts.
      const firstOfSecond = rows.find((row) => row.created_at === second)!;
      expect((await poll(small, `since=${encodeURIComponent(at('.000'))}&since_id=${firstOfSecond.id}`)).body).toEqual(
        window({ since: second, id: firstOfSecond.id }),
      );
    });
  });

  describe('created_at', () => {
    it('is ISO 8601 in UTC with whole seconds and the offset written as Z', async () => {
      const feed = await reader(small);
      await feed.drain();
      clock.ms = Math.floor(clock.ms / 1000) * 1000 + 10_789;
      await setCost(small, small.refs[1]!, '44.00');
      const [change] = await feed.drain();
      expect(change!.created_at).toBe(iso(clock.ms));
      expect(change!.created_at).toMatch(WHOLE_SECOND_UTC);
      expect(Date.parse(change!.created_at)).toBe(Math.floor(clock.ms / 1000) * 1000);
    });
  });

  describe('bad input', () => {
    const since = '2025-03-14T09:26:53Z';
    it.each([
      ['since=yesterday', 'since'],
      ['since=2025-13-01T00:00:00Z', 'since'],
      ['since=2025-02-30T00:00:00Z', 'since'],
      ['since=2025-03-14T09:26:53', 'since'],
      ['since=2025-03-14T10:26:53+01:00', 'since'], // an unencoded + arrives as a space
      ['since=', 'since'],
      [`since=${since}&since_id=-1`, 'since_id'],
      [`since=${since}&since_id=abc`, 'since_id'],
      [`since=${since}&since_id=1.5`, 'since_id'],
      [`since=${since}&since_id=`, 'since_id'],
      ['since_id=5', 'since_id'],
      ['since_id=0', 'since_id'],
    ])('answers 400 invalid_parameter naming the parameter for %s', async (query, name) => {
      const response = await poll(small, query);
      expect(response.status).toBe(400);
      expect(response.headers.get('content-type')).toContain('application/problem+json');
      expect(response.body).toMatchObject({ status: 400, code: 'invalid_parameter' });
      expect(response.body.invalid_params.map((p: { name: string }) => p.name)).toContain(name);
    });
  });

  describe('tenancy', () => {
    it("never shows merchant A's changes to merchant B's key", async () => {
      const otherIds = new Set(await Promise.all(other.refs.map(async (ref) => (await service.admin.product(other.id, ref)).id)));
      const bigIds = new Set(await Promise.all(big.refs.map(async (ref) => (await service.admin.product(big.id, ref)).id)));
      nextSecond();
      await reprice(service, big);
      const feed = new FeedReader(service, other.key, 'de', await storeId(service, other, 'de'), WINDOW);
      const read = await feed.drain();
      expect(read.length).toBeGreaterThan(0);
      expect(read.every((change) => otherIds.has(change.product_id))).toBe(true);
      expect(read.some((change) => bigIds.has(change.product_id))).toBe(false);
    });

    it("answers 404 store_not_found when B's key names a store only A has", async () => {
      const response = await poll(other, 'store=pl');
      expect(response.status).toBe(404);
      expect(response.body.code).toBe('store_not_found');
    });

    it('answers 401 without a key', async () => {
      const response = await service.api('/v1/changes', null);
      expect(response.status).toBe(401);
    });
  });
});

describe('monotonic timestamps', () => {
  const T = Date.parse('2025-06-01T12:00:00Z');
  const clock: Clock = { ms: T };
  let service: TestService;
  let merchant: Merchant;

  beforeAll(async () => {
    service = await startTestService({ now: () => new Date(clock.ms), config: changesConfig({ feedWindow: 5 }) });
    merchant = await buildMerchant(service, 'Clockwork', 5);
  });
  afterAll(() => service.close());

  it('never makes created_at go back, nor the feed skip or repeat, when the clock steps back', async () => {
    const feed = new FeedReader(service, merchant.key, 'de', await storeId(service, merchant, 'de'), 5);
    await feed.drain();
    const expected: ChangeEntry[] = [];
    const ids = await Promise.all(merchant.refs.map(async (ref) => (await service.admin.product(merchant.id, ref)).id));
    const repriced = (at: number) =>
      expected.push(...ids.map((id) => ({ product_id: id, change_type: 'price' as const, created_at: iso(at) })));

    clock.ms = T + 10_000;
    await reprice(service, merchant);
    repriced(T + 10_000);
    await feed.poll(); // the cursor now sits inside the second T+10s
    clock.ms = T + 10_000 - 3600_000; // the clock steps back one hour
    await reprice(service, merchant);
    repriced(T + 10_000);
    // The server's own admin (another CatalogAdmin on the same storage) shares the monotonic clock.
    await adminOk(service, 'PUT', `/admin/v1/merchants/${merchant.id}/pricing-rules/${merchant.rule.id}`, {
      ...ruleBody(merchant.rule),
      markup_percent: String(++merchant.markup),
    });
    repriced(T + 10_000);
    await feed.poll();
    clock.ms += 5_000; // still an hour behind
    await reprice(service, merchant);
    repriced(T + 10_000);
    clock.ms = T + 12_000; // past the last handed-out second again
    await reprice(service, merchant);
    repriced(T + 12_000);
    await feed.drain();
    const all = feed.read.filter((c) => c.created_at >= iso(T + 10_000));
    expect(all).toEqual(expected);
    // In the table too: positions grow with the id.
    const rows = await storedChanges(service, feed.store);
    const byId = [...rows].sort((a, b) => a.id - b.id);
    expect(byId).toEqual(rows);
  });
});

function ruleBody(rule: PricingRuleRecord) {
  const { id: _id, is_catch_all: _catchAll, ...body } = rule;
  return body;
}

describe('retention', () => {
  const D0 = Date.parse('2025-01-01T08:00:00Z');
  const WINDOW = 5;
  const clock: Clock = { ms: D0 };
  let service: TestService;
  let merchant: Merchant;
  let midD0: Cursor;
  let endD0: Cursor;
  let endD10: Cursor;
  let pruned: number;
  let recordedD0: number;

  beforeAll(async () => {
    service = await startTestService({ now: () => new Date(clock.ms), config: changesConfig({ feedWindow: WINDOW }) });
    merchant = await buildMerchant(service, 'Retained', 3);
    await reprice(service, merchant);
    recordedD0 = (await everyStoredChange(service)).length;
    const feed = new FeedReader(service, merchant.key, 'de', await storeId(service, merchant, 'de'), WINDOW);
    await feed.poll();
    midD0 = feed.cursor!;
    await feed.drain();
    endD0 = feed.cursor!;
    clock.ms = D0 + 10 * DAY;
    await reprice(service, merchant);
    await service.admin.upsertStore(merchant.id, 'fr', { ...PL, name: 'France', locale: 'fr-FR', currency: 'EUR' });
    const read = await feed.drain();
    expect(read.map((c) => c.created_at)).toEqual(read.map(() => iso(D0 + 10 * DAY)));
    endD10 = feed.cursor!;
    clock.ms = D0 + 31 * DAY;
    pruned = await pruneExpiredChanges(service.storage, new Date(clock.ms), service.config.changes.retentionDays);
  });
  afterAll(() => service.close());

  const poll = (query: string) => service.api(`/v1/changes?${query}`, merchant.key);

  it('deletes the changes older than the retention and keeps the newer ones', async () => {
    expect(service.config.changes.retentionDays).toBe(30);
    expect(pruned).toBe(recordedD0);
    const left = [...new Set((await everyStoredChange(service)).map((change) => change.created_at))];
    expect(left).toEqual([iso(D0 + 10 * DAY)]);
  });

  it('answers 410 problem+json cursor_expired for a cursor before the newest deleted change', async () => {
    for (const query of [
      `store=de&${cursorQuery(midD0)}`,
      `store=de&since=${iso(D0)}`,
      'store=de&since=1970-01-01T00:00:00Z&since_id=0',
      `store=de&${cursorQuery({ since: endD0.since, id: endD0.id - 1 })}`,
    ]) {
      const response = await poll(query);
      expect(response.status, query).toBe(410);
      expect(response.headers.get('content-type')).toContain('application/problem+json');
      expect(response.body).toMatchObject({ status: 410, code: 'cursor_expired' });
      expect(response.body.detail).toContain('/v1/products');
    }
  });

  it('keeps a cursor at or after the newest deleted change working', async () => {
    const fromEnd = await poll(`store=de&${cursorQuery(endD0)}`);
    expect(fromEnd.status).toBe(200);
    expect(fromEnd.body.changes.length).toBeGreaterThan(0);
    expect(fromEnd.body.changes.every((c: ChangeEntry) => c.created_at === iso(D0 + 10 * DAY))).toBe(true);
    const caughtUp = await poll(`store=de&${cursorQuery(endD10)}`);
    expect(caughtUp.body).toEqual({ changes: [], next_since: endD10.since, next_id: endD10.id, store: 'de' });
  });

  it('starts a first poll right after the newest deleted change', async () => {
    const first = await poll('store=de');
    expect(first.status).toBe(200);
    expect(first.body).toEqual((await poll(`store=de&${cursorQuery(endD0)}`)).body);
  });

  it('keeps any cursor of a store without deleted changes valid, however old', async () => {
    const response = await poll('store=fr&since=2020-01-01T00:00:00Z&since_id=0');
    expect(response.status).toBe(200);
    expect(response.body.changes.length).toBeGreaterThan(0);
  });

  it('deletes nothing more when pruned again, and the horizon stays', async () => {
    expect(await pruneExpiredChanges(service.storage, new Date(clock.ms), service.config.changes.retentionDays)).toBe(0);
    expect((await poll(`store=de&${cursorQuery(endD0)}`)).status).toBe(200);
    expect((await poll(`store=de&${cursorQuery(midD0)}`)).status).toBe(410);
  });

  it('is configuration: config.changes.retentionDays, 30 by default', async () => {
    expect(loadConfig({}).changes.retentionDays).toBe(30);
    expect(loadConfig({ CPS_CHANGE_RETENTION_DAYS: '45' }).changes.retentionDays).toBe(45);
    // docs/decisions.md#changes-and-the-feed: history is kept at least 30 days, so a shorter setting is refused at start.
    expect(() => loadConfig({ CPS_CHANGE_RETENTION_DAYS: '10' })).toThrow(/at least 30/);
    const local: Clock = { ms: D0 };
    const longer = await startTestService({ now: () => new Date(local.ms), config: changesConfig({ retentionDays: 45 }) });
    try {
      const kept = await buildMerchant(longer, 'Kept', 2);
      local.ms = D0 + 31 * DAY;
      expect(await pruneExpiredChanges(longer.storage, new Date(local.ms), longer.config.changes.retentionDays)).toBe(0);
      const old = await longer.api(`/v1/changes?since=${iso(D0 - DAY)}`, kept.key);
      expect(old.status).toBe(200);
      expect(old.body.changes.length).toBeGreaterThan(0);
      local.ms = D0 + 46 * DAY;
      expect(await pruneExpiredChanges(longer.storage, new Date(local.ms), longer.config.changes.retentionDays)).toBeGreaterThan(0);
      expect((await longer.api(`/v1/changes?since=${iso(D0 - DAY)}`, kept.key)).status).toBe(410);
    } finally {
      await longer.close();
    }
  });

  it('deletes in transactions of config.changes.pruneBatch (1,000 by default, at least 1), every expired change in the end, and stops between two when told', async () => {
    expect(loadConfig({}).changes.pruneBatch).toBe(1000);
    expect(loadConfig({ CPS_CHANGE_PRUNE_BATCH: '50' }).changes.pruneBatch).toBe(50);
    expect(() => loadConfig({ CPS_CHANGE_PRUNE_BATCH: '0' })).toThrow(/CPS_CHANGE_PRUNE_BATCH must be at least 1/);
    const local: Clock = { ms: D0 };
    const batched = await startTestService({ now: () => new Date(local.ms), config: changesConfig({}) });
    try {
      const m = await buildMerchant(batched, 'Batched', 4);
      const store = (await batched.storage.findStore(m.id, 'de'))!;
      const recorded =
        (await storedChanges(batched, store.id)).length +
        (await storedChanges(batched, (await batched.storage.findStore(m.id, 'pl'))!.id)).length;
      expect(recorded).toBeGreaterThan(6);
      local.ms = D0 + 31 * DAY;
      // The real storage, its batches counted.
      const batches: number[] = [];
      const counting = new Proxy(batched.storage, {
        get(object, property) {
          if (property === 'pruneChangesBefore') {
            return async (cutoff: string, limit: number) => {
              const deleted = await object.pruneChangesBefore(cutoff, limit);
              batches.push(deleted);
              return deleted;
            };
          }
          const value = Reflect.get(object, property, object) as unknown;
          return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(object) : value;
        },
      });
      // Told to stop after the first batch: one transaction, the rest left for the next run.
      expect(await pruneExpiredChanges(counting, new Date(local.ms), 30, 3, () => true)).toBe(3);
      expect(batches).toEqual([3]);
      batches.length = 0;
      expect(await pruneExpiredChanges(counting, new Date(local.ms), 30, 3)).toBe(recorded - 3);
      expect(batches.every((n) => n <= 3)).toBe(true);
      expect(batches.length).toBe(Math.floor((recorded - 3) / 3) + 1);
      expect(await storedChanges(batched, store.id)).toEqual([]);
    } finally {
      await batched.close();
    }
  });

  severalConnections.it(
    'reads the horizon and the window in one statement, so pruning by another process never makes the feed skip',
    async () => {
      const local: Clock = { ms: D0 };
      const racing = await startTestService({ now: () => new Date(local.ms), config: changesConfig({ feedWindow: WINDOW }) });
      const otherProcess = await racing.database.open();
      try {
        const m = await buildMerchant(racing, 'Raced', 3);
        local.ms = D0 + 10 * DAY;
        await reprice(racing, m);
        const store = (await racing.storage.findStore(m.id, 'de'))!;
        const cursor = { since: iso(D0), sinceId: (await storedChanges(racing, store.id))[0]!.id };
        const before = await readChangeFeed(racing.storage, m.id, 'de', cursor, WINDOW);
        // Another process prunes the day's changes one at a time while the feed is read over and
        // over: each read is the window before any pruning past the cursor, or 410, never a window
        // with the pruned changes missing.
        let pruning = true;
        const pruner = (async () => {
          while ((await otherProcess.pruneChangesBefore(iso(D0 + DAY), 1)) > 0) await new Promise((resolve) => setImmediate(resolve));
          pruning = false;
        })();
        const seen = { window: 0, expired: 0 };
        for (let reads = 0; pruning || reads === 0; reads++) {
          // The pruner's turn (on SQLite both are synchronous statements: nothing else would interleave).
          await new Promise((resolve) => setImmediate(resolve));
          try {
            expect(await readChangeFeed(racing.storage, m.id, 'de', cursor, WINDOW)).toEqual(before);
            seen.window++;
          } catch (error) {
            expect(error).toBeInstanceOf(ProblemError);
            expect((error as ProblemError).code).toBe('cursor_expired');
            seen.expired++;
          }
        }
        await pruner;
        await expect(readChangeFeed(racing.storage, m.id, 'de', cursor, WINDOW)).rejects.toMatchObject({ code: 'cursor_expired' });
        expect(seen.window + seen.expired).toBeGreaterThan(1);
      } finally {
        await otherProcess.close();
        await racing.close();
      }
    },
  );

  it('reads a window in one statement, the store, its horizon and its changes, without a snapshot', async () => {
    const storage = await service.database.open();
    const statements: string[] = [];
    try {
      if (!isStatementTimed(storage)) throw new Error('the storage times its statements');
      storage.observeStatements({ observeStatement: (_engine, name) => statements.push(name) });
      const snapshot = vi.spyOn(storage, 'snapshot');
      const transaction = vi.spyOn(storage, 'transaction');
      const first = await readChangeFeed(storage, merchant.id, 'de', {}, WINDOW);
      expect(first.changes.length).toBeGreaterThan(0);
      const next = await readChangeFeed(storage, merchant.id, undefined, { since: first.next_since, sinceId: first.next_id }, WINDOW);
      expect(next.store).toBe('de');
      await expect(readChangeFeed(storage, merchant.id, 'de', { since: midD0.since, sinceId: midD0.id }, WINDOW)).rejects.toMatchObject({
        code: 'cursor_expired',
      });
      expect(statements).toEqual(['changes.changeWindowOfStore', 'changes.changeWindowOfStore', 'changes.changeWindowOfStore']);
      expect(snapshot).not.toHaveBeenCalled();
      expect(transaction).not.toHaveBeenCalled();
    } finally {
      await storage.close();
    }
  });
});
