// The windows the live feed reads (changes/live.ts), shared by every client of a store: streams
// catching up, and the looks that answer clients waiting at the head.
//
// A read in flight is shared by every client that asks for the same (store, cursor) meanwhile. Every
// window read is also kept, in a small LRU: positions are handed out in commit order and never go
// back (ChangeStore.recordChanges on both engines), so once a snapshot has seen the changes up to a
// window's end, no later commit can add one inside it. A window is therefore a final range of the
// store's feed, (from, to], and serves any later reader whose cursor falls inside it:
// - a reader at its start gets the window itself (the same object, so http/live-feed.ts makes its
//   JSON and event bytes once for every stream);
// - a reader inside it gets the part after its own cursor, ending at the window's end. That is a
//   shorter window than a poll would answer at that moment (spec 4.4 sets only the most), with the
//   same exact cursor; from there it reads the windows every other stream reads. Streams that fell
//   behind at different moments (a client slower than the others, a commit between two reads) meet
//   again at the next window's end instead of each reading its own sequence of windows.
// A window that was not full (it ended at the store's head when read) does not say whether more
// came since: `full` is false, so the reader looks at the storage after it, as after any window
// that was not full. (Retention may delete a kept window's changes later; a client served it from
// here still gets every change it covers, so it skips nothing, which is what a 410 guards against.)
// Errors (410 cursor_expired) are never kept.
import type { StoreRecord } from '../catalog/model.js';
import type { CatalogStorage } from '../storage/port.js';
import { readWindowAfter, type ChangePage } from './feed.js';
import type { FeedPosition } from './model.js';
import { FairTurns } from '../shared/fair-turns.js';

/** The window after a cursor, as a stream sends it, and whether it covers a whole window (more may follow). */
export interface CatchUpWindow {
  page: ChangePage;
  full: boolean;
  /** The live feed's wake-ups heard before the read's snapshot: a client that waits after it waits with it, missing no commit. */
  heard: number;
}

/** A window read from the storage, kept with its range and the id of each entry's position. */
interface KeptWindow extends CatchUpWindow {
  storeId: number;
  from: FeedPosition;
  ids: number[];
}

const after = (at: string, id: number, position: FeedPosition) => at > position.at || (at === position.at && id > position.id);
const within = (kept: KeptWindow, position: FeedPosition) =>
  !after(kept.from.at, kept.from.id, position) && after(kept.page.next_since, kept.page.next_id, position);

export class CatchUpReads {
  private readonly inFlight = new Map<string, Promise<CatchUpWindow>>();
  /** Windows kept, least recently used first (a Map keeps insertion order), by (store, start). */
  private readonly kept = new Map<string, KeptWindow>();
  /** Windows read from the storage so far (each one snapshot); tests and the bench read it. */
  reads = 0;
  /** Windows answered from a kept one, whole or the part after a cursor inside it. */
  served = 0;

  constructor(
    private readonly storage: CatalogStorage,
    private readonly feedWindow: number,
    /** Windows kept at most (CPS_FEED_WINDOW_CACHE; 0: only reads in flight are shared). */
    private readonly capacity: number,
    /** The live feed's count of wake-ups heard (LiveFeed.listen). */
    private readonly listen: () => number,
    /** The turns every read of the live feed takes (one at a time, merchants in turn). */
    private readonly turns = new FairTurns(),
  ) {}

  /** The window of the store after `from`: from a kept window, in flight, or read now (one snapshot). */
  read(store: StoreRecord, from: FeedPosition): Promise<CatchUpWindow> {
    const kept = this.keptAround(store.id, from);
    if (kept) {
      this.served++;
      return Promise.resolve(kept);
    }
    const key = `${store.id}/${from.at}/${from.id}`;
    let reading = this.inFlight.get(key);
    if (!reading) {
      reading = this.readNow(store, from, key);
      this.inFlight.set(key, reading);
    }
    return reading;
  }

  /** A kept window of the store whose range holds `from`: itself when it starts there, else the part after `from`. */
  private keptAround(storeId: number, from: FeedPosition): CatchUpWindow | undefined {
    for (const [key, kept] of this.kept) {
      if (kept.storeId !== storeId || !within(kept, from)) continue;
      this.kept.delete(key);
      this.kept.set(key, kept);
      if (kept.from.at === from.at && kept.from.id === from.id) return kept;
      const { changes } = kept.page;
      return {
        page: { ...kept.page, changes: changes.filter((change, i) => after(change.created_at, kept.ids[i]!, from)) },
        full: kept.full,
        heard: kept.heard,
      };
    }
    return undefined;
  }

  /** Keeps a window read, dropping the kept windows of its store it covers (windows read before at its head), then the least recently used past capacity. */
  private keep(key: string, window: KeptWindow): void {
    const { next_since: toAt, next_id: toId } = window.page;
    for (const [other, kept] of this.kept) {
      const inside =
        kept.storeId === window.storeId &&
        !after(window.from.at, window.from.id, kept.from) &&
        !after(kept.page.next_since, kept.page.next_id, { at: toAt, id: toId });
      if (inside) this.kept.delete(other);
    }
    this.kept.set(key, window);
    if (this.kept.size > this.capacity) this.kept.delete(this.kept.keys().next().value!);
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
      // An empty window covers no range: nothing to keep.
      if (this.capacity > 0 && read.window.changes.length > 0) this.keep(key, { ...found, storeId: store.id, from, ids: read.ids });
      return found;
    } finally {
      this.inFlight.delete(key);
    }
  }
}
