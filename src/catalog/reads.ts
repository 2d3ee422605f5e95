// Read queries of the public API (spec 4.1-4.3). Payloads are served as stored: a page is one
// range scan over the (store, product) key, located through an in-memory index of the store's
// product ids that is rebuilt only when the set of published products changes
// (stores.catalog_version). No OFFSET over wide rows, no count per request.
import type { Store, StoreRecord } from './model.js';
import type { CatalogStorage } from '../storage/port.js';

export const PER_PAGE_DEFAULT = 50;
export const PER_PAGE_MAX = 200;

/** spec 4.1: per_page is clamped to 1..200. */
export function clampPerPage(perPage: number): number {
  return Math.min(PER_PAGE_MAX, Math.max(1, perPage));
}

export interface PageMeta {
  current_page: number;
  per_page: number;
  last_page: number;
  total: number;
}

export interface ProductPage {
  /** The page's product payloads as UTF-8 JSON, comma-separated (the inside of `data: [...]`). */
  data: Uint8Array;
  /** The rows' stored hashes: what the page's ETag is computed over (with the envelope). */
  digests: Uint8Array;
  meta: PageMeta;
}

const EMPTY = new Uint8Array(0);

export function toPublicStore(store: StoreRecord): Store {
  return {
    id: store.id,
    slug: store.slug,
    name: store.name,
    locale: store.locale,
    currency: store.currency,
    is_default: store.is_default,
  };
}

export class CatalogReads {
  private readonly idIndex = new Map<number, { version: number; ids: Float64Array | number[] }>();

  constructor(private readonly storage: CatalogStorage) {}

  /** spec 4.3: the merchant's active stores, default store first. */
  activeStores(merchantId: number): StoreRecord[] {
    return this.storage.listStores(merchantId).filter((s) => s.active);
  }

  /** The active store named by slug, or the default store when slug is omitted. */
  findActiveStore(merchantId: number, slug: string | undefined): StoreRecord | undefined {
    const store = slug === undefined
      ? this.storage.findDefaultStore(merchantId)
      : this.storage.findStore(merchantId, slug);
    return store?.active ? store : undefined;
  }

  /** The payload of one product in the store, or undefined outside the merchant's catalog. */
  product(store: StoreRecord, productId: number): Uint8Array | undefined {
    return this.storage.publishedPayload(store.id, productId);
  }

  /** Runs several reads on one snapshot, so a page never mixes two versions of the catalog. */
  consistent<T>(fn: () => T): T {
    return this.storage.snapshot(fn);
  }

  /** spec 4.1: a page of the store's products, ordered by id. */
  productPage(store: StoreRecord, page: number, perPage: number): ProductPage {
    const ids = this.productIds(store);
    const total = ids.length;
    const lastPage = Math.max(1, Math.ceil(total / perPage));
    const start = (page - 1) * perPage;
    const meta = { current_page: page, per_page: perPage, last_page: lastPage, total };
    if (start >= total) return { data: EMPTY, digests: EMPTY, meta };
    const end = Math.min(total, start + perPage) - 1;
    const { bytes, digests } = this.storage.publishedPage(store.id, ids[start]!, ids[end]!);
    return { data: bytes, digests, meta };
  }

  /**
   * Keyset paging: the store's products with id > afterId, at most perPage. meta.current_page is
   * the page the last returned product is on, and equals last_page exactly when the response
   * reaches the end of the store (so the spec's paging rule still ends the loop).
   */
  productPageAfter(store: StoreRecord, afterId: number, perPage: number): ProductPage {
    const ids = this.productIds(store);
    const total = ids.length;
    const lastPage = Math.max(1, Math.ceil(total / perPage));
    const start = firstGreater(ids, afterId);
    if (start >= total) return { data: EMPTY, digests: EMPTY, meta: { current_page: lastPage, per_page: perPage, last_page: lastPage, total } };
    const end = Math.min(total, start + perPage) - 1;
    const currentPage = end === total - 1 ? lastPage : Math.min(lastPage - 1, Math.floor(end / perPage) + 1);
    const { bytes, digests } = this.storage.publishedPage(store.id, ids[start]!, ids[end]!);
    return { data: bytes, digests, meta: { current_page: currentPage, per_page: perPage, last_page: lastPage, total } };
  }

  /** Some products of the store by id (ids outside the catalog are absent), ascending. */
  productsByIds(store: StoreRecord, ids: number[]): { bytes: Uint8Array; count: number } {
    return this.storage.publishedPayloadsByIds(store.id, ids);
  }

  /** `id` and `prices` of some products of the store, ascending. */
  pricesByIds(store: StoreRecord, ids: number[]): Uint8Array {
    return this.storage.publishedPricesByIds(store.id, ids);
  }

  private productIds(store: StoreRecord): Float64Array | number[] {
    const cached = this.idIndex.get(store.id);
    if (cached && cached.version === store.catalog_version) return cached.ids;
    const ids = Float64Array.from(this.storage.publishedProductIds(store.id));
    this.idIndex.set(store.id, { version: store.catalog_version, ids });
    return ids;
  }
}

/** Index of the first id greater than `id` in an ascending list (binary search). */
function firstGreater(ids: Float64Array | number[], id: number): number {
  let low = 0;
  let high = ids.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (ids[middle]! <= id) low = middle + 1;
    else high = middle;
  }
  return low;
}
