// Read queries of the public API (spec 4.1-4.3). Payloads are served as stored: a page is one
// range scan over the (store, product) key. Its range is found from the store's published products
// per block of ids (kept by the database, read again only when the set of published products
// changes: stores.catalog_version) and one bounded read within a block, remembered per request at
// that version: no read of every id, no OFFSET over wide rows, no count per request, whatever the
// catalog's size. Bytes read are kept (read-cache.ts) and served again while the
// merchant's published version has not moved.
import type { components } from '../generated/public-api.js';
import { PER_PAGE_MAXIMUM } from '../generated/public-limits.js';
import type { Store, StoreRecord } from './model.js';
import { ProblemError, invalidInput } from '../shared/problem.js';
import type { CatalogStorage, PublishedPage, StorageOperations } from '../storage/port.js';
import type { PublishedKeys } from '../storage/records.js';
import { scopeToMerchant, type MerchantScope } from '../storage/merchant-scope.js';
import type { PublishedExclusionCounts, PublishedProductSummary } from './model.js';
import { PUBLISHED_BLOCK_BITS } from '../storage/records.js';
import type { PublishedReadCache } from './read-cache.js';

export const PER_PAGE_DEFAULT = 50;
export const PER_PAGE_MAX = PER_PAGE_MAXIMUM;

/** spec 4.1: per_page is clamped to 1..200. */
export function clampPerPage(perPage: number): number {
  return Math.min(PER_PAGE_MAX, Math.max(1, perPage));
}

export type PageMeta = components['schemas']['PaginationMeta'];

export interface ProductPage {
  /** The page's product payloads as UTF-8 JSON, comma-separated (the inside of `data: [...]`). */
  data: Uint8Array;
  /** The rows' stored hashes: what the page's ETag is computed over (with the envelope). */
  digests: Uint8Array;
  meta: PageMeta;
  /** The read cache holds `data`: the same object comes back for this page while it is current (read-cache.ts). */
  kept: boolean;
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

/** The merchant's active store named by slug, or its default store when slug is omitted; 404 store_not_found otherwise. */
export async function activeStore(merchant: MerchantScope, slug: string | undefined): Promise<StoreRecord> {
  const store = slug === undefined ? await merchant.findDefaultStore() : await merchant.findStore(slug);
  if (store?.active) return store;
  throw storeNotFound(slug);
}

export function storeNotFound(slug: string | undefined): ProblemError {
  return slug === undefined
    ? new ProblemError('store_not_found', 'The merchant has no active default store.')
    : new ProblemError('store_not_found', `No active store with slug "${slug}".`);
}

export interface PageRequest {
  /** 1-based page number (spec 4.1), or ... */
  page: number;
  /** ... keyset paging after this product id, when given. */
  afterId?: number;
  perPage: number;
}

/** What a search query matched, in the order fields are tried: id, ref, SKU, EAN. */
export type ProductSearchField = 'id' | 'ref' | 'sku' | 'ean';

/** At most this many products are listed for a SKU or EAN that several products share. */
export const SEARCH_MATCHES_MAX = 10;

export interface ProductMatch {
  id: number;
  ref: string;
  /** The published payload's summary in the store (SKU and EAN matches only: they are found there). */
  summary?: PublishedProductSummary;
}

export interface ProductSearch {
  store: StoreRecord;
  /** The field that matched; null when nothing did (matches is then empty). */
  field: ProductSearchField | null;
  matches: ProductMatch[];
}

export interface ProductSummaryPage {
  store: StoreRecord;
  /** The store's published products and the excluded ones per reason (the whole store, not the page). */
  counts: PublishedExclusionCounts;
  products: PublishedProductSummary[];
  /** The `after_id` of the next page; null on the last one. */
  nextAfterId: number | null;
}

/** Some products of a store by id, and the digests their ETag is computed over. */
export interface ProductsByIds {
  store: StoreRecord;
  /** The payloads found, ascending by id, joined by commas. */
  bytes: Uint8Array;
  digests: Uint8Array;
  count: number;
  /** The read cache holds `bytes`: the same object comes back for this list while it is current. */
  kept: boolean;
}

/** At most this many products answer one look-up by SKU or EAN (a page's most). */
export const KEY_MATCHES_MAX = PER_PAGE_MAXIMUM;

function tooManyMatches(field: PublishedKeys['field']): ProblemError {
  return invalidInput('query', [
    { name: field, in: 'query', reason: `matches more than ${KEY_MATCHES_MAX} products: send fewer values at a time` },
  ]);
}

/** Page plans remembered per store and catalog version (the oldest forgotten first). */
export const PAGE_PLANS_MAX = 4096;

const BLOCK_SIZE = 2 ** PUBLISHED_BLOCK_BITS;

/** A store's published products per block of ids at one catalog version, and the plans of pages found in it. */
interface StorePositions {
  version: number;
  /** The blocks holding products, ascending, and how many products precede each. */
  blocks: Float64Array;
  before: Float64Array;
  total: number;
  plans: Map<string, PagePlan>;
}

export class CatalogReads {
  private readonly positions = new Map<number, StorePositions>();
  /** The store a (merchant, slug or default) request was last served from: where the next one expects to find its ids. */
  private readonly servedStores = new Map<string, number>();

  /** `cache`: published bytes this process keeps while they are still the stored ones (read-cache.ts); none reads every time. */
  constructor(
    private readonly storage: CatalogStorage,
    private readonly cache?: PublishedReadCache,
  ) {}

  /** spec 4.3: the merchant's active stores, default store first. */
  async activeStores(merchantId: number): Promise<StoreRecord[]> {
    return (await scopeToMerchant(this.storage, merchantId).listStores()).filter((s) => s.active);
  }

  activeStore(merchantId: number, slug: string | undefined): Promise<StoreRecord> {
    return activeStore(scopeToMerchant(this.storage, merchantId), slug);
  }

  /** spec 4.2: the payload of one product in the store; 404 outside the merchant's catalog. */
  async product(merchantId: number, slug: string | undefined, productId: number): Promise<Uint8Array> {
    const store = await this.activeStore(merchantId, slug);
    const payload = await this.storage.publishedPayload(store.id, productId);
    // Including another merchant's id.
    if (payload === undefined) throw new ProblemError('not_found', `Product ${productId} is not in the catalog.`);
    return payload;
  }

  /**
   * spec 4.1: a page of the store's products, ordered by id, read on one consistent view so a page
   * never mixes two versions of the catalog. When this process knows the store's ids at some catalog
   * version, the store and the page are one statement that holds only if the store is still at that
   * version, and that reads no rows when the process holds the page's bytes at the merchant's current
   * published version; otherwise, on a snapshot that refreshes the ids first.
   */
  async productPage(
    merchantId: number,
    slug: string | undefined,
    request: PageRequest,
  ): Promise<{ store: StoreRecord; page: ProductPage }> {
    const servedKey = slug === undefined ? `${merchantId}` : `${merchantId}/${slug}`;
    const storeId = this.servedStores.get(servedKey);
    const known = storeId === undefined ? undefined : this.positions.get(storeId);
    const plan = storeId !== undefined && known ? await this.planOf(this.storage, storeId, known, request) : undefined;
    if (storeId !== undefined && known && plan) {
      const held = plan.range ? this.cache?.page(storeId, plan.range[0], plan.range[1]) : undefined;
      const read = await scopeToMerchant(this.storage, merchantId).publishedPageOfStore(slug, {
        storeId,
        catalogVersion: known.version,
        range: plan.range,
        heldVersion: held?.publishedVersion,
      });
      if (!read.store?.active) throw storeNotFound(slug);
      const { store } = read;
      if (store.id === storeId && store.catalog_version === known.version) {
        if (!plan.range) return { store, page: { data: EMPTY, digests: EMPTY, meta: plan.meta, kept: false } };
        if (held && read.publishedVersion === held.publishedVersion) {
          this.cache!.counted('hit');
          return { store, page: { data: held.bytes, digests: held.digests, meta: plan.meta, kept: true } };
        }
        if (read.page) {
          const kept = this.keepPage(storeId, plan.range, read.publishedVersion, read.page);
          return { store, page: { data: read.page.bytes, digests: read.page.digests, meta: plan.meta, kept } };
        }
      }
      // Another store now answers to the slug, or its published products changed: on a snapshot.
    }
    return this.storage.snapshot(async (reader) => {
      const { store, publishedVersion } = await scopeToMerchant(reader, merchantId).storeAtPublishedVersion(slug);
      if (!store?.active) throw storeNotFound(slug);
      const positions = await this.positionsOf(reader, store);
      this.servedStores.set(servedKey, store.id);
      // On one snapshot, the store's catalog version is the one its blocks were read at.
      const plan = (await this.planOf(reader, store.id, positions, request))!;
      if (!plan.range) return { store, page: { data: EMPTY, digests: EMPTY, meta: plan.meta, kept: false } };
      // The version and the rows are of one snapshot: rows held at this version are these rows.
      const held = this.cache?.page(store.id, plan.range[0], plan.range[1]);
      if (held?.publishedVersion === publishedVersion) {
        this.cache!.counted('hit');
        return { store, page: { data: held.bytes, digests: held.digests, meta: plan.meta, kept: true } };
      }
      const page = await reader.publishedPage(store.id, plan.range[0], plan.range[1]);
      const kept = this.keepPage(store.id, plan.range, publishedVersion, page);
      return { store, page: { data: page.bytes, digests: page.digests, meta: plan.meta, kept } };
    });
  }

  /**
   * Some products of the store by id (ids outside the catalog are absent), ascending: from memory
   * while the merchant's published version is the one this process read the same list at.
   */
  async productsByIds(merchantId: number, slug: string | undefined, ids: number[]): Promise<ProductsByIds> {
    const { store, publishedVersion } = await scopeToMerchant(this.storage, merchantId).storeAtPublishedVersion(slug);
    if (!store?.active) throw storeNotFound(slug);
    // One entry per set of ids, however the request orders or repeats them (the answer is ascending).
    const list = [...new Set(ids)].sort((a, b) => a - b);
    const held = this.cache?.products(store.id, list, publishedVersion);
    if (held) {
      this.cache!.counted('hit');
      return { store, bytes: held.bytes, digests: held.digests, count: held.count, kept: true };
    }
    const read = await this.storage.publishedPayloadsByIds(store.id, list);
    this.cache?.counted('miss');
    const kept = this.cache?.keepProducts(store.id, list, read) ?? false;
    return { store, bytes: read.bytes, digests: read.digests, count: read.count, kept };
  }

  /**
   * The store's products whose `sku` (or `ean`) is one of the values, every product that carries one
   * (several may share it), ascending by id; values no product carries are absent. More than
   * KEY_MATCHES_MAX products answer 400 naming the field: never a silently shortened answer.
   */
  async productsByKeys(merchantId: number, slug: string | undefined, keys: PublishedKeys): Promise<ProductsByIds> {
    const store = await this.activeStore(merchantId, slug);
    const read = await this.storage.publishedPayloadsByKeys(store.id, keys, KEY_MATCHES_MAX + 1);
    if (read.count > KEY_MATCHES_MAX) throw tooManyMatches(keys.field);
    return { store, bytes: read.bytes, digests: read.digests, count: read.count, kept: false };
  }

  /** `id`, `sku`, `ean` and `prices` of some products of the store, ascending. */
  async pricesByIds(merchantId: number, slug: string | undefined, ids: number[]): Promise<{ store: StoreRecord; bytes: Uint8Array }> {
    const store = await this.activeStore(merchantId, slug);
    return { store, bytes: await this.storage.publishedPricesByIds(store.id, ids) };
  }

  /** pricesByIds of the products productsByKeys finds, with the same bound. */
  async pricesByKeys(
    merchantId: number,
    slug: string | undefined,
    keys: PublishedKeys,
  ): Promise<{ store: StoreRecord; bytes: Uint8Array }> {
    const store = await this.activeStore(merchantId, slug);
    const read = await this.storage.publishedPricesByKeys(store.id, keys, KEY_MATCHES_MAX + 1);
    if (read.count > KEY_MATCHES_MAX) throw tooManyMatches(keys.field);
    return { store, bytes: read.bytes };
  }

  /**
   * The merchant's products an exact query names, for the panel's search: an all-digit query is
   * tried as a product id first, then the query as a ref (both merchant-wide), then as the SKU and
   * then the EAN of the store's published payloads (where exported SKUs exist), which several
   * products may share.
   */
  findProducts(merchantId: number, slug: string | undefined, query: string): Promise<ProductSearch> {
    return this.storage.snapshot(async (reader) => {
      const merchant = scopeToMerchant(reader, merchantId);
      const store = await activeStore(merchant, slug);
      if (/^[0-9]{1,15}$/.test(query)) {
        const [byId] = await merchant.productsByIds([Number(query)]);
        if (byId) return { store, field: 'id', matches: [{ id: byId.id, ref: byId.ref }] };
      }
      const byRef = await merchant.findProductByRef(query);
      if (byRef) return { store, field: 'ref', matches: [{ id: byRef.id, ref: byRef.ref }] };
      for (const field of ['sku', 'ean'] as const) {
        const found = await merchant.findPublishedProducts(store, { [field]: query }, SEARCH_MATCHES_MAX);
        if (found.length === 0) continue;
        const refs = new Map((await merchant.productsByIds(found.map((f) => f.id))).map((p) => [p.id, p.ref]));
        const matches = found.filter((f) => refs.has(f.id)).map((f) => ({ id: f.id, ref: refs.get(f.id)!, summary: f }));
        if (matches.length > 0) return { store, field, matches };
      }
      return { store, field: null, matches: [] };
    });
  }

  /**
   * A page of the store's published products by id (keyset after `afterId`, as the public API's
   * after_id), optionally the excluded ones only, with the store's counts, on one snapshot.
   */
  productSummaries(
    merchantId: number,
    slug: string | undefined,
    request: { afterId?: number; perPage: number; excludedOnly?: boolean },
  ): Promise<ProductSummaryPage> {
    return this.storage.snapshot(async (reader) => {
      const merchant = scopeToMerchant(reader, merchantId);
      const store = await activeStore(merchant, slug);
      const [counts, rows] = await Promise.all([
        merchant.publishedCountsByExclusion(store),
        // One more than the page: whether it exists says whether there is a next page.
        merchant.publishedSummaries(store, {
          afterId: request.afterId ?? 0,
          limit: request.perPage + 1,
          excludedOnly: request.excludedOnly ?? false,
        }),
      ]);
      const products = rows.slice(0, request.perPage);
      const nextAfterId = rows.length > request.perPage ? products[products.length - 1]!.id : null;
      return { store, counts, products, nextAfterId };
    });
  }

  /** A page just read from the database, kept (a miss when there is a cache): whether it was. */
  private keepPage(storeId: number, [fromId, toId]: [number, number], publishedVersion: number, page: PublishedPage): boolean {
    if (!this.cache) return false;
    this.cache.counted('miss');
    return this.cache.keepPage(storeId, fromId, toId, { publishedVersion, bytes: page.bytes, digests: page.digests, count: 0 });
  }

  /** The store's blocks at its catalog version: kept while the version stays (O(blocks) to read again). */
  private async positionsOf(reader: StorageOperations, store: StoreRecord): Promise<StorePositions> {
    const cached = this.positions.get(store.id);
    if (cached && cached.version === store.catalog_version) return cached;
    const blocks = await reader.publishedBlocks(store.id);
    const positions: StorePositions = {
      version: store.catalog_version,
      blocks: new Float64Array(blocks.length),
      before: new Float64Array(blocks.length),
      total: 0,
      plans: new Map(),
    };
    blocks.forEach((block, i) => {
      positions.blocks[i] = block.block;
      positions.before[i] = positions.total;
      positions.total += block.count;
    });
    this.positions.set(store.id, positions);
    return positions;
  }

  /**
   * The page a request asks for at the positions' catalog version: remembered, or found with one
   * bounded read; undefined when the store's catalog version is no longer the positions' one.
   */
  private async planOf(
    reader: StorageOperations,
    storeId: number,
    positions: StorePositions,
    request: PageRequest,
  ): Promise<PagePlan | undefined> {
    const key = request.afterId === undefined ? `${request.page}/${request.perPage}` : `>${request.afterId}/${request.perPage}`;
    const remembered = positions.plans.get(key);
    if (remembered) return remembered;
    const plan =
      request.afterId === undefined
        ? await numberedPage(reader, storeId, positions, request.page, request.perPage)
        : await pageAfter(reader, storeId, positions, request.afterId, request.perPage);
    if (!plan) return undefined;
    if (positions.plans.size >= PAGE_PLANS_MAX) positions.plans.delete(positions.plans.keys().next().value!);
    positions.plans.set(key, plan);
    return plan;
  }
}

type PagePlan = { meta: PageMeta; range: [number, number] | null };

/** spec 4.1: page n of ceil(total / perPage), by position in the ascending id list. */
async function numberedPage(
  reader: StorageOperations,
  storeId: number,
  positions: StorePositions,
  page: number,
  perPage: number,
): Promise<PagePlan | undefined> {
  const { total } = positions;
  const lastPage = Math.max(1, Math.ceil(total / perPage));
  const start = (page - 1) * perPage;
  const meta = { current_page: page, per_page: perPage, last_page: lastPage, total };
  if (start >= total) return { meta, range: null };
  // The block holding position `start`, and the page within its index range.
  const i = lastAtOrBefore(positions.before, start);
  const window = await reader.publishedWindow(storeId, {
    fromId: positions.blocks[i]! * BLOCK_SIZE,
    skip: start - positions.before[i]!,
    limit: Math.min(perPage, total - start),
  });
  if (window.catalogVersion !== positions.version || window.firstId === null) return undefined;
  return { meta, range: [window.firstId, window.lastId!] };
}

/**
 * Keyset paging: the store's products with id > afterId, at most perPage. meta.current_page is
 * the page the last returned product is on, and equals last_page exactly when the response
 * reaches the end of the store (so the spec's paging rule still ends the loop).
 */
async function pageAfter(
  reader: StorageOperations,
  storeId: number,
  positions: StorePositions,
  afterId: number,
  perPage: number,
): Promise<PagePlan | undefined> {
  const { total } = positions;
  const lastPage = Math.max(1, Math.ceil(total / perPage));
  // The products up to afterId: those of the blocks before its block, and its block's up to it.
  const block = Math.floor(afterId / BLOCK_SIZE);
  const window = await reader.publishedWindow(storeId, { fromId: afterId + 1, skip: 0, limit: perPage }, [block * BLOCK_SIZE, afterId]);
  if (window.catalogVersion !== positions.version) return undefined;
  const start = firstAtOrAfter(positions.blocks, block, positions.before, total) + window.counted;
  if (window.count === 0 || window.firstId === null) {
    return { meta: { current_page: lastPage, per_page: perPage, last_page: lastPage, total }, range: null };
  }
  const end = start + window.count - 1;
  const currentPage = end === total - 1 ? lastPage : Math.min(lastPage - 1, Math.floor(end / perPage) + 1);
  return { meta: { current_page: currentPage, per_page: perPage, last_page: lastPage, total }, range: [window.firstId, window.lastId!] };
}

/** The last index whose value is <= value in an ascending list (0 when none is). */
function lastAtOrBefore(values: Float64Array, value: number): number {
  let low = 0;
  let high = values.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (values[middle]! <= value) low = middle + 1;
    else high = middle;
  }
  return Math.max(0, low - 1);
}

/** How many products precede block `block`: `before` of the first block at or after it, else the total. */
function firstAtOrAfter(blocks: Float64Array, block: number, before: Float64Array, total: number): number {
  let low = 0;
  let high = blocks.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (blocks[middle]! < block) low = middle + 1;
    else high = middle;
  }
  return low < blocks.length ? before[low]! : total;
}
