// The schedule of a worker's fallback poll (the webhook dispatcher's, the image mirror's). Once
// IDLE_POLLS_BEFORE_BACKOFF polls in a row found nothing while wake-ups are heard (storage.onWork:
// PostgreSQL's LISTEN connection up, or SQLite's in-process wake-ups), each further one that finds
// nothing doubles the wait before the next one, up to `idleMaxMs`; a
// wake-up, a poll that finds work, or wake-ups not heard (the LISTEN connection down) bring it back
// to `fastMs` at once. Work that becomes due by time and not by a write (a retry's next attempt, a
// lease that ran out in a process that died, a down origin's next probe) is looked at no later than
// `idleMaxMs` after it is due: the cap bounds how late it can be.

/** Polls in a row that found nothing before the waits grow. */
export const IDLE_POLLS_BEFORE_BACKOFF = 4;

export interface IdlePollOptions {
  /** The wait while there is work, or while wake-ups are not heard (CPS_*_POLL_INTERVAL_MS). */
  fastMs: number;
  /** The longest wait while idle with wake-ups heard (CPS_*_IDLE_POLL_MAX_MS); at most fastMs: no back-off. */
  idleMaxMs: number;
  /** Whether wake-ups are heard now (storage.wakeupsLive); without it, never. */
  live?: () => boolean;
  /** Whether work is under way now (sends or fetches in flight, work waiting here): the next poll comes at fastMs. */
  busy?: () => boolean;
  /** Runs a poll. */
  poll: () => void;
  /** Subscribes to wake-ups while started (storage.onWork): each is work() and a poll. Returns the unsubscribe. */
  listen?: (wake: () => void) => (() => void) | undefined;
  /** Timers (tests pass fake ones). */
  setTimer?: (fn: () => void, ms: number) => NodeJS.Timeout;
  clearTimer?: (timer: NodeJS.Timeout) => void;
  now?: () => number;
}

export class IdlePoll {
  private timer: NodeJS.Timeout | null = null;
  private unsubscribe: (() => void) | undefined;
  /** When the armed timer fires (ms on `now`). */
  private firesAt = 0;
  private waitMs: number;
  /** Whether something since the last timed poll said there is work (a wake-up, a poll that found some). */
  private sawWork = true;
  /** Timed polls in a row since the last work: the back-off starts after IDLE_POLLS_BEFORE_BACKOFF. */
  private emptyPolls = 0;
  private readonly setTimer: (fn: () => void, ms: number) => NodeJS.Timeout;
  private readonly clearTimer: (timer: NodeJS.Timeout) => void;
  private readonly now: () => number;

  constructor(private readonly options: IdlePollOptions) {
    this.waitMs = options.fastMs;
    this.setTimer = options.setTimer ?? ((fn, ms) => setTimeout(fn, ms));
    this.clearTimer = options.clearTimer ?? ((timer) => clearTimeout(timer));
    this.now = options.now ?? (() => performance.now());
  }

  /** The wait before the next timed poll, as it stands. */
  get currentWaitMs(): number {
    return this.waitMs;
  }

  /** Arms the first timed poll, fastMs from now, and listens for wake-ups. */
  start(): void {
    if (!this.timer) this.arm(this.options.fastMs);
    this.unsubscribe ??= this.options.listen?.(() => {
      this.work();
      this.options.poll();
    });
  }

  stop(): void {
    if (this.timer) this.clearTimer(this.timer);
    this.timer = null;
    this.unsubscribe?.();
    this.unsubscribe = undefined;
  }

  /** There is work (a wake-up, a poll that found some): the next timed poll comes at most fastMs from now. */
  work(): void {
    this.sawWork = true;
    this.waitMs = this.options.fastMs;
    if (this.timer && this.firesAt - this.now() > this.options.fastMs) {
      this.clearTimer(this.timer);
      this.arm(this.options.fastMs);
    }
  }

  /** A poll's outcome: it found work (back to fastMs) or not (the back-off goes on at the next timed poll). */
  found(work: boolean): void {
    if (work) this.work();
  }

  private arm(ms: number): void {
    this.firesAt = this.now() + ms;
    this.timer = this.setTimer(() => this.fire(), ms);
  }

  private fire(): void {
    this.timer = null;
    const { fastMs, idleMaxMs } = this.options;
    // Doubles only after IDLE_POLLS_BEFORE_BACKOFF waits in a row without work; never while wake-ups
    // are not heard. Several workers share the due work (claims skip what another holds): one that
    // found nothing in a burst keeps polling at fastMs for that long, as before.
    this.emptyPolls = this.sawWork || this.options.busy?.() ? 0 : this.emptyPolls + 1;
    if (this.emptyPolls < IDLE_POLLS_BEFORE_BACKOFF || !(this.options.live?.() ?? false)) this.waitMs = fastMs;
    else this.waitMs = Math.max(fastMs, Math.min(this.waitMs * 2, idleMaxMs));
    this.sawWork = false;
    this.arm(this.waitMs);
    this.options.poll();
  }
}

/** Where a worker hears of new work: the storage's onWork and wakeupsLive (shared/ imports no storage). */
export interface WorkWakeups<Topic extends string> {
  onWork?(topic: Topic, listener: () => void): () => void;
  wakeupsLive?(): boolean;
}

/**
 * Starts a worker's fallback poll (the dispatcher's, the mirror's) on its CPS_*_POLL_INTERVAL_MS and
 * CPS_*_IDLE_POLL_MAX_MS, woken by `wakeups` on `topic`; its stop() also stops listening.
 */
export function startIdlePoll<Topic extends string>(
  wakeups: WorkWakeups<Topic>,
  topic: Topic,
  intervals: { pollIntervalMs: number; idlePollMaxMs: number },
  work: Pick<IdlePollOptions, 'busy' | 'poll'>,
): IdlePoll {
  const schedule = new IdlePoll({
    fastMs: intervals.pollIntervalMs,
    idleMaxMs: intervals.idlePollMaxMs,
    live: () => wakeups.wakeupsLive?.() ?? false,
    listen: (wake) => wakeups.onWork?.(topic, wake),
    ...work,
  });
  schedule.start();
  return schedule;
}
