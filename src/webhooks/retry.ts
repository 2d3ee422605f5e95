// Retry schedule of a failed delivery (docs/decisions.md#retries): exponential backoff with jitter —
// about 30 s, 2 min, 10 min, 1 h, 6 h — then the delivery is given up (the feed is the catch-up).

export const DEFAULT_BACKOFF_SECONDS = [30, 120, 600, 3600, 21600] as const;

/**
 * When to try again after failed attempt number `attempt` (1-based), or null to give up.
 * `retryAfterSeconds` (from a 429/503 Retry-After, parseRetryAfter: at most the last step) wins
 * when it is longer.
 */
export function nextAttemptAt(
  attempt: number,
  now: Date,
  backoffSeconds: readonly number[] = DEFAULT_BACKOFF_SECONDS,
  retryAfterSeconds: number | null = null,
  random: () => number = Math.random,
): Date | null {
  const base = backoffSeconds[attempt - 1];
  if (base === undefined) return null;
  const jittered = base * (0.8 + 0.4 * random());
  const wait = Math.max(jittered, retryAfterSeconds ?? 0);
  return new Date(now.getTime() + Math.round(wait * 1000));
}

const DAY_NAMES = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
const DAY = `(?:${DAY_NAMES.join('|')})`;
const LONG_DAY = '(?:Sunday|Monday|Tuesday|Wednesday|Thursday|Friday|Saturday)';
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const MONTH = `(${MONTHS.join('|')})`;
const TIME = '(\\d{2}):(\\d{2}):(\\d{2})';
// RFC 9110 section 5.6.7: the three forms of an HTTP-date, nothing else (Date.parse also reads
// "-5", "Jan 1 2058" or "2058-01-01" as dates).
const IMF_FIXDATE = new RegExp(`^${DAY}, (\\d{2}) ${MONTH} (\\d{4}) ${TIME} GMT$`);
const RFC850_DATE = new RegExp(`^${LONG_DAY}, (\\d{2})-${MONTH}-(\\d{2}) ${TIME} GMT$`);
const ASCTIME_DATE = new RegExp(`^${DAY} ${MONTH} ([ \\d]\\d) ${TIME} (\\d{4})$`);

/** The instant an HTTP-date names (ms since the epoch), or null when it is none or names no real time. */
export function parseHttpDate(value: string, now: Date): number | null {
  let parts: [day: string, month: string, year: string, hour: string, minute: string, second: string];
  let match: RegExpExecArray | null;
  if ((match = IMF_FIXDATE.exec(value))) parts = [match[1]!, match[2]!, match[3]!, match[4]!, match[5]!, match[6]!];
  else if ((match = RFC850_DATE.exec(value))) parts = [match[1]!, match[2]!, match[3]!, match[4]!, match[5]!, match[6]!];
  else if ((match = ASCTIME_DATE.exec(value))) parts = [match[2]!, match[1]!, match[6]!, match[3]!, match[4]!, match[5]!];
  else return null;
  const [day, month, hour, minute, second] = [
    Number(parts[0].trim()),
    MONTHS.indexOf(parts[1]),
    Number(parts[3]),
    Number(parts[4]),
    Number(parts[5]),
  ];
  let year = Number(parts[2]);
  if (parts[2].length === 2) {
    // RFC 9110: a two-digit year more than 50 years ahead is the most recent past year ending so.
    year += 2000;
    if (year > now.getUTCFullYear() + 50) year -= 100;
  }
  // A leap second (60) is allowed; 31 February or 25 o'clock is no time at all.
  if (hour > 23 || minute > 59 || second > 60) return null;
  const date = new Date(0);
  date.setUTCFullYear(year, month, day);
  if (date.getUTCFullYear() !== year || date.getUTCMonth() !== month || date.getUTCDate() !== day) return null;
  date.setUTCHours(hour, minute, Math.min(second, 59));
  return date.getTime();
}

/**
 * Seconds to wait from a Retry-After header (delta-seconds or an HTTP date), at most `maxSeconds`
 * (the last step of the backoff: docs/decisions.md#retries), or null when it is absent or does not parse (a
 * negative or fractional number, a date Date.parse reads but HTTP does not, a day that does not
 * exist). A date in the past is 0 s. A digit string too long for a number is a very long wait,
 * capped like any other (as RFC 9111 section 1.2.2 has caches read an overflowing delta-seconds).
 */
export function parseRetryAfter(value: string | null, now: Date, maxSeconds: number): number | null {
  const text = value?.trim();
  if (!text) return null;
  if (/^\d+$/.test(text)) return Math.min(Number(text), maxSeconds);
  const date = parseHttpDate(text, now);
  if (date === null) return null;
  return Math.min(Math.max(0, (date - now.getTime()) / 1000), maxSeconds);
}
