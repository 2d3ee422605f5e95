// Publishing: re-resolves products after a source change and stores the payload per (store,
// product), recording a change per store when the payload changed (spec 6;
// docs/decisions.md#changes-and-the-feed). Runs inside the write's transaction, so reads never resolve on the fly
// and a change is never recorded without its data, nor data without its change. Merchant-wide
// publishing works in bounded chunks and yields the event loop between bounded steps, so reads
// are answered (from the last committed state) while it runs.
//
// Only active stores are published: an inactive store is neither resolved nor
// recorded in the feed nor delivered, and its payloads stay as they were when it was deactivated.
// Activating it publishes it through a publish run: every product whose payload differs from the
// kept one is recorded (a product it never had as price and content), and a kept payload whose
// product was deleted meanwhile as `removed`; a feed cursor taken before the deactivation resumes
// exactly. Deactivating records nothing (docs/decisions.md#stores: an inactive store is not readable, so
// nothing about it is announced; its slug answers 404 and /v1/stores no longer lists it).
import type { MerchantContext, ProductRecord, StoreRecord } from './model.js';
import { resolveProduct } from './resolve.js';
import { ChangeRecorder, type DetectedChange } from '../changes/recorder.js';
import { yieldToOthers } from '../shared/cooperative.js';
import type { PublishedHashes, PublishedPriceRow, PublishedRow, StorageTx } from '../storage/port.js';
import type { MerchantScope } from '../storage/merchant-scope.js';
import type { WebhookEndpointRecord } from '../webhooks/model.js';

/** No product created in the transaction (publishRecords' default). */
const NONE: ReadonlySet<number> = new Set();

/** Products resolved between two checks of the event loop's time slice. */
const RESOLVE_STEP = 16;

/** The stores a publish writes to: the active ones of those named (null: all). */
function publishedStores(context: MerchantContext, storeIds: readonly number[] | null = null): StoreRecord[] {
  return context.stores.filter((s) => s.active && (storeIds === null || storeIds.includes(s.id)));
}

export interface PublishSummary {
  resolved: number;
  changes: number;
}

export class CatalogPublisher {
  private readonly changes: ChangeRecorder;

  constructor(
    now: () => Date,
    /** Products read and resolved per bounded step of a bulk re-publish. */
    private readonly chunkSize = 500,
  ) {
    this.changes = new ChangeRecorder(now);
  }

  /** Everything merchant-wide that resolution reads, loaded once per publish (through the merchant's scope on the transaction or snapshot). */
  async loadContext(scope: MerchantScope): Promise<MerchantContext> {
    const setup = await scope.catalogSetup();
    if (!setup) throw new Error(`merchant ${scope.merchantId} does not exist`);
    const { merchant, stores, customerGroups, pricingRules, exchangeRates, attributeDefinitions, suppliers } = setup;
    return {
      merchantId: scope.merchantId,
      skuPattern: merchant.sku_pattern,
      stores,
      customerGroups,
      pricingRules,
      exchangeRates,
      attributeDefinitions: new Map(attributeDefinitions.map((d) => [d.key, d])),
      suppliersByRef: new Map(suppliers.map((s) => [s.ref, s])),
    };
  }

  /**
   * Re-publishes the given products (every store of the merchant), in the caller's transaction:
   * `merchant` is the merchant's scope on `tx`, whose own operations are keyed by the merchant's stores.
   */
  async publishProducts(tx: StorageTx, merchant: MerchantScope, productIds: number[]): Promise<PublishSummary> {
    const context = await this.loadContext(merchant);
    const summary = { resolved: 0, changes: 0 };
    for (let i = 0; i < productIds.length; i += this.chunkSize) {
      await yieldToOthers();
      const products = await merchant.productsByIds(productIds.slice(i, i + this.chunkSize));
      await yieldToOthers();
      await this.publishChunk(tx, merchant, context, publishedStores(context), products, summary);
    }
    return summary;
  }

  /**
   * publishProducts for products whose sources the caller has just written in `tx` (an import's
   * chunk): resolved from those records, in id order, without reading them back. `created`: those
   * of them created in `tx`, which no store has yet (their payloads are neither looked for nor
   * checked for before they are inserted). `whileResolving`: writes of the transaction that nothing
   * publishing reads depends on, sent once the first chunk's reads are done (the database runs them
   * while the products resolve; awaited with the chunk's writes).
   */
  async publishRecords(
    tx: StorageTx,
    merchant: MerchantScope,
    records: ProductRecord[],
    created: ReadonlySet<number> = NONE,
    whileResolving?: () => Promise<void>,
  ): Promise<PublishSummary> {
    const summary = { resolved: 0, changes: 0 };
    // Nothing to publish (a chunk of sources sent again unchanged): not even the context is read.
    if (records.length === 0) return summary;
    const context = await this.loadContext(merchant);
    const products = [...records].sort((a, b) => a.id - b.id);
    for (let i = 0; i < products.length; i += this.chunkSize) {
      await yieldToOthers();
      const chunk = products.slice(i, i + this.chunkSize);
      await this.publishChunk(
        tx,
        merchant,
        context,
        publishedStores(context),
        chunk,
        summary,
        created,
        i === 0 ? whileResolving : undefined,
      );
    }
    return summary;
  }

  /**
   * Re-publishes every product of the merchant, in bounded chunks (an exchange rate, pricing rule,
   * customer group or store setting can change any payload). `onlyStores` limits it to some stores.
   */
  async publishAll(
    tx: StorageTx,
    merchant: MerchantScope,
    onlyStores?: number[],
    onProgress?: (done: number) => void,
  ): Promise<PublishSummary> {
    const context = await this.loadContext(merchant);
    const stores = publishedStores(context, onlyStores);
    const summary = { resolved: 0, changes: 0 };
    let afterId = 0;
    for (;;) {
      await yieldToOthers();
      const products = await merchant.productsAfter(afterId, this.chunkSize);
      if (products.length === 0) break;
      await yieldToOthers();
      await this.publishChunk(tx, merchant, context, stores, products, summary);
      afterId = products[products.length - 1]!.id;
      onProgress?.(summary.resolved);
    }
    return summary;
  }

  /**
   * Re-publishes the next chunk of the merchant's products after `afterId` in its active stores
   * (of `storeIds`; null: all), adding to `summary`; returns the last product id the chunk covered,
   * or null when none is left. The chunk also takes each store's kept payloads in the same range of
   * ids whose product is gone (deleted while the store was inactive) out of it as `removed`: the
   * products and each store's payloads are walked side by side, a chunk ending where the first of
   * them ends. Each store's payloads of the range are read once, with their hashes: the chunk's
   * products compare with them (no probe per product).
   */
  async publishAfter(
    tx: StorageTx,
    merchant: MerchantScope,
    storeIds: number[] | null,
    afterId: number,
    summary: PublishSummary,
  ): Promise<number | null> {
    const context = await this.loadContext(merchant);
    const stores = publishedStores(context, storeIds);
    const products = await merchant.productsAfter(afterId, this.chunkSize);
    const keptByStore: Map<number, PublishedHashes>[] = [];
    for (const store of stores) keptByStore.push(await tx.publishedHashesAfter(store.id, afterId, this.chunkSize));
    // The chunk covers ids up to where the first full list ends: beyond it, a list is not known.
    let upTo = Infinity;
    let last = 0;
    for (const ids of [products.map((p) => p.id), ...keptByStore.map((kept) => [...kept.keys()])]) {
      if (ids.length > 0) last = Math.max(last, ids[ids.length - 1]!);
      if (ids.length === this.chunkSize) upTo = Math.min(upTo, ids[ids.length - 1]!);
    }
    if (last === 0) return null;
    const end = Math.min(upTo, last);
    const covered = products.filter((p) => p.id <= end);
    // Every covered product's payload, if it has one, is in its store's range read (its id is at most end).
    await this.publishChunk(tx, merchant, context, stores, covered, summary, NONE, undefined, keptByStore);
    const present = new Set(covered.map((p) => p.id));
    const gone: DetectedChange[] = [];
    const touched: number[] = [];
    for (const [index, store] of stores.entries()) {
      const orphans = [...keptByStore[index]!.keys()].filter((id) => id <= end && !present.has(id));
      if (orphans.length === 0) continue;
      await tx.deletePublished(store.id, orphans);
      gone.push(...orphans.map((productId) => ({ storeId: store.id, productId, changeType: 'removed' as const })));
      touched.push(store.id);
    }
    if (gone.length > 0) {
      await this.changes.record(tx, merchant, gone);
      await tx.bumpCatalogVersion(touched);
      summary.changes += gone.length;
    }
    return end;
  }

  /**
   * Removes products from every active store's catalog: a `removed` change where one was published.
   * An inactive store keeps its payloads until it is activated, whose run records the removal.
   */
  async unpublishProducts(tx: StorageTx, merchant: MerchantScope, productIds: number[]): Promise<PublishSummary> {
    const summary = { resolved: 0, changes: 0 };
    if (productIds.length === 0) return summary;
    const touched: number[] = [];
    // The merchant's webhook endpoints, read once for the outbox rows of every store.
    let endpoints: Promise<WebhookEndpointRecord[]> | undefined;
    const listEndpoints = () => (endpoints ??= merchant.listWebhookEndpoints());
    for (const store of (await merchant.listStores()).filter((s) => s.active)) {
      const published = [...(await tx.publishedHashes(store.id, productIds)).keys()];
      if (published.length === 0) continue;
      await tx.deletePublished(store.id, published);
      await this.changes.record(
        tx,
        merchant,
        published.map((productId) => ({ storeId: store.id, productId, changeType: 'removed' as const })),
        listEndpoints,
      );
      summary.changes += published.length;
      touched.push(store.id);
    }
    await tx.bumpCatalogVersion(touched);
    return summary;
  }

  private async publishChunk(
    tx: StorageTx,
    merchant: MerchantScope,
    context: MerchantContext,
    stores: StoreRecord[],
    products: ProductRecord[],
    summary: PublishSummary,
    created: ReadonlySet<number> = NONE,
    whileResolving?: () => Promise<void>,
    /** Each store's published hashes of (at least) these products, when the caller has read them. */
    known?: Map<number, PublishedHashes>[],
  ): Promise<void> {
    if (products.length === 0) return;
    // Products created in this transaction have no payloads yet: only the others' are read.
    const ids = products.flatMap((p) => (created.has(p.id) ? [] : [p.id]));
    const mirrors = await merchant.imageMirrors([...new Set(products.flatMap((p) => p.source.images.map((i) => i.url)))]);
    // Every store's published hashes first: a store's writes below touch only its own rows, so they
    // read the same before them as between them.
    const previousByStore: Map<number, PublishedHashes>[] = known ?? [];
    if (!known) {
      for (const store of stores)
        previousByStore.push(ids.length === 0 ? new Map<number, PublishedHashes>() : await tx.publishedHashes(store.id, ids));
    }
    // The merchant's webhook endpoints, read once for the chunk's outbox rows of every store.
    let endpoints: Promise<WebhookEndpointRecord[]> | undefined;
    const listEndpoints = () => (endpoints ??= merchant.listWebhookEndpoints());
    // A store's writes go out while the next store resolves (node resolves while the database
    // writes): the transaction still runs them in the same order, each store's after the one before.
    let writing: Promise<void> = whileResolving ? whileResolving() : Promise.resolve();
    writing.catch(() => {});
    // Every store's changes are recorded together, once the stores' payloads are written: on
    // PostgreSQL recording them takes the merchant's change sequencer to COMMIT (every other write
    // of the merchant waits for it), which must not be held while the next store resolves.
    const chunkChanges: DetectedChange[] = [];
    // The stores a product is new to: their catalog versions moved together, once the payloads are written.
    const grown: number[] = [];
    for (const [storeIndex, store] of stores.entries()) {
      await yieldToOthers();
      const previous = previousByStore[storeIndex]!;
      const rows: PublishedRow[] = [];
      // Price changes alone (the content hash, which covers the exclusion reason, sku and ean, is
      // unchanged): only the payload and its price hash are rewritten.
      const prices: PublishedPriceRow[] = [];
      const changes: DetectedChange[] = [];
      let added = false;
      for (const [index, product] of products.entries()) {
        if (index % RESOLVE_STEP === 0) await yieldToOthers();
        const resolved = resolveProduct(product, store, context, mirrors);
        summary.resolved++;
        const before = previous.get(product.id);
        if (!before) added = true;
        if (before && before.priceHash === resolved.priceHash && before.contentHash === resolved.contentHash) continue;
        if (before && before.contentHash === resolved.contentHash) prices.push(resolved);
        else rows.push(resolved);
        // Price first, content last: when the feed collapses both into the latest change of the
        // product, the survivor is `content`, which tells a client to fetch the whole product.
        // A product new to the store is announced as both.
        if (!before || before.priceHash !== resolved.priceHash) {
          changes.push({ storeId: store.id, productId: product.id, changeType: 'price' });
        }
        if (!before || before.contentHash !== resolved.contentHash) {
          changes.push({ storeId: store.id, productId: product.id, changeType: 'content' });
        }
      }
      writing = writing.then(async () => {
        await tx.upsertPublished(store.id, rows, created);
        await tx.updatePublishedPrices(store.id, prices);
        await this.changes.outbox(tx, merchant, changes, listEndpoints);
      });
      if (added) grown.push(store.id);
      chunkChanges.push(...changes);
      // Awaited below; a failure meanwhile is not an unhandled rejection (and stops the writes after it).
      writing.catch(() => {});
      summary.changes += changes.length;
    }
    await writing;
    await tx.bumpCatalogVersion(grown);
    await this.changes.positions(merchant, chunkChanges);
    await yieldToOthers();
  }
}
