// Records detected changes (spec 6) with a monotonic timestamp, inside the caller's transaction.
import type { CatalogStorage, ChangeType } from '../storage/port.js';
import { nextChangeTimestamp } from './clock.js';

export interface DetectedChange {
  storeId: number;
  productId: number;
  changeType: ChangeType;
}

export class ChangeRecorder {
  constructor(private readonly storage: CatalogStorage, private readonly now: () => Date) {}

  /** Writes the changes; must run inside the transaction of the data change that caused them. */
  record(changes: DetectedChange[]): void {
    if (changes.length === 0) return;
    const createdAt = nextChangeTimestamp(this.now(), this.storage.lastChangeAt());
    this.storage.setLastChangeAt(createdAt);
    this.storage.recordChanges(changes.map((change) => ({ ...change, createdAt })));
  }
}
