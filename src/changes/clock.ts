// Change timestamps (spec 2.6, 4.4): ISO 8601 UTC in whole seconds, and monotonic per deployment:
// a clock that steps back never gives a later change an earlier `created_at`, so the feed's
// (created_at, id) positions always grow with the change id.
import { wholeSecondIso } from '../shared/time.js';

/** The timestamp for changes recorded now: the current second, or the last one handed out if later. */
export function nextChangeTimestamp(now: Date, lastHandedOut: string | undefined): string {
  const current = wholeSecondIso(now);
  return lastHandedOut !== undefined && lastHandedOut > current ? lastHandedOut : current;
}
