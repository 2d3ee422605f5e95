// A storage whose one operation fails: shows that a transition and the changes it records commit
// together or not at all (the real SQLite storage underneath, so the rollback is the real one).
// The operation rejects wherever it is called: on the storage itself, and on the tx that
// `transaction` hands its callback, so the failure happens inside the real transaction.
import type { CatalogStorage, StorageOperations, StorageTx } from '../../src/storage/port.js';

export class CatalogStorageProxyError extends Error {}

function failing<T extends object>(target: T, method: keyof StorageOperations): T {
  return new Proxy(target, {
    get(object, property) {
      if (property === method) return () => Promise.reject(new CatalogStorageProxyError(`${String(method)} failed`));
      const value = Reflect.get(object, property, object) as unknown;
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(object) : value;
    },
  });
}

export function failingOn(storage: CatalogStorage, method: keyof StorageOperations): CatalogStorage {
  const failingStorage = failing(storage, method);
  return new Proxy(failingStorage, {
    get(object, property) {
      if (property === 'transaction') {
        return <T>(fn: (tx: StorageTx) => Promise<T>) => storage.transaction((tx) => fn(failing(tx, method)));
      }
      if (property === 'snapshot') {
        return <T>(fn: (reader: StorageOperations) => Promise<T>) => storage.snapshot((reader) => fn(failing(reader, method)));
      }
      return Reflect.get(object, property, object) as unknown;
    },
  });
}
