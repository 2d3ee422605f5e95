// The coded bytes of JSON reads (gzip, br) kept in memory within a byte budget, so that integrators
// reading the same page pay its compression once (issue 15). Keyed by the response's strong ETag,
// which names the coding and is a digest of what determines the uncompressed bytes (conditional.ts):
// one key, one byte string, whoever asks. Least recently used entries leave first.
import type { CodedBodyCacheObserver } from '../operations/metrics.js';
import type { ContentCoding } from './compression.js';

export class CodedBodyCache {
  /** Map order is insertion order: a hit re-inserts, so the first key is the least recently used. */
  private readonly entries = new Map<string, Uint8Array<ArrayBuffer>>();
  private size = 0;

  constructor(readonly budgetBytes: number, private readonly observer?: CodedBodyCacheObserver) {}

  /** Bytes of coded bodies held now (at most budgetBytes). */
  get bytes(): number {
    return this.size;
  }

  get count(): number {
    return this.entries.size;
  }

  get(etag: string, coding: ContentCoding): Uint8Array<ArrayBuffer> | undefined {
    const key = `${coding} ${etag}`;
    const coded = this.entries.get(key);
    if (coded) {
      this.entries.delete(key);
      this.entries.set(key, coded);
    }
    this.observer?.observeCodedBodyCache(coded ? 'hit' : 'miss', this.size, this.entries.size);
    return coded;
  }

  /** Keeps `coded` unless it alone exceeds the budget, evicting the least recently used to make room. */
  set(etag: string, coding: ContentCoding, coded: Uint8Array<ArrayBuffer>): void {
    if (coded.length > this.budgetBytes) return;
    const key = `${coding} ${etag}`;
    const previous = this.entries.get(key);
    if (previous) {
      this.entries.delete(key);
      this.size -= previous.length;
    }
    for (const [oldest, bytes] of this.entries) {
      if (this.size + coded.length <= this.budgetBytes) break;
      this.entries.delete(oldest);
      this.size -= bytes.length;
      this.observer?.observeCodedBodyCache('evict', this.size, this.entries.size);
    }
    this.entries.set(key, coded);
    this.size += coded.length;
    this.observer?.observeCodedBodyCache('store', this.size, this.entries.size);
  }
}
