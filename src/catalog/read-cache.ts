// Published bytes this process has read, kept in memory within a byte budget and served again while
// they are still the stored bytes (issue 15): a page of a store or the products of an `?ids=` list,
// with the digests their ETag is computed over, labelled with the merchant's published version
// they were read at. Every write of published payloads moves that version in its transaction
// (storage/records.ts PublishedVersionRead), and every request reads the current version from the
// database (with the store row, in the same statement), so an entry is used only while no payload
// of the merchant has changed, whichever process wrote: processes behind one database never serve
// each other's stale bytes. Least recently used entries leave first.
import { ByteBudgetCache, type CacheEvent } from '../shared/byte-budget-cache.js';

/** What the cache did (hit: answered from memory; miss: read from the database), with its size after it. */
export interface PublishedReadCacheObserver {
  observePublishedReadCache(event: CacheEvent, bytes: number, entries: number): void;
}

/** Bytes read at a published version: a page's or an id list's payloads and their digests. */
export interface HeldPublishedBytes {
  publishedVersion: number;
  bytes: Uint8Array;
  digests: Uint8Array;
  /** Products in bytes (an id list's; a page's count is its plan's). */
  count: number;
}

/** Bytes an entry costs besides its byte strings (key, object, map slot): so that many small entries still count. */
const ENTRY_OVERHEAD_BYTES = 256;

/**
 * What an entry costs: its bytes twice (as read, and as answered: the HTTP layer keeps the page it
 * assembled from them for as long as they live, http/assembled-pages.ts), its digests and the overhead.
 */
const entrySize = (held: HeldPublishedBytes) => 2 * held.bytes.length + held.digests.length + ENTRY_OVERHEAD_BYTES;

export class PublishedReadCache {
  private readonly cache: ByteBudgetCache<HeldPublishedBytes>;

  constructor(readonly budgetBytes: number, private readonly observer?: PublishedReadCacheObserver) {
    this.cache = new ByteBudgetCache(budgetBytes, entrySize,
      (event, bytes, entries) => observer?.observePublishedReadCache(event, bytes, entries));
  }

  get bytes(): number {
    return this.cache.bytes;
  }

  get count(): number {
    return this.cache.count;
  }

  /** The rows of the store's products fromId..toId this process holds, at whichever version it read them. */
  page(storeId: number, fromId: number, toId: number): HeldPublishedBytes | undefined {
    return this.cache.get(pageKey(storeId, fromId, toId));
  }

  /** Whether it was kept (an entry larger than the whole budget is not). */
  keepPage(storeId: number, fromId: number, toId: number, held: HeldPublishedBytes): boolean {
    return this.cache.set(pageKey(storeId, fromId, toId), held);
  }

  /** The products of an id list (ascending, without repeats) held at exactly this published version. */
  products(storeId: number, ids: readonly number[], publishedVersion: number): HeldPublishedBytes | undefined {
    const held = this.cache.get(productsKey(storeId, ids));
    return held?.publishedVersion === publishedVersion ? held : undefined;
  }

  keepProducts(storeId: number, ids: readonly number[], held: HeldPublishedBytes): boolean {
    return this.cache.set(productsKey(storeId, ids), held);
  }

  /** Counts a lookup: answered from memory (hit) or read from the database (miss). */
  counted(event: 'hit' | 'miss'): void {
    this.observer?.observePublishedReadCache(event, this.cache.bytes, this.cache.count);
  }
}

const pageKey = (storeId: number, fromId: number, toId: number) => `p${storeId}:${fromId}-${toId}`;
const productsKey = (storeId: number, ids: readonly number[]) => `i${storeId}:${ids.join(',')}`;
