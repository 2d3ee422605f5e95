// A fake clock for tests that move time by hand (retry schedules, cooldowns, dead-after periods):
// the service, the workers and the receivers take `now` from it, so no test sleeps.

export const SECOND = 1000;
export const MINUTE = 60 * SECOND;
export const HOUR = 60 * MINUTE;

export interface FakeClock {
  now: () => Date;
  advance(ms: number): void;
  /** Milliseconds since the epoch. */
  readonly ms: number;
  /** The time as an ISO 8601 string. */
  readonly iso: string;
}

export function fakeClock(start = '2025-03-14T09:00:00.000Z'): FakeClock {
  let ms = Date.parse(start);
  return {
    now: () => new Date(ms),
    advance: (by: number) => {
      ms += by;
    },
    get ms() {
      return ms;
    },
    get iso() {
      return new Date(ms).toISOString();
    },
  };
}
