// The admin client's names for the admin document's types. Types only, from the generated document.
import type { Client } from 'openapi-fetch';
import type { components, paths } from '../generated/admin-api.js';

export type { components as AdminComponents, paths as AdminDocumentPaths } from '../generated/admin-api.js';

type Schemas = components['schemas'];
export type ProductSource = Schemas['ProductSource'];
export type ProductSourceInput = Schemas['ProductSourceInput'];
export type ImportResult = Schemas['ImportResult'];
export type ImportJob = Schemas['ImportJob'];
export type WebhookEndpoint = Schemas['WebhookEndpoint'];
export type CreatedWebhookEndpoint = Schemas['CreatedWebhookEndpoint'];
export type Delivery = Schemas['Delivery'];
export type AdminStore = Schemas['AdminStore'];

/**
 * A JSON merge patch (RFC 7396) of a document of type T: every member optional, `null` removes
 * one, objects merge member by member, arrays are replaced whole (so they are given whole).
 */
export type MergePatch<T> = T extends readonly unknown[]
  ? T
  : T extends object
    ? { -readonly [K in keyof T]?: MergePatch<T[K]> | null }
    : T;

/** The JSON body of a path's PUT: the document its merge patch changes. */
type PutBody<Item> = Item extends { put: { requestBody: { content: { 'application/json': infer Body } } } } ? Body : never;

/**
 * The document declares the merge patches of a product, a store and a pricing rule as free-form
 * objects (what the service checks is the merged document, against the PUT schema), which types as
 * an object with no members. A path with both gets its patch typed as MergePatch of its PUT body.
 */
type WithTypedMergePatch<Item> = Item extends {
  patch: infer Operation extends { requestBody: { content: { 'application/merge-patch+json': Record<string, never> } } };
}
  ? Omit<Item, 'patch'> & {
      patch: Omit<Operation, 'requestBody'> & { requestBody: { content: { 'application/merge-patch+json': MergePatch<PutBody<Item>> } } };
    }
  : Item;

/** The admin document's paths, with the merge patches typed (see WithTypedMergePatch). */
export type AdminPaths = { [Path in keyof paths]: WithTypedMergePatch<paths[Path]> };

/** The media types the admin client reads: JSON answers and problem details. */
export type AdminMediaType = 'application/json' | 'application/problem+json';

/** The openapi-fetch client typed on the admin document, as createAdminClient returns it. */
export type AdminClient = Client<AdminPaths, AdminMediaType>;

/** One line of an NDJSON import (`importProducts`): a product source with its `ref`, or a deletion. */
export type ImportOperation =
  | { op: 'upsert_product'; product: Partial<Omit<ProductSourceInput, 'id' | 'ref'>> & { ref: string } }
  | { op: 'delete_product'; ref: string };
