// A window of a store's feed as one statement reads it on either engine (ChangeStore.changeWindowOfStore):
// the store's row, its horizon, and the window's changes aggregated into one JSON array of
// [id, product_id, change_type, created_at], so the store and the horizon are not repeated per change.
import type { ChangeType, StoredChange } from '../../changes/model.js';
import type { StoreChangeWindow } from '../port.js';
import { toStore, type Row } from '../rows.js';

/** The window read by the statement: `changes` as the engine returns it (PostgreSQL parses json, SQLite gives its text). */
export function toStoreChangeWindow(row: Row | undefined, changes: unknown): StoreChangeWindow {
  if (!row) return { store: undefined, horizon: undefined, changes: [] };
  const entries = (typeof changes === 'string' ? JSON.parse(changes) : (changes ?? [])) as [number, number, ChangeType, string][];
  return {
    store: toStore(row),
    horizon: row.horizon_at === null ? undefined : { at: row.horizon_at as string, id: Number(row.horizon_id) },
    changes: entries.map(([id, product_id, change_type, created_at]): StoredChange => ({ id, product_id, change_type, created_at })),
  };
}
