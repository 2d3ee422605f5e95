// The admin side of the catalog: merchants, stores, customer groups, exchange rates, pricing
// rules, suppliers, attribute definitions and product sources. Every write re-publishes the
// products it can affect, in the same transaction (catalog/publish.ts), and is recorded in the
// merchant's audit log in that transaction, as done by its actor (`operator` by default: the
// admin API and the CLI; the panel passes its user).
import type {
  AttributeDefinitionRecord, ExchangeRateRecord, ProductRecord, ProductSourceDocument, StoreRecord,
} from '../catalog/model.js';
import { currenciesRepriced, parseDecimal } from '../catalog/money.js';
import type { components } from '../generated/admin-api.js';
import { CatalogPublisher, type PublishSummary } from '../catalog/publish.js';
import { PublishRuns } from '../catalog/publish-runs.js';
import { explainResolution, type ResolutionExplanation } from '../catalog/resolve.js';
import { ProblemError, invalidInput, type InvalidParam } from '../shared/problem.js';
import { issueApiKey, type ActiveApiKeys } from './api-keys.js';
import { audit, OPERATOR, type Actor, type AuditAction } from './audit.js';
import { DEFAULT_PRODUCT_LIMITS, productLimitProblems, type ProductLimits } from './product-limits.js';
import { retryDeadImages } from '../images/retry.js';
import { yieldToOthers } from '../shared/cooperative.js';
import type {
  ApiKeyRecord, CatalogStorage, ImageMirrorWork, ImageStateCounts, MerchantRecord, PricingRuleInputRecord, PricingRuleRecord, ProductListPage,
  PublishedExclusionCounts, StorageOperations, StorageTx, StoreInputRecord,
} from '../storage/port.js';

/** Upserts written in one storage call at most (a bound on one statement's size and on how long it holds the loop). */
const UPSERT_RUN = 100;

/** The catch-all rule every merchant has (docs/decisions.md#resolution: applied_rule_id is never null). */
export const CATCH_ALL_PRIORITY = 2147483647;

/** A product source as the admin API accepts it: every part but the ref is optional. */
/** One checked line of an import: a product to upsert or delete (with its line number in the file). */
export type ProductOperation = { op: 'upsert_product'; ref: string; source: ProductSourceDocument; line?: number }
  | { op: 'delete_product'; ref: string; line?: number };

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

/** A product's source with each image's mirroring state, as the admin API shows it (generated). */
export type ProductSourceView = components['schemas']['ProductSource'];

/** The suppliers and stores a product source may name, loaded once per request or import. */
export interface SourceReferences {
  suppliers: Set<string>;
  stores: Set<string>;
}

/** A pricing rule in the audit log: its id, priority and what it does. */
function ruleDetail(rule: PricingRuleRecord): string {
  const markup = [rule.markup_percent !== '0' && `+${rule.markup_percent}%`, rule.markup_amount !== '0' && `+${rule.markup_amount}`]
    .filter(Boolean).join(' ') || 'no markup';
  return `pricing rule ${rule.id} (priority ${rule.priority}, ${markup}${rule.price_ending ? `, ending ${rule.price_ending}` : ''})`;
}

export class CatalogAdmin {
  readonly publisher: CatalogPublisher;
  /** Merchant-wide re-publishing, a chunk per transaction; `serve` and `worker` resume interrupted runs. */
  readonly publishRuns: PublishRuns;

  constructor(
    readonly storage: CatalogStorage,
    readonly now: () => Date = () => new Date(),
    publishChunk = 500,
    /** This process's remembered API keys (http auth): a revoked key is forgotten at once. */
    private readonly apiKeys?: Pick<ActiveApiKeys, 'forget'>,
    publishRunLeaseMs?: number,
    /** The bounds of one product's source (configuration: `config.limits`). */
    readonly productLimits: ProductLimits = DEFAULT_PRODUCT_LIMITS,
  ) {
    this.publisher = new CatalogPublisher(now, publishChunk);
    this.publishRuns = new PublishRuns(storage, this.publisher, now, publishRunLeaseMs);
  }

  private at(): string {
    return this.now().toISOString();
  }

  /** Records the change in the merchant's audit log, on `tx`: it commits with the change. */
  private audit(tx: StorageTx, merchantId: number, actor: Actor, action: AuditAction, detail: string): Promise<void> {
    return audit(tx, merchantId, actor, action, detail, this.now());
  }

  /** 404 unless the merchant exists (on tx inside a transaction). */
  private async merchantIn(reader: StorageOperations, merchantId: number): Promise<MerchantRecord> {
    const merchant = await reader.getMerchant(merchantId);
    if (!merchant) throw notFound(`Merchant ${merchantId}`);
    return merchant;
  }

  /**
   * Runs a write of the merchant's, then re-publishes every product of the merchant (or of some of
   * its stores): the checks and the write see one state and commit with a publish run, which
   * re-publishes a chunk per transaction (catalog/publish-runs.ts); resolves when it has ended.
   */
  private async writeAndRepublish<T>(
    merchantId: number, write: (tx: StorageTx) => Promise<T>, onlyStores?: (tx: StorageTx) => Promise<number[]>,
  ): Promise<T> {
    const { result, run } = await this.storage.transaction(async (tx) => {
      await this.merchantIn(tx, merchantId);
      const result = await write(tx);
      const stores = (await onlyStores?.(tx)) ?? null;
      // No store to re-publish: no run (it would read every product for nothing).
      return { result, run: stores?.length === 0 ? null : await this.publishRuns.begin(tx, merchantId, stores) };
    });
    if (run) await this.publishRuns.complete(run);
    return result;
  }

  // Merchants and keys

  listMerchants(): Promise<MerchantRecord[]> {
    return this.storage.listMerchants();
  }

  createMerchant(input: { name: string; sku_pattern?: string | null; owner_emails?: string[] }, actor: Actor = OPERATOR): Promise<MerchantRecord> {
    return this.storage.transaction(async (tx) => {
      const merchant = await tx.createMerchant({
        name: input.name, sku_pattern: input.sku_pattern ?? null, owner_emails: input.owner_emails ?? [], created_at: this.at(),
      });
      await tx.createPricingRule(merchant.id, {
        priority: CATCH_ALL_PRIORITY, customer_group_id: null, store_id: null, manufacturer: null,
        min_cost: null, max_cost: null, markup_percent: '0', markup_amount: '0', price_ending: null,
      }, true);
      await this.audit(tx, merchant.id, actor, 'merchant.create', `merchant ${merchant.id} "${merchant.name}"`);
      return merchant;
    });
  }

  merchant(merchantId: number): Promise<MerchantRecord> {
    return this.merchantIn(this.storage, merchantId);
  }

  updateMerchant(
    merchantId: number, patch: Partial<Pick<MerchantRecord, 'name' | 'sku_pattern' | 'owner_emails'>>, actor: Actor = OPERATOR,
  ): Promise<MerchantRecord> {
    return this.writeAndRepublish(merchantId, async (tx) => {
      const merchant = (await tx.updateMerchant(merchantId, patch))!;
      const changed = Object.entries(patch).filter(([, value]) => value !== undefined)
        .map(([field, value]) => `${field} ${Array.isArray(value) ? value.join(', ') || 'none' : JSON.stringify(value)}`);
      await this.audit(tx, merchantId, actor, 'merchant.update', `merchant ${merchantId}: ${changed.join('; ') || 'unchanged'}`);
      return merchant;
    });
  }

  async listApiKeys(merchantId: number): Promise<ApiKeyRecord[]> {
    await this.merchant(merchantId);
    return this.storage.listApiKeys(merchantId);
  }

  /** A new key for the merchant: the plain key is in this result and never again. */
  createApiKey(merchantId: number, name: string, actor: Actor = OPERATOR): Promise<ApiKeyRecord & { key: string }> {
    return this.storage.transaction(async (tx) => {
      await this.merchantIn(tx, merchantId);
      const created = await issueApiKey(tx, merchantId, name, this.now());
      await this.audit(tx, merchantId, actor, 'api_key.create', `key ${created.id} "${created.name}" (${created.prefix})`);
      return created;
    });
  }

  async revokeApiKey(merchantId: number, keyId: number, actor: Actor = OPERATOR): Promise<void> {
    await this.storage.transaction(async (tx) => {
      await this.merchantIn(tx, merchantId);
      if (!await tx.revokeApiKey(merchantId, keyId, this.at())) throw notFound(`API key ${keyId}`);
      await this.audit(tx, merchantId, actor, 'api_key.revoke', `key ${keyId}`);
    });
    // After the commit: a lookup that starts now reads the revocation.
    this.apiKeys?.forget(keyId);
  }

  // Stores

  async listStores(merchantId: number): Promise<StoreRecord[]> {
    await this.merchant(merchantId);
    return this.storage.listStores(merchantId);
  }

  /** Per store of the merchant: the products it publishes and the excluded ones per reason. */
  async publishedCounts(merchantId: number): Promise<(PublishedExclusionCounts & { store: StoreRecord })[]> {
    const stores = await this.listStores(merchantId);
    return Promise.all(stores.map(async (store) => ({ store, ...await this.storage.publishedCountsByExclusion(store.id) })));
  }

  async upsertStore(merchantId: number, slug: string, input: StoreInputRecord, actor: Actor = OPERATOR): Promise<StoreRecord> {
    const { store, run } = await this.storage.transaction(async (tx) => {
      await this.merchantIn(tx, merchantId);
      const existing = await tx.findStore(merchantId, slug);
      const isOnlyStore = (await tx.listStores(merchantId)).every((s) => s.slug === slug);
      // The first store is the default; the default store must stay active and stay default
      // until another store takes over (spec 1: a merchant has one default store).
      const isDefault = input.is_default || isOnlyStore;
      if (existing?.is_default && !input.is_default) {
        throw new ProblemError('conflict', `Store "${slug}" is the default store: make another store the default first.`);
      }
      if (isDefault && !input.active) {
        throw new ProblemError('conflict', `Store "${slug}" is (or becomes) the default store, which must stay active.`);
      }
      const store = await tx.upsertStore(merchantId, slug, { ...input, is_default: isDefault });
      await this.audit(tx, merchantId, actor, existing ? 'store.update' : 'store.create',
        `store "${slug}" (${store.name}, ${store.locale}, ${store.currency}${store.is_default ? ', default' : ''}${store.active ? '' : ', inactive'})`);
      // An inactive store is not published (catalog/publish.ts): deactivating it, or changing it
      // while inactive, re-publishes nothing; activating it publishes it through a run.
      return { store, run: store.active ? await this.publishRuns.begin(tx, merchantId, [store.id]) : null };
    });
    if (run) await this.publishRuns.complete(run);
    return (await this.storage.findStore(merchantId, slug)) ?? store;
  }

  deleteStore(merchantId: number, slug: string, actor: Actor = OPERATOR): Promise<void> {
    return this.storage.transaction(async (tx) => {
      await this.merchantIn(tx, merchantId);
      const store = await tx.findStore(merchantId, slug);
      if (!store) throw notFound(`Store "${slug}"`);
      if (store.is_default) throw new ProblemError('conflict', `Store "${slug}" is the default store and cannot be deleted.`);
      if ((await tx.listWebhookEndpoints(merchantId)).some((e) => e.store_id === store.id)) {
        throw new ProblemError('conflict', `Webhook endpoints are scoped to store "${slug}"; change or delete them first.`);
      }
      if ((await tx.listPricingRules(merchantId)).some((r) => r.store_id === store.id)) {
        throw new ProblemError('conflict', `Pricing rules still refer to store "${slug}"; change or delete them first.`);
      }
      // The slug may be taken again later: a deleted store leaves no exclusions behind.
      for (const product of await tx.productsExcludedFrom(merchantId, slug)) {
        const source = { ...product.source, excluded_stores: product.source.excluded_stores.filter((s) => s !== slug) };
        await tx.upsertProductSource(merchantId, product.ref, source, this.at());
      }
      await tx.deleteStore(store.id);
      await this.audit(tx, merchantId, actor, 'store.delete', `store "${slug}"`);
    });
  }

  // Customer groups

  async listCustomerGroups(merchantId: number) {
    await this.merchant(merchantId);
    return this.storage.listCustomerGroups(merchantId);
  }

  createCustomerGroup(merchantId: number, name: string, actor: Actor = OPERATOR) {
    return this.writeAndRepublish(merchantId, async (tx) => {
      if ((await tx.listCustomerGroups(merchantId)).some((g) => g.name === name)) {
        throw new ProblemError('conflict', `A customer group named "${name}" already exists.`);
      }
      const group = await tx.createCustomerGroup(merchantId, name);
      await this.audit(tx, merchantId, actor, 'customer_group.create', `customer group ${group.id} "${name}"`);
      return group;
    });
  }

  updateCustomerGroup(merchantId: number, id: number, name: string, actor: Actor = OPERATOR) {
    return this.writeAndRepublish(merchantId, async (tx) => {
      if ((await tx.listCustomerGroups(merchantId)).some((g) => g.name === name && g.id !== id)) {
        throw new ProblemError('conflict', `A customer group named "${name}" already exists.`);
      }
      const group = await tx.updateCustomerGroup(merchantId, id, name);
      if (!group) throw notFound(`Customer group ${id}`);
      await this.audit(tx, merchantId, actor, 'customer_group.update', `customer group ${id} "${name}"`);
      return group;
    });
  }

  deleteCustomerGroup(merchantId: number, id: number, actor: Actor = OPERATOR): Promise<void> {
    return this.writeAndRepublish(merchantId, async (tx) => {
      if ((await tx.listPricingRules(merchantId)).some((r) => r.customer_group_id === id)) {
        throw new ProblemError('conflict', `Pricing rules still refer to customer group ${id}; change or delete them first.`);
      }
      if (!await tx.deleteCustomerGroup(merchantId, id)) throw notFound(`Customer group ${id}`);
      await this.audit(tx, merchantId, actor, 'customer_group.delete', `customer group ${id}`);
    });
  }

  // Exchange rates

  async listExchangeRates(merchantId: number) {
    await this.merchant(merchantId);
    return this.storage.listExchangeRates(merchantId);
  }

  upsertExchangeRate(merchantId: number, rate: ExchangeRateRecord, actor: Actor = OPERATOR): Promise<ExchangeRateRecord> {
    if (rate.base === rate.quote) {
      throw invalidInput('path', [{ name: 'quote', in: 'path', reason: 'must differ from base' }]);
    }
    if (!/[1-9]/.test(rate.rate)) throw invalidInput('body', [{ name: '/rate', in: 'body', reason: 'must be greater than 0' }]);
    let before: ExchangeRateRecord[] = [];
    return this.writeAndRepublish(merchantId, async (tx) => {
      before = await tx.listExchangeRates(merchantId);
      const existed = before.some((r) => r.base === rate.base && r.quote === rate.quote);
      const written = await tx.upsertExchangeRate(merchantId, rate);
      await this.audit(tx, merchantId, actor, existed ? 'exchange_rate.update' : 'exchange_rate.create', `${rate.base}/${rate.quote} = ${written.rate}`);
      return written;
    }, (tx) => this.storesRepriced(tx, merchantId, before));
  }

  /**
   * The stores into whose currency some currency the merchant's products bill in now converts
   * differently: a rate converts between its two currencies, and also between any two currencies
   * whose path passes through it (money.ts), so a store of a third currency can be re-priced too.
   */
  private async storesRepriced(tx: StorageTx, merchantId: number, before: ExchangeRateRecord[]): Promise<number[]> {
    const [stores, after] = await Promise.all([tx.listStores(merchantId), tx.listExchangeRates(merchantId)]);
    const rated = [...new Set([...before, ...after].flatMap((r) => [r.base, r.quote]))].sort();
    const billed = await tx.currenciesInUse(merchantId, rated);
    const repriced = currenciesRepriced(before, after, new Set(stores.map((s) => s.currency)), billed);
    return stores.filter((s) => repriced.has(s.currency)).map((s) => s.id);
  }

  deleteExchangeRate(merchantId: number, base: string, quote: string, actor: Actor = OPERATOR): Promise<void> {
    let before: ExchangeRateRecord[] = [];
    return this.writeAndRepublish(merchantId, async (tx) => {
      before = await tx.listExchangeRates(merchantId);
      if (!await tx.deleteExchangeRate(merchantId, base, quote)) throw notFound(`Exchange rate ${base}/${quote}`);
      await this.audit(tx, merchantId, actor, 'exchange_rate.delete', `${base}/${quote}`);
    }, (tx) => this.storesRepriced(tx, merchantId, before));
  }

  // Pricing rules

  async listPricingRules(merchantId: number) {
    await this.merchant(merchantId);
    return this.storage.listPricingRules(merchantId);
  }

  private async checkRuleReferences(tx: StorageTx, merchantId: number, input: PricingRuleInputRecord): Promise<void> {
    const problems: InvalidParam[] = [];
    if (input.customer_group_id !== null && !(await tx.listCustomerGroups(merchantId)).some((g) => g.id === input.customer_group_id)) {
      problems.push({ name: '/customer_group_id', in: 'body', reason: 'is not a customer group of this merchant' });
    }
    if (input.store_id !== null && !(await tx.listStores(merchantId)).some((s) => s.id === input.store_id)) {
      problems.push({ name: '/store_id', in: 'body', reason: 'is not a store of this merchant' });
    }
    if (input.min_cost !== null && input.max_cost !== null && compareDecimals(input.min_cost, input.max_cost) > 0) {
      problems.push({ name: '/min_cost', in: 'body', reason: 'must not exceed max_cost' });
    }
    if (problems.length) throw invalidInput('body', problems);
  }

  createPricingRule(merchantId: number, input: PricingRuleInputRecord, actor: Actor = OPERATOR) {
    return this.writeAndRepublish(merchantId, async (tx) => {
      await this.checkRuleReferences(tx, merchantId, input);
      if (input.priority >= CATCH_ALL_PRIORITY) {
        throw invalidInput('body', [{ name: '/priority', in: 'body', reason: `must be below ${CATCH_ALL_PRIORITY} (the catch-all rule runs last)` }]);
      }
      const rule = await tx.createPricingRule(merchantId, input);
      await this.audit(tx, merchantId, actor, 'pricing_rule.create', ruleDetail(rule));
      return rule;
    });
  }

  updatePricingRule(merchantId: number, id: number, input: PricingRuleInputRecord, actor: Actor = OPERATOR) {
    return this.writeAndRepublish(merchantId, async (tx) => {
      const current = await tx.getPricingRule(merchantId, id);
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
      await this.checkRuleReferences(tx, merchantId, input);
      const rule = (await tx.updatePricingRule(merchantId, id, input))!;
      await this.audit(tx, merchantId, actor, 'pricing_rule.update', ruleDetail(rule));
      return rule;
    });
  }

  deletePricingRule(merchantId: number, id: number, actor: Actor = OPERATOR): Promise<void> {
    return this.writeAndRepublish(merchantId, async (tx) => {
      const rule = await tx.getPricingRule(merchantId, id);
      if (!rule) throw notFound(`Pricing rule ${id}`);
      if (rule.is_catch_all) throw new ProblemError('conflict', 'The catch-all pricing rule cannot be deleted; edit its markup instead.');
      await tx.deletePricingRule(merchantId, id);
      await this.audit(tx, merchantId, actor, 'pricing_rule.delete', `pricing rule ${id}`);
    });
  }

  // Suppliers and attribute definitions

  async listSuppliers(merchantId: number) {
    await this.merchant(merchantId);
    return this.storage.listSuppliers(merchantId);
  }

  upsertSupplier(merchantId: number, ref: string, name: string, actor: Actor = OPERATOR) {
    return this.storage.transaction(async (tx) => {
      await this.merchantIn(tx, merchantId);
      const existed = (await tx.listSuppliers(merchantId)).some((s) => s.ref === ref);
      const supplier = await tx.upsertSupplier(merchantId, ref, name);
      await this.audit(tx, merchantId, actor, existed ? 'supplier.update' : 'supplier.create', `supplier "${ref}" (${name})`);
      return supplier;
    });
  }

  deleteSupplier(merchantId: number, ref: string, actor: Actor = OPERATOR): Promise<void> {
    return this.storage.transaction(async (tx) => {
      await this.merchantIn(tx, merchantId);
      if (await tx.isSupplierReferenced(merchantId, ref)) {
        throw new ProblemError('conflict', `Supplier "${ref}" still has offers; remove them from the products first.`);
      }
      if (!await tx.deleteSupplier(merchantId, ref)) throw notFound(`Supplier "${ref}"`);
      await this.audit(tx, merchantId, actor, 'supplier.delete', `supplier "${ref}"`);
    });
  }

  async listAttributeDefinitions(merchantId: number) {
    await this.merchant(merchantId);
    return this.storage.listAttributeDefinitions(merchantId);
  }

  upsertAttributeDefinition(merchantId: number, definition: AttributeDefinitionRecord, actor: Actor = OPERATOR) {
    return this.writeAndRepublish(merchantId, async (tx) => {
      const existed = (await tx.listAttributeDefinitions(merchantId)).some((d) => d.key === definition.key);
      const written = await tx.upsertAttributeDefinition(merchantId, definition);
      await this.audit(tx, merchantId, actor, existed ? 'attribute.update' : 'attribute.create', `attribute "${definition.key}"`);
      return written;
    });
  }

  deleteAttributeDefinition(merchantId: number, key: string, actor: Actor = OPERATOR): Promise<void> {
    return this.writeAndRepublish(merchantId, async (tx) => {
      if (!await tx.deleteAttributeDefinition(merchantId, key)) throw notFound(`Attribute definition "${key}"`);
      await this.audit(tx, merchantId, actor, 'attribute.delete', `attribute "${key}"`);
    });
  }

  // Products

  /** The suppliers and stores a source may name. */
  async sourceReferences(reader: StorageOperations, merchantId: number): Promise<SourceReferences> {
    const [suppliers, stores] = await Promise.all([reader.listSuppliers(merchantId), reader.listStores(merchantId)]);
    return { suppliers: new Set(suppliers.map((s) => s.ref)), stores: new Set(stores.map((s) => s.slug)) };
  }

  /** The product limits a source exceeds (JSON pointers under `base`), each naming its limit. */
  sourceLimitProblems(source: ProductSourceDocument, base = ''): InvalidParam[] {
    return productLimitProblems(source, this.productLimits, base);
  }

  /** Problems with a source's references to suppliers and stores (JSON pointers under `base`). */
  sourceProblems(references: SourceReferences, source: ProductSourceDocument, base = ''): InvalidParam[] {
    const { suppliers, stores } = references;
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

  async product(merchantId: number, ref: string): Promise<ProductRecord> {
    await this.merchant(merchantId);
    const product = await this.storage.findProductByRef(merchantId, ref);
    if (!product) throw notFound(`Product "${ref}"`);
    return product;
  }

  /** The product with the service's id (the public API's `id`); 404 outside the merchant. */
  async productById(merchantId: number, productId: number): Promise<ProductRecord> {
    await this.merchant(merchantId);
    const [product] = await this.storage.productsByIds(merchantId, [productId]);
    if (!product) throw notFound(`Product ${productId}`);
    return product;
  }

  /**
   * A page of the merchant's products in ref order (admin listProductSources), filtered
   * by ref prefix, time of the last write, and exclusion from a store; at most `scan` products are
   * looked at for one page, so a rare filter answers short pages, each with where to go on.
   */
  async listProducts(merchantId: number, filters: {
    after?: string; limit: number; ref_prefix?: string; updated_since?: string; excluded_from?: string;
  }, scan: number): Promise<{ data: ProductListPage['products']; next_after: string | null }> {
    await this.merchant(merchantId);
    let excludedFromStore: number | null = null;
    if (filters.excluded_from !== undefined) {
      const store = await this.storage.findStore(merchantId, filters.excluded_from);
      if (!store) throw notFound(`Store "${filters.excluded_from}"`);
      excludedFromStore = store.id;
    }
    const page = await this.storage.productList(merchantId, {
      afterRef: filters.after ?? null, refPrefix: filters.ref_prefix ?? null, limit: filters.limit, scan, excludedFromStore,
      // Stored times are ISO 8601 in UTC with milliseconds: compared as text, after the same normalisation.
      updatedSince: filters.updated_since === undefined ? null : new Date(filters.updated_since).toISOString(),
    });
    return { data: page.products, next_after: page.nextAfter };
  }

  /** The product's source as the admin API shows it, each image with its mirroring state. */
  async productSource(merchantId: number, ref: string): Promise<ProductSourceView> {
    return this.sourceView(this.storage, merchantId, await this.product(merchantId, ref));
  }

  /**
   * Why the product resolves as it does in each of the merchant's stores (the chosen supplier, the
   * pricing rule per customer group), from one snapshot of its source and the merchant's setup: the
   * decisions the published payloads were written from, which this leaves as they are.
   */
  async explainProduct(merchantId: number, ref: string): Promise<ResolutionExplanation[]> {
    await this.merchant(merchantId);
    return this.storage.snapshot(async (reader) => {
      const product = await reader.findProductByRef(merchantId, ref);
      if (!product) throw notFound(`Product "${ref}"`);
      const context = await this.publisher.loadContext(reader, merchantId);
      return context.stores.map((store) => explainResolution(product, store, context));
    });
  }

  private async sourceView(reader: StorageOperations, merchantId: number, product: ProductRecord): Promise<ProductSourceView> {
    const mirrors = await reader.imageMirrors(merchantId, product.source.images.map((i) => i.url));
    return {
      id: product.id,
      ref: product.ref,
      ...product.source,
      images: product.source.images.map(({ url }) => ({
        url, state: mirrors.get(url)?.state ?? 'pending', mirrored_url: mirrors.get(url)?.mirrored_url ?? null,
      })),
    };
  }

  upsertProduct(merchantId: number, ref: string, input: ProductSourceInput, actor: Actor = OPERATOR): Promise<ProductSourceView & { created: boolean }> {
    const source = normalizeSource(input);
    const aboveLimits = this.sourceLimitProblems(source);
    if (aboveLimits.length) return Promise.reject(invalidInput('body', aboveLimits));
    return this.storage.transaction(async (tx) => {
      await this.merchantIn(tx, merchantId);
      const problems = this.sourceProblems(await this.sourceReferences(tx, merchantId), source);
      if (problems.length) throw invalidInput('body', problems);
      // The mirror learns of new image sources with the write (state is per source URL).
      const { id, created } = await tx.upsertProductSource(merchantId, ref, source, this.at());
      await this.publisher.publishProducts(tx, merchantId, [id]);
      await this.audit(tx, merchantId, actor, created ? 'product.create' : 'product.update', `product "${ref}" (id ${id})`);
      return { ...await this.sourceView(tx, merchantId, { id, ref, source }), created };
    });
  }

  deleteProduct(merchantId: number, ref: string, actor: Actor = OPERATOR): Promise<void> {
    return this.storage.transaction(async (tx) => {
      await this.merchantIn(tx, merchantId);
      const product = await tx.findProductByRef(merchantId, ref);
      if (!product) throw notFound(`Product "${ref}"`);
      await tx.deleteProduct(merchantId, product.id);
      await this.publisher.unpublishProducts(tx, merchantId, [product.id]);
      await this.audit(tx, merchantId, actor, 'product.delete', `product "${ref}" (id ${product.id})`);
    });
  }

  /**
   * Applies upserts and deletes as one unit per chunk (used by the NDJSON import). The sources'
   * references are checked again in the chunk's transaction: a supplier or store deleted since
   * the lines were read is a 409, and nothing of the chunk is applied.
   */
  applyProductBatch(merchantId: number, operations: ProductOperation[]): Promise<{ upserted: number; deleted: number } & PublishSummary> {
    return this.storage.transaction((tx) => this.applyProductBatchIn(tx, merchantId, operations));
  }

  /** applyProductBatch in the caller's transaction (a chunk of an import's run: admin/import-jobs.ts). */
  async applyProductBatchIn(tx: StorageTx, merchantId: number, operations: ProductOperation[]): Promise<{ upserted: number; deleted: number } & PublishSummary> {
    const references = await this.sourceReferences(tx, merchantId);
    const stale = operations.filter((operation) => operation.op === 'upsert_product'
      && this.sourceProblems(references, operation.source).length > 0);
    if (stale.length > 0) {
      const lines = stale.slice(0, 10).map((operation) => (operation.line ? `line ${operation.line}` : `"${operation.ref}"`));
      throw new ProblemError('conflict', `A supplier or store that ${lines.join(', ')}${stale.length > lines.length ? ' and others' : ''} `
        + 'refer to was deleted while the import ran.');
    }
    const at = this.at();
    const upsertedIds: number[] = [];
    const deletedIds: number[] = [];
    // Runs of upserts with distinct refs are written together (upsertProductSources: the same
    // rows and ids as one after another, in a few statements on PostgreSQL instead of three per
    // product); a delete, or a ref seen again in the run, ends the run first, so every operation
    // still applies in line order.
    let run: { ref: string; source: ProductSourceDocument }[] = [];
    let runRefs = new Set<string>();
    const flush = async () => {
      if (run.length === 0) return;
      for (const { id } of await tx.upsertProductSources(merchantId, run, at)) upsertedIds.push(id);
      run = [];
      runRefs = new Set();
      await yieldToOthers();
    };
    for (const operation of operations) {
      if (operation.op === 'upsert_product') {
        if (runRefs.has(operation.ref) || run.length >= UPSERT_RUN) await flush();
        run.push({ ref: operation.ref, source: operation.source });
        runRefs.add(operation.ref);
      } else {
        await flush();
        const existing = await tx.findProductByRef(merchantId, operation.ref);
        if (!existing) continue;
        await tx.deleteProduct(merchantId, existing.id);
        deletedIds.push(existing.id);
      }
    }
    await flush();
    const deleted = new Set(deletedIds);
    const published = await this.publisher.publishProducts(tx, merchantId, [...new Set(upsertedIds)].filter((id) => !deleted.has(id)));
    const removed = await this.publisher.unpublishProducts(tx, merchantId, deletedIds);
    return {
      upserted: upsertedIds.length, deleted: deletedIds.length,
      resolved: published.resolved, changes: published.changes + removed.changes,
    };
  }

  // Images

  /** Mirroring progress per state, and the dead images with their last error (at most `limit`). */
  async imageMirroring(merchantId: number, limit = 100): Promise<ImageStateCounts & { dead_images: Pick<ImageMirrorWork, 'url' | 'last_error' | 'first_failure_at' | 'updated_at'>[] }> {
    await this.merchant(merchantId);
    const [counts, dead] = await Promise.all([this.storage.imageStateCounts(merchantId), this.storage.deadImages(merchantId, limit)]);
    return { ...counts, dead_images: dead.map(({ url, last_error, first_failure_at, updated_at }) => ({ url, last_error, first_failure_at, updated_at })) };
  }

  /** Fetches the merchant's dead images again; returns how many. Audited once it is done (it commits in steps). */
  async retryDeadImages(merchantId: number, actor: Actor = OPERATOR): Promise<number> {
    await this.merchant(merchantId);
    const retried = await retryDeadImages(this.storage, this.publisher, merchantId, this.now());
    await audit(this.storage, merchantId, actor, 'image.retry_dead', `${retried} dead images retried`, this.now());
    return retried;
  }
}
