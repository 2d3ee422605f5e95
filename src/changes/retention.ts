// Feed retention (docs/decisions.md#changes-and-the-feed): changes older than the retention
// period are deleted, and each store remembers the newest deleted position so that a cursor
// before it answers 410 instead of silently skipping what was deleted. The same schedule deletes
// the admin API's expired idempotency keys (admin/idempotency-keys.ts).
import { pruneExpiredIdempotencyKeys } from '../admin/idempotency-keys.js';
import { silentLogger, type Logger } from '../operations/log.js';
import { wholeSecondIso } from '../shared/time.js';
import type { CatalogStorage } from '../storage/port.js';

const DAY_MS = 24 * 60 * 60 * 1000;

/** Changes deleted per transaction by default (CPS_CHANGE_PRUNE_BATCH), so pruning never holds the write lock, nor the event loop, for long. */
export const PRUNE_BATCH = 1000;

/** Deletes changes recorded before now - retentionDays, a batch per transaction; returns how many were deleted. */
export async function pruneExpiredChanges(
  storage: CatalogStorage,
  now: Date,
  retentionDays: number,
  batch = PRUNE_BATCH,
  stopped: () => boolean = () => false,
): Promise<number> {
  const cutoff = wholeSecondIso(now.getTime() - retentionDays * DAY_MS);
  let deleted = 0;
  for (;;) {
    const pruned = await storage.pruneChangesBefore(cutoff, batch);
    deleted += pruned;
    if (pruned < batch || stopped()) return deleted;
    // The requests and the workers waiting run between two batches.
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
}

/**
 * Runs the pruning now and then every interval, in the serving process (one run at a time); returns
 * a stop function, which also ends a run in progress after its current batch.
 */
export function schedulePruning(
  storage: CatalogStorage,
  now: () => Date,
  retentionDays: number,
  intervalSeconds: number,
  logger: Logger = silentLogger,
  batch = PRUNE_BATCH,
): () => void {
  let stopped = false;
  let running = false;
  const run = async () => {
    if (running || stopped) return;
    running = true;
    try {
      const deleted = await pruneExpiredChanges(storage, now(), retentionDays, batch, () => stopped);
      if (deleted > 0) logger.info({ deleted, retention_days: retentionDays }, 'expired changes deleted');
      // The admin API's idempotency keys past CPS_IDEMPOTENCY_HOURS, on the same schedule.
      const keys = await pruneExpiredIdempotencyKeys(storage, now(), batch, () => stopped);
      if (keys > 0) logger.info({ deleted: keys }, 'expired idempotency keys deleted');
    } catch (error) {
      logger.error({ err: error }, 'pruning expired changes failed');
    } finally {
      running = false;
    }
  };
  void run();
  const timer = setInterval(() => void run(), intervalSeconds * 1000);
  timer.unref();
  return () => {
    stopped = true;
    clearInterval(timer);
  };
}
