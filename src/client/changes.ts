// The change feed (spec 4.4) as an async iterator over its windows, and a local replica of a store
// kept by it: the "Initial sync, and resync after 410" recipe of `GET /v1/changes`, started from a
// snapshot export and its exact cursor (export.ts).
import { CatalogApiError, unwrap } from './errors.js';
import { exportStore } from './export.js';
import type { CatalogClient, ChangeEntry, Product } from './types.js';
import { fetchProductsByIds, type StoreOption } from './reads.js';
import { wholeSecondIso } from '../shared/time.js';

/** A position in a store's change feed. Send both halves back together, unchanged (spec 4.4, cursor rule 1). */
export interface ChangeCursor {
  /** The previous response's `next_since`; sent as `since`. */
  since: string;
  /** The previous response's `next_id`; sent as `since_id`. */
  since_id: number;
}

/** One non-empty window of the feed, and the cursor to continue from once it is handled. */
export interface ChangeWindow {
  /** Slug of the store the window was read for. */
  store: string;
  /** The latest change per product in the window, oldest first; never empty. */
  changes: ChangeEntry[];
  /** The cursor after this window: persist it once the window's changes are applied. */
  cursor: ChangeCursor;
}

export interface PollChangesOptions extends StoreOption {
  /** Where to resume; omitted, the feed starts at the beginning of the retained history (cursor rule 3). */
  cursor?: ChangeCursor;
  /** Keep following the feed when caught up instead of ending. Default false. */
  follow?: boolean;
  /**
   * With `follow`, each poll asks the server to wait up to this many seconds for a change when
   * none follows the cursor (`wait`, a long-poll: the server answers as soon as a change is
   * recorded, and caps the wait, at 30 s by default). Default 30. `0` polls every
   * `pollIntervalMs` instead.
   */
  waitSeconds?: number;
  /** With `follow` and `waitSeconds: 0`, the wait between polls once caught up. Default 10 000 ms. */
  pollIntervalMs?: number;
  /** Aborting rejects the pending request or wait, and so the iteration, with the signal's reason. */
  signal?: AbortSignal;
}

/** A long-poll that came back empty sooner than this (a server shutting down, a proxy) is not repeated at once. */
const MIN_EMPTY_LONG_POLL_MS = 1000;

/**
 * The windows of a store's change feed after a cursor, each once, in order. Yields only non-empty
 * windows, each with the cursor after it; polls again right away while windows are non-empty and,
 * once a window comes back empty (caught up), ends, returning the caught-up cursor, or with
 * `follow` goes on: each poll then waits on the server for the next change (`wait`, a long-poll),
 * so a window is yielded as soon as it is recorded. Windows rather than single entries because the
 * cursor advances a window at a time: persist `window.cursor` after applying a window, and a restart
 * resumes exactly after it. The store is the one the first response names, for every later poll.
 * Throws CatalogApiError on an error response: 410 `cursor_expired` means resync (see syncStore).
 */
export async function* pollChanges(
  client: CatalogClient,
  { store, cursor, follow = false, waitSeconds = 30, pollIntervalMs = 10_000, signal }: PollChangesOptions = {},
): AsyncGenerator<ChangeWindow, ChangeCursor, undefined> {
  // The server answers at once while changes follow the cursor, so every poll of a follower may ask it to wait.
  const wait = follow && waitSeconds > 0 ? waitSeconds : undefined;
  for (;;) {
    signal?.throwIfAborted();
    const started = Date.now();
    const page = await unwrap(
      client.GET('/v1/changes', {
        params: { query: { store, since: cursor?.since, since_id: cursor?.since_id, wait } },
        signal,
      }),
    );
    store = page.store;
    cursor = { since: page.next_since, since_id: page.next_id };
    if (page.changes.length > 0) {
      // cursor rule 4: while `changes` is not empty, more may follow: poll again right away.
      yield { store: page.store, changes: page.changes, cursor };
    } else if (!follow) {
      return cursor;
    } else if (wait === undefined) {
      await sleep(pollIntervalMs, signal);
    } else {
      const early = MIN_EMPTY_LONG_POLL_MS - (Date.now() - started);
      if (early > 0) await sleep(early, signal);
    }
  }
}

/**
 * The starting cursor a response's `Date` header names (`GET /v1/changes`, "Initial sync" by
 * paging, with a margin): that second in RFC 3339 with `since_id` 0. Undefined when the header is
 * missing or unreadable. syncStore needs none: an export carries its exact cursor.
 */
export function cursorFromDateHeader(date: string | null | undefined): ChangeCursor | undefined {
  const ms = date ? Date.parse(date) : Number.NaN;
  if (Number.isNaN(ms)) return undefined;
  return { since: wholeSecondIso(ms), since_id: 0 };
}

/** The local copy of one store's catalog that syncStore keeps, implemented by the caller (one per store). */
export interface StoreReplica {
  /** Stores the product as given, replacing any earlier copy with the same `id`. */
  upsert(product: Product): void | Promise<void>;
  /** Forgets the product; an id the replica does not hold is a no-op. */
  remove(id: number): void | Promise<void>;
  /** The ids the replica holds: a full sync removes those the store no longer has. */
  ids(): Iterable<number> | AsyncIterable<number>;
}

/** A StoreReplica over a Map from product id to product, for tests and small stores. */
export interface MapReplica extends StoreReplica {
  readonly products: Map<number, Product>;
}

export function mapReplica(products = new Map<number, Product>()): MapReplica {
  return {
    products,
    upsert: (product) => void products.set(product.id, product),
    remove: (id) => void products.delete(id),
    ids: () => [...products.keys()],
  };
}

export interface SyncStoreOptions extends StoreOption {
  replica: StoreReplica;
  /** The cursor the previous syncStore returned; omitted, the store is read in full first. */
  cursor?: ChangeCursor;
}

/**
 * Brings `replica` up to date with a store and returns the cursor to persist for the next call.
 *
 * With a cursor, applies the feed from it. Without one, syncs in full: exports the store
 * (`GET /v1/products/export`: every product from one consistent snapshot, upserting each as it
 * arrives, then removing what the store no longer has) and applies the feed from the cursor of
 * that snapshot, which holds exactly the changes made since: no time margin, nothing applied
 * twice. A 410 `cursor_expired` (the cursor is older than the retained history) is answered by
 * the same full sync. Applying the feed: per window, `removed` products are removed, the others
 * fetched by `ids` in batches of 200, upserted when found and removed when absent (absent means
 * outside the catalog). Every step is idempotent, so a call interrupted by an error (an export
 * cut short throws IncompleteExportError and removes nothing) can be repeated with the previous
 * cursor.
 *
 * `store` omitted means the default store at the time of the call; pass the slug to keep a
 * replica of one particular store.
 */
export async function syncStore(client: CatalogClient, { store, replica, cursor }: SyncStoreOptions): Promise<ChangeCursor> {
  if (cursor) {
    try {
      return await applyChanges(client, replica, store, cursor);
    } catch (error) {
      if (!(error instanceof CatalogApiError && error.problem.code === 'cursor_expired')) throw error;
    }
  }
  return fullSync(client, replica, store);
}

async function fullSync(client: CatalogClient, replica: StoreReplica, store: string | undefined): Promise<ChangeCursor> {
  // (1) The whole store from one snapshot; what the replica holds beyond it has left the catalog.
  const seen = new Set<number>();
  const products = exportStore(client, { store });
  let next = await products.next();
  for (; !next.done; next = await products.next()) {
    await replica.upsert(next.value);
    seen.add(next.value.id);
  }
  const snapshot = next.value;
  const gone: number[] = [];
  for await (const id of replica.ids()) if (!seen.has(id)) gone.push(id);
  for (const id of gone) await replica.remove(id);

  // (2) What changed since the snapshot, on the store it read (the default store, pinned). A 410 here is not retried.
  return applyChanges(client, replica, snapshot.store, snapshot.cursor);
}

async function applyChanges(
  client: CatalogClient,
  replica: StoreReplica,
  store: string | undefined,
  cursor: ChangeCursor,
): Promise<ChangeCursor> {
  for await (const window of pollChanges(client, { store, cursor })) {
    const removed = window.changes.filter((c) => c.change_type === 'removed').map((c) => c.product_id);
    const changed = window.changes.filter((c) => c.change_type !== 'removed').map((c) => c.product_id);
    const products = await fetchProductsByIds(client, changed, { store: window.store });
    const found = new Set(products.map((p) => p.id));
    for (const product of products) await replica.upsert(product);
    for (const id of [...removed, ...changed.filter((id) => !found.has(id))]) await replica.remove(id);
    cursor = window.cursor;
  }
  return cursor;
}

/** Resolves after `ms`, or rejects with the signal's reason once it aborts. */
export function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- the abort's reason, as fetch rejects with it (an AbortError unless the caller gave one)
      reject(signal!.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
