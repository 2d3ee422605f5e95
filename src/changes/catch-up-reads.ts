// Catch-up reads shared by the streams of a store that are behind it (changes/live.ts): streams at
// the same cursor read the same next window, so they share one read and one window object (whose
// JSON and event bytes http/live-feed.ts then makes once for all of them).
//
// A read in flight is shared by every stream that asks for the same (store, cursor) meanwhile. A
// FULL window is also kept, in a small LRU: positions are handed out in commit order and never go
// back (ChangeStore.recordChanges on both engines), so no later commit can add a change inside a
// full window after a cursor: it is the same for every later read. (Retention may delete its changes
// later; a stream served it from here still gets every change it covers, so it skips nothing, which
// is what a 410 guards against.) A window that is not full is shared only while its read is in
// flight: a later read may see more changes. Errors (410 cursor_expired) are never kept.
import type { StoreRecord } from '../catalog/model.js';
import type { CatalogStorage } from '../storage/port.js';
import { readWindowAfter, type ChangePage } from './feed.js';
import type { FeedPosition } from './model.js';
import { FairTurns } from '../shared/fair-turns.js';

/** The window after a cursor, as a stream sends it, and whether it covers a whole window (more may follow). */
export interface CatchUpWindow {
  page: ChangePage;
  full: boolean;
  /** The live feed's wake-ups heard before the read's snapshot: a stream that joined the read later waits with it, missing no commit. */
  heard: number;
}

export class CatchUpReads {
  private readonly inFlight = new Map<string, Promise<CatchUpWindow>>();
  /** Full windows by (store, cursor), least recently used first (a Map keeps insertion order). */
  private readonly kept = new Map<string, CatchUpWindow>();
  /** Windows read from the storage so far (each one snapshot); tests and the bench read it. */
  reads = 0;

  constructor(
    private readonly storage: CatalogStorage,
    private readonly feedWindow: number,
    /** Full windows kept at most (CPS_FEED_WINDOW_CACHE; 0: only reads in flight are shared). */
    private readonly capacity: number,
    /** The live feed's count of wake-ups heard (LiveFeed.listen). */
    private readonly listen: () => number,
    /** The turns every read of the live feed takes (one at a time, merchants in turn). */
    private readonly turns = new FairTurns(),
  ) {}

  /** The window of the store after `from`: kept, in flight, or read now (one snapshot). */
  read(store: StoreRecord, from: FeedPosition): Promise<CatchUpWindow> {
    const key = `${store.id}/${from.at}/${from.id}`;
    const kept = this.kept.get(key);
    if (kept) {
      this.kept.delete(key);
      this.kept.set(key, kept);
      return Promise.resolve(kept);
    }
    let reading = this.inFlight.get(key);
    if (!reading) {
      reading = this.readNow(store, from, key);
      this.inFlight.set(key, reading);
    }
    return reading;
  }

  private async readNow(store: StoreRecord, from: FeedPosition, key: string): Promise<CatchUpWindow> {
    this.reads++;
    try {
      // One read at a time, merchants in turn: a merchant's many streams behind its store cannot
      // hold the event loop from other merchants' requests (shared/fair-turns.ts).
      const { read, heard } = await this.turns.run(store.merchant_id, async () => {
        const heard = this.listen();
        return { read: await this.storage.snapshot((reader) => readWindowAfter(reader, store, from, this.feedWindow)), heard };
      });
      const found: CatchUpWindow = { page: { ...read.window, store: store.slug }, full: read.full, heard };
      if (found.full && this.capacity > 0) {
        this.kept.set(key, found);
        if (this.kept.size > this.capacity) this.kept.delete(this.kept.keys().next().value!);
      }
      return found;
    } finally {
      this.inFlight.delete(key);
    }
  }
}
