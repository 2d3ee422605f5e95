// Feed retention (product decisions, "Changes and the feed"): changes older than the retention
// period are deleted, and each store remembers the newest deleted position so that a cursor
// before it answers 410 instead of silently skipping what was deleted.
import { silentLogger, type Logger } from '../operations/log.js';
import { wholeSecondIso } from '../shared/time.js';
import type { CatalogStorage } from '../storage/port.js';

const DAY_MS = 24 * 60 * 60 * 1000;

/** Changes deleted per transaction, so pruning never holds the write lock for long. */
const PRUNE_BATCH = 10_000;

/** Deletes changes recorded before now - retentionDays; returns how many were deleted. */
export async function pruneExpiredChanges(storage: CatalogStorage, now: Date, retentionDays: number): Promise<number> {
  const cutoff = wholeSecondIso(now.getTime() - retentionDays * DAY_MS);
  let deleted = 0;
  for (;;) {
    const batch = await storage.pruneChangesBefore(cutoff, PRUNE_BATCH);
    deleted += batch;
    if (batch < PRUNE_BATCH) return deleted;
  }
}

/** Runs the pruning now and then every interval, in the serving process; returns a stop function. */
export function schedulePruning(
  storage: CatalogStorage, now: () => Date, retentionDays: number, intervalSeconds: number, logger: Logger = silentLogger,
): () => void {
  const run = async () => {
    try {
      const deleted = await pruneExpiredChanges(storage, now(), retentionDays);
      if (deleted > 0) logger.info({ deleted, retention_days: retentionDays }, 'expired changes deleted');
    } catch (error) {
      logger.error({ err: error }, 'pruning expired changes failed');
    }
  };
  void run();
  const timer = setInterval(() => void run(), intervalSeconds * 1000);
  timer.unref();
  return () => clearInterval(timer);
}
