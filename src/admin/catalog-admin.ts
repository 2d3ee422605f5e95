// The admin side of the catalog: merchants, stores, customer groups, exchange rates, pricing
// rules, suppliers, attribute definitions and product sources. Every write re-publishes the
// products it can affect, in the same transaction (catalog/publish.ts).
import type {
  AttributeDefinitionRecord, ExchangeRateRecord, ProductRecord, ProductSourceDocument, StoreRecord,
} from '../catalog/model.js';
import { parseDecimal } from '../catalog/money.js';
import { CatalogPublisher, type PublishSummary } from '../catalog/publish.js';
import { ProblemError, invalidInput, type InvalidParam } from '../shared/problem.js';
import type {
  CatalogStorage, MerchantRecord, PricingRuleInputRecord, StoreInputRecord,
} from '../storage/port.js';

/** The catch-all rule every merchant has (product decisions: applied_rule_id is never null). */
export const CATCH_ALL_PRIORITY = 2147483647;

/** A product source as the admin API accepts it: every part but the ref is optional. */
export interface ProductSourceInput {
  eans?: string[];
  manufacturer?: string | null;
  content?: Record<string, { title?: string | null; description?: string | null }>;
  images?: { url: string }[];
  offers?: ProductSourceDocument['offers'];
  own_stock?: { quantity: number; cost?: string | null; currency?: string | null } | null;
  supplier_attributes?: ProductSourceDocument['supplier_attributes'];
  overrides?: Record<string, string>;
  excluded_stores?: string[];
}

export function normalizeSource(input: ProductSourceInput): ProductSourceDocument {
  return {
    eans: input.eans ?? [],
    manufacturer: input.manufacturer ?? null,
    content: Object.fromEntries(Object.entries(input.content ?? {}).map(([locale, c]) =>
      [locale, { title: c.title ?? null, description: c.description ?? null }])),
    images: (input.images ?? []).map(({ url }) => ({ url })),
    offers: input.offers ?? [],
    own_stock: input.own_stock
      ? { quantity: input.own_stock.quantity, cost: input.own_stock.cost ?? null, currency: input.own_stock.currency ?? null }
      : null,
    supplier_attributes: input.supplier_attributes ?? [],
    overrides: input.overrides ?? {},
    excluded_stores: input.excluded_stores ?? [],
  };
}

function compareDecimals(a: string, b: string): number {
  const x = parseDecimal(a);
  const y = parseDecimal(b);
  const difference = x.n * y.d - y.n * x.d;
  return difference === 0n ? 0 : difference > 0n ? 1 : -1;
}

const notFound = (what: string) => new ProblemError('not_found', `${what} does not exist.`);

export class CatalogAdmin {
  readonly publisher: CatalogPublisher;

  constructor(
    readonly storage: CatalogStorage,
    readonly now: () => Date = () => new Date(),
    publishChunk = 2000,
  ) {
    this.publisher = new CatalogPublisher(storage, now, publishChunk);
  }

  private at(): string {
    return this.now().toISOString();
  }

  /** Runs a write and re-publishes every product of the merchant in the same transaction. */
  private writeAndRepublish<T>(merchantId: number, write: () => T, onlyStores?: () => number[]): T {
    return this.storage.transaction(() => {
      const result = write();
      this.publisher.publishAll(merchantId, onlyStores?.());
      return result;
    });
  }

  // Merchants

  createMerchant(input: { name: string; sku_pattern?: string | null; owner_emails?: string[] }): MerchantRecord {
    return this.storage.transaction(() => {
      const merchant = this.storage.createMerchant({
        name: input.name, sku_pattern: input.sku_pattern ?? null, owner_emails: input.owner_emails ?? [], created_at: this.at(),
      });
      this.storage.createPricingRule(merchant.id, {
        priority: CATCH_ALL_PRIORITY, customer_group_id: null, store_id: null, manufacturer: null,
        min_cost: null, max_cost: null, markup_percent: '0', markup_amount: '0', price_ending: null,
      }, true);
      return merchant;
    });
  }

  merchant(merchantId: number): MerchantRecord {
    const merchant = this.storage.getMerchant(merchantId);
    if (!merchant) throw notFound(`Merchant ${merchantId}`);
    return merchant;
  }

  updateMerchant(merchantId: number, patch: Partial<Pick<MerchantRecord, 'name' | 'sku_pattern' | 'owner_emails'>>): MerchantRecord {
    this.merchant(merchantId);
    return this.writeAndRepublish(merchantId, () => this.storage.updateMerchant(merchantId, patch)!);
  }

  // Stores

  upsertStore(merchantId: number, slug: string, input: StoreInputRecord): StoreRecord {
    this.merchant(merchantId);
    return this.storage.transaction(() => {
      const existing = this.storage.findStore(merchantId, slug);
      const isOnlyStore = this.storage.listStores(merchantId).every((s) => s.slug === slug);
      // The first store is the default; the default store must stay active and stay default
      // until another store takes over (spec 1: a merchant has one default store).
      const isDefault = input.is_default || isOnlyStore;
      if (existing?.is_default && !input.is_default) {
        throw new ProblemError('conflict', `Store "${slug}" is the default store: make another store the default first.`);
      }
      if (isDefault && !input.active) {
        throw new ProblemError('conflict', `Store "${slug}" is (or becomes) the default store, which must stay active.`);
      }
      const store = this.storage.upsertStore(merchantId, slug, { ...input, is_default: isDefault });
      this.publisher.publishAll(merchantId, [store.id]);
      return this.storage.findStore(merchantId, slug)!;
    });
  }

  deleteStore(merchantId: number, slug: string): void {
    this.merchant(merchantId);
    const store = this.storage.findStore(merchantId, slug);
    if (!store) throw notFound(`Store "${slug}"`);
    if (store.is_default) throw new ProblemError('conflict', `Store "${slug}" is the default store and cannot be deleted.`);
    if (this.storage.listWebhookEndpoints(merchantId).some((e) => e.store_id === store.id)) {
      throw new ProblemError('conflict', `Webhook endpoints are scoped to store "${slug}"; change or delete them first.`);
    }
    if (this.storage.listPricingRules(merchantId).some((r) => r.store_id === store.id)) {
      throw new ProblemError('conflict', `Pricing rules still refer to store "${slug}"; change or delete them first.`);
    }
    this.storage.transaction(() => {
      // The slug may be taken again later: a deleted store leaves no exclusions behind.
      for (const product of this.storage.productsExcludedFrom(merchantId, slug)) {
        const source = { ...product.source, excluded_stores: product.source.excluded_stores.filter((s) => s !== slug) };
        this.storage.upsertProductSource(merchantId, product.ref, source, this.at());
      }
      this.storage.deleteStore(store.id);
    });
  }

  // Customer groups

  createCustomerGroup(merchantId: number, name: string) {
    this.merchant(merchantId);
    if (this.storage.listCustomerGroups(merchantId).some((g) => g.name === name)) {
      throw new ProblemError('conflict', `A customer group named "${name}" already exists.`);
    }
    return this.writeAndRepublish(merchantId, () => this.storage.createCustomerGroup(merchantId, name));
  }

  updateCustomerGroup(merchantId: number, id: number, name: string) {
    this.merchant(merchantId);
    if (this.storage.listCustomerGroups(merchantId).some((g) => g.name === name && g.id !== id)) {
      throw new ProblemError('conflict', `A customer group named "${name}" already exists.`);
    }
    return this.writeAndRepublish(merchantId, () => {
      const group = this.storage.updateCustomerGroup(merchantId, id, name);
      if (!group) throw notFound(`Customer group ${id}`);
      return group;
    });
  }

  deleteCustomerGroup(merchantId: number, id: number): void {
    this.merchant(merchantId);
    if (this.storage.listPricingRules(merchantId).some((r) => r.customer_group_id === id)) {
      throw new ProblemError('conflict', `Pricing rules still refer to customer group ${id}; change or delete them first.`);
    }
    this.writeAndRepublish(merchantId, () => {
      if (!this.storage.deleteCustomerGroup(merchantId, id)) throw notFound(`Customer group ${id}`);
    });
  }

  // Exchange rates

  upsertExchangeRate(merchantId: number, rate: ExchangeRateRecord): ExchangeRateRecord {
    this.merchant(merchantId);
    if (rate.base === rate.quote) {
      throw invalidInput('path', [{ name: 'quote', in: 'path', reason: 'must differ from base' }]);
    }
    if (!/[1-9]/.test(rate.rate)) throw invalidInput('body', [{ name: '/rate', in: 'body', reason: 'must be greater than 0' }]);
    return this.writeAndRepublish(merchantId, () => this.storage.upsertExchangeRate(merchantId, rate),
      () => this.storesPricedIn(merchantId, rate.base, rate.quote));
  }

  /** A rate converts only between its two currencies (directly or inverted), so only stores in them can change. */
  private storesPricedIn(merchantId: number, ...currencies: string[]): number[] {
    return this.storage.listStores(merchantId).filter((s) => currencies.includes(s.currency)).map((s) => s.id);
  }

  deleteExchangeRate(merchantId: number, base: string, quote: string): void {
    this.merchant(merchantId);
    this.writeAndRepublish(merchantId, () => {
      if (!this.storage.deleteExchangeRate(merchantId, base, quote)) throw notFound(`Exchange rate ${base}/${quote}`);
    }, () => this.storesPricedIn(merchantId, base, quote));
  }

  // Pricing rules

  private checkRuleReferences(merchantId: number, input: PricingRuleInputRecord): void {
    const problems: InvalidParam[] = [];
    if (input.customer_group_id !== null && !this.storage.listCustomerGroups(merchantId).some((g) => g.id === input.customer_group_id)) {
      problems.push({ name: '/customer_group_id', in: 'body', reason: 'is not a customer group of this merchant' });
    }
    if (input.store_id !== null && !this.storage.listStores(merchantId).some((s) => s.id === input.store_id)) {
      problems.push({ name: '/store_id', in: 'body', reason: 'is not a store of this merchant' });
    }
    if (input.min_cost !== null && input.max_cost !== null && compareDecimals(input.min_cost, input.max_cost) > 0) {
      problems.push({ name: '/min_cost', in: 'body', reason: 'must not exceed max_cost' });
    }
    if (problems.length) throw invalidInput('body', problems);
  }

  createPricingRule(merchantId: number, input: PricingRuleInputRecord) {
    this.merchant(merchantId);
    this.checkRuleReferences(merchantId, input);
    if (input.priority >= CATCH_ALL_PRIORITY) {
      throw invalidInput('body', [{ name: '/priority', in: 'body', reason: `must be below ${CATCH_ALL_PRIORITY} (the catch-all rule runs last)` }]);
    }
    return this.writeAndRepublish(merchantId, () => this.storage.createPricingRule(merchantId, input));
  }

  updatePricingRule(merchantId: number, id: number, input: PricingRuleInputRecord) {
    this.merchant(merchantId);
    const current = this.storage.getPricingRule(merchantId, id);
    if (!current) throw notFound(`Pricing rule ${id}`);
    // The catch-all keeps matching everything and running last; only its markup and ending change.
    if (current.is_catch_all) {
      const conditions = [input.customer_group_id, input.store_id, input.manufacturer, input.min_cost, input.max_cost];
      if (input.priority !== CATCH_ALL_PRIORITY || conditions.some((c) => c !== null)) {
        throw new ProblemError('conflict', `The catch-all rule keeps priority ${CATCH_ALL_PRIORITY} and no conditions; only its markups and price ending change.`);
      }
    } else if (input.priority >= CATCH_ALL_PRIORITY) {
      throw invalidInput('body', [{ name: '/priority', in: 'body', reason: `must be below ${CATCH_ALL_PRIORITY} (the catch-all rule runs last)` }]);
    }
    this.checkRuleReferences(merchantId, input);
    return this.writeAndRepublish(merchantId, () => this.storage.updatePricingRule(merchantId, id, input)!);
  }

  deletePricingRule(merchantId: number, id: number): void {
    this.merchant(merchantId);
    const rule = this.storage.getPricingRule(merchantId, id);
    if (!rule) throw notFound(`Pricing rule ${id}`);
    if (rule.is_catch_all) throw new ProblemError('conflict', 'The catch-all pricing rule cannot be deleted; edit its markup instead.');
    this.writeAndRepublish(merchantId, () => this.storage.deletePricingRule(merchantId, id));
  }

  // Suppliers and attribute definitions

  upsertSupplier(merchantId: number, ref: string, name: string) {
    this.merchant(merchantId);
    return this.storage.upsertSupplier(merchantId, ref, name);
  }

  deleteSupplier(merchantId: number, ref: string): void {
    this.merchant(merchantId);
    if (this.storage.isSupplierReferenced(merchantId, ref)) {
      throw new ProblemError('conflict', `Supplier "${ref}" still has offers; remove them from the products first.`);
    }
    if (!this.storage.deleteSupplier(merchantId, ref)) throw notFound(`Supplier "${ref}"`);
  }

  upsertAttributeDefinition(merchantId: number, definition: AttributeDefinitionRecord) {
    this.merchant(merchantId);
    return this.writeAndRepublish(merchantId, () => this.storage.upsertAttributeDefinition(merchantId, definition));
  }

  deleteAttributeDefinition(merchantId: number, key: string): void {
    this.merchant(merchantId);
    this.writeAndRepublish(merchantId, () => {
      if (!this.storage.deleteAttributeDefinition(merchantId, key)) throw notFound(`Attribute definition "${key}"`);
    });
  }

  // Products

  /** Problems with a source's references to suppliers and stores (JSON pointers under `base`). */
  sourceProblems(merchantId: number, source: ProductSourceDocument, base = ''): InvalidParam[] {
    const suppliers = new Set(this.storage.listSuppliers(merchantId).map((s) => s.ref));
    const stores = new Set(this.storage.listStores(merchantId).map((s) => s.slug));
    const problems: InvalidParam[] = [];
    const seen = new Set<string>();
    source.offers.forEach((offer, i) => {
      if (!suppliers.has(offer.supplier_ref)) problems.push({ name: `${base}/offers/${i}/supplier_ref`, in: 'body', reason: `unknown supplier "${offer.supplier_ref}"` });
      if (seen.has(offer.supplier_ref)) problems.push({ name: `${base}/offers/${i}/supplier_ref`, in: 'body', reason: 'one offer per supplier' });
      seen.add(offer.supplier_ref);
    });
    const seenValues = new Set<string>();
    source.supplier_attributes.forEach((value, i) => {
      if (!suppliers.has(value.supplier_ref)) problems.push({ name: `${base}/supplier_attributes/${i}/supplier_ref`, in: 'body', reason: `unknown supplier "${value.supplier_ref}"` });
      const pair = `${value.supplier_ref}\u0000${value.key}`;
      if (seenValues.has(pair)) problems.push({ name: `${base}/supplier_attributes/${i}/key`, in: 'body', reason: 'one value per supplier and key' });
      seenValues.add(pair);
    });
    source.eans.forEach((ean, i) => {
      if (source.eans.indexOf(ean) !== i) problems.push({ name: `${base}/eans/${i}`, in: 'body', reason: 'is listed twice' });
    });
    source.excluded_stores.forEach((slug, i) => {
      if (!stores.has(slug)) problems.push({ name: `${base}/excluded_stores/${i}`, in: 'body', reason: `unknown store "${slug}"` });
    });
    const own = source.own_stock;
    if (own && (own.cost === null) !== (own.currency === null)) {
      problems.push({ name: `${base}/own_stock`, in: 'body', reason: 'cost and currency are given together' });
    }
    return problems;
  }

  product(merchantId: number, ref: string): ProductRecord {
    this.merchant(merchantId);
    const product = this.storage.findProductByRef(merchantId, ref);
    if (!product) throw notFound(`Product "${ref}"`);
    return product;
  }

  upsertProduct(merchantId: number, ref: string, input: ProductSourceInput): ProductRecord & { created: boolean } {
    this.merchant(merchantId);
    const source = normalizeSource(input);
    const problems = this.sourceProblems(merchantId, source);
    if (problems.length) throw invalidInput('body', problems);
    return this.storage.transaction(() => {
      const { id, created } = this.storage.upsertProductSource(merchantId, ref, source, this.at());
      // The mirror learns of new image sources with the write (state is per source URL).
      this.storage.ensureImageMirrors(merchantId, source.images.map((i) => i.url), this.at());
      this.publisher.publishProducts(merchantId, [id]);
      return { id, ref, source, created };
    });
  }

  deleteProduct(merchantId: number, ref: string): void {
    const product = this.product(merchantId, ref);
    this.storage.transaction(() => {
      this.storage.deleteProduct(merchantId, product.id);
      this.publisher.unpublishProducts(merchantId, [product.id]);
    });
  }

  /** Applies upserts and deletes as one unit per chunk (used by the NDJSON import). */
  applyProductBatch(
    merchantId: number,
    operations: ({ op: 'upsert_product'; ref: string; source: ProductSourceDocument } | { op: 'delete_product'; ref: string })[],
  ): { upserted: number; deleted: number } & PublishSummary {
    return this.storage.transaction(() => {
      const at = this.at();
      const upsertedIds: number[] = [];
      const deletedIds: number[] = [];
      for (const operation of operations) {
        if (operation.op === 'upsert_product') {
          upsertedIds.push(this.storage.upsertProductSource(merchantId, operation.ref, operation.source, at).id);
          this.storage.ensureImageMirrors(merchantId, operation.source.images.map((i) => i.url), at);
        } else {
          const existing = this.storage.findProductByRef(merchantId, operation.ref);
          if (!existing) continue;
          this.storage.deleteProduct(merchantId, existing.id);
          deletedIds.push(existing.id);
        }
      }
      const published = this.publisher.publishProducts(merchantId, [...new Set(upsertedIds)].filter((id) => !deletedIds.includes(id)));
      const removed = this.publisher.unpublishProducts(merchantId, deletedIds);
      return {
        upserted: upsertedIds.length, deleted: deletedIds.length,
        resolved: published.resolved, changes: published.changes + removed.changes,
      };
    });
  }
}
