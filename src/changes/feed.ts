// The change feed (spec 4.4): the latest change per product in a window after an exact two-part
// cursor. Positions are (created_at, id); the storage hands them out per merchant in commit order,
// timestamps never going back (ChangeStore.recordChanges), so positions grow with the id and a
// cursor resumes exactly where the previous window ended, whatever one second holds.
import type { StoreRecord } from '../catalog/model.js';
import { storeNotFound } from '../catalog/reads.js';
import { scopeToMerchant } from '../storage/merchant-scope.js';
import type { components } from '../generated/public-api.js';
import { ProblemError, invalidInput } from '../shared/problem.js';
import { wholeSecondIso } from '../shared/time.js';
import type { CatalogStorage, StorageOperations } from '../storage/port.js';
import type { FeedPosition, StoredChange } from './model.js';

export type ChangeEntry = components['schemas']['ChangeEntry'];
export type ChangePage = components['schemas']['ChangePage'];
export type { FeedPosition };

/** A window of the feed: the ChangePage the public API answers, but for the store it names. */
export type ChangeWindow = Omit<components['schemas']['ChangePage'], 'store'>;

/** The position before every change: where a feed with nothing deleted starts. */
export const FEED_START: FeedPosition = { at: '1970-01-01T00:00:00Z', id: 0 };

const before = (a: FeedPosition, b: FeedPosition) => a.at < b.at || (a.at === b.at && a.id < b.id);

/** The first and last whole seconds a position can carry: RFC 3339 has four-digit years. */
const FIRST_SECOND = Date.parse('0000-01-01T00:00:00Z');
const LAST_SECOND = Date.parse('9999-12-31T23:59:59Z');

/**
 * The position a client's cursor names. `since` is any RFC 3339 instant; changes carry whole
 * seconds, so a fractional `since` means "from the next whole second on" (cursor rule 2 holds for
 * every cursor the feed itself hands out, which are whole seconds). A `since` outside the seconds a
 * change can carry is refused (400): past 9999-12-31T23:59:59Z the next whole second is in year
 * 10000, which would compare before every position and rewind the feed.
 */
export function cursorPosition(since: string, sinceId: number): FeedPosition {
  const ms = Date.parse(since);
  const second = Math.floor(ms / 1000) * 1000;
  // Date.parse keeps milliseconds only: 09:26:53.0001Z is still an instant after 09:26:53.
  const fraction = /^[^.]*\.([0-9]+)/.exec(since)?.[1] ?? '';
  const fractional = ms !== second || /[1-9]/.test(fraction);
  const start = fractional ? second + 1000 : second;
  if (!(second >= FIRST_SECOND && start <= LAST_SECOND)) {
    throw invalidInput('query', [
      { name: 'since', in: 'query', reason: 'must be an instant from 0000-01-01T00:00:00Z to 9999-12-31T23:59:59Z' },
    ]);
  }
  return fractional ? { at: wholeSecondIso(start), id: 0 } : { at: wholeSecondIso(second), id: sinceId };
}

/** spec 4.4: a window of the feed of the merchant's store named by slug (the default store when omitted). */
export async function readChangeFeed(
  storage: CatalogStorage,
  merchantId: number,
  slug: string | undefined,
  cursor: { since?: string; sinceId?: number },
  window: number,
): Promise<ChangePage> {
  return (await readStoreChangeFeed(storage, merchantId, slug, cursor, window)).page;
}

/** readChangeFeed, with the store it read (the live feed waits on it: changes/live.ts). */
export async function readStoreChangeFeed(
  storage: CatalogStorage,
  merchantId: number,
  slug: string | undefined,
  cursor: { since?: string; sinceId?: number },
  window: number,
): Promise<{ store: StoreRecord; page: ChangePage }> {
  const asked = cursor.since === undefined ? undefined : cursorPosition(cursor.since, cursor.sinceId ?? 0);
  // One statement: the store, its horizon and the window on one snapshot, so pruning committed by
  // another process cannot fall between the horizon and the window (a cursor it just expired would
  // skip the deleted changes without a 410), and no transaction's BEGIN and COMMIT round trips.
  const read = await scopeToMerchant(storage, merchantId).changeWindowOfStore(slug, asked, window);
  if (!read.store?.active) throw storeNotFound(slug);
  // cursor rule 3: the first poll starts at the beginning of the retained history.
  const from = asked ?? read.horizon ?? FEED_START;
  refuseExpired(from, read.horizon);
  const page = { ...windowOf(from, read.changes, latestPerProduct(read.changes)), store: read.store.slug };
  return { store: read.store, page };
}

/**
 * The window after a position (410 when retention deleted changes after it), in the caller's
 * snapshot; whether it is full (it covers `window` changes: more may follow); and the id of each
 * entry's position (its created_at is the other half), so a later reader can take the part of the
 * window after its own cursor (changes/catch-up-reads.ts).
 */
export async function readWindowAfter(
  reader: StorageOperations,
  store: StoreRecord,
  from: FeedPosition,
  window: number,
): Promise<{ window: ChangeWindow; full: boolean; ids: number[] }> {
  refuseExpired(from, await reader.changeHorizon(store.id));
  const rows = await reader.changesAfter(store.id, from, window);
  const kept = latestPerProduct(rows);
  return { window: windowOf(from, rows, kept), full: rows.length >= window, ids: kept.map((row) => row.id) };
}

/** 410 when retention deleted changes after the position: the client must resync rather than skip them. */
function refuseExpired(from: FeedPosition, horizon: FeedPosition | undefined): void {
  if (horizon && before(from, horizon)) {
    throw new ProblemError(
      'cursor_expired',
      'Changes after this cursor were deleted by retention. Resync the store from /v1/products, then poll with a new cursor.',
    );
  }
}

/** spec 6 rule 3: only the latest change per product in the window, in position order. */
function latestPerProduct(rows: StoredChange[]): StoredChange[] {
  const latest = new Map<number, StoredChange>();
  for (const row of rows) {
    latest.delete(row.product_id);
    latest.set(row.product_id, row);
  }
  return [...latest.values()];
}

/** The window after `from` that covers `rows` (its next cursor is the last row's position, or `from`), answering `kept`. */
function windowOf(from: FeedPosition, rows: StoredChange[], kept: StoredChange[]): ChangeWindow {
  const last = rows[rows.length - 1];
  return {
    changes: kept.map((row) => ({ product_id: row.product_id, change_type: row.change_type, created_at: row.created_at })),
    next_since: last ? last.created_at : from.at,
    next_id: last ? last.id : from.id,
  };
}
