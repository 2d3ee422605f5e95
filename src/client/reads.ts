// The read endpoints (spec 4.1-4.3) as small functions over the openapi-fetch client.
import { unwrap } from './errors.js';
import type { CatalogClient, Product, ProductPage, Store } from './index.js';

export interface StoreOption {
  /** Store slug; omitted means the merchant's default store. */
  store?: string;
}

/** The most ids one `GET /v1/products?ids=` request accepts (IdsParam `maxItems`). */
export const MAX_IDS_PER_REQUEST = 200;

/** The merchant's active stores, default store first (spec 4.3). */
export async function listStores(client: CatalogClient): Promise<Store[]> {
  return (await unwrap(client.GET('/v1/stores'))).data;
}

/** One product resolved for a store (spec 4.2); a product not in the catalog throws CatalogApiError `not_found`. */
export async function getProduct(client: CatalogClient, id: number, { store }: StoreOption = {}): Promise<Product> {
  return (await unwrap(client.GET('/v1/products/{id}', { params: { path: { id }, query: { store } } }))).data;
}

/** One page of a store's products, ordered by id (spec 4.1). */
export async function listProducts(
  client: CatalogClient, { store, page, perPage }: StoreOption & { page?: number; perPage?: number } = {},
): Promise<ProductPage> {
  return unwrap(client.GET('/v1/products', { params: { query: { store, page, per_page: perPage } } }));
}

/**
 * Every product of a store, in id order. Follows the paging rule of spec 4.1: request page = 1, 2,
 * 3, ... until `meta.current_page` equals `meta.last_page` (at least 1, so an empty store ends after
 * one request). Throws CatalogApiError on an error response.
 */
export async function* iterateProducts(
  client: CatalogClient, { store, perPage = 200 }: StoreOption & { perPage?: number } = {},
): AsyncGenerator<Product, void, undefined> {
  for (let page = 1; ; page++) {
    const result = await listProducts(client, { store, page, perPage });
    yield* result.data;
    // `>=` rather than `===`: if products are deleted while paging, last_page can drop below the
    // page just read, and the loop must still end.
    if (result.meta.current_page >= result.meta.last_page) return;
    // Stay on the store page 1 was read from, even if the merchant's default store changes meanwhile.
    store = result.store;
  }
}

/**
 * The listed products of a store that are in its catalog, in id order within each batch of at
 * most 200 ids (one `GET /v1/products?ids=` request per batch; duplicates are sent once). Ids
 * outside the catalog (removed, never there, another merchant's) are simply absent from the
 * result: that absence is the answer "not in this store". No ids, no request.
 */
export async function fetchProductsByIds(
  client: CatalogClient, ids: Iterable<number>, { store }: StoreOption = {},
): Promise<Product[]> {
  const unique = [...new Set(ids)];
  const products: Product[] = [];
  for (let start = 0; start < unique.length; start += MAX_IDS_PER_REQUEST) {
    const batch = unique.slice(start, start + MAX_IDS_PER_REQUEST);
    const page = await unwrap(client.GET('/v1/products', {
      params: { query: { store, ids: batch } },
      // IdsParam is `style: form, explode: false`: ids=1,2,3 rather than ids=1&ids=2&ids=3.
      querySerializer: { array: { style: 'form', explode: false } },
    }));
    products.push(...page.data);
    // Every batch reads the store the first one was resolved for, as iterateProducts does.
    store = page.store;
  }
  return products;
}
