// Timestamps in whole seconds (spec 2.6, 4.4): change times, feed cursors and a delivery's
// `occurred_at` are ISO 8601 UTC without a fraction. The one formatter for them; runtime-neutral,
// so the published client uses it too.

/** The instant in ISO 8601 UTC, the fraction of its second dropped: `2025-03-14T09:26:53Z`. */
export function wholeSecondIso(at: Date | number | string): string {
  return `${new Date(at).toISOString().slice(0, 19)}Z`;
}

/**
 * The whole second for changes recorded at `now`: now's second, or the last one handed out when
 * that is later. A clock that steps back never gives a later change an earlier `created_at`, so
 * the feed's (created_at, id) positions grow with the id (spec 4.4).
 */
export function monotonicSecond(now: Date, lastHandedOut: string | undefined): string {
  const current = wholeSecondIso(now);
  return lastHandedOut !== undefined && lastHandedOut > current ? lastHandedOut : current;
}
