// The snapshot export of a store (openapi exportProducts): every published product of
// the store as NDJSON lines, read in one consistent snapshot (storage.snapshot: one read
// transaction on SQLite, REPEATABLE READ on PostgreSQL) in bounded steps, then a trailer line with
// the feed cursor of exactly that snapshot: the merchant's latest feed position, read in the same
// snapshot. Changes take their positions in commit order (ChangeStore.recordChanges), so a change
// committed after the snapshot is after that cursor and one committed before it is in the
// snapshot: the feed from the cursor yields every later change and none the snapshot shows
// (list-then-watch, with no time margin).
import type { components } from '../generated/public-api.js';
import { FEED_START } from '../changes/feed.js';
import type { CatalogStorage } from '../storage/port.js';
import type { FeedPosition } from '../changes/model.js';
import type { StoreRecord } from './model.js';
import { activeStore } from './reads.js';
import { scopeToMerchant } from '../storage/merchant-scope.js';

export type ExportTrailer = components['schemas']['ProductExportTrailer'];

/** What the snapshot is, known before its first product: the store and the feed cursor of the snapshot. */
export interface SnapshotHead {
  store: StoreRecord;
  cursor: FeedPosition;
}

/** Where the export's lines go. */
export interface SnapshotSink {
  /** Called once, before any line: false ends the export there (the client holds this snapshot already). */
  begin(head: SnapshotHead): boolean;
  /** NDJSON lines, in order; the next step is read once what this returns has settled. */
  write(lines: Uint8Array): void | Promise<void>;
}

export interface SnapshotExportOptions {
  /** Products read per statement (a bounded step; the event loop is free between two). */
  stepRows: number;
  /** Snapshots read at once by this process; the others wait their turn (each holds a database connection). */
  concurrency: number;
  /** Of those, snapshots of one merchant at once: a merchant whose clients stall its reads never holds every turn. */
  concurrencyPerMerchant: number;
}

/** The trailer line: how many products came before it, and the feed cursor of the snapshot. */
export function trailerLine(trailer: ExportTrailer): Uint8Array {
  return Buffer.from(`${JSON.stringify(trailer)}\n`, 'utf8');
}

/** One export waiting for its turn: its merchant, and how to hand it the turn. */
interface Waiter {
  merchantId: number;
  take: () => void;
}

export class SnapshotExports {
  private running = 0;
  private readonly runningByMerchant = new Map<number, number>();
  private readonly waiting: Waiter[] = [];

  constructor(
    private readonly storage: CatalogStorage,
    private readonly options: SnapshotExportOptions,
  ) {}

  /**
   * Exports the merchant's store (by slug, or its default store) into the sink; resolves with the
   * trailer written last, or undefined when `begin` declined. Rejects with `store_not_found` before
   * `begin` for a store that is not active; with the signal's reason once it is aborted.
   */
  async export(merchantId: number, slug: string | undefined, sink: SnapshotSink, signal?: AbortSignal): Promise<ExportTrailer | undefined> {
    await this.turn(merchantId, signal);
    try {
      return await this.storage.snapshot(async (reader) => {
        // The snapshot's first read fixes it (SQLite: the read transaction's WAL mark).
        const merchant = scopeToMerchant(reader, merchantId);
        const store = await activeStore(merchant, slug);
        const cursor = (await merchant.latestFeedPosition()) ?? FEED_START;
        if (!sink.begin({ store, cursor })) return undefined;
        let count = 0;
        for (let afterId = 0; ; ) {
          signal?.throwIfAborted();
          const step = await reader.publishedLinesAfter(store.id, afterId, this.options.stepRows);
          if (step.count > 0) {
            await sink.write(step.bytes);
            count += step.count;
            afterId = step.lastId!;
          }
          if (step.count < this.options.stepRows) break;
          // Between two steps, always: requests and writes waiting meanwhile run (a step of 500
          // products is ~1 ms of SQLite's time; the turn costs microseconds).
          await new Promise<void>((resolve) => setImmediate(resolve));
        }
        const trailer: ExportTrailer = { store: store.slug, count, next_since: cursor.at, next_id: cursor.id };
        await sink.write(trailerLine(trailer));
        return trailer;
      });
    } finally {
      this.leave(merchantId);
    }
  }

  /** A turn is free for the merchant while the process and the merchant are both below their counts. */
  private mayRun(merchantId: number): boolean {
    return this.running < this.options.concurrency && (this.runningByMerchant.get(merchantId) ?? 0) < this.options.concurrencyPerMerchant;
  }

  private start(merchantId: number): void {
    this.running++;
    this.runningByMerchant.set(merchantId, (this.runningByMerchant.get(merchantId) ?? 0) + 1);
  }

  private async turn(merchantId: number, signal: AbortSignal | undefined): Promise<void> {
    if (this.mayRun(merchantId)) return this.start(merchantId);
    await new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        merchantId,
        take: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
      };
      const onAbort = () => {
        const index = this.waiting.indexOf(waiter);
        if (index >= 0) this.waiting.splice(index, 1);
        // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- the abort's reason, as fetch rejects with it (an AbortError unless the caller gave one)
        reject(signal!.reason);
      };
      this.waiting.push(waiter);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
    // The turn was counted for it by leave().
  }

  /** Frees the merchant's turn and hands turns to the first waiters, in order, whose merchants may run. */
  private leave(merchantId: number): void {
    this.running--;
    const left = this.runningByMerchant.get(merchantId)! - 1;
    if (left > 0) this.runningByMerchant.set(merchantId, left);
    else this.runningByMerchant.delete(merchantId);
    for (let i = 0; i < this.waiting.length && this.running < this.options.concurrency; ) {
      const waiter = this.waiting[i]!;
      if (!this.mayRun(waiter.merchantId)) {
        i++;
        continue;
      }
      this.waiting.splice(i, 1);
      this.start(waiter.merchantId);
      waiter.take();
    }
  }
}
