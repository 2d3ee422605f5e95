// Timestamps in whole seconds (spec 2.6, 4.4): change times, feed cursors and a delivery's
// `occurred_at` are ISO 8601 UTC without a fraction. The one formatter for them; runtime-neutral,
// so the published client uses it too.

/** The instant in ISO 8601 UTC, the fraction of its second dropped: `2025-03-14T09:26:53Z`. */
export function wholeSecondIso(at: Date | number | string): string {
  return `${new Date(at).toISOString().slice(0, 19)}Z`;
}
