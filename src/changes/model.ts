// The change feed's types (spec 2.6, 4.4): a change as detected, as recorded, and a position in a
// store's feed. Types only: storage imports these, never the other way round.
import type { components } from '../generated/public-api.js';

type PublicSchemas = components['schemas'];

export type ChangeType = PublicSchemas['ChangeType'];

/** A change detected in a write, before the engine gives it its position in the merchant's feed. */
export interface RecordedChange {
  storeId: number;
  productId: number;
  changeType: ChangeType;
}

/** A recorded change: a ChangeEntry of the feed plus its position's id (from the merchant's sequence). */
export type StoredChange = PublicSchemas['ChangeEntry'] & { id: number };

/** A position in a store's feed: a whole UTC second and a change id. */
export interface FeedPosition {
  at: string;
  id: number;
}
