// The admin client for merchants' systems (docs/admin-client.md), one entry point that only
// re-exports: admin-client.ts (openapi-fetch typed on the admin document; authentication, the
// declared media types, an Idempotency-Key per write, waiting out 429 and 503 with Retry-After),
// admin-imports.ts (an NDJSON import from a list of operations), the error type the read client
// throws too (errors.ts), and admin-types.ts. Imports only types from the generated admin
// document, its generated route facts (data), and the openapi-fetch runtime, never server code.
export { createAdminClient, idempotencyKeys, retryingOn429Or503, type AdminClientOptions } from './admin-client.js';
export { importProducts, toNdjson } from './admin-imports.js';
export { CatalogApiError, unwrap, type FetchResult, type Problem } from './errors.js';
export type { RetryAfterOptions } from './retry-after.js';
export type {
  AdminClient,
  AdminComponents,
  AdminDocumentPaths,
  AdminMediaType,
  AdminPaths,
  AdminStore,
  CreatedWebhookEndpoint,
  Delivery,
  ImportJob,
  ImportOperation,
  ImportResult,
  MergePatch,
  ProductSource,
  ProductSourceInput,
  WebhookEndpoint,
} from './admin-types.js';
