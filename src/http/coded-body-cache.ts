// The coded bytes of JSON reads (gzip, br) kept in memory within a byte budget, so that integrators
// reading the same page pay its compression once. Keyed by the response's strong ETag,
// which names the coding and is a digest of what determines the uncompressed bytes (conditional.ts):
// one key, one byte string, whoever asks. Least recently used entries leave first.
import type { CodedBodyCacheObserver } from '../operations/metrics.js';
import { ByteBudgetCache } from '../shared/byte-budget-cache.js';
import type { ContentCoding } from './compression.js';

export class CodedBodyCache {
  private readonly cache: ByteBudgetCache<Uint8Array<ArrayBuffer>>;

  constructor(
    readonly budgetBytes: number,
    private readonly observer?: CodedBodyCacheObserver,
  ) {
    this.cache = new ByteBudgetCache(
      budgetBytes,
      (coded) => coded.length,
      (event, bytes, entries) => observer?.observeCodedBodyCache(event, bytes, entries),
    );
  }

  /** Bytes of coded bodies held now (at most budgetBytes). */
  get bytes(): number {
    return this.cache.bytes;
  }

  get count(): number {
    return this.cache.count;
  }

  get(etag: string, coding: ContentCoding): Uint8Array<ArrayBuffer> | undefined {
    const coded = this.cache.get(`${coding} ${etag}`);
    this.observer?.observeCodedBodyCache(coded ? 'hit' : 'miss', this.cache.bytes, this.cache.count);
    return coded;
  }

  /** Keeps `coded` unless it alone exceeds the budget, evicting the least recently used to make room. */
  set(etag: string, coding: ContentCoding, coded: Uint8Array<ArrayBuffer>): void {
    this.cache.set(`${coding} ${etag}`, coded);
  }
}
