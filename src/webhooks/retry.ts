// Retry schedule of a failed delivery (product decisions): exponential backoff with jitter —
// about 30 s, 2 min, 10 min, 1 h, 6 h — then the delivery is given up (the feed is the catch-up).

export const DEFAULT_BACKOFF_SECONDS = [30, 120, 600, 3600, 21600] as const;

/**
 * When to try again after failed attempt number `attempt` (1-based), or null to give up.
 * `retryAfterSeconds` (from a 429/503 Retry-After) wins when it is longer.
 */
export function nextAttemptAt(
  attempt: number, now: Date, backoffSeconds: readonly number[] = DEFAULT_BACKOFF_SECONDS,
  retryAfterSeconds: number | null = null, random: () => number = Math.random,
): Date | null {
  const base = backoffSeconds[attempt - 1];
  if (base === undefined) return null;
  const jittered = base * (0.8 + 0.4 * random());
  const wait = Math.max(jittered, retryAfterSeconds ?? 0);
  return new Date(now.getTime() + Math.round(wait * 1000));
}

/** Seconds from a Retry-After header (delta-seconds or an HTTP date), or null. */
export function parseRetryAfter(value: string | null, now: Date): number | null {
  if (!value) return null;
  if (/^\d+$/.test(value.trim())) return Number(value.trim());
  const date = Date.parse(value);
  return Number.isNaN(date) ? null : Math.max(0, (date - now.getTime()) / 1000);
}
