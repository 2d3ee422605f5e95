import { describe, expect, it } from 'vitest';
import { EventLoopDelay } from '../../src/operations/event-loop-delay.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const block = (ms: number) => {
  const start = performance.now();
  while (performance.now() - start < ms) {
    /* holds the event loop */
  }
};

describe('the event-loop delay of /metrics', () => {
  it('answers 0 before it runs, and shows a loop blocked 100 ms in the middle of a window in its max', async () => {
    const delay = new EventLoopDelay(10);
    try {
      expect(delay.take()).toEqual({ min: 0, mean: 0, stddev: 0, p50: 0, p90: 0, p99: 0, max: 0 });
      delay.start();
      delay.take();
      await sleep(200);
      block(100);
      await sleep(50);
      const window = delay.take();
      expect(window.max).toBeGreaterThanOrEqual(0.08);
      expect(window.max).toBeLessThan(1);
      expect(window.p50).toBeLessThan(0.08);
      expect(window.p99).toBeLessThanOrEqual(window.max);
    } finally {
      delay.stop();
    }
    expect(delay.running).toBe(false);
  });

  it('shows a loop blocked right after a take() in the next one (the interval in progress at a scrape), and not again after it', async () => {
    const delay = new EventLoopDelay(10);
    try {
      delay.start();
      await sleep(50);
      delay.take();
      block(120);
      await sleep(30);
      expect(delay.take().max).toBeGreaterThanOrEqual(0.1);
      await sleep(50);
      expect(delay.take().max).toBeLessThan(0.1);
    } finally {
      delay.stop();
    }
  });
});
