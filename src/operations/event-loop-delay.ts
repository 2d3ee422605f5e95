// This process's event-loop delay, for /metrics: how late a timer due every `intervalMs` ran, in
// an HDR histogram (perf_hooks.createHistogram) read and cleared at each scrape.
//
// Not perf_hooks.monitorEventLoopDelay: its reset() also forgets when its timer last ran, so the
// interval in progress at a scrape is never recorded: a loop blocked right after a scrape (the
// scrape's own work included) went unseen, 150 ms of it in a test. Here the time the next tick is
// due survives the reset. One timer callback per interval (well under a microsecond each); the
// timer does not keep the process alive.
import { createHistogram, type RecordableHistogram } from 'node:perf_hooks';

export interface LoopDelayWindow {
  /** Seconds, over the samples since the previous take(); all 0 when none was taken. */
  p50: number;
  p99: number;
  max: number;
}

export class EventLoopDelay {
  private readonly histogram: RecordableHistogram = createHistogram();
  private timer: NodeJS.Timeout | undefined;
  private due = 0;

  constructor(readonly intervalMs: number) {}

  start(): void {
    if (this.timer) return;
    this.due = performance.now() + this.intervalMs;
    this.timer = setInterval(() => {
      const now = performance.now();
      // Nanoseconds late (at least 1: the histogram records positive values; a timer may run a little early).
      this.histogram.record(Math.max(1, Math.round((now - this.due) * 1e6)));
      this.due = now + this.intervalMs;
    }, this.intervalMs);
    this.timer.unref();
  }

  /** Whether its timer runs (between start() and stop()). */
  get running(): boolean {
    return this.timer !== undefined;
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** The delay since the previous take(), then a new window. */
  take(): LoopDelayWindow {
    const h = this.histogram;
    const seconds = (ns: number) => (h.count === 0 || ns <= 1 ? 0 : ns / 1e9);
    const window = { p50: seconds(h.percentile(50)), p99: seconds(h.percentile(99)), max: seconds(h.max) };
    h.reset();
    return window;
  }
}
