// Published bytes this process has read, kept in memory within a byte budget and served again while
// they are still the stored bytes: a page of a store or the products of an `?ids=` list,
// with the digests their ETag is computed over, labelled with the merchant's published version
// they were read at. Every write of published payloads moves that version in its transaction
// (storage/records.ts PublishedVersionRead), and every request reads the current version from the
// database (with the store row, in the same statement), so an entry is used only while no payload
// of the merchant has changed, whichever process wrote: processes behind one database never serve
// each other's stale bytes. Least recently used entries leave first.
// What is kept is chosen by how often it is read (as TinyLFU admits): a page or list is kept from its
// second read on, and when keeping it would evict others, only if it was read more often than each
// of them. So what is read once (a sync going through a whole catalog) is never kept, and a second
// sync of a catalog larger than the budget does not push out what was kept: keeping bytes that are
// then evicted unread costs more than it could save (the collector's work on large retained
// buffers: ~0.5 ms per page of a 100k-product sync, measured with the cache churning).
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

/** Read counts are kept for at most this many keys (the least recently read forgotten first)... */
export const READ_COUNTS_MAX = 10_000;
/** ... and halved every this many reads, so that what was read often long ago gives way. */
export const READS_PER_AGING = 10 * READ_COUNTS_MAX;

export class PublishedReadCache {
  private readonly cache: ByteBudgetCache<HeldPublishedBytes>;
  /** How often each key was read lately (insertion order is recency of reads: the first is the least recent). */
  private readonly reads = new Map<string, number>();
  private readsSinceAging = 0;

  constructor(
    readonly budgetBytes: number,
    private readonly observer?: PublishedReadCacheObserver,
  ) {
    this.cache = new ByteBudgetCache(budgetBytes, entrySize, (event, bytes, entries) =>
      observer?.observePublishedReadCache(event, bytes, entries),
    );
  }

  get bytes(): number {
    return this.cache.bytes;
  }

  get count(): number {
    return this.cache.count;
  }

  /**
   * The rows of the store's products fromId..toId this process holds, at whichever version it read
   * them (the database says whether that is the current one). Every call counts as a read of the page.
   */
  page(storeId: number, fromId: number, toId: number): HeldPublishedBytes | undefined {
    const key = pageKey(storeId, fromId, toId);
    this.countRead(key);
    return this.cache.get(key);
  }

  /**
   * Keeps a page just read from the database (after page() counted the read) when it is read often
   * enough (see above); whether it was kept (an entry larger than the whole budget never is).
   */
  keepPage(storeId: number, fromId: number, toId: number, held: HeldPublishedBytes): boolean {
    return this.keep(pageKey(storeId, fromId, toId), held);
  }

  /** The products of an id list (ascending, without repeats) held at exactly this published version; counts a read. */
  products(storeId: number, ids: readonly number[], publishedVersion: number): HeldPublishedBytes | undefined {
    const key = productsKey(storeId, ids);
    this.countRead(key);
    const held = this.cache.get(key);
    return held?.publishedVersion === publishedVersion ? held : undefined;
  }

  /** As keepPage, for an id list (after products() counted the read). */
  keepProducts(storeId: number, ids: readonly number[], held: HeldPublishedBytes): boolean {
    return this.keep(productsKey(storeId, ids), held);
  }

  private keep(key: string, held: HeldPublishedBytes): boolean {
    // Held at an older version: replaced in place.
    if (this.cache.has(key)) return this.cache.set(key, held);
    const reads = this.reads.get(key) ?? 0;
    if (reads < 2) return false;
    // Kept only if read more often than every entry it would push out.
    if (this.cache.victims(entrySize(held)).some((victim) => (this.reads.get(victim) ?? 0) >= reads)) return false;
    return this.cache.set(key, held);
  }

  private countRead(key: string): void {
    const reads = (this.reads.get(key) ?? 0) + 1;
    this.reads.delete(key);
    this.reads.set(key, reads);
    if (this.reads.size > READ_COUNTS_MAX) this.reads.delete(this.reads.keys().next().value!);
    if (++this.readsSinceAging < READS_PER_AGING) return;
    this.readsSinceAging = 0;
    for (const [counted, n] of this.reads) {
      if (n >= 2) this.reads.set(counted, n >> 1);
      else this.reads.delete(counted);
    }
  }

  /** Counts a lookup: answered from memory (hit) or read from the database (miss). */
  counted(event: 'hit' | 'miss'): void {
    this.observer?.observePublishedReadCache(event, this.cache.bytes, this.cache.count);
  }
}

const pageKey = (storeId: number, fromId: number, toId: number) => `p${storeId}:${fromId}-${toId}`;
const productsKey = (storeId: number, ids: readonly number[]) => `i${storeId}:${ids.join(',')}`;
