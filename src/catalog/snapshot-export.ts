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
}

/** The trailer line: how many products came before it, and the feed cursor of the snapshot. */
export function trailerLine(trailer: ExportTrailer): Uint8Array {
  return Buffer.from(`${JSON.stringify(trailer)}\n`, 'utf8');
}

export class SnapshotExports {
  private running = 0;
  private readonly waiting: (() => void)[] = [];

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
    await this.turn(signal);
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
      this.leave();
    }
  }

  private async turn(signal: AbortSignal | undefined): Promise<void> {
    if (this.running < this.options.concurrency) {
      this.running++;
      return;
    }
    await new Promise<void>((resolve, reject) => {
      const take = () => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      };
      const onAbort = () => {
        const index = this.waiting.indexOf(take);
        if (index >= 0) this.waiting.splice(index, 1);
        // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- the abort's reason, as fetch rejects with it (an AbortError unless the caller gave one)
        reject(signal!.reason);
      };
      this.waiting.push(take);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
    // The slot was handed over by leave(): running already counts it.
  }

  private leave(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.running--;
  }
}
