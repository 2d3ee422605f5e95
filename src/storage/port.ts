// The storage port: everything the domain asks of a database, and nothing about SQL.
// storage/sqlite.ts implements it on better-sqlite3; another engine implements this interface
// and the domain (catalog/, admin/, changes/) does not change. The port is synchronous because
// resolution and change recording must commit in one transaction with the write that caused them.
import type { EndpointHealth } from '../webhooks/health.js';
import type {
  AttributeDefinitionRecord, CustomerGroupRecord, ExchangeRateRecord, ImageMirrorRecord,
  PricingRuleRecord, ProductRecord, ProductSourceDocument, StoreRecord, SupplierRecord,
} from '../catalog/model.js';

export interface MerchantRecord {
  id: number;
  name: string;
  sku_pattern: string | null;
  owner_emails: string[];
  created_at: string;
}

export interface ApiKeyRecord {
  id: number;
  merchant_id: number;
  name: string;
  prefix: string;
  created_at: string;
  revoked_at: string | null;
}

export type StoreInputRecord = Pick<StoreRecord, 'name' | 'locale' | 'currency' | 'is_default' | 'active' | 'exclude_out_of_stock'>;

export type PricingRuleInputRecord = Omit<PricingRuleRecord, 'id' | 'is_catch_all'>;

export interface PublishedRow {
  productId: number;
  payload: string;
  priceHash: string;
  contentHash: string;
}

export type ChangeType = 'price' | 'content' | 'removed';

export interface ChangeRow {
  storeId: number;
  productId: number;
  changeType: ChangeType;
  createdAt: string;
}

export interface CatalogStorage {
  /** Runs fn in one write transaction (nested calls join the outer one). */
  transaction<T>(fn: () => T): T;
  /** Runs fn on one consistent snapshot of the data (a read transaction). */
  snapshot<T>(fn: () => T): T;
  close(): void;
  /** Throws unless the database answers a query. */
  ping(): void;
  /** Ids of the migrations this version knows that the database has not applied. */
  missingMigrations(): number[];
  /** Whole-service counts for the metrics (openapi/operations.yaml, getMetrics); no merchant's own. */
  operationalCounts(): OperationalCounts;

  // Merchants and keys
  createMerchant(input: Omit<MerchantRecord, 'id'>): MerchantRecord;
  listMerchants(): MerchantRecord[];
  getMerchant(id: number): MerchantRecord | undefined;
  updateMerchant(id: number, patch: Partial<Omit<MerchantRecord, 'id' | 'created_at'>>): MerchantRecord | undefined;
  countMerchants(): number;
  insertApiKey(input: Omit<ApiKeyRecord, 'id' | 'revoked_at'> & { key_hash: Buffer }): ApiKeyRecord;
  listApiKeys(merchantId: number): ApiKeyRecord[];
  revokeApiKey(merchantId: number, keyId: number, at: string): boolean;
  /** The key with this hash that is not revoked, with its stored hash for a constant-time check. */
  findActiveApiKey(keyHash: Buffer): { id: number; merchant_id: number; key_hash: Buffer } | undefined;

  // Stores
  listStores(merchantId: number): StoreRecord[];
  findStore(merchantId: number, slug: string): StoreRecord | undefined;
  findDefaultStore(merchantId: number): StoreRecord | undefined;
  upsertStore(merchantId: number, slug: string, input: StoreInputRecord): StoreRecord;
  deleteStore(storeId: number): void;
  /** Marks the set of products published for these stores as changed (read-side index). */
  bumpCatalogVersion(storeIds: number[]): void;

  // Customer groups, exchange rates, pricing rules, suppliers, attribute definitions
  listCustomerGroups(merchantId: number): CustomerGroupRecord[];
  createCustomerGroup(merchantId: number, name: string): CustomerGroupRecord;
  updateCustomerGroup(merchantId: number, id: number, name: string): CustomerGroupRecord | undefined;
  deleteCustomerGroup(merchantId: number, id: number): boolean;
  listExchangeRates(merchantId: number): ExchangeRateRecord[];
  upsertExchangeRate(merchantId: number, rate: ExchangeRateRecord): ExchangeRateRecord;
  deleteExchangeRate(merchantId: number, base: string, quote: string): boolean;
  listPricingRules(merchantId: number): PricingRuleRecord[];
  createPricingRule(merchantId: number, input: PricingRuleInputRecord, isCatchAll?: boolean): PricingRuleRecord;
  updatePricingRule(merchantId: number, id: number, input: PricingRuleInputRecord): PricingRuleRecord | undefined;
  deletePricingRule(merchantId: number, id: number): boolean;
  getPricingRule(merchantId: number, id: number): PricingRuleRecord | undefined;
  listSuppliers(merchantId: number): SupplierRecord[];
  upsertSupplier(merchantId: number, ref: string, name: string): SupplierRecord;
  deleteSupplier(merchantId: number, ref: string): boolean;
  isSupplierReferenced(merchantId: number, ref: string): boolean;
  listAttributeDefinitions(merchantId: number): AttributeDefinitionRecord[];
  upsertAttributeDefinition(merchantId: number, definition: AttributeDefinitionRecord): AttributeDefinitionRecord;
  deleteAttributeDefinition(merchantId: number, key: string): boolean;

  // Product sources
  findProductByRef(merchantId: number, ref: string): ProductRecord | undefined;
  /** Inserts or replaces the source; returns the product id and whether it was created. */
  upsertProductSource(merchantId: number, ref: string, source: ProductSourceDocument, at: string): { id: number; created: boolean };
  deleteProduct(merchantId: number, productId: number): void;
  /** Products whose source excludes them from the store with this slug. */
  productsExcludedFrom(merchantId: number, slug: string): ProductRecord[];
  /** Products with id > afterId, ascending, at most `limit` (bulk re-publishing walks these). */
  productsAfter(merchantId: number, afterId: number, limit: number): ProductRecord[];
  productsByIds(merchantId: number, ids: number[]): ProductRecord[];
  imageMirrors(merchantId: number, urls: string[]): Map<string, ImageMirrorRecord>;
  /** Adds the URLs not known yet as `pending`, due at once. */
  ensureImageMirrors(merchantId: number, urls: string[], at: string): void;
  /** Pending images whose next attempt is due, oldest first. */
  dueImageMirrors(now: string, limit: number): ImageMirrorWork[];
  updateImageMirror(merchantId: number, url: string, patch: Partial<Omit<ImageMirrorWork, 'merchant_id' | 'url'>>): void;
  /** Ids of the merchant's products whose source lists the image URL. */
  productIdsWithImage(merchantId: number, url: string): number[];
  imageStateCounts(merchantId: number): Record<'pending' | 'mirrored' | 'dead', number>;
  /** The merchant's dead images that a product still lists, newest first. */
  deadImages(merchantId: number, limit: number): ImageMirrorWork[];

  // Published payloads and changes
  publishedHashes(storeId: number, productIds: number[]): Map<number, { priceHash: string; contentHash: string }>;
  upsertPublished(storeId: number, rows: PublishedRow[]): void;
  deletePublished(storeId: number, productIds: number[]): void;
  /** The stored payload (UTF-8 JSON) of one product in the store. */
  publishedPayload(storeId: number, productId: number): Uint8Array | undefined;
  /** Payloads of the store's products with fromId <= id <= toId, ascending, joined by commas. */
  publishedPage(storeId: number, fromId: number, toId: number): PublishedPage;
  /** Every product id published for the store, ascending. */
  publishedProductIds(storeId: number): Float64Array | number[];
  /** Payloads of the listed products found in the store, ascending, joined by commas, and their count. */
  publishedPayloadsByIds(storeId: number, productIds: number[]): { bytes: Uint8Array; count: number };
  /** `{"id":…,"prices":[…]}` of the listed products found in the store, ascending, joined by commas. */
  publishedPricesByIds(storeId: number, productIds: number[]): Uint8Array;

  // Changes (spec 2.6, 4.4)
  recordChanges(rows: ChangeRow[]): void;
  /** The newest change timestamp handed out (the monotonic clock's state). */
  lastChangeAt(): string | undefined;
  setLastChangeAt(at: string): void;
  /** The store's changes strictly after the position (at, id), in position order, at most `limit`. */
  changesAfter(storeId: number, at: string, id: number, limit: number): StoredChange[];
  /** The position of the newest change of the store deleted by retention. */
  changeHorizon(storeId: number): { at: string; id: number } | undefined;
  /** Deletes changes created before `cutoff` (in bounded batches), moving horizons; returns the count. */
  pruneChangesBefore(cutoff: string): number;

  // Webhooks (spec 3, 4.5)
  createWebhookEndpoint(input: WebhookEndpointInputRecord): WebhookEndpointRecord;
  listWebhookEndpoints(merchantId: number): WebhookEndpointRecord[];
  /** An endpoint by id, of any merchant when merchantId is undefined. */
  getWebhookEndpoint(id: number, merchantId?: number): WebhookEndpointRecord | undefined;
  updateWebhookEndpoint(id: number, patch: Partial<Omit<WebhookEndpointRecord, 'id' | 'merchant_id' | 'created_at'>>): void;
  deleteWebhookEndpoint(id: number): void;
  insertOutbox(rows: OutboxRow[]): void;
  /** Waiting outbox rows per (endpoint, event, store), with their count and oldest time. */
  outboxGroups(): OutboxGroup[];
  /** The group's rows in arrival order, at most `limit`. */
  outboxRows(group: Pick<OutboxGroup, 'endpointId' | 'event' | 'storeId'>, limit: number): { id: number; productId: number; createdAt: string }[];
  deleteOutboxRows(ids: number[]): void;
  /** oldestChangeAt: when the oldest change it carries was recorded (default: created_at). */
  insertDelivery(input: Omit<DeliveryRecord, 'id'>, oldestChangeAt?: string): DeliveryRecord;
  getDelivery(id: number): DeliveryRecord | undefined;
  /** Pending or failed deliveries whose next attempt is due, of endpoints that are active. */
  dueDeliveries(now: string, limit: number): DeliveryRecord[];
  updateDelivery(id: number, patch: Partial<Omit<DeliveryRecord, 'id' | 'endpoint_id'>>): void;
  /** Marks the endpoint's pending and failed deliveries dropped; returns how many. */
  dropPendingDeliveries(endpointId: number): number;
  recordAttempt(deliveryId: number, attempt: AttemptRecord): void;
  listDeliveries(endpointId: number, filter: { status?: DeliveryStatus; limit: number; beforeId?: number }): DeliveryRecord[];
  listAttempts(deliveryId: number): AttemptRecord[];
  /** Failed, given-up or dropped deliveries of the endpoint created at or after `since`. */
  unsuccessfulDeliveriesSince(endpointId: number, since: string): DeliveryRecord[];
  insertNotification(input: Omit<NotificationRecord, 'id' | 'emailed_at'>): NotificationRecord;
  listNotifications(merchantId: number, limit: number): NotificationRecord[];
  markNotificationEmailed(id: number, at: string): void;
}

/** A range of a store's published payloads, and what identifies their bytes. */
export interface PublishedPage {
  /** The payloads (UTF-8 JSON), ascending by product id, joined by commas. */
  bytes: Uint8Array;
  /**
   * Each row's stored price and content hashes, in the same order: together they change whenever
   * any byte of the row does, so a page's ETag is computed over these (~11 KB) instead of the
   * page's ~155 KB.
   */
  digests: Uint8Array;
}

export interface OperationalCounts {
  endpoints: Record<'active' | 'paused' | 'disabled', number>;
  /** Outbox rows not yet batched into a delivery. */
  outboxDepth: number;
  waitingDeliveries: Record<'pending' | 'failed', number>;
  /** When the oldest change not yet attempted for an active endpoint (in the outbox or a pending delivery) was recorded; null when none. */
  oldestWaitingAt: string | null;
  images: Record<'pending' | 'mirrored' | 'dead', number>;
}

/** An image source's mirroring state with its retry bookkeeping. */
export interface ImageMirrorWork extends ImageMirrorRecord {
  merchant_id: number;
  attempts: number;
  first_failure_at: string | null;
  next_attempt_at: string | null;
  last_error: string | null;
  updated_at: string;
}

export interface WebhookEndpointRecord extends EndpointHealth {
  id: number;
  merchant_id: number;
  url: string;
  /** null: every store of the merchant. */
  store_id: number | null;
  events: ChangeType[];
  secret: string;
  created_at: string;
}

export type WebhookEndpointInputRecord = Pick<WebhookEndpointRecord, 'merchant_id' | 'url' | 'store_id' | 'events' | 'secret' | 'created_at'>;

export interface OutboxRow {
  endpointId: number;
  event: ChangeType;
  storeId: number | null;
  productId: number;
  createdAt: string;
}

export interface OutboxGroup {
  endpointId: number;
  event: ChangeType;
  storeId: number | null;
  count: number;
  oldestAt: string;
}

export type DeliveryStatus = 'pending' | 'succeeded' | 'failed' | 'given_up' | 'dropped';

export interface DeliveryRecord {
  id: number;
  endpoint_id: number;
  event: ChangeType;
  store_id: number | null;
  product_ids: number[];
  occurred_at: string | null;
  status: DeliveryStatus;
  attempts: number;
  next_attempt_at: string | null;
  created_at: string;
}

export interface AttemptRecord {
  at: string;
  status_code: number | null;
  error: string | null;
  latency_ms: number;
  response_snippet: string | null;
}

export interface NotificationRecord {
  id: number;
  merchant_id: number;
  endpoint_id: number | null;
  kind: 'failing' | 'paused' | 'disabled';
  subject: string;
  body: string;
  created_at: string;
  emailed_at: string | null;
}

export interface StoredChange {
  id: number;
  product_id: number;
  change_type: ChangeType;
  created_at: string;
}
