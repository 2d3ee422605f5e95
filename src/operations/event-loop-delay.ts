// This process's event-loop delay, for /metrics: how late a timer due every `intervalMs` ran, read
// and cleared at each scrape.
//
// The timer is perf_hooks.monitorEventLoopDelay's, run by libuv with no JavaScript per tick: a JS
// setInterval every 10 ms (a callback, a histogram record and its garbage each time) cost an idle
// serving thread more than everything else it did. Its reset() also forgets when the timer last
// ran, so the interval in progress at a scrape is not recorded (a loop blocked right after a scrape,
// the scrape's own work included: 150 ms of it in a test): a one-shot timer due one interval after
// each take() records that interval's delay, within one interval, for the next take(). The timer
// does not keep the process alive.
import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';

export interface LoopDelayWindow {
  /** Seconds, over the samples since the previous take(); all 0 when none was taken. */
  min: number;
  mean: number;
  stddev: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

const NONE: LoopDelayWindow = { min: 0, mean: 0, stddev: 0, p50: 0, p90: 0, p99: 0, max: 0 };

export class EventLoopDelay {
  private monitor: IntervalHistogram | undefined;
  /** The one-shot timer that times the interval in progress at the last take(). */
  private straddling: NodeJS.Timeout | undefined;
  /** How late (ns) the interval in progress at the last take() ended, once its timer ran; 0: not yet, or on time. */
  private straddled = 0;

  constructor(readonly intervalMs: number) {}

  start(): void {
    if (this.monitor) return;
    this.monitor = monitorEventLoopDelay({ resolution: this.intervalMs });
    this.monitor.enable();
  }

  /** Whether its timer runs (between start() and stop()). */
  get running(): boolean {
    return this.monitor !== undefined;
  }

  stop(): void {
    this.monitor?.disable();
    this.monitor = undefined;
    clearTimeout(this.straddling);
    this.straddling = undefined;
  }

  /** The delay since the previous take(), then a new window. */
  take(): LoopDelayWindow {
    const h = this.monitor;
    if (!h) return { ...NONE };
    // The monitor records each interval between its ticks (ns): the delay is what exceeds intervalMs.
    const intervalNs = this.intervalMs * 1e6;
    const seconds = (ns: number) => (ns <= intervalNs ? 0 : (ns - intervalNs) / 1e9);
    const window =
      h.count > 0
        ? {
            min: seconds(h.min),
            mean: seconds(h.mean),
            stddev: h.stddev / 1e9,
            p50: seconds(h.percentile(50)),
            p90: seconds(h.percentile(90)),
            p99: seconds(h.percentile(99)),
            max: seconds(h.max),
          }
        : { ...NONE };
    window.max = Math.max(window.max, this.straddled / 1e9);
    h.reset();
    this.straddled = 0;
    clearTimeout(this.straddling);
    const due = performance.now() + this.intervalMs;
    this.straddling = setTimeout(() => {
      this.straddling = undefined;
      this.straddled = Math.max(0, Math.round((performance.now() - due) * 1e6));
    }, this.intervalMs);
    this.straddling.unref();
    return window;
  }
}
