// The live change feed: `GET /v1/changes` may wait for the next change instead of
// answering an empty window, as a long-poll (`wait=N`) or as a stream of windows (Server-Sent
// Events, http/live-feed.ts). Positions, windows and cursors are the feed's own (feed.ts, spec 4.4):
// a waiting client gets a window a poll could have got: after its exact cursor, at most a window of
// changes, the latest per product (a stream behind may get the part of a window other streams were
// sent, from its cursor on: catch-up-reads.ts).
//
// Wake-ups come from the commit: the storage tells which stores a commit recorded changes for
// (CatalogStorage.onChanges: this process's commits on SQLite, plus what serve's worker threads
// post; every process's on PostgreSQL, by LISTEN/NOTIFY). Waiting clients are grouped by store and
// cursor, so a wake-up costs one look per store (one window read per distinct cursor, in practice
// one: clients wait only once caught up), however many clients wait; every client of a cursor is
// answered from that one read. Every read, and every window handed to a client, takes a turn (one
// at a time, merchants in turn, the event loop free between two: shared/fair-turns.ts), so one
// merchant's hundred streams never hold the event loop from another merchant's requests. A slow fallback poll looks at every store with waiting
// clients, for writers no wake-up reaches (another process on the SQLite file, a lost NOTIFY).
import type { StoreRecord } from '../catalog/model.js';
import { ProblemError } from '../shared/problem.js';
import { Slots, type SlotHolder } from '../shared/slots.js';
import type { CatalogStorage, ChangedStores } from '../storage/port.js';
import type { FeedPosition } from './model.js';
import { CatchUpReads } from './catch-up-reads.js';
import { FairTurns } from '../shared/fair-turns.js';
import { readStoreChangeFeed, type ChangePage } from './feed.js';

export interface LiveFeedSettings {
  /** spec 4.4: recorded changes one window covers at most (CPS_FEED_WINDOW). */
  feedWindow: number;
  /** The longest a long-poll waits: `wait=N` is clamped to it (0: requests never wait). */
  maxWaitSeconds: number;
  /** A stream with nothing to send for this long sends a comment, so proxies keep it open. */
  heartbeatSeconds: number;
  /** Live connections (long-polls waiting, streams open) one API key, one merchant and this process may hold at once. */
  perKey: number;
  perMerchant: number;
  perProcess: number;
  /** Every store with waiting clients is looked at this often whatever wake-ups came. */
  pollIntervalMs: number;
  /** Full windows kept for streams catching up (CPS_FEED_WINDOW_CACHE, changes/catch-up-reads.ts); 0 keeps none. */
  windowCache?: number;
  /** How long the feed's pieces of work run back to back before the event loop turns (CPS_FEED_TURN_MS; shared/fair-turns.ts). */
  turnMs?: number;
}

/** Where a waiting client reads from, as the public API received it. */
export interface LiveRequest {
  merchantId: number;
  /** The API key: live connections are capped per key, per merchant and per process (shared/slots.ts). */
  keyId: number | string;
  /** The store's slug; the merchant's default store when omitted. */
  store?: string;
  cursor: { since?: string; sinceId?: number };
  /** Aborted when the client goes away: it stops waiting and frees its place. */
  signal?: AbortSignal;
}

/** What is logged when a look fails (the clients keep waiting; the next wake-up or poll looks again). */
export interface LiveFeedLog {
  warn(details: object, message: string): void;
}

/** A window a look found for the clients of a cursor. */
export interface LiveWindow {
  page: ChangePage;
  /** It covers a whole window of changes: more may follow, read on before waiting again. */
  full: boolean;
  /** listen()'s count before the look's snapshot: a client caught up by this window waits with it. */
  heard: number;
}

/** A wait that ended without a window (time-out, abort, shutdown): listen()'s count when it ended. */
export interface NoWindow {
  page?: undefined;
  heard: number;
}

interface Waiter {
  settle: (found: LiveWindow | undefined, error?: ProblemError) => void;
}

/** The clients waiting on one store after one position. */
interface CursorGroup {
  from: FeedPosition;
  waiters: Set<Waiter>;
}

interface WaitingStore {
  store: StoreRecord;
  groups: Map<string, CursorGroup>;
  looking: boolean;
  /** A wake-up came during the look: look again when it ends. */
  again: boolean;
}

/**
 * `Retry-After` of a live connection refused at a cap: a place frees when a stream ends or a long-poll
 * is answered, rarely within a second, and clients told 1 s came back a thousand times a second.
 */
export const LIVE_RETRY_AFTER_SECONDS = 5;

const positionKey = (position: FeedPosition) => `${position.at}/${position.id}`;

export class LiveFeed {
  private readonly waiting = new Map<number, WaitingStore>();
  /** Stores to look at on the next turn of the event loop (wake-ups of one turn share a look). */
  private readonly due = new Set<number>();
  private flushScheduled = false;
  /** Wake-ups heard so far: a client compares it before its read and once it waits. */
  private wakeups = 0;
  private unsubscribe: (() => void) | null = null;
  private pollTimer: NodeJS.Timeout | null = null;
  private readonly places: Slots;
  private isClosed = false;
  /** Looks run so far (each one snapshot of one store); tests and the bench read it. */
  looks = 0;
  /** The windows streams behind their store read, shared per (store, cursor). */
  readonly catchUp: CatchUpReads;
  /**
   * Every read of the live feed (a client's first window, a look, a catch-up read) takes a turn: one
   * at a time, merchants in turn, the event loop free between two (shared/fair-turns.ts).
   */
  private readonly turns: FairTurns;

  constructor(
    private readonly storage: CatalogStorage,
    readonly settings: LiveFeedSettings,
    private readonly log?: LiveFeedLog,
  ) {
    this.places = new Slots(settings, 'live connections to the change feed (waiting polls and streams)', LIVE_RETRY_AFTER_SECONDS);
    this.turns = new FairTurns(settings.turnMs ?? 0);
    this.catchUp = new CatchUpReads(storage, settings.feedWindow, settings.windowCache ?? 0, () => this.listen(), this.turns);
  }

  get closed(): boolean {
    return this.isClosed;
  }

  /** Live connections held now: long-polls waiting and streams open (what the caps count). */
  get connections(): number {
    return this.places.held;
  }

  /** Clients waiting now, over every store. */
  get waitingClients(): number {
    let count = 0;
    for (const entry of this.waiting.values()) for (const group of entry.groups.values()) count += group.waiters.size;
    return count;
  }

  /**
   * Changes were recorded for these stores ('any': perhaps for any store): their waiting clients
   * are looked at once, on the next turn of the event loop. Never throws (it runs after a COMMIT).
   */
  wake(stores: ChangedStores): void {
    this.wakeups++;
    if (this.waiting.size === 0) return;
    for (const id of stores === 'any' ? this.waiting.keys() : stores) if (this.waiting.has(id)) this.due.add(id);
    this.scheduleFlush();
  }

  /**
   * `GET /v1/changes?wait=N`: the window after the cursor; when it is empty, waits up to
   * `waitSeconds` (clamped to settings.maxWaitSeconds) for a change of the store and answers the
   * window then, or the empty window (the same cursor) once the time is up, the client went away or
   * the service shuts down. 429 when the key or its merchant holds its cap of live connections, 503 when the process does.
   */
  async waitForChanges(request: LiveRequest, waitSeconds: number): Promise<ChangePage> {
    const waitMs = Math.min(waitSeconds, this.settings.maxWaitSeconds) * 1000;
    // The place first: a refused client costs no read (its retries came at hundreds a second).
    const release = waitMs > 0 && !this.isClosed ? this.admit(request) : () => {};
    try {
      const { store, page, heard } = await this.firstWindow(request);
      if (page.changes.length > 0 || waitMs <= 0 || this.isClosed) return page;
      const found = await this.nextWindow(store, { at: page.next_since, id: page.next_id }, heard, waitMs, request.signal);
      // A look answers every client of a cursor at once: each answer is written in its own turn.
      return found.page ? await this.inTurn(request.merchantId, found.page) : page;
    } finally {
      release();
    }
  }

  /**
   * `GET /v1/changes` as a stream: takes a live place (429 when the key or its merchant has none left, 503 when the
   * process has none), then reads the first window (a bad cursor or store fails here, before anything is sent).
   */
  async openStream(request: LiveRequest): Promise<LiveStream> {
    // The place first: a refused client costs no read (its retries came at hundreds a second).
    const release = this.admit(request);
    try {
      const { store, page, heard } = await this.firstWindow(request);
      return new LiveStream(this, store, page, heard, release);
    } catch (error) {
      release();
      throw error;
    }
  }

  /** The client's first window, in the merchant's turn; `heard` is listen()'s count before its snapshot. */
  private firstWindow(request: LiveRequest): Promise<{ store: StoreRecord; page: ChangePage; heard: number }> {
    return this.turns.run(request.merchantId, async () => {
      const heard = this.listen();
      const read = await readStoreChangeFeed(this.storage, request.merchantId, request.store, request.cursor, this.settings.feedWindow);
      return { ...read, heard };
    });
  }

  /**
   * `value`, once it is the merchant's turn: what the caller does with it before its next await (a
   * window written to a client) runs in that turn, one client at a time, merchants in turn.
   */
  inTurn<T>(merchantId: number, value: T): Promise<T> {
    return this.turns.run(merchantId, () => Promise.resolve(value));
  }

  /** Ends every wait now (long-polls answer their empty window, streams end); later waits end at once. */
  close(): void {
    if (this.isClosed) return;
    this.isClosed = true;
    this.unsubscribe?.();
    this.unsubscribe = null;
    this.stopPolling();
    for (const entry of [...this.waiting.values()]) {
      for (const group of [...entry.groups.values()]) for (const waiter of [...group.waiters]) waiter.settle(undefined);
    }
  }

  /** Subscribes to the storage's wake-ups on first use; returns the wake-ups heard so far. */
  listen(): number {
    if (!this.unsubscribe && !this.isClosed) this.unsubscribe = this.storage.onChanges?.((stores) => this.wake(stores)) ?? (() => {});
    return this.wakeups;
  }

  /** Takes a live place for the key and its merchant; the returned function gives it back (once). */
  admit(holder: SlotHolder): () => void {
    return this.places.take(holder);
  }

  /**
   * The next non-empty window of the store after `from`, or NoWindow after `timeoutMs`, when the
   * signal aborts or the feed closes. `heard` is listen()'s count taken before the caller read the
   * (empty) window at `from`: a wake-up since then makes it look at once, so no commit between that
   * read and this wait is missed.
   */
  nextWindow(
    store: StoreRecord,
    from: FeedPosition,
    heard: number,
    timeoutMs: number,
    signal?: AbortSignal,
  ): Promise<LiveWindow | NoWindow> {
    if (this.isClosed || timeoutMs <= 0 || signal?.aborted) return Promise.resolve({ heard });
    return new Promise((resolve, reject) => {
      let entry = this.waiting.get(store.id);
      if (!entry) {
        entry = { store, groups: new Map(), looking: false, again: false };
        this.waiting.set(store.id, entry);
        this.startPolling();
      }
      const key = positionKey(from);
      let group = entry.groups.get(key);
      if (!group) {
        group = { from, waiters: new Set() };
        entry.groups.set(key, group);
      }
      const waiting = entry;
      const joined = group;
      const onAbort = () => waiter.settle(undefined);
      const timer = setTimeout(onAbort, timeoutMs);
      const waiter: Waiter = {
        settle: (found, error) => {
          if (!joined.waiters.delete(waiter)) return;
          clearTimeout(timer);
          signal?.removeEventListener('abort', onAbort);
          if (joined.waiters.size === 0 && waiting.groups.get(key) === joined) waiting.groups.delete(key);
          this.forgetIfIdle(waiting);
          if (error) reject(error);
          // Until now this client was looked at on every wake-up of its store: whoever waits next counts from here.
          else resolve(found ?? { heard: this.wakeups });
        },
      };
      joined.waiters.add(waiter);
      signal?.addEventListener('abort', onAbort, { once: true });
      if (this.wakeups !== heard) {
        this.due.add(store.id);
        this.scheduleFlush();
      }
    });
  }

  private scheduleFlush(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() => {
      this.flushScheduled = false;
      const stores = [...this.due];
      this.due.clear();
      for (const id of stores) {
        const entry = this.waiting.get(id);
        if (!entry) continue;
        if (entry.looking) entry.again = true;
        else void this.look(entry);
      }
    });
  }

  /**
   * One look at a store: the window after each cursor its clients wait after, each its own snapshot
   * read in the feed's turns (one read at a time, merchants in turn, the event loop free between
   * two: a hundred cursors of one merchant never hold another merchant's requests for the whole
   * look); each client of a non-empty window is answered as soon as it is read.
   */
  private async look(entry: WaitingStore): Promise<void> {
    entry.looking = true;
    entry.again = false;
    this.looks++;
    try {
      await Promise.all([...entry.groups.values()].map((group) => this.lookAfter(entry, group)));
    } finally {
      entry.looking = false;
      if (entry.again && this.waiting.get(entry.store.id) === entry) void this.look(entry);
      else this.forgetIfIdle(entry);
    }
  }

  private async lookAfter(entry: WaitingStore, group: CursorGroup): Promise<void> {
    try {
      // Shared with streams catching up at the same cursor; `heard` is taken before its snapshot.
      const read = await this.catchUp.read(entry.store, group.from);
      // One window for every client of the cursor.
      if (read.page.changes.length > 0) for (const waiter of [...group.waiters]) waiter.settle(read);
    } catch (error) {
      // 410: retention deleted changes after this cursor while its clients waited.
      if (error instanceof ProblemError) for (const waiter of [...group.waiters]) waiter.settle(undefined, error);
      else
        this.log?.warn(
          { err: error, store_id: entry.store.id },
          'live feed: reading the changes of a store failed (its clients keep waiting)',
        );
    }
  }

  private forgetIfIdle(entry: WaitingStore): void {
    if (entry.groups.size > 0 || entry.looking || this.waiting.get(entry.store.id) !== entry) return;
    this.waiting.delete(entry.store.id);
    if (this.waiting.size === 0) this.stopPolling();
  }

  /** The fallback: every store with waiting clients, every pollIntervalMs. */
  private startPolling(): void {
    if (this.pollTimer || this.isClosed) return;
    this.pollTimer = setInterval(() => {
      for (const id of this.waiting.keys()) this.due.add(id);
      this.scheduleFlush();
    }, this.settings.pollIntervalMs);
    this.pollTimer.unref();
  }

  private stopPolling(): void {
    if (this.pollTimer) clearInterval(this.pollTimer);
    this.pollTimer = null;
  }
}

/**
 * One client's stream of windows: each non-empty window once, in order, from its cursor on. While
 * behind (its last window was full) it reads the next window itself; once caught up it waits with
 * the store's other clients, so a wake-up costs one look however many streams follow the store;
 * streams behind at the same cursor share their reads too (catch-up-reads.ts).
 * `next()` answers 'heartbeat' after settings.heartbeatSeconds without a window, and undefined once
 * the feed closed (shutdown) or the stream was closed.
 */
export class LiveStream {
  private pending: ChangePage | undefined;
  private cursor: FeedPosition;
  /** The last window was full: more may follow, so read on before waiting. */
  private behind: boolean;
  private readonly stopped = new AbortController();

  constructor(
    private readonly feed: LiveFeed,
    readonly store: StoreRecord,
    first: ChangePage,
    /** listen()'s count before the first window was read. */
    private heard: number,
    private readonly release: () => void,
  ) {
    this.cursor = { at: first.next_since, id: first.next_id };
    if (first.changes.length > 0) this.pending = first;
    // The first read is a whole window when it is not empty: read on to be sure (at most one read too many).
    this.behind = first.changes.length > 0;
  }

  async next(): Promise<ChangePage | 'heartbeat' | undefined> {
    if (this.stopped.signal.aborted || this.feed.closed) return undefined;
    let page = this.pending;
    this.pending = undefined;
    if (!page && this.behind) {
      // Streams at the same cursor share the read and get the same window object (catch-up-reads.ts).
      const read = await this.feed.catchUp.read(this.store, this.cursor);
      this.heard = read.heard;
      this.behind = read.full;
      if (read.page.changes.length > 0) page = read.page;
    }
    if (!page) {
      const found = await this.feed.nextWindow(
        this.store,
        this.cursor,
        this.heard,
        this.feed.settings.heartbeatSeconds * 1000,
        this.stopped.signal,
      );
      if (!found.page) {
        this.heard = found.heard;
        return this.stopped.signal.aborted || this.feed.closed ? undefined : 'heartbeat';
      }
      page = found.page;
      this.behind = found.full;
      this.heard = found.heard;
    }
    this.cursor = { at: page.next_since, id: page.next_id };
    // Sent in its own turn: a window for a hundred streams is written a stream at a time, the event
    // loop free between two, not all in one turn of it (what a hundred 75 KB writes would cost).
    return this.feed.inTurn(this.store.merchant_id, page);
  }

  /** The client went away (or the stream ended): stop waiting and give the key's place back. */
  close(): void {
    this.stopped.abort();
    this.release();
  }
}
