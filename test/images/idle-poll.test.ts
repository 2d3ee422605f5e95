// An idle mirror's fallback poll backs off while wake-ups are heard (shared/idle-poll.ts): it counts
// its claims, and a write that adds images (on PostgreSQL from another process's connection, NOTIFY;
// on SQLite this process's commit) wakes it at once.
import { describe, expect, it, vi } from 'vitest';
import { severalConnections, TEST_ENGINE } from '../support/engine.js';
import { backedOff, cleanupsAfterEach, sleep } from '../support/idle-worker.js';
import { countingMirror, startImageWorld, type ImageWorld } from './world.js';

let world: ImageWorld | undefined;
const cleanups = cleanupsAfterEach(async () => {
  await world?.close();
  world = undefined;
});

describe('an idle mirror', () => {
  it('claims at most 14 times in 1.2 s while wake-ups are heard (60 at its 20 ms interval)', async () => {
    world = await startImageWorld();
    const { claims } = await countingMirror(world, { pollIntervalMs: 20, idlePollMaxMs: 250 }, false, cleanups);
    await sleep(1200);
    expect(claims.length).toBeGreaterThanOrEqual(4);
    expect(claims.length).toBeLessThanOrEqual(14);
  });

  severalConnections.it('is woken at once by a write that adds images (on PostgreSQL from another process)', async () => {
    world = await startImageWorld();
    const { claims } = await countingMirror(world, { pollIntervalMs: 20, idlePollMaxMs: 60_000 }, TEST_ENGINE === 'postgres', cleanups);
    await backedOff(claims);
    const lastIdleClaim = claims.at(-1)!;
    const url = world.images.url('/png/woken.png');
    await world.putProduct('WOKEN', [url]);
    await vi.waitFor(() => expect(world!.images.hits('/png/woken.png')).toBe(1), { timeout: 5000, interval: 5 });
    // Long before the timed poll (>= 1.2 s after the last one): the wake-up claimed it.
    expect(performance.now() - lastIdleClaim).toBeLessThan(1000);
  });
});
