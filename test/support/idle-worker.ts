// What the idle-poll tests of a worker (the dispatcher's, the image mirror's) share: a storage of the
// worker's own whose wake-ups are heard, and the times of the worker's claims.
import { afterEach, expect, vi } from 'vitest';
import type { CatalogStorage } from '../../src/storage/port.js';
import type { TestService } from './service.js';

/** Cleanups that run after each test of the file, the last added first, then `last` (closing the test's world). */
export function cleanupsAfterEach(last: () => Promise<void>): (() => Promise<void>)[] {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
    await last();
  });
  return cleanups;
}

/**
 * The service's storage, or (`otherConnection`, on PostgreSQL another process's) one opened anew with
 * its own pool and listening connection, closed by `cleanups`; resolves once its wake-ups are heard.
 */
export async function listeningStorage(
  service: TestService,
  otherConnection: boolean,
  cleanups: (() => Promise<void>)[],
): Promise<CatalogStorage> {
  const storage = otherConnection ? await service.database.open() : service.storage;
  if (otherConnection) cleanups.push(() => storage.close());
  await (storage as { listening?: () => Promise<void> }).listening?.();
  return storage;
}

/** `storage` with the time (performance.now()) of each call to its `method` pushed to `calls`. */
export function timingCalls(storage: CatalogStorage, method: keyof CatalogStorage, calls: number[]): CatalogStorage {
  return new Proxy(storage, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver) as unknown;
      if (typeof value !== 'function') return value;
      const bound = (value as (...args: unknown[]) => unknown).bind(target);
      if (property !== method) return bound;
      return (...args: unknown[]) => {
        calls.push(performance.now());
        return bound(...args);
      };
    },
  });
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Resolves once the last wait between two of `claims` was at least `ms`: the worker's poll has backed off. */
export async function backedOff(claims: number[], ms = 600): Promise<void> {
  await vi.waitFor(
    () => {
      expect(claims.length).toBeGreaterThanOrEqual(2);
      expect(claims.at(-1)! - claims.at(-2)!).toBeGreaterThanOrEqual(ms);
    },
    { timeout: 5000, interval: 20 },
  );
}
