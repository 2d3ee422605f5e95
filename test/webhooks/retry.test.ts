// The retry schedule's pure parts (docs/decisions.md#retries): a receiver's Retry-After is
// honoured up to the last backoff step and ignored when it is not delta-seconds or an HTTP date.
import { describe, expect, it } from 'vitest';
import { DEFAULT_BACKOFF_SECONDS, nextAttemptAt, parseHttpDate, parseRetryAfter } from '../../src/webhooks/retry.js';

const NOW = new Date('2025-03-14T09:26:55Z');
const LAST_STEP = DEFAULT_BACKOFF_SECONDS.at(-1)!;
const parse = (value: string | null) => parseRetryAfter(value, NOW, LAST_STEP);

describe('parseRetryAfter', () => {
  it('reads delta-seconds, surrounding spaces allowed', () => {
    expect(parse('0')).toBe(0);
    expect(parse('120')).toBe(120);
    expect(parse(' 120 ')).toBe(120);
    expect(parse('007')).toBe(7);
    // Seconds, not the year Date.parse reads in it.
    expect(parse('2058')).toBe(2058);
  });

  it('caps a wait longer than the last backoff step at that step', () => {
    expect(parse(String(LAST_STEP))).toBe(LAST_STEP);
    expect(parse(String(LAST_STEP + 1))).toBe(LAST_STEP);
    expect(parse('999999999')).toBe(LAST_STEP);
    // More than a Date can add (it threw a RangeError in the dispatcher), and more than a double holds.
    expect(parse('99999999999999999999')).toBe(LAST_STEP);
    expect(parse('9'.repeat(400))).toBe(LAST_STEP);
    expect(parseRetryAfter('600', NOW, 60)).toBe(60);
  });

  it('reads the three forms of an HTTP date, a past one as 0 s, a far one capped', () => {
    expect(parse('Fri, 14 Mar 2025 09:31:55 GMT')).toBe(300);
    expect(parse('Friday, 14-Mar-25 09:31:55 GMT')).toBe(300);
    expect(parse('Fri Mar 14 09:31:55 2025')).toBe(300);
    expect(parse('Fri Mar  7 09:26:55 2025')).toBe(0);
    expect(parse('Sun, 06 Nov 1994 08:49:37 GMT')).toBe(0);
    expect(parse('Fri, 01 Jan 2100 00:00:00 GMT')).toBe(LAST_STEP);
    expect(parse('Fri, 31 Dec 9999 23:59:59 GMT')).toBe(LAST_STEP);
  });

  it.each([
    null,
    '',
    '   ',
    'soon',
    '-5',
    '+5',
    '12.5',
    '1e3',
    '0x10',
    'Infinity',
    'NaN',
    '120 s',
    '1 20',
    // Date.parse reads these; they are not HTTP dates.
    '-1',
    '2058-01-01',
    '2058-01-01T00:00:00Z',
    'Jan 1 2058',
    '1 Jan 2058 00:00:00 GMT',
    'Fri, 01 Jan 2100 00:00:00 UTC',
    // Dates that name no time, or none a Date holds.
    'Mon, 31 Feb 2031 00:00:00 GMT',
    'Fri, 14 Mar 2025 24:00:00 GMT',
    'Fri, 14 Mar 2025 09:60:00 GMT',
    'Fri, 01 Jan 275760 00:00:00 GMT',
    'Fri, 14 Foo 2025 09:31:55 GMT',
    'Fri, 00 Mar 2025 09:31:55 GMT',
  ])('treats Retry-After %j as absent', (value) => {
    expect(parse(value)).toBeNull();
  });
});

describe('parseHttpDate', () => {
  it('reads a two-digit year as the most recent past year ending so when it is more than 50 years ahead', () => {
    expect(new Date(parseHttpDate('Sunday, 06-Nov-94 08:49:37 GMT', NOW)!).toISOString()).toBe('1994-11-06T08:49:37.000Z');
    expect(new Date(parseHttpDate('Monday, 01-Jan-74 00:00:00 GMT', NOW)!).toISOString()).toBe('2074-01-01T00:00:00.000Z');
    expect(new Date(parseHttpDate('Tuesday, 01-Jan-76 00:00:00 GMT', NOW)!).toISOString()).toBe('1976-01-01T00:00:00.000Z');
  });

  it('reads a leap second as the end of its minute', () => {
    expect(new Date(parseHttpDate('Sat, 31 Dec 2016 23:59:60 GMT', NOW)!).toISOString()).toBe('2016-12-31T23:59:59.000Z');
  });
});

describe('nextAttemptAt with a Retry-After', () => {
  it('waits the Retry-After when it is longer than the step, and the step otherwise', () => {
    const at = (attempt: number, retryAfter: number | null) =>
      nextAttemptAt(attempt, NOW, DEFAULT_BACKOFF_SECONDS, retryAfter, () => 0.5)!.getTime() - NOW.getTime();
    expect(at(1, parse('999999999'))).toBe(LAST_STEP * 1000);
    expect(at(1, parse('5'))).toBe(30_000);
    expect(at(1, parse('soon'))).toBe(30_000);
    expect(nextAttemptAt(6, NOW, DEFAULT_BACKOFF_SECONDS, parse('120'))).toBeNull();
  });
});
