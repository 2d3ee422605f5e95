// The published typed client (spec 4.1-4.4, 5): openapi-fetch typed on the public document, an auth
// middleware, and small helpers over it. Imports only types from the generated document and the
// openapi-fetch runtime, never server code.
import createClient, { type Client, type Middleware } from 'openapi-fetch';
import type { components, paths, webhooks } from '../generated/public-api.js';
import { unwrap } from './errors.js';

export { CatalogApiError, unwrap, type FetchResult, type Problem } from './errors.js';
export type { components, paths, webhooks } from '../generated/public-api.js';

type Schemas = components['schemas'];
export type Product = Schemas['Product'];
export type Store = Schemas['Store'];
export type PriceEntry = Schemas['PriceEntry'];
export type Attribute = Schemas['Attribute'];
export type ExclusionReason = Schemas['ExclusionReason'];
export type ProductPage = Schemas['ProductPage'];
export type PaginationMeta = Schemas['PaginationMeta'];
export type ChangeType = Schemas['ChangeType'];
export type ChangeEntry = Schemas['ChangeEntry'];
export type ChangePage = Schemas['ChangePage'];
/** Body of a webhook delivery, discriminated on `event` (`price`, `content` or `removed`). */
export type WebhookPayload = {
  [Event in keyof webhooks]: webhooks[Event]['post']['requestBody']['content']['application/json'];
}[keyof webhooks];

export type CatalogClient = Client<paths>;

export interface CatalogClientOptions {
  /** Scheme, host and port of the deployment, for example `https://catalog.example.com` (paths carry `/v1`). */
  baseUrl: string;
  apiKey: string;
  /** A fetch to send requests with (tests, proxies, retries); defaults to the global fetch. */
  fetch?: (request: Request) => Promise<Response>;
}

/** An openapi-fetch client for the public API that authenticates every request with the API key. */
export function createCatalogClient({ baseUrl, apiKey, fetch }: CatalogClientOptions): CatalogClient {
  const client = createClient<paths>({ baseUrl, fetch });
  client.use(bearerAuth(apiKey));
  return client;
}

/** spec 5, rule 1: every request carries `Authorization: Bearer <API_KEY>`. */
export function bearerAuth(apiKey: string): Middleware {
  return {
    onRequest({ request }) {
      request.headers.set('Authorization', `Bearer ${apiKey}`);
      return request;
    },
  };
}

export interface StoreOption {
  /** Store slug; omitted means the merchant's default store. */
  store?: string;
}

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
