// An endpoint's success rate over the last 24 hours and 7 days, from the attempt log.
// Storage counts the attempts per UTC hour and outcome in one range of the (endpoint, at) index
// (attemptsPerHour); this module cuts those hours into each window's buckets (1 h for the day, 6 h
// for the week, aligned to UTC), so one statement serves both charts whatever the log's size.
import type { AttemptHourRecord, AttemptOutcomeKind } from './model.js';

export const ATTEMPT_OUTCOMES: readonly AttemptOutcomeKind[] = ['succeeded', 'failed', 'no_response'];

export interface AttemptBucket {
  /** The bucket's first instant (ISO, UTC) and the instant after it. */
  from: string;
  to: string;
  attempts: number;
  byOutcome: Record<AttemptOutcomeKind, number>;
  /** Average and slowest latency of the bucket's attempts (ms); null without attempts. */
  latencyAvgMs: number | null;
  latencyMaxMs: number | null;
}

export interface AttemptWindow {
  id: 'day' | 'week';
  /** "Last 24 hours", "Last 7 days". */
  label: string;
  bucketHours: number;
  /** Oldest first; the last one holds the current hour (day) or the current 6 hours (week). */
  buckets: AttemptBucket[];
  /** The window's sums, as one bucket covering it all. */
  total: AttemptBucket;
}

const HOUR_MS = 3600_000;

/** The windows the panel charts: 24 buckets of an hour, 28 of six hours. */
const WINDOWS = [
  { id: 'day', label: 'Last 24 hours', bucketHours: 1, buckets: 24 },
  { id: 'week', label: 'Last 7 days', bucketHours: 6, buckets: 28 },
] as const;

/** Where a window's first bucket starts and its last one ends (UTC-aligned), at `now`. */
function bounds(window: (typeof WINDOWS)[number], now: Date): { from: number; to: number } {
  const size = window.bucketHours * HOUR_MS;
  const current = Math.floor(now.getTime() / size) * size;
  return { from: current - (window.buckets - 1) * size, to: current + size };
}

/** The range of the attempt log every window reads: storage's [from, to). */
export function attemptStatsRange(now: Date): { from: string; to: string } {
  const all = WINDOWS.map((w) => bounds(w, now));
  return {
    from: new Date(Math.min(...all.map((b) => b.from))).toISOString(),
    to: new Date(Math.max(...all.map((b) => b.to))).toISOString(),
  };
}

interface Sums {
  attempts: number;
  byOutcome: Record<AttemptOutcomeKind, number>;
  latencySumMs: number;
  latencyMaxMs: number;
}

const emptySums = (): Sums => ({ attempts: 0, byOutcome: { succeeded: 0, failed: 0, no_response: 0 }, latencySumMs: 0, latencyMaxMs: 0 });

function add(sums: Sums, row: AttemptHourRecord): void {
  sums.attempts += row.attempts;
  sums.byOutcome[row.outcome] += row.attempts;
  sums.latencySumMs += row.latencySumMs;
  sums.latencyMaxMs = Math.max(sums.latencyMaxMs, row.latencyMaxMs);
}

function bucketOf(sums: Sums, from: number, to: number): AttemptBucket {
  return {
    from: new Date(from).toISOString(),
    to: new Date(to).toISOString(),
    attempts: sums.attempts,
    byOutcome: sums.byOutcome,
    latencyAvgMs: sums.attempts === 0 ? null : Math.round(sums.latencySumMs / sums.attempts),
    latencyMaxMs: sums.attempts === 0 ? null : sums.latencyMaxMs,
  };
}

/** Cuts storage's hours into each window's buckets at `now`. */
export function attemptWindows(hours: readonly AttemptHourRecord[], now: Date): AttemptWindow[] {
  return WINDOWS.map((window) => {
    const { from, to } = bounds(window, now);
    const size = window.bucketHours * HOUR_MS;
    const sums = Array.from({ length: window.buckets }, emptySums);
    const total = emptySums();
    for (const row of hours) {
      const at = Date.parse(`${row.hour}:00:00.000Z`);
      if (at < from || at >= to) continue;
      add(sums[Math.floor((at - from) / size)]!, row);
      add(total, row);
    }
    return {
      id: window.id,
      label: window.label,
      bucketHours: window.bucketHours,
      buckets: sums.map((s, i) => bucketOf(s, from + i * size, from + (i + 1) * size)),
      total: bucketOf(total, from, to),
    };
  });
}
