// The one object the admin API, the CLI and the panel call for a merchant's catalog and tenancy: a
// facade over the domain's modules, where the rules live (catalog/stores.ts, customer-groups.ts,
// exchange-rates.ts, pricing-rules.ts, suppliers.ts, attribute-definitions.ts, products.ts;
// tenancy/merchants.ts, api-keys.ts; images/retry.ts). Every write runs through catalog/catalog-writes.ts:
// in one transaction, on the merchant's scope, recorded in the merchant's audit log as done by its
// actor (`operator` by default: the admin API and the CLI; the panel passes its user), re-publishing
// what it can affect.
import { AttributeDefinitions } from '../catalog/attribute-definitions.js';
import { CatalogWrites } from '../catalog/catalog-writes.js';
import { CustomerGroups } from '../catalog/customer-groups.js';
import { ExchangeRates } from '../catalog/exchange-rates.js';
import type { AttributeDefinitionRecord, ExchangeRateRecord, PricingRuleInputRecord, ProductSourceDocument } from '../catalog/model.js';
import { PricingRules } from '../catalog/pricing-rules.js';
import { DEFAULT_PRODUCT_LIMITS, type ProductLimits } from '../catalog/product-limits.js';
import {
  sourceProblems,
  sourceReferences,
  type ProductOperation,
  type ProductSourceInput,
  type SourceReferences,
} from '../catalog/product-sources.js';
import { Products } from '../catalog/products.js';
import { PublishRuns } from '../catalog/publish-runs.js';
import { CatalogPublisher } from '../catalog/publish.js';
import { Stores } from '../catalog/stores.js';
import { Suppliers } from '../catalog/suppliers.js';
import { MerchantImages } from '../images/retry.js';
import type { InvalidParam } from '../shared/problem.js';
import { scopeToMerchant } from '../storage/merchant-scope.js';
import type { CatalogStorage, StorageOperations, StorageTx } from '../storage/port.js';
import { MerchantApiKeys, type ActiveApiKeys, type ApiKeyGrant } from '../tenancy/api-keys.js';
import { Merchants } from '../tenancy/merchants.js';
import type { ApiKeyPatch, MerchantRecord } from '../tenancy/model.js';
import { OPERATOR, type Actor } from './audit.js';

export class CatalogAdmin {
  readonly publisher: CatalogPublisher;
  /** Merchant-wide re-publishing, a chunk per transaction; `serve` and `worker` resume interrupted runs. */
  readonly publishRuns: PublishRuns;
  readonly writes: CatalogWrites;
  readonly merchants: Merchants;
  readonly apiKeys: MerchantApiKeys;
  readonly stores: Stores;
  readonly customerGroups: CustomerGroups;
  readonly exchangeRates: ExchangeRates;
  readonly pricingRules: PricingRules;
  readonly suppliers: Suppliers;
  readonly attributeDefinitions: AttributeDefinitions;
  readonly products: Products;
  readonly images: MerchantImages;

  constructor(
    readonly storage: CatalogStorage,
    readonly now: () => Date = () => new Date(),
    publishChunk = 500,
    /** This process's API keys (http auth, open streams): a revoked key is forgotten, and its streams ended, at once; a changed one read again. */
    rememberedApiKeys?: Pick<ActiveApiKeys, 'forget' | 'changed'>,
    publishRunLeaseMs?: number,
    /** The bounds of one product's source (configuration: `config.limits`). */
    readonly productLimits: ProductLimits = DEFAULT_PRODUCT_LIMITS,
    /** Active API keys one merchant may have (CPS_API_KEYS_PER_MERCHANT). */
    apiKeysPerMerchant?: number,
  ) {
    this.publisher = new CatalogPublisher(now, publishChunk);
    this.publishRuns = new PublishRuns(storage, this.publisher, now, publishRunLeaseMs);
    this.writes = new CatalogWrites(storage, this.publisher, this.publishRuns, now);
    this.merchants = new Merchants(this.writes);
    this.apiKeys = new MerchantApiKeys(this.writes, rememberedApiKeys, apiKeysPerMerchant);
    this.stores = new Stores(this.writes);
    this.customerGroups = new CustomerGroups(this.writes);
    this.exchangeRates = new ExchangeRates(this.writes);
    this.pricingRules = new PricingRules(this.writes);
    this.suppliers = new Suppliers(this.writes);
    this.attributeDefinitions = new AttributeDefinitions(this.writes);
    this.products = new Products(this.writes, productLimits);
    this.images = new MerchantImages(this.writes);
  }

  // Merchants and keys (tenancy/)

  listMerchants() {
    return this.merchants.listAcrossTenants();
  }
  createMerchant(input: { name: string; sku_pattern?: string | null; owner_emails?: string[] }, actor: Actor = OPERATOR) {
    return this.merchants.create(input, actor);
  }
  merchant(merchantId: number) {
    return this.merchants.get(merchantId);
  }
  updateMerchant(
    merchantId: number,
    patch: Partial<Pick<MerchantRecord, 'name' | 'sku_pattern' | 'owner_emails'>>,
    actor: Actor = OPERATOR,
  ) {
    return this.merchants.update(merchantId, patch, actor);
  }
  listApiKeys(merchantId: number) {
    return this.apiKeys.list(merchantId);
  }
  createApiKey(merchantId: number, name: string, actor: Actor = OPERATOR, grant: ApiKeyGrant = {}) {
    return this.apiKeys.create(merchantId, name, actor, grant);
  }
  updateApiKey(merchantId: number, keyId: number, patch: ApiKeyPatch, actor: Actor = OPERATOR) {
    return this.apiKeys.update(merchantId, keyId, patch, actor);
  }
  revokeApiKey(merchantId: number, keyId: number, actor: Actor = OPERATOR) {
    return this.apiKeys.revoke(merchantId, keyId, actor);
  }
  rollApiKey(merchantId: number, keyId: number, actor: Actor = OPERATOR, oldExpiresAt?: string | null) {
    return this.apiKeys.roll(merchantId, keyId, actor, oldExpiresAt);
  }

  // The catalog's setup (catalog/)

  listStores(merchantId: number) {
    return this.stores.list(merchantId);
  }
  publishedCounts(merchantId: number) {
    return this.stores.publishedCounts(merchantId);
  }
  upsertStore(merchantId: number, slug: string, input: Parameters<Stores['upsert']>[2], actor: Actor = OPERATOR) {
    return this.stores.upsert(merchantId, slug, input, actor);
  }
  deleteStore(merchantId: number, slug: string, actor: Actor = OPERATOR) {
    return this.stores.delete(merchantId, slug, actor);
  }

  listCustomerGroups(merchantId: number) {
    return this.customerGroups.list(merchantId);
  }
  createCustomerGroup(merchantId: number, name: string, actor: Actor = OPERATOR) {
    return this.customerGroups.create(merchantId, name, actor);
  }
  updateCustomerGroup(merchantId: number, id: number, name: string, actor: Actor = OPERATOR) {
    return this.customerGroups.update(merchantId, id, name, actor);
  }
  deleteCustomerGroup(merchantId: number, id: number, actor: Actor = OPERATOR) {
    return this.customerGroups.delete(merchantId, id, actor);
  }

  listExchangeRates(merchantId: number) {
    return this.exchangeRates.list(merchantId);
  }
  upsertExchangeRate(merchantId: number, rate: ExchangeRateRecord, actor: Actor = OPERATOR) {
    return this.exchangeRates.upsert(merchantId, rate, actor);
  }
  deleteExchangeRate(merchantId: number, base: string, quote: string, actor: Actor = OPERATOR) {
    return this.exchangeRates.delete(merchantId, base, quote, actor);
  }

  listPricingRules(merchantId: number) {
    return this.pricingRules.list(merchantId);
  }
  createPricingRule(merchantId: number, input: PricingRuleInputRecord, actor: Actor = OPERATOR) {
    return this.pricingRules.create(merchantId, input, actor);
  }
  updatePricingRule(merchantId: number, id: number, input: Parameters<PricingRules['update']>[2], actor: Actor = OPERATOR) {
    return this.pricingRules.update(merchantId, id, input, actor);
  }
  deletePricingRule(merchantId: number, id: number, actor: Actor = OPERATOR) {
    return this.pricingRules.delete(merchantId, id, actor);
  }

  listSuppliers(merchantId: number) {
    return this.suppliers.list(merchantId);
  }
  upsertSupplier(merchantId: number, ref: string, name: string, actor: Actor = OPERATOR) {
    return this.suppliers.upsert(merchantId, ref, name, actor);
  }
  deleteSupplier(merchantId: number, ref: string, actor: Actor = OPERATOR) {
    return this.suppliers.delete(merchantId, ref, actor);
  }

  listAttributeDefinitions(merchantId: number) {
    return this.attributeDefinitions.list(merchantId);
  }
  upsertAttributeDefinition(merchantId: number, definition: AttributeDefinitionRecord, actor: Actor = OPERATOR) {
    return this.attributeDefinitions.upsert(merchantId, definition, actor);
  }
  deleteAttributeDefinition(merchantId: number, key: string, actor: Actor = OPERATOR) {
    return this.attributeDefinitions.delete(merchantId, key, actor);
  }

  // Products (catalog/products.ts, catalog/product-sources.ts)

  /** The suppliers and stores the merchant's sources may name, read on `reader`. */
  sourceReferences(reader: StorageOperations, merchantId: number): Promise<SourceReferences> {
    return sourceReferences(scopeToMerchant(reader, merchantId));
  }
  sourceLimitProblems(source: ProductSourceDocument, base = ''): InvalidParam[] {
    return this.products.limitProblems(source, base);
  }
  sourceProblems(references: SourceReferences, source: ProductSourceDocument, base = ''): InvalidParam[] {
    return sourceProblems(references, source, base);
  }
  product(merchantId: number, ref: string) {
    return this.products.get(merchantId, ref);
  }
  productById(merchantId: number, productId: number) {
    return this.products.byId(merchantId, productId);
  }
  listProducts(merchantId: number, filters: Parameters<Products['list']>[1], scan: number) {
    return this.products.list(merchantId, filters, scan);
  }
  productSource(merchantId: number, ref: string) {
    return this.products.source(merchantId, ref);
  }
  explainProduct(merchantId: number, ref: string) {
    return this.products.explain(merchantId, ref);
  }
  upsertProduct(merchantId: number, ref: string, input: ProductSourceInput, actor: Actor = OPERATOR) {
    return this.products.upsert(merchantId, ref, input, actor);
  }
  editProduct(merchantId: number, ref: string, edit: Parameters<Products['edit']>[2], actor: Actor = OPERATOR) {
    return this.products.edit(merchantId, ref, edit, actor);
  }
  deleteProduct(merchantId: number, ref: string, actor: Actor = OPERATOR) {
    return this.products.delete(merchantId, ref, actor);
  }
  applyProductBatch(merchantId: number, operations: ProductOperation[]) {
    return this.products.applyBatch(merchantId, operations);
  }
  applyProductBatchIn(tx: StorageTx, merchantId: number, operations: ProductOperation[]) {
    return this.products.applyBatchIn(tx, merchantId, operations);
  }

  // Images (images/retry.ts)

  imageMirroring(merchantId: number, limit = 100) {
    return this.images.mirroring(merchantId, limit);
  }
  retryDeadImages(merchantId: number, actor: Actor = OPERATOR) {
    return this.images.retryDead(merchantId, actor);
  }
}
