// The published typed client (spec 4.1-4.4, 5), one entry point that only re-exports:
// catalog-client.ts (openapi-fetch typed on the public document, an auth middleware, waiting out
// rate limits: 429 + Retry-After), small helpers over it (reads.ts: stores and products;
// export.ts: a store's snapshot export; changes.ts: the change feed and a replica kept by it;
// change-stream.ts: the feed as a stream read with fetch, for browsers),
// errors.ts, and types.ts (the document's types every module shares, so that none imports this
// one). Imports only types from the generated document, the openapi-fetch runtime and the
// runtime-neutral src/shared/time.ts, never server code.
export {
  bearerAuth,
  createCatalogClient,
  retryingOn429,
  type CatalogClientOptions,
  type RateLimitRetryOptions,
} from './catalog-client.js';
export { CatalogApiError, unwrap, type FetchResult, type Problem } from './errors.js';
export {
  MAX_IDS_PER_REQUEST,
  MAX_KEYS_PER_REQUEST,
  fetchProductsByIds,
  fetchProductsByKeys,
  getProduct,
  iterateProducts,
  listProducts,
  listStores,
  type ProductKeys,
  type StoreOption,
} from './reads.js';
export { IncompleteExportError, exportStore, type ExportStoreOptions, type StoreSnapshot } from './export.js';
export {
  cursorFromDateHeader,
  mapReplica,
  pollChanges,
  syncStore,
  type ChangeCursor,
  type ChangeWindow,
  type MapReplica,
  type PollChangesOptions,
  type StoreReplica,
  type SyncStoreOptions,
} from './changes.js';
export { streamChanges, type StreamChangesOptions } from './change-stream.js';
export type {
  Attribute,
  CatalogClient,
  ChangeEntry,
  ChangePage,
  ChangeType,
  ExclusionReason,
  PaginationMeta,
  PriceEntry,
  Product,
  ProductPage,
  Store,
  WebhookPayload,
  components,
  paths,
  webhooks,
} from './types.js';
