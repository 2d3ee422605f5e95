// Streams behind their store share their catch-up reads (changes/catch-up-reads.ts): streams at the
// same cursor read each window once, not once each, and get the same window object (serialized once),
// while each still gets exactly the windows a poll from its cursor answers, changes arriving or not.
// The LiveFeed runs on the project's engine through a storage that counts the windows read.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ProductSourceInput } from '../../src/catalog/product-sources.js';
import { readChangeFeed, type ChangePage } from '../../src/changes/feed.js';
import { CatchUpReads } from '../../src/changes/catch-up-reads.js';
import { LiveFeed, type LiveStream } from '../../src/changes/live.js';
import type { StoreRecord } from '../../src/catalog/model.js';
import { ProblemError } from '../../src/shared/problem.js';
import type { CatalogStorage, StorageOperations } from '../../src/storage/port.js';
import { startTestService, type TestService } from '../support/service.js';

const WINDOW = 2;
const STREAMS = 12;

const source = (cost: number): ProductSourceInput => ({
  content: { de: { title: 'Zelt', description: null } },
  offers: [{ supplier_ref: 'alpine', quantity: 4, cost: `${cost}.00`, currency: 'EUR' }],
});

let service: TestService;
beforeAll(async () => {
  service = await startTestService();
});
afterAll(() => service?.close());

/** The storage, counting the windows read (changesAfter) per cursor, in every snapshot. */
function countingStorage(storage: CatalogStorage) {
  const reads = new Map<string, number>();
  const counting = (reader: StorageOperations) =>
    new Proxy(reader, {
      get(target, name) {
        const value = Reflect.get(target, name, target) as unknown;
        if (typeof value !== 'function') return value;
        if (name !== 'changesAfter') return value.bind(target);
        return (storeId: number, after: { at: string; id: number }, limit: number) => {
          const key = `${after.at}/${after.id}`;
          reads.set(key, (reads.get(key) ?? 0) + 1);
          return target.changesAfter(storeId, after, limit);
        };
      },
    });
  const wrapped = new Proxy(storage, {
    get(target, name) {
      if (name === 'snapshot')
        return <T>(fn: (reader: StorageOperations) => Promise<T>) => target.snapshot((reader) => fn(counting(reader)));
      const value = Reflect.get(target, name, target) as unknown;
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  return { storage: wrapped, reads };
}

/** A merchant with store `de` and five products; `change(i)` re-prices product i (one change). */
async function shop(name: string) {
  const { admin } = service;
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
  for (let i = 0; i < 5; i++) await admin.upsertProduct(merchant.id, `tent-${i}`, source(cost));
  return {
    id: merchant.id,
    change: async (i: number) => {
      await admin.upsertProduct(merchant.id, `tent-${i % 5}`, source(++cost));
    },
  };
}

const poll = (merchantId: number, from: Pick<ChangePage, 'next_since' | 'next_id'> | undefined) =>
  readChangeFeed(service.storage, merchantId, 'de', from ? { since: from.next_since, sinceId: from.next_id } : {}, WINDOW);

async function caughtUp(merchantId: number): Promise<ChangePage> {
  let page = await poll(merchantId, undefined);
  while (page.changes.length > 0) page = await poll(merchantId, page);
  return page;
}

/** The window of the recorded changes in (from, to]: the latest change per product, in position order (spec 4.4). */
async function windowBetween(
  merchantId: number,
  from: Pick<ChangePage, 'next_since' | 'next_id'>,
  to: Pick<ChangePage, 'next_since' | 'next_id'>,
): Promise<ChangePage> {
  const store = (await service.storage.snapshot((reader) => reader.findStore(merchantId, 'de')))!;
  const rows = await service.storage.snapshot((reader) =>
    reader.changesAfter(store.id, { at: from.next_since, id: from.next_id }, 100_000),
  );
  const latest = new Map<number, ChangePage['changes'][number]>();
  for (const row of rows) {
    if (row.created_at > to.next_since || (row.created_at === to.next_since && row.id > to.next_id)) break;
    latest.delete(row.product_id);
    latest.set(row.product_id, { product_id: row.product_id, change_type: row.change_type, created_at: row.created_at });
  }
  return { changes: [...latest.values()], next_since: to.next_since, next_id: to.next_id, store: 'de' };
}

/** The windows a poll answers now from `from` until caught up. */
async function pollsFrom(merchantId: number, from: ChangePage): Promise<ChangePage[]> {
  const pages: ChangePage[] = [];
  for (let page = await poll(merchantId, from); page.changes.length > 0; page = await poll(merchantId, page)) pages.push(page);
  return pages;
}

async function openStreams(feed: LiveFeed, merchantId: number, from: ChangePage): Promise<LiveStream[]> {
  const cursor = { since: from.next_since, sinceId: from.next_id };
  return Promise.all(Array.from({ length: STREAMS }, (_, i) => feed.openStream({ merchantId, keyId: `key-${i}`, store: 'de', cursor })));
}

const settings = {
  feedWindow: WINDOW,
  maxWaitSeconds: 5,
  heartbeatSeconds: 60,
  perKey: 100,
  perMerchant: 100,
  perProcess: 100,
  pollIntervalMs: 60_000,
  windowCache: 8,
};

describe('streams behind their store share their catch-up reads', () => {
  it('streams at the same cursor read each next window once, get the same window object, and as a poll answers it', async () => {
    const merchant = await shop('Shared Reads Outfitters');
    const start = await caughtUp(merchant.id);
    for (let i = 0; i < 5; i++) await merchant.change(i); // windows of 2, 2 and 1
    const expected = await pollsFrom(merchant.id, start);
    expect(expected.map((page) => page.changes.length)).toEqual([2, 2, 1]);
    const { storage, reads } = countingStorage(service.storage);
    const feed = new LiveFeed(storage, settings);
    const streams = await openStreams(feed, merchant.id, start);
    reads.clear(); // each open read its first window itself
    for (const [round, window] of expected.entries()) {
      const pages = (await Promise.all(streams.map((stream) => stream.next()))) as ChangePage[];
      for (const page of pages) expect(page).toEqual(window);
      // After the first (each stream's own opening read), one object: its JSON is made once for all.
      if (round > 0) expect(new Set(pages).size).toBe(1);
    }
    // The second and third windows were read once each, for all 12 streams, each one object for all.
    expect(Object.fromEntries(reads)).toEqual({
      [`${expected[0]!.next_since}/${expected[0]!.next_id}`]: 1,
      [`${expected[1]!.next_since}/${expected[1]!.next_id}`]: 1,
    });
    for (const stream of streams) stream.close();
    feed.close();
  });

  it('serves streams that reach a kept window later from it, whole or the part after their cursor, while changes keep arriving: every change once, in order', async () => {
    const merchant = await shop('Late Readers Outfitters');
    const start = await caughtUp(merchant.id);
    for (let i = 0; i < 5; i++) await merchant.change(i);
    const { storage, reads } = countingStorage(service.storage);
    // Room for every window of the run: 3 at first, then one a stream (the change recorded after the one before).
    const feed = new LiveFeed(storage, { ...settings, windowCache: 32 });
    const streams = await openStreams(feed, merchant.id, start);
    reads.clear();
    // One stream after the other catches up; a change is recorded after each, so each later stream
    // meets windows kept while the store's head moved on.
    for (const [i, stream] of streams.entries()) {
      const head = await caughtUp(merchant.id);
      let cursor: ChangePage = start;
      const pages: ChangePage[] = [];
      while (cursor.next_id !== head.next_id) {
        const page = (await stream.next()) as ChangePage;
        pages.push(page);
        // Each window is exactly the latest change per product of the recorded changes in its range.
        expect(page).toEqual(await windowBetween(merchant.id, cursor, page));
        expect(page.changes.length).toBeLessThanOrEqual(WINDOW);
        cursor = page;
      }
      // Every change after the start, once: the windows chain from the start to the head.
      expect(pages.length).toBeGreaterThan(0);
      await merchant.change(i);
    }
    // Stream 0 read its second and third windows (the first was its opening read); every later stream
    // read only the change recorded after the stream before it, served the rest from kept windows.
    expect([...reads.values()].reduce((sum, count) => sum + count, 0)).toBe(2 + (STREAMS - 1));
    expect(feed.catchUp.served).toBeGreaterThanOrEqual(2 * (STREAMS - 1));
    for (const stream of streams) stream.close();
    feed.close();
  });

  it('answers a reader whose cursor falls inside a kept window with the part of it after the cursor, read from no storage', async () => {
    const merchant = await shop('Inside Outfitters');
    const start = await caughtUp(merchant.id);
    for (let i = 0; i < 4; i++) await merchant.change(i);
    const { storage, reads } = countingStorage(service.storage);
    const catchUp = new CatchUpReads(storage, WINDOW, 8, () => 0);
    const store = (await service.storage.snapshot((reader) => reader.findStore(merchant.id, 'de')))!;
    const first = await catchUp.read(store, { at: start.next_since, id: start.next_id });
    expect([first.page.changes.length, first.full]).toEqual([2, true]);
    // A poll of one change from the start: a cursor inside the window just read.
    const inside = await readChangeFeed(service.storage, merchant.id, 'de', { since: start.next_since, sinceId: start.next_id }, 1);
    reads.clear();
    const part = await catchUp.read(store, { at: inside.next_since, id: inside.next_id });
    expect(part.page).toEqual(await windowBetween(merchant.id, inside, first.page));
    expect(part.page.changes).toHaveLength(1);
    expect(part.full).toBe(true);
    // At the window's start: the very object, again from no storage.
    expect((await catchUp.read(store, { at: start.next_since, id: start.next_id })).page).toBe(first.page);
    expect(reads.size).toBe(0);
    expect(catchUp.served).toBe(2);
  });

  it('keeps no error: a cursor that expired is read again by the next stream (410 each time)', async () => {
    let snapshots = 0;
    const expired = {
      snapshot: async () => {
        snapshots++;
        throw new ProblemError('cursor_expired', 'Changes after this cursor were deleted by retention.');
      },
    } as unknown as CatalogStorage;
    const reads = new CatchUpReads(expired, WINDOW, 8, () => 0);
    const store = { id: 1, slug: 'de' } as StoreRecord;
    for (let i = 0; i < 2; i++) await expect(reads.read(store, { at: '2025-01-01T00:00:00Z', id: 3 })).rejects.toThrow(ProblemError);
    expect(snapshots).toBe(2);
  });

  it('reads nothing for a stream or long-poll refused at its cap: the place is taken before the first window is read', async () => {
    const merchant = await shop('Refused Reads Outfitters');
    const start = await caughtUp(merchant.id);
    const { storage, reads } = countingStorage(service.storage);
    const feed = new LiveFeed(storage, { ...settings, perMerchant: 1 });
    const cursor = { since: start.next_since, sinceId: start.next_id };
    const held = await feed.openStream({ merchantId: merchant.id, keyId: 'held', store: 'de', cursor });
    reads.clear();
    for (let i = 0; i < 20; i++) {
      await expect(feed.openStream({ merchantId: merchant.id, keyId: `refused-${i}`, store: 'de', cursor })).rejects.toMatchObject({
        code: 'rate_limited',
      });
      await expect(feed.waitForChanges({ merchantId: merchant.id, keyId: `refused-${i}`, store: 'de', cursor }, 5)).rejects.toMatchObject({
        code: 'rate_limited',
      });
    }
    expect(Object.fromEntries(reads)).toEqual({});
    held.close();
    feed.close();
  });
});
