// A map of byte strings held within a byte budget, least recently used leaving first: what the
// caches of the read path are made of (catalog/read-cache.ts: published pages and id lists;
// http/coded-body-cache.ts: their gzip and br bytes).

/** What a cache did: a lookup found (hit) or did not find (miss) an entry, an entry was evicted for room, or one stored. */
export type CacheEvent = 'hit' | 'miss' | 'evict' | 'store';

/** Told of each eviction and store, with the cache's size after it (hits and misses are the owner's to tell). */
export type CacheSizeObserver = (event: 'evict' | 'store', bytes: number, entries: number) => void;

export class ByteBudgetCache<V> {
  /** Map order is insertion order: a hit re-inserts, so the first key is the least recently used. */
  private readonly entries = new Map<string, { value: V; size: number }>();
  private size = 0;

  constructor(
    readonly budgetBytes: number,
    private readonly sizeOf: (value: V) => number,
    private readonly observe?: CacheSizeObserver,
  ) {}

  /** Bytes held now (at most budgetBytes). */
  get bytes(): number {
    return this.size;
  }

  get count(): number {
    return this.entries.size;
  }

  /** Whether an entry is under key (its recency unchanged). */
  has(key: string): boolean {
    return this.entries.has(key);
  }

  /** The keys set() would evict, least recently used first, to make room for an entry of `size` bytes. */
  victims(size: number): string[] {
    const victims: string[] = [];
    let room = this.budgetBytes - this.size;
    for (const [key, entry] of this.entries) {
      if (room >= size) break;
      victims.push(key);
      room += entry.size;
    }
    return victims;
  }

  /** The entry under key, now the most recently used. */
  get(key: string): V | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    this.entries.delete(key);
    this.entries.set(key, entry);
    return entry.value;
  }

  /**
   * Keeps `value` under key (replacing what was there) unless it alone exceeds the budget, evicting
   * the least recently used to make room; whether it was kept.
   */
  set(key: string, value: V): boolean {
    const size = this.sizeOf(value);
    this.delete(key);
    if (size > this.budgetBytes) return false;
    for (const [oldest, entry] of this.entries) {
      if (this.size + size <= this.budgetBytes) break;
      this.entries.delete(oldest);
      this.size -= entry.size;
      this.observe?.('evict', this.size, this.entries.size);
    }
    this.entries.set(key, { value, size });
    this.size += size;
    this.observe?.('store', this.size, this.entries.size);
    return true;
  }

  delete(key: string): void {
    const entry = this.entries.get(key);
    if (!entry) return;
    this.entries.delete(key);
    this.size -= entry.size;
  }
}
