// The full-recompute consistency check (fault and load tests): after a crash, or at any
// time, everything derived from the merchants' sources must agree with resolving them again.
// Pure over the storage port, read in one snapshot; it writes nothing. Test support, not shipped:
// the fault tests, their processes (test/faults) and scripts/bench/soak.ts run it.
//   (a) every stored payload of an active store (and its hashes) equals resolveProduct over the
//       sources, and no payload is stored for a product that no longer exists (an inactive store
//       is not published: it keeps the payloads it had until it is activated);
//   (b) the feed agrees with what is published: a published product's latest change is not
//       `removed`, and a product that has changes but is not published has `removed` as its latest;
//   (c) every change became an outbox row or a delivery for each endpoint subscribed to it.
import { CatalogPublisher } from '../../src/catalog/publish.js';
import { resolveProduct } from '../../src/catalog/resolve.js';
import { wholeSecondIso } from '../../src/shared/time.js';
import type { CatalogStorage, StorageOperations } from '../../src/storage/port.js';
import { scopeToMerchant } from '../../src/storage/merchant-scope.js';
import type { ChangeType, StoredChange } from '../../src/changes/model.js';
import type { WebhookEndpointRecord } from '../../src/webhooks/model.js';

export interface ConsistencyReport {
  merchants: number;
  stores: number;
  products: number;
  /** Payloads resolved again and compared with the stored ones. */
  payloadsCompared: number;
  changes: number;
  endpoints: number;
  /** (change, subscribed endpoint) pairs found in the outbox or in a delivery. */
  deliveriesCovered: number;
  /** What disagrees, at most `maxProblems` of them; empty when everything agrees. */
  problems: string[];
  problemCount: number;
}

export interface VerifyOptions {
  /** Problems listed at most (all are counted). */
  maxProblems?: number;
  /** Products resolved per step. */
  chunkSize?: number;
}

const PAGE = 5000;
const decoder = new TextDecoder();

/** Recomputes every published payload from the sources and checks the feed and the outbox against it. */
export function verifyCatalog(storage: CatalogStorage, options: VerifyOptions = {}): Promise<ConsistencyReport> {
  const maxProblems = options.maxProblems ?? 50;
  const chunkSize = options.chunkSize ?? 1000;
  const report: ConsistencyReport = {
    merchants: 0,
    stores: 0,
    products: 0,
    payloadsCompared: 0,
    changes: 0,
    endpoints: 0,
    deliveriesCovered: 0,
    problems: [],
    problemCount: 0,
  };
  const problem = (text: string) => {
    report.problemCount++;
    if (report.problems.length < maxProblems) report.problems.push(text);
  };

  return storage.snapshot(async (reader) => {
    for (const merchant of await reader.listMerchants()) {
      report.merchants++;
      const context = await loadContext(reader, merchant.id);
      report.stores += context.stores.length;
      const productIds = new Set<number>();

      // (a) published payloads == full recompute
      for (let afterId = 0; ; ) {
        const products = await reader.productsAfter(merchant.id, afterId, chunkSize);
        if (products.length === 0) break;
        afterId = products[products.length - 1]!.id;
        const ids = products.map((p) => p.id);
        for (const id of ids) productIds.add(id);
        const mirrors = await reader.imageMirrors(merchant.id, [...new Set(products.flatMap((p) => p.source.images.map((i) => i.url)))]);
        for (const store of context.stores.filter((s) => s.active)) {
          const hashes = await reader.publishedHashes(store.id, ids);
          for (const product of products) {
            const expected = resolveProduct(product, store, context, mirrors);
            const stored = await reader.publishedPayload(store.id, product.id);
            report.payloadsCompared++;
            const where = `merchant ${merchant.id} store ${store.slug} (${store.id}) product ${product.id} (${product.ref})`;
            if (!stored) {
              problem(`${where}: not published, a full recompute publishes it`);
              continue;
            }
            const payload = decoder.decode(stored);
            const hash = hashes.get(product.id);
            if (payload !== expected.payload) {
              problem(
                `${where}: stored payload differs from a full recompute:\n  stored   ${payload.slice(0, 400)}\n  resolved ${expected.payload.slice(0, 400)}`,
              );
            } else if (hash?.priceHash !== expected.priceHash || hash.contentHash !== expected.contentHash) {
              problem(`${where}: stored price/content hashes differ from a full recompute`);
            }
          }
        }
        report.products += products.length;
      }

      const endpoints = await reader.listWebhookEndpoints(merchant.id);
      report.endpoints += endpoints.length;
      const delivered = await deliveredChanges(reader, endpoints);

      for (const store of context.stores) {
        const published = new Set<number>();
        for (const id of await reader.publishedProductIds(store.id)) {
          published.add(id);
          if (store.active && !productIds.has(id))
            problem(`store ${store.slug} (${store.id}): product ${id} is published but does not exist`);
        }

        // (b) the latest change of each product in the store agrees with what is published
        const latest = new Map<number, ChangeType>();
        await forEachChange(reader, store.id, (change) => {
          report.changes++;
          latest.set(change.product_id, change.change_type);
          // (c) the change reached the outbox or a delivery of every endpoint subscribed to it
          for (const endpoint of endpoints) {
            if (!subscribed(endpoint, store.id, change)) continue;
            const storeId = endpoint.store_id === null && change.change_type === 'removed' ? null : store.id;
            if (delivered.get(endpoint.id)!.has(`${change.change_type}:${storeId}:${change.product_id}`)) report.deliveriesCovered++;
            else
              problem(
                `endpoint ${endpoint.id}: change ${change.id} (${change.change_type}, store ${store.id}, product ${change.product_id}) is neither in the outbox nor in a delivery`,
              );
          }
        });
        const pruned = (await reader.changeHorizon(store.id)) !== undefined;
        for (const id of published) {
          const type = latest.get(id);
          if (type === 'removed')
            problem(`store ${store.slug} (${store.id}): product ${id} is published but its latest change is "removed"`);
          // Retention may have deleted a product's only changes; without pruning every published product has one.
          if (type === undefined && !pruned)
            problem(`store ${store.slug} (${store.id}): product ${id} is published but the feed never announced it`);
        }
        for (const [id, type] of latest) {
          if (!published.has(id) && type !== 'removed') {
            problem(`store ${store.slug} (${store.id}): product ${id} is not published but its latest change is "${type}", not "removed"`);
          }
        }
      }
    }
    return report;
  });
}

/** What resolution reads merchant-wide: the same inputs, loaded the same way, as the publisher's. */
const loadContext = (reader: StorageOperations, merchantId: number) =>
  new CatalogPublisher(() => new Date()).loadContext(scopeToMerchant(reader, merchantId));

async function forEachChange(reader: StorageOperations, storeId: number, visit: (change: StoredChange) => void): Promise<void> {
  for (let at = '', id = 0; ; ) {
    const page = await reader.changesAfter(storeId, { at, id }, PAGE);
    for (const change of page) visit(change);
    if (page.length < PAGE) return;
    ({ created_at: at, id } = page[page.length - 1]!);
  }
}

/**
 * Whether an endpoint's outbox receives this change (scope and event filters, change/recorder.ts).
 * Only changes recorded in a later second than the endpoint's creation count: change timestamps are
 * whole seconds, so one in the same second may predate it. Uses the endpoint's current scope.
 */
function subscribed(endpoint: WebhookEndpointRecord, storeId: number, change: StoredChange): boolean {
  if (endpoint.store_id !== null && endpoint.store_id !== storeId) return false;
  if (!endpoint.events.includes(change.change_type)) return false;
  return change.created_at > wholeSecondIso(endpoint.created_at);
}

/** Per endpoint, every `event:store_id:product_id` waiting in the outbox or carried by a delivery. */
async function deliveredChanges(reader: StorageOperations, endpoints: WebhookEndpointRecord[]): Promise<Map<number, Set<string>>> {
  const covered = new Map<number, Set<string>>(endpoints.map((e) => [e.id, new Set<string>()]));
  for (const group of await reader.outboxGroups()) {
    const keys = covered.get(group.endpointId);
    if (!keys) continue;
    for (const row of await reader.outboxRows(group, group.count)) keys.add(`${group.event}:${group.storeId}:${row.productId}`);
  }
  for (const endpoint of endpoints) {
    const keys = covered.get(endpoint.id)!;
    for (let beforeId: number | undefined; ; ) {
      const deliveries = await reader.listDeliveries(endpoint.id, { limit: PAGE, beforeId });
      for (const delivery of deliveries) {
        for (const productId of delivery.product_ids) keys.add(`${delivery.event}:${delivery.store_id}:${productId}`);
      }
      if (deliveries.length < PAGE) break;
      beforeId = deliveries[deliveries.length - 1]!.id;
    }
  }
  return covered;
}
