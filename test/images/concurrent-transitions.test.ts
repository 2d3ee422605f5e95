// Transitions of two images of one product at the same moment (spec 3 image state): each changes
// its image's state and re-publishes the products listing it in one transaction. Whatever the
// order of their commits, the payload published last shows both states: on PostgreSQL the
// transaction locks the products it re-publishes before reading the other images' states, so the
// second waits for the first and reads its commit (without the lock, each resolved the product
// with the other image still pending, and a dead image was published with its supplier URL).
// The storage below holds each transition, just after its state change, until the other has made
// its own (or 500 ms have passed: SQLite runs one transaction at a time), so they overlap.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { CatalogStorage, StorageOperations, StorageTx } from '../../src/storage/port.js';
import { everyStore, startImageWorld, type ImageWorld } from './world.js';

let world: ImageWorld;

beforeEach(async () => {
  world = await startImageWorld();
});
afterEach(async () => {
  await world.close();
});

/** Resolves for everyone once `parties` have arrived, or for each one 500 ms after it arrived. */
function barrier(parties: number): () => Promise<void> {
  let arrived = 0;
  const waiting: (() => void)[] = [];
  return () =>
    new Promise<void>((resolve) => {
      waiting.push(resolve);
      if (++arrived >= parties) for (const release of waiting.splice(0)) release();
      else setTimeout(resolve, 500);
    });
}

/** The storage, whose transactions pause after each image state change at `meet`. */
function meetingAfterStateChanges(storage: CatalogStorage, meet: () => Promise<void>): CatalogStorage {
  const pausing = (tx: StorageTx): StorageTx =>
    new Proxy(tx, {
      get(object, property) {
        const value = Reflect.get(object, property, object) as unknown;
        if (property === 'updateImageMirror') {
          return async (...args: Parameters<StorageOperations['updateImageMirror']>) => {
            await tx.updateImageMirror(...args);
            if (args[2].state) await meet();
          };
        }
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(object) : value;
      },
    });
  return new Proxy(storage, {
    get(object, property) {
      if (property === 'transaction') return <T>(fn: (tx: StorageTx) => Promise<T>) => storage.transaction((tx) => fn(pausing(tx)));
      const value = Reflect.get(object, property, object) as unknown;
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(object) : value;
    },
  });
}

describe('two images of one product changing state at once', () => {
  it('publishes the product with both new states, whichever transition commits last', async () => {
    const { images } = world;
    const dead = images.url('/status/404/gone.png');
    const fine = images.url('/png/fine.png');
    const id = await world.putProduct('BP-40', [dead, fine]);
    // Concurrency 2: both fetched at once, both transitions meet after their state changes.
    const mirror = world.otherMirror({ storage: meetingAfterStateChanges(world.service.storage, barrier(2)) });
    const changes = await world.recorded(() => mirror.tick());
    expect(await world.imagesInEveryStore(id)).toEqual(everyStore([world.mediaUrl(images.bytes('/png/fine.png'), 'png')]));
    expect(await world.sourceImages('BP-40')).toMatchObject([
      { url: dead, state: 'dead' },
      { url: fine, state: 'mirrored' },
    ]);
    // A content change per transition in each store (one or two, as the feed collapses them).
    for (const recorded of Object.values(changes)) {
      expect(recorded.length).toBeGreaterThan(0);
      expect(
        recorded.every(([product, type]) => product === id && type === 'content'),
        JSON.stringify(recorded),
      ).toBe(true);
    }
  });

  it('publishes every product listing either image right, when one image is shared', async () => {
    const { images } = world;
    const dead = images.url('/status/410/shared.png');
    const fine = images.url('/png/own.png');
    const first = await world.putProduct('BP-40', [fine, dead]);
    const second = await world.putProduct('BP-55', [dead, fine]);
    const mirror = world.otherMirror({ storage: meetingAfterStateChanges(world.service.storage, barrier(2)) });
    await mirror.tick();
    const mirrored = world.mediaUrl(images.bytes('/png/own.png'), 'png');
    expect(await world.imagesInEveryStore(first)).toEqual(everyStore([mirrored]));
    expect(await world.imagesInEveryStore(second)).toEqual(everyStore([mirrored]));
  });
});
