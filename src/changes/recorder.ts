// Records detected changes (spec 6) inside the caller's transaction, together with the webhook
// outbox rows they cause (one per endpoint, event and store, carrying the products): a crash can lose neither without the other. The storage gives each change
// its position in the merchant's feed (its own id sequence, a monotonic whole-second timestamp) in
// commit order (ChangeStore.recordChanges).
import type { MerchantScope } from '../storage/merchant-scope.js';
import type { OutboxRow, StorageTx } from '../storage/port.js';
import type { RecordedChange } from './model.js';
import type { WebhookEndpointRecord } from '../webhooks/model.js';

/** A change a write detected (spec 6), before storage gives it its feed position. */
export type DetectedChange = RecordedChange;

export class ChangeRecorder {
  constructor(private readonly now: () => Date) {}

  /**
   * Writes the merchant's changes in tx, the transaction of the data change that caused them
   * (`merchant`: its scope on tx; `endpoints`: as for outbox).
   */
  async record(
    tx: StorageTx,
    merchant: MerchantScope,
    changes: DetectedChange[],
    endpoints?: () => Promise<WebhookEndpointRecord[]>,
  ): Promise<void> {
    await this.outbox(tx, merchant, changes, endpoints);
    await this.positions(merchant, changes);
  }

  /**
   * The outbox rows of the changes (record's first half: a bulk write records its parts' as it
   * goes); `endpoints` gives the merchant's endpoints when the caller has them (a chunk reads them
   * once for all of its stores).
   */
  async outbox(
    tx: StorageTx,
    merchant: MerchantScope,
    changes: DetectedChange[],
    endpoints: () => Promise<WebhookEndpointRecord[]> = () => merchant.listWebhookEndpoints(),
  ): Promise<void> {
    if (changes.length === 0) return;
    // Paused and disabled endpoints get rows too: the dispatcher records them as dropped deliveries.
    await tx.insertOutbox(outboxRows(await endpoints(), changes, this.now().toISOString()));
  }

  /**
   * The changes themselves, with their feed positions (record's second half), last: on PostgreSQL
   * their positions hold the merchant's sequencer row to COMMIT, and every other write of the
   * merchant waits for it; the outbox rows (tens of thousands for a chunk with 20 endpoints) and a
   * bulk write's every part are written before it is taken.
   */
  async positions(merchant: MerchantScope, changes: DetectedChange[]): Promise<void> {
    if (changes.length === 0) return;
    await merchant.recordChanges(changes, this.now());
  }
}

/**
 * One outbox row per (subscribed endpoint, event, store) of the changes, carrying their products in
 * the order the write changed them (each once): scope and event filters (docs/webhooks.md#delivery).
 */
function outboxRows(endpoints: WebhookEndpointRecord[], changes: DetectedChange[], createdAt: string): OutboxRow[] {
  if (endpoints.length === 0) return [];
  const rows = new Map<string, OutboxRow & { seen: Set<number> }>();
  for (const change of changes) {
    for (const endpoint of endpoints) {
      if (endpoint.store_id !== null && endpoint.store_id !== change.storeId) continue;
      if (!endpoint.events.includes(change.changeType)) continue;
      // spec 2.7: store_id is null for all-stores endpoints when the change is not store-specific;
      // a removal takes the product out of every store at once.
      const storeId = endpoint.store_id === null && change.changeType === 'removed' ? null : change.storeId;
      const key = `${endpoint.id}:${change.changeType}:${storeId}`;
      let row = rows.get(key);
      if (!row) {
        row = { endpointId: endpoint.id, event: change.changeType, storeId, productIds: [], createdAt, seen: new Set() };
        rows.set(key, row);
      }
      if (row.seen.has(change.productId)) continue;
      row.seen.add(change.productId);
      row.productIds.push(change.productId);
    }
  }
  return [...rows.values()].map(({ seen: _seen, ...row }) => row);
}
