// The published typed client (spec 4.1-4.4, 5): openapi-fetch typed on the public document, an auth
// middleware, and small helpers over it (reads.ts: stores and products; changes.ts: the change feed
// and a replica kept by it). Imports only types from the generated document and the openapi-fetch
// runtime, never server code.
import createClient, { type Client, type Middleware } from 'openapi-fetch';
import type { components, paths, webhooks } from '../generated/public-api.js';

export { CatalogApiError, unwrap, type FetchResult, type Problem } from './errors.js';
export {
  MAX_IDS_PER_REQUEST, fetchProductsByIds, getProduct, iterateProducts, listProducts, listStores, type StoreOption,
} from './reads.js';
export {
  cursorFromDateHeader, mapReplica, pollChanges, syncStore,
  type ChangeCursor, type ChangeWindow, type MapReplica, type PollChangesOptions, type StoreReplica, type SyncStoreOptions,
} from './changes.js';
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
