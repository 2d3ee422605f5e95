// Publishing: re-resolves products after a source change and stores the payload per (store,
// product), recording a change per store when the payload changed (spec 6; product decisions,
// "Changes and the feed"). Runs inside the write's transaction, so reads never resolve on the fly
// and a change is never recorded without its data, nor data without its change.
import type { MerchantContext, ProductRecord, StoreRecord } from './model.js';
import { resolveProduct } from './resolve.js';
import { ChangeRecorder, type DetectedChange } from '../changes/recorder.js';
import type { CatalogStorage, PublishedRow } from '../storage/port.js';

export interface PublishSummary {
  resolved: number;
  changes: number;
}

export class CatalogPublisher {
  private readonly changes: ChangeRecorder;

  constructor(
    private readonly storage: CatalogStorage,
    now: () => Date,
    /** Products resolved per bounded step of a bulk re-publish. */
    private readonly chunkSize = 2000,
  ) {
    this.changes = new ChangeRecorder(storage, now);
  }

  /** Everything merchant-wide that resolution reads, loaded once per publish. */
  loadContext(merchantId: number): MerchantContext {
    const merchant = this.storage.getMerchant(merchantId);
    if (!merchant) throw new Error(`merchant ${merchantId} does not exist`);
    return {
      merchantId,
      skuPattern: merchant.sku_pattern,
      stores: this.storage.listStores(merchantId),
      customerGroups: this.storage.listCustomerGroups(merchantId),
      pricingRules: this.storage.listPricingRules(merchantId),
      exchangeRates: this.storage.listExchangeRates(merchantId),
      attributeDefinitions: new Map(this.storage.listAttributeDefinitions(merchantId).map((d) => [d.key, d])),
      suppliersByRef: new Map(this.storage.listSuppliers(merchantId).map((s) => [s.ref, s])),
    };
  }

  /** Re-publishes the given products (every store of the merchant). */
  publishProducts(merchantId: number, productIds: number[]): PublishSummary {
    return this.storage.transaction(() => {
      const context = this.loadContext(merchantId);
      const summary = { resolved: 0, changes: 0 };
      for (let i = 0; i < productIds.length; i += this.chunkSize) {
        const products = this.storage.productsByIds(merchantId, productIds.slice(i, i + this.chunkSize));
        this.publishChunk(context, context.stores, products, summary);
      }
      return summary;
    });
  }

  /**
   * Re-publishes every product of the merchant, in bounded chunks (an exchange rate, pricing rule,
   * customer group or store setting can change any payload). `onlyStores` limits it to some stores.
   */
  publishAll(merchantId: number, onlyStores?: number[], onProgress?: (done: number) => void): PublishSummary {
    return this.storage.transaction(() => {
      const context = this.loadContext(merchantId);
      const stores = onlyStores ? context.stores.filter((s) => onlyStores.includes(s.id)) : context.stores;
      const summary = { resolved: 0, changes: 0 };
      let afterId = 0;
      for (;;) {
        const products = this.storage.productsAfter(merchantId, afterId, this.chunkSize);
        if (products.length === 0) break;
        this.publishChunk(context, stores, products, summary);
        afterId = products[products.length - 1]!.id;
        onProgress?.(summary.resolved);
      }
      return summary;
    });
  }

  /** Removes products from every store's catalog: a `removed` change where one was published. */
  unpublishProducts(merchantId: number, productIds: number[]): PublishSummary {
    return this.storage.transaction(() => {
      const summary = { resolved: 0, changes: 0 };
      const touched: number[] = [];
      for (const store of this.storage.listStores(merchantId)) {
        const published = [...this.storage.publishedHashes(store.id, productIds).keys()];
        if (published.length === 0) continue;
        this.storage.deletePublished(store.id, published);
        this.changes.record(merchantId, published.map((productId) => ({ storeId: store.id, productId, changeType: 'removed' as const })));
        summary.changes += published.length;
        touched.push(store.id);
      }
      this.storage.bumpCatalogVersion(touched);
      return summary;
    });
  }

  private publishChunk(
    context: MerchantContext, stores: StoreRecord[], products: ProductRecord[], summary: PublishSummary,
  ): void {
    if (products.length === 0) return;
    const ids = products.map((p) => p.id);
    const mirrors = this.storage.imageMirrors(context.merchantId, [
      ...new Set(products.flatMap((p) => p.source.images.map((i) => i.url))),
    ]);
    for (const store of stores) {
      const previous = this.storage.publishedHashes(store.id, ids);
      const rows: PublishedRow[] = [];
      const changes: DetectedChange[] = [];
      let added = false;
      for (const product of products) {
        const resolved = resolveProduct(product, store, context, mirrors);
        summary.resolved++;
        const before = previous.get(product.id);
        if (!before) added = true;
        if (before && before.priceHash === resolved.priceHash && before.contentHash === resolved.contentHash) continue;
        rows.push(resolved);
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
      this.storage.upsertPublished(store.id, rows);
      this.changes.record(context.merchantId, changes);
      summary.changes += changes.length;
      if (added) this.storage.bumpCatalogVersion([store.id]);
    }
  }
}
