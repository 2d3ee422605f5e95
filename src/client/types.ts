// The client's names for the public document's types (spec 4.1-4.5): what every helper module
// shares, so that none of them imports index.ts. Types only, from the generated document.
import type { Client } from 'openapi-fetch';
import type { components, paths } from '../generated/public-api.js';

export type { components, paths, webhooks } from '../generated/public-api.js';

type Schemas = components['schemas'];
export type Product = Schemas['Product'];
/** A Product cut down by `fields=`: `id` and the members asked for. */
export type SparseProduct = Schemas['SparseProduct'];
export type Store = Schemas['Store'];
export type PriceEntry = Schemas['PriceEntry'];
export type Attribute = Schemas['Attribute'];
export type ExclusionReason = Schemas['ExclusionReason'];
export type ProductPage = Schemas['ProductPage'];
export type PaginationMeta = Schemas['PaginationMeta'];
export type ChangeType = Schemas['ChangeType'];
export type ChangeEntry = Schemas['ChangeEntry'];
export type ChangePage = Schemas['ChangePage'];
/** Body of a webhook delivery, discriminated on `event` (the document's `webhooks:` section). */
export type { WebhookPayload } from '../generated/public-webhooks.js';

/**
 * The media types the client reads: JSON answers and problem details. (`GET /v1/changes` can also
 * answer a text/event-stream; the client long-polls it instead: pollChanges.)
 */
export type ClientMediaType = 'application/json' | 'application/problem+json';

/** The openapi-fetch client typed on the public document, as createCatalogClient returns it. */
export type CatalogClient = Client<paths, ClientMediaType>;
