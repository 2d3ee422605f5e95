// A merchant's stores (spec 1: a merchant has stores, one of them its default). Writing a store
// re-publishes it when it is active; deleting one leaves no exclusions of its slug behind.
import { OPERATOR, type Actor } from '../admin/audit.js';
import { ProblemError } from '../shared/problem.js';
import type { CatalogWrites } from './catalog-writes.js';
import { notFound } from './catalog-writes.js';
import type { PublishedExclusionCounts, StoreInputRecord, StoreRecord } from './model.js';

export class Stores {
  constructor(private readonly writes: CatalogWrites) {}

  async list(merchantId: number): Promise<StoreRecord[]> {
    return (await this.writes.reads(merchantId)).listStores();
  }

  /** Per store of the merchant: the products it publishes and the excluded ones per reason. */
  async publishedCounts(merchantId: number): Promise<(PublishedExclusionCounts & { store: StoreRecord })[]> {
    const merchant = await this.writes.reads(merchantId);
    const stores = await merchant.listStores();
    return Promise.all(stores.map(async (store) => ({ store, ...(await merchant.publishedCountsByExclusion(store)) })));
  }

  /**
   * Creates or replaces the store; or, given an edit, replaces the existing store with what the
   * edit makes of it (a merge patch), read and written in one transaction (404 without the store).
   */
  async upsert(
    merchantId: number,
    slug: string,
    change: StoreInputRecord | ((current: StoreRecord) => StoreInputRecord),
    actor: Actor = OPERATOR,
  ): Promise<StoreRecord> {
    const store = await this.writes.write(merchantId, actor, async ({ tx, audit, republish }) => {
      const existing = await tx.findStore(slug);
      if (typeof change === 'function' && !existing) throw notFound(`Store "${slug}"`);
      const input = typeof change === 'function' ? change(existing!) : change;
      const isOnlyStore = (await tx.listStores()).every((s) => s.slug === slug);
      // The first store is the default; the default store must stay active and stay default
      // until another store takes over (spec 1: a merchant has one default store).
      const isDefault = input.is_default || isOnlyStore;
      if (existing?.is_default && !input.is_default) {
        throw new ProblemError('conflict', `Store "${slug}" is the default store: make another store the default first.`);
      }
      if (isDefault && !input.active) {
        throw new ProblemError('conflict', `Store "${slug}" is (or becomes) the default store, which must stay active.`);
      }
      const store = await tx.upsertStore(slug, { ...input, is_default: isDefault });
      await audit(
        existing ? 'store.update' : 'store.create',
        `store "${slug}" (${store.name}, ${store.locale}, ${store.currency}${store.is_default ? ', default' : ''}${store.active ? '' : ', inactive'})`,
      );
      // An inactive store is not published (catalog/publish.ts): deactivating it, or changing it
      // while inactive, re-publishes nothing; activating it publishes it through a run.
      if (store.active) await republish([store.id]);
      return store;
    });
    return (await this.writes.of(merchantId).findStore(slug)) ?? store;
  }

  delete(merchantId: number, slug: string, actor: Actor = OPERATOR): Promise<void> {
    return this.writes.write(merchantId, actor, async (write) => {
      const { tx, audit } = write;
      const store = await tx.findStore(slug);
      if (!store) throw notFound(`Store "${slug}"`);
      if (store.is_default) throw new ProblemError('conflict', `Store "${slug}" is the default store and cannot be deleted.`);
      if ((await tx.listWebhookEndpoints()).some((e) => e.store_id === store.id)) {
        throw new ProblemError('conflict', `Webhook endpoints are scoped to store "${slug}"; change or delete them first.`);
      }
      if ((await tx.listPricingRules()).some((r) => r.store_id === store.id)) {
        throw new ProblemError('conflict', `Pricing rules still refer to store "${slug}"; change or delete them first.`);
      }
      // The slug may be taken again later: a deleted store leaves no exclusions behind.
      for (const product of await tx.productsExcludedFrom(slug)) {
        const source = { ...product.source, excluded_stores: product.source.excluded_stores.filter((s) => s !== slug) };
        await tx.upsertProductSource(product.ref, source, write.at);
      }
      await tx.deleteStore(store);
      await audit('store.delete', `store "${slug}"`);
    });
  }
}
