// The read endpoints (spec 4.1-4.3) as small functions over the openapi-fetch client.
import { IDS_MAX_ITEMS, PER_PAGE_MAXIMUM, SKU_MAX_ITEMS } from '../generated/public-limits.js';
import { unwrap } from './errors.js';
import type { CatalogClient, Product, ProductPage, SparseProduct, Store } from './types.js';

export interface StoreOption {
  /** Store slug; omitted means the merchant's default store. */
  store?: string;
}

/** The most ids one `GET /v1/products?ids=` request accepts (IdsParam `maxItems`). */
export const MAX_IDS_PER_REQUEST = IDS_MAX_ITEMS;

/** The most SKUs or EANs one `GET /v1/products?sku=` (or `?ean=`) request accepts (SkuParam and EanParam `maxItems`). */
export const MAX_KEYS_PER_REQUEST = SKU_MAX_ITEMS;

/** A product these helpers read: whole, since they never send `fields` (a SparseProduct answers only a request that does). */
const whole = (product: Product | SparseProduct) => product as Product;

/** The merchant's active stores, default store first (spec 4.3). */
export async function listStores(client: CatalogClient): Promise<Store[]> {
  return (await unwrap(client.GET('/v1/stores'))).data;
}

/** One product resolved for a store (spec 4.2); a product not in the catalog throws CatalogApiError `not_found`. */
export async function getProduct(client: CatalogClient, id: number, { store }: StoreOption = {}): Promise<Product> {
  return whole((await unwrap(client.GET('/v1/products/{id}', { params: { path: { id }, query: { store } } }))).data);
}

/** One page of a store's products, ordered by id (spec 4.1). */
export async function listProducts(
  client: CatalogClient,
  { store, page, perPage }: StoreOption & { page?: number; perPage?: number } = {},
): Promise<ProductPage> {
  return unwrap(client.GET('/v1/products', { params: { query: { store, page, per_page: perPage } } }));
}

/**
 * Every product of a store, in id order, until `meta.current_page` equals `meta.last_page` (the
 * paging rule of spec 4.1; at least 1, so an empty store ends after one request). By default it
 * pages with `after_id` (keyset: send the last id read), which never skips a product when another
 * one is removed meanwhile; `paging: 'page'` requests page = 1, 2, 3, ... as the spec describes.
 * Throws CatalogApiError on an error response.
 */
export async function* iterateProducts(
  client: CatalogClient,
  { store, perPage = PER_PAGE_MAXIMUM, paging = 'after_id' }: StoreOption & { perPage?: number; paging?: 'after_id' | 'page' } = {},
): AsyncGenerator<Product, void, undefined> {
  let afterId = 0;
  for (let page = 1; ; page++) {
    const result =
      paging === 'page'
        ? await listProducts(client, { store, page, perPage })
        : await unwrap(client.GET('/v1/products', { params: { query: { store, after_id: afterId, per_page: perPage } } }));
    yield* result.data.map(whole);
    // `>=` rather than `===`: if products are deleted while paging by page number, last_page can
    // drop below the page just read, and the loop must still end.
    if (result.meta.current_page >= result.meta.last_page || result.data.length === 0) return;
    afterId = result.data[result.data.length - 1]!.id;
    // Stay on the store the first response was read from, even if the default store changes meanwhile.
    store = result.store;
  }
}

/**
 * The listed products of a store that are in its catalog, in id order within each batch of at
 * most 200 ids (one `GET /v1/products?ids=` request per batch; duplicates are sent once). Ids
 * outside the catalog (removed, never there, another merchant's) are simply absent from the
 * result: that absence is the answer "not in this store". No ids, no request.
 */
export async function fetchProductsByIds(client: CatalogClient, ids: Iterable<number>, { store }: StoreOption = {}): Promise<Product[]> {
  const unique = [...new Set(ids)];
  const products: Product[] = [];
  for (let start = 0; start < unique.length; start += MAX_IDS_PER_REQUEST) {
    const batch = unique.slice(start, start + MAX_IDS_PER_REQUEST);
    const page = await unwrap(
      client.GET('/v1/products', {
        params: { query: { store, ids: batch } },
        // IdsParam is `style: form, explode: false`: ids=1,2,3 rather than ids=1&ids=2&ids=3.
        querySerializer: { array: { style: 'form', explode: false } },
      }),
    );
    products.push(...page.data.map(whole));
    // Every batch reads the store the first one was resolved for, as iterateProducts does.
    store = page.store;
  }
  return products;
}

/** Exact SKUs or EANs to look products up by (one of the two). */
export type ProductKeys = { sku: Iterable<string> } | { ean: Iterable<string> };

/**
 * The store's products whose `sku` (or `ean`) is one of the values, exactly: every product that
 * carries one (EANs, and SKUs built from them, repeat), in id order within each batch of at most
 * 200 values (one `GET /v1/products?sku=` or `?ean=` request per batch; duplicates are sent once).
 * A value no product carries is simply absent: compare each product's `sku` or `ean` with yours. A
 * batch whose values match more than 200 products throws CatalogApiError `invalid_parameter`. A
 * SKU containing a comma cannot be looked up (the comma separates values). No values, no request.
 */
export async function fetchProductsByKeys(client: CatalogClient, keys: ProductKeys, { store }: StoreOption = {}): Promise<Product[]> {
  const field = 'sku' in keys ? 'sku' : 'ean';
  const unique = [...new Set('sku' in keys ? keys.sku : keys.ean)];
  const products: Product[] = [];
  for (let start = 0; start < unique.length; start += MAX_KEYS_PER_REQUEST) {
    const batch = unique.slice(start, start + MAX_KEYS_PER_REQUEST);
    const page = await unwrap(
      client.GET('/v1/products', {
        params: { query: { store, [field]: batch } },
        // SkuParam and EanParam are `style: form, explode: false`, as IdsParam.
        querySerializer: { array: { style: 'form', explode: false } },
      }),
    );
    products.push(...page.data.map(whole));
    store = page.store;
  }
  return products;
}
