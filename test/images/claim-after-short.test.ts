// A mirror whose claim came back short of its room, with no merchant nor origin at its cap, has
// claimed every image due then: freed slots start what it queued without claiming again (each claim
// is a write transaction; with many merchants a few images due each, and several processes, claiming
// again at every freed slot cost more than the images). A poll or a wake-up claims again.
import { describe, expect, it, vi } from 'vitest';
import { atCap } from '../../src/images/mirror.js';
import type { ClaimedImageMirror } from '../../src/storage/port.js';
import { cleanupsAfterEach, sleep } from '../support/idle-worker.js';
import { countingMirror, startImageWorld, type ImageWorld } from './world.js';

let world: ImageWorld | undefined;
const cleanups = cleanupsAfterEach(async () => {
  await world?.close();
  world = undefined;
});

/** A started mirror of one fetch slot, its timed poll out of the way (a minute), counting its claims. */
const startedMirror = (w: ImageWorld) =>
  countingMirror(w, { concurrency: 1, pollIntervalMs: 60_000, idlePollMaxMs: 60_000 }, false, cleanups);

describe('a mirror after a claim that took every due image', () => {
  it('fetches what it queued without claiming again, and claims again at a wake-up', async () => {
    world = await startImageWorld();
    const { claims, storage } = await startedMirror(world);
    // The claims at start (its first poll; on PostgreSQL the wake-up of its listening connection) find nothing.
    await (storage as { listening?: () => Promise<void> }).listening?.();
    await sleep(200);
    const idle = claims.length;
    const paths = ['/png/s1.png', '/png/s2.png', '/png/s3.png', '/png/s4.png'];
    await world.putProduct(
      'SHORT',
      paths.map((p) => world!.images.url(p)),
    );
    await vi.waitFor(() => expect(paths.map((p) => world!.images.hits(p))).toEqual([1, 1, 1, 1]), { timeout: 5000, interval: 5 });
    await vi.waitFor(async () => expect((await world!.status()).pending).toBe(0), { timeout: 5000, interval: 10 });
    // Four images, one slot: the wake-up's claim queued all four (16 a slot), and no freed slot claimed.
    expect(claims.length - idle).toBe(1);

    // A write that adds an image wakes it again: claimed and fetched at once, not at the minute's poll.
    await world.putProduct('WOKEN', [world.images.url('/png/woken.png')]);
    await vi.waitFor(() => expect(world!.images.hits('/png/woken.png')).toBe(1), { timeout: 5000, interval: 5 });
    expect(claims.length - idle).toBe(2);
  });
});

describe('whether a claim left due work behind', () => {
  const image = (merchant_id: number, origin: string) => ({ merchant_id, origin }) as ClaimedImageMirror;

  it('says so when a merchant or an origin of a merchant is at its cap, counting the fetches busy and the images claimed', () => {
    expect(atCap([], [image(1, 'a'), image(1, 'b')], 3, 2)).toBe(false);
    expect(atCap([], [image(1, 'a'), image(1, 'a')], 3, 2)).toBe(true);
    expect(atCap([{ merchant_id: 1, origin: 'a', fetching: 1 }], [image(1, 'b'), image(1, 'c')], 3, 2)).toBe(true);
    expect(atCap([{ merchant_id: 1, origin: 'a', fetching: 1 }], [image(2, 'a')], 3, 2)).toBe(false);
  });
});
