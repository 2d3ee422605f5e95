// The snapshot export of a store (GET /v1/products/export) as an async iterator over its products,
// returning the feed cursor of the snapshot from its trailer line: the exact start of a replica
// (syncStore) with no time margin.
import { CatalogApiError } from './errors.js';
import type { ChangeCursor } from './changes.js';
import type { CatalogClient, Product } from './types.js';
import type { StoreOption } from './reads.js';

/** What the trailer line of an export says: the store read, how many products, and the cursor of the snapshot. */
export interface StoreSnapshot {
  /** Slug of the store that was exported (the default store when none was given). */
  store: string;
  /** Products the export held. */
  count: number;
  /** The feed cursor of the snapshot: poll `GET /v1/changes` from it for every later change, and none the export shows. */
  cursor: ChangeCursor;
}

/** The export ended without its trailer line (the connection broke), or did not hold what its trailer says: export again. */
export class IncompleteExportError extends Error {
  override readonly name = 'IncompleteExportError';
}

export interface ExportStoreOptions extends StoreOption {
  /** Aborting cancels the request and the iteration with the signal's reason. */
  signal?: AbortSignal;
}

type Trailer = { store: string; count: number; next_since: string; next_id: number };

/**
 * Every product of a store from one consistent snapshot, in id order, as the response streams
 * them; returns the snapshot's store and feed cursor (its trailer line) once the last product was
 * taken. Throws CatalogApiError on an error response, IncompleteExportError when the response ends
 * without its trailer (nothing said by it may be taken as the whole store then).
 *
 * ```ts
 * const products = exportStore(client, { store: 'de' });
 * for (let next = await products.next(); ; next = await products.next()) {
 *   if (next.done) { saveCursor(next.value.cursor); break; }
 *   await upsertLocally(next.value);
 * }
 * ```
 */
export async function* exportStore(
  client: CatalogClient,
  { store, signal }: ExportStoreOptions = {},
): AsyncGenerator<Product, StoreSnapshot, undefined> {
  const { data, error, response } = await client.GET('/v1/products/export', { params: { query: { store } }, parseAs: 'stream', signal });
  if (!response.ok) throw CatalogApiError.from(response, error);
  if (!data) throw new IncompleteExportError('The export answered without a body.');
  const reader = (data as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  let pending = '';
  let count = 0;
  let trailer: Trailer | undefined;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      pending += done ? decoder.decode() : decoder.decode(value, { stream: true });
      let start = 0;
      for (let end = pending.indexOf('\n'); end >= 0; end = pending.indexOf('\n', start)) {
        const line = pending.slice(start, end);
        start = end + 1;
        if (trailer) throw new IncompleteExportError('The export has lines after its trailer.');
        const value = JSON.parse(line) as Product | Trailer;
        // Only the trailer has a `next_id` (a Product never does).
        if ('next_id' in value) {
          trailer = value;
        } else {
          count++;
          yield value;
        }
      }
      pending = pending.slice(start);
      if (done) break;
    }
  } finally {
    // Left early (break, an error in the caller's loop): the rest of the response is not read.
    await reader.cancel().catch(() => {});
  }
  if (!trailer || pending !== '')
    throw new IncompleteExportError('The export ended without its trailer line: the connection broke. Export again.');
  if (trailer.count !== count) throw new IncompleteExportError(`The export's trailer counts ${trailer.count} products but ${count} came.`);
  return { store: trailer.store, count, cursor: { since: trailer.next_since, since_id: trailer.next_id } };
}
