// The idle workers' poll schedule (shared/idle-poll.ts) on injected timers and clock: how many polls
// an idle worker makes, and when it returns to its fast interval.
import { describe, expect, it } from 'vitest';
import { IdlePoll, type IdlePollOptions } from '../../src/shared/idle-poll.js';

/** Timers on a fake clock: run(ms) fires every timer due within the next ms, in order. */
function fakeTimers() {
  let now = 0;
  let nextId = 0;
  const timers = new Map<number, { at: number; fn: () => void }>();
  return {
    now: () => now,
    setTimer: (fn: () => void, ms: number) => {
      const id = ++nextId;
      timers.set(id, { at: now + ms, fn });
      return id as unknown as NodeJS.Timeout;
    },
    clearTimer: (timer: NodeJS.Timeout) => {
      timers.delete(timer as unknown as number);
    },
    run(ms: number) {
      const end = now + ms;
      for (;;) {
        const due = [...timers.entries()].filter(([, t]) => t.at <= end).sort((a, b) => a[1].at - b[1].at)[0];
        if (!due) break;
        timers.delete(due[0]);
        now = due[1].at;
        due[1].fn();
      }
      now = end;
    },
  };
}

function schedule(options: Partial<IdlePollOptions> & { live?: () => boolean }) {
  const timers = fakeTimers();
  const polls: number[] = [];
  const poll = new IdlePoll({
    fastMs: 250,
    idleMaxMs: 5000,
    poll: () => polls.push(timers.now()),
    ...timers,
    ...options,
  });
  poll.start();
  return { poll, polls, timers };
}

describe('the idle poll schedule', () => {
  it('polls an idle worker at most 19 times a minute while wake-ups are heard (240 at the fast interval)', () => {
    const { polls, timers } = schedule({ live: () => true });
    timers.run(60_000);
    // Four empty polls 250 ms apart, then waits of 500, 1000, 2000, 4000, then 5000 ms.
    expect(polls.slice(0, 10)).toEqual([250, 500, 750, 1000, 1250, 1750, 2750, 4750, 8750, 13_750]);
    expect(polls.length).toBeLessThanOrEqual(19);
  });

  it('polls at the fast interval while wake-ups are not heard (a LISTEN connection down)', () => {
    const { polls, timers } = schedule({ live: () => false });
    timers.run(10_000);
    expect(polls).toHaveLength(40);
  });

  it('returns to the fast interval when the wake-ups stop being heard, from the next poll on', () => {
    let live = true;
    const { polls, timers } = schedule({ live: () => live });
    timers.run(20_000);
    const before = polls.length;
    live = false;
    // The wait armed (at most 5 s) ends first; then every 250 ms.
    timers.run(5000 + 2000);
    const after = polls.slice(before);
    expect(after.slice(1).map((at, i) => at - after[i]!)).toEqual(Array(after.length - 1).fill(250));
    expect(after.length).toBeGreaterThanOrEqual(9);
  });

  it('returns to the fast interval at once on a wake-up, and backs off again from there', () => {
    const { poll, polls, timers } = schedule({ live: () => true });
    timers.run(20_000);
    expect(poll.currentWaitMs).toBe(5000);
    const wokenAt = timers.now();
    poll.work();
    timers.run(2000);
    expect(polls.filter((at) => at > wokenAt).map((at) => at - wokenAt)).toEqual([250, 500, 750, 1000, 1250, 1750]);
  });

  it('stays at the fast interval while work is under way, and backs off once it is done', () => {
    let busy = true;
    const { polls, timers } = schedule({ live: () => true, busy: () => busy });
    timers.run(5000);
    expect(polls).toHaveLength(20);
    busy = false;
    timers.run(5000);
    expect(polls.length - 20).toBeLessThanOrEqual(7);
  });

  it('is late with work due by time by at most idleMaxMs: no wait is longer than the cap', () => {
    const { polls, timers } = schedule({ live: () => true, idleMaxMs: 3000 });
    timers.run(120_000);
    const gaps = polls.slice(1).map((at, i) => at - polls[i]!);
    expect(Math.max(...gaps)).toBe(3000);
  });

  it('never waits longer than the fast interval when the cap is below it (no back-off)', () => {
    const { polls, timers } = schedule({ live: () => true, idleMaxMs: 10 });
    timers.run(10_000);
    expect(polls).toHaveLength(40);
  });
});
