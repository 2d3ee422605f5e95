// A storage whose one method fails: shows that a transition and the changes it records commit
// together or not at all (the real SQLite storage underneath, so the rollback is the real one).
import type { CatalogStorage } from '../../src/storage/port.js';

export class CatalogStorageProxyError extends Error {}

export function failingOn(storage: CatalogStorage, method: keyof CatalogStorage): CatalogStorage {
  return new Proxy(storage, {
    get(target, property) {
      if (property === method) return () => { throw new CatalogStorageProxyError(`${String(method)} failed`); };
      const value = Reflect.get(target, property, target) as unknown;
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}
