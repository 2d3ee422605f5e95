// The storage port: everything the domain asks of a database, and nothing about SQL. One interface
// per aggregate, composed into StorageOperations; an engine (storage/sqlite/, storage/postgres/,
// with the plain aggregates written once for both in storage/sql/) implements them and the domain
// does not change. Every operation is asynchronous, so an engine may run its queries anywhere
// (another connection, thread or machine); the domain awaits them.
//
// Transactions are explicit: `transaction(fn)` hands fn a `tx` whose operations all commit or roll
// back together (resolution and change recording commit with the write that caused them), and
// `snapshot(fn)` hands fn a reader on one consistent view. Operations called on the CatalogStorage itself
// run on their own (each write its own transaction); inside a transaction, use its tx.
import type {
  DeliveryClaim,
  ClaimedImageMirror,
  ImageOriginState,
  OperationalCounts,
  OutboxGroup,
  OutboxEntry,
  OutboxWindowGroup,
  OutboxRow,
  ProductListPage,
  ProductListQuery,
  PublishRunRecord,
  ExpectedStorePage,
  PublishedHashes,
  PublishedLines,
  PublishedPage,
  PublishedKeys,
  PublishedPayloads,
  PublishedPrices,
  PublishedRow,
  PublishedPriceRow,
  PublishedBlock,
  PublishedIdWindow,
  PublishedSummaryWindow,
  PublishedVersionRead,
  PublishedWindowRead,
  StorePageRead,
} from './records.js';
import type { ActiveApiKeyRecord, ApiKeyPatch, ApiKeyRecord, MerchantRecord, NewApiKey } from '../tenancy/model.js';
import type {
  AttemptRecord,
  ClaimedDelivery,
  DeliveryRecord,
  DeliveryStatus,
  AttemptHourRecord,
  NotificationKind,
  NotificationRecord,
  WebhookEndpointInputRecord,
  WebhookEndpointRecord,
  NewAttempt,
  NewDelivery,
} from '../webhooks/model.js';
import type {
  AttributeDefinitionRecord,
  CustomerGroupRecord,
  ExchangeRateRecord,
  ImageMirrorRecord,
  ImageMirrorWork,
  ImageStateCounts,
  PricingRuleInputRecord,
  PricingRuleRecord,
  ProductRecord,
  ProductSourceDocument,
  PublishedExclusionCounts,
  PublishedProductSummary,
  StoreInputRecord,
  StoreRecord,
  SupplierRecord,
} from '../catalog/model.js';
import type { FeedPosition, RecordedChange, StoredChange } from '../changes/model.js';
import type {
  AuditEntryRecord,
  ListedAuditEntryRecord,
  ImportJobProgress,
  ImportJobRecord,
  PanelInvitationRecord,
  PanelSessionRecord,
  PanelUserRecord,
  IdempotencyKeyRecord,
  IdempotentAnswer,
} from '../admin/model.js';

export type * from './records.js';

/** Merchants, their API keys and their stores. */
export interface TenancyStore {
  createMerchant(input: Omit<MerchantRecord, 'id'>): Promise<MerchantRecord>;
  listMerchants(): Promise<MerchantRecord[]>;
  getMerchant(id: number): Promise<MerchantRecord | undefined>;
  updateMerchant(id: number, patch: Partial<Omit<MerchantRecord, 'id' | 'created_at'>>): Promise<MerchantRecord | undefined>;
  countMerchants(): Promise<number>;

  /** Without scopes, a catalog:read key; without stores, one for every store. */
  insertApiKey(input: NewApiKey): Promise<ApiKeyRecord>;
  listApiKeys(merchantId: number): Promise<ApiKeyRecord[]>;
  /** The merchant's keys neither revoked nor expired at `at`; in a write transaction it serializes with other writes counting them (the merchant's row locked). */
  countActiveApiKeys(merchantId: number, at: string): Promise<number>;
  /** Changes the fields of the patch on the merchant's key; undefined when it has no such key. */
  updateApiKey(merchantId: number, keyId: number, patch: ApiKeyPatch): Promise<ApiKeyRecord | undefined>;
  revokeApiKey(merchantId: number, keyId: number, at: string): Promise<boolean>;
  /** Makes an unrevoked key expire at `at`, unless it expires sooner; whether the key was changed. */
  expireApiKey(merchantId: number, keyId: number, at: string): Promise<boolean>;
  /**
   * Records a use of the key at `at`, unless its recorded last use is after `unlessAfter` (written
   * since, by this process or another): a key's row is written at most once per interval, never
   * moved back. Returns whether it was written.
   */
  recordApiKeyUse(keyId: number, at: string, unlessAfter: string): Promise<boolean>;
  /** The key with this hash that is not revoked (expired or not: the caller's clock decides), with its stored hash for a constant-time check. */
  findActiveApiKey(keyHash: Buffer): Promise<(ActiveApiKeyRecord & { key_hash: Buffer }) | undefined>;
  /** Of these key ids, the keys that exist, are not revoked and not expired at `at` (the re-check of the keys open streams and long-polls hold). */
  activeApiKeyIds(keyIds: readonly number[], at: string): Promise<number[]>;
  /** Every origin some key neither revoked nor expired at `at` allows, over the deployment (a preflight's answer: http/browser-cors.ts). */
  browserOrigins(at: string): Promise<string[]>;

  listStores(merchantId: number): Promise<StoreRecord[]>;
  findStore(merchantId: number, slug: string): Promise<StoreRecord | undefined>;
  findDefaultStore(merchantId: number): Promise<StoreRecord | undefined>;
  upsertStore(merchantId: number, slug: string, input: StoreInputRecord): Promise<StoreRecord>;
  /** Deletes the store with its published payloads and changes. */
  deleteStore(storeId: number): Promise<void>;
  /** Marks the set of products published for these stores as changed (read-side index). */
  bumpCatalogVersion(storeIds: number[]): Promise<void>;
}

/** Everything merchant-wide that resolution reads, as one read (CatalogSetupStore.catalogSetup), each list in its own list's order. */
export interface CatalogSetupRead {
  merchant: MerchantRecord;
  stores: StoreRecord[];
  customerGroups: CustomerGroupRecord[];
  pricingRules: PricingRuleRecord[];
  exchangeRates: ExchangeRateRecord[];
  attributeDefinitions: AttributeDefinitionRecord[];
  suppliers: SupplierRecord[];
}

/** What resolution reads merchant-wide: customer groups, exchange rates, pricing rules, suppliers, attribute definitions. */
export interface CatalogSetupStore {
  /**
   * The merchant with its stores and every list above, in one statement (a publish reads them for
   * each commit: one round trip, not seven); undefined when the merchant does not exist.
   */
  catalogSetup(merchantId: number): Promise<CatalogSetupRead | undefined>;

  listCustomerGroups(merchantId: number): Promise<CustomerGroupRecord[]>;
  createCustomerGroup(merchantId: number, name: string): Promise<CustomerGroupRecord>;
  updateCustomerGroup(merchantId: number, id: number, name: string): Promise<CustomerGroupRecord | undefined>;
  deleteCustomerGroup(merchantId: number, id: number): Promise<boolean>;

  listExchangeRates(merchantId: number): Promise<ExchangeRateRecord[]>;
  upsertExchangeRate(merchantId: number, rate: ExchangeRateRecord): Promise<ExchangeRateRecord>;
  deleteExchangeRate(merchantId: number, base: string, quote: string): Promise<boolean>;

  listPricingRules(merchantId: number): Promise<PricingRuleRecord[]>;
  getPricingRule(merchantId: number, id: number): Promise<PricingRuleRecord | undefined>;
  createPricingRule(merchantId: number, input: PricingRuleInputRecord, isCatchAll?: boolean): Promise<PricingRuleRecord>;
  updatePricingRule(merchantId: number, id: number, input: PricingRuleInputRecord): Promise<PricingRuleRecord | undefined>;
  deletePricingRule(merchantId: number, id: number): Promise<boolean>;

  listSuppliers(merchantId: number): Promise<SupplierRecord[]>;
  upsertSupplier(merchantId: number, ref: string, name: string): Promise<SupplierRecord>;
  deleteSupplier(merchantId: number, ref: string): Promise<boolean>;
  isSupplierReferenced(merchantId: number, ref: string): Promise<boolean>;
  /** Of `currencies`, those an offer or an own stock's cost of the merchant's products is in (a probe of product_links each). */
  currenciesInUse(merchantId: number, currencies: string[]): Promise<string[]>;

  listAttributeDefinitions(merchantId: number): Promise<AttributeDefinitionRecord[]>;
  upsertAttributeDefinition(merchantId: number, definition: AttributeDefinitionRecord): Promise<AttributeDefinitionRecord>;
  deleteAttributeDefinition(merchantId: number, key: string): Promise<boolean>;
}

/** Products as the merchant sent them. */
export interface ProductSourceStore {
  /** The refs of the merchant's suppliers and the slugs of its stores (what a source may name), in one statement. */
  sourceReferenceNames(merchantId: number): Promise<{ suppliers: string[]; stores: string[] }>;
  /** The product with this ref; in a write transaction its row stays locked until it ends (PostgreSQL). */
  findProductByRef(merchantId: number, ref: string): Promise<ProductRecord | undefined>;
  /**
   * Inserts or replaces the source; returns the product id and whether it was created. Keeps what the
   * source refers to (images, excluded stores, suppliers) findable by index in the same transaction,
   * and makes its new image URLs pending work for the mirror (as ensureImageMirrors).
   */
  upsertProductSource(
    merchantId: number,
    ref: string,
    source: ProductSourceDocument,
    at: string,
  ): Promise<{ id: number; created: boolean }>;
  /**
   * upsertProductSource for each product in turn (refs distinct), in fewer statements: the same
   * rows, ids (new products numbered in the given order), links and image work; results in order,
   * `unchanged` where the product existed with this very source (only its time of the last write moved).
   * A product's `json`, when given, is its source as JSON.stringify writes it (the caller has it).
   * With `linkLater`, an engine may leave the products' links and image rows to the statement it
   * hands there, which the caller runs in the same transaction before anything reads them (the
   * links, the image rows' counts; an image's state reads the same before it as after).
   */
  upsertProductSources(
    merchantId: number,
    products: { ref: string; source: ProductSourceDocument; json?: string }[],
    at: string,
    linkLater?: (link: () => Promise<void>) => void,
  ): Promise<{ id: number; created: boolean; unchanged: boolean }[]>;
  deleteProduct(merchantId: number, productId: number): Promise<void>;
  /** Products whose source excludes them from the store with this slug. */
  productsExcludedFrom(merchantId: number, slug: string): Promise<ProductRecord[]>;
  /** Products with id > afterId, ascending, at most `limit` (bulk re-publishing walks these). */
  productsAfter(merchantId: number, afterId: number, limit: number): Promise<ProductRecord[]>;
  productsByIds(merchantId: number, ids: number[]): Promise<ProductRecord[]>;
  /**
   * A page of the merchant's products in ref order, filtered: the statement looks at no more than
   * `scan` products past `afterRef` (by the (merchant_id, ref) index), so a filter that few match
   * answers a short page, or an empty one, with the ref to go on from.
   */
  productList(merchantId: number, query: ProductListQuery): Promise<ProductListPage>;
  /**
   * Ids of the merchant's products whose source lists the image URL. In a transaction, these
   * products are not re-published by another transaction until it ends (PostgreSQL: row locks), so
   * an image state change re-publishes them with every other committed state change.
   */
  productIdsWithImage(merchantId: number, url: string): Promise<number[]>;
}

/** A mirror's caps, and what it fetches now, per merchant and origin (`claimDueImageMirrors`). */
export interface ImageClaimFairness {
  perMerchant: number;
  perOrigin: number;
  busy: { merchant_id: number; origin: string; fetching: number }[];
  /**
   * CPS_IMAGE_DEAD_AFTER_HOURS in ms: a down origin's images whose own time is up (failing this long
   * since their first failure, or waiting this long since the origin went down) are claimed `expired`,
   * to become dead without a fetch. Absent: none is.
   */
  deadAfterMs?: number;
}

/** Claims with no caps: a window this wide per merchant. */
export const UNCAPPED_IMAGE_CLAIM: ImageClaimFairness = { perMerchant: 1_000_000, perOrigin: 1_000_000, busy: [] };

/** A change of one image's mirroring state (updateImageMirrors). */
export interface ImageMirrorChange {
  url: string;
  patch: Partial<Omit<ImageMirrorWork, 'merchant_id' | 'url'>>;
}

/** Mirroring state per (merchant, source URL). */
export interface ImageStore {
  imageMirrors(merchantId: number, urls: string[]): Promise<Map<string, ImageMirrorRecord>>;
  /** Adds the URLs not known yet as `pending`, due at once. */
  ensureImageMirrors(merchantId: number, urls: string[], at: string): Promise<void>;
  /**
   * Claims pending images whose next attempt is due, at most `limit`, in one atomic step: each is
   * leased (not due again) until `leaseUntil`, so several mirrors on one database never fetch one
   * image at once; should the mirror die, the image is due again when the lease ends. Returns them
   * as they were before the lease, with their origin.
   *
   * Merchants take turns: the merchant with the fewest fetches (busy plus claimed)
   * goes first, then the oldest due work; within a merchant its origins take turns. With `fairness`,
   * nothing is claimed past `perMerchant` fetches of a merchant nor `perOrigin` fetches of one
   * origin of a merchant, counting those `busy` already; without it, no caps.
   */
  claimDueImageMirrors(now: string, limit: number, leaseUntil: string, fairness?: ImageClaimFairness): Promise<ClaimedImageMirror[]>;
  updateImageMirror(merchantId: number, url: string, patch: Partial<Omit<ImageMirrorWork, 'merchant_id' | 'url'>>): Promise<void>;
  /**
   * Applies the merchant's image state changes (each as updateImageMirror would; a URL given twice:
   * its last change) and returns the ids of the merchant's products that list any of their URLs, in
   * id order, locked as productIdsWithImage locks them. A batch of the mirror's transitions in a few
   * statements, not a round trip per image.
   */
  updateImageMirrors(merchantId: number, changes: ImageMirrorChange[]): Promise<number[]>;
  /** Per distinct source URL that a product of the merchant still lists. */
  imageStateCounts(merchantId: number): Promise<ImageStateCounts>;
  /** The merchant's dead images that a product still lists, newest first. */
  deadImages(merchantId: number, limit: number): Promise<ImageMirrorWork[]>;
  /** The merchant's origins whose last fetch failed (the others are up), down ones first. */
  imageOrigins(merchantId: number): Promise<ImageOriginState[]>;
  /** The merchant's origins with pending images (from the index, one probe each), in order, at most `limit`. */
  pendingImageOrigins(merchantId: number, limit: number): Promise<string[]>;
  /** The origin's pending images, counted up to `countMax`. */
  countPendingImagesOf(merchantId: number, origin: string, countMax: number): Promise<number>;
  /** Counts one more failure in a row of the origin (one atomic step), with its error; returns its state. */
  countImageOriginFailure(merchantId: number, origin: string, error: string): Promise<ImageOriginState>;
  /** Writes an origin's down state (see ImageOriginState); its count of failures is countImageOriginFailure's. */
  putImageOrigin(merchantId: number, state: ImageOriginState): Promise<void>;
  /** Forgets an origin's failures: it is up, and its pending images are due for claims from `at`. */
  clearImageOrigin(merchantId: number, origin: string, at: string): Promise<void>;
}

/** The payload published per (store, product), and the reads of the public API over it. */
export interface PublishedStore {
  publishedHashes(storeId: number, productIds: number[]): Promise<Map<number, PublishedHashes>>;
  /**
   * Writes payloads. Every write of published payloads records the changes it makes (recordChanges)
   * in the same transaction: that moves the merchant's published version (PublishedVersionRead),
   * which tells readers holding bytes read earlier whether they still hold the stored ones.
   * `created`: products created in this transaction (no store can have a row of theirs yet), whose
   * rows are inserted without looking for one.
   */
  upsertPublished(storeId: number, rows: PublishedRow[], created?: ReadonlySet<number>): Promise<void>;
  /**
   * Replaces the payload and price hash of products already published in the store whose content
   * hash is unchanged (a price change alone): their exclusion reason, sku and ean, all part of the
   * content, stay as they are. Recorded as upsertPublished is.
   */
  updatePublishedPrices(storeId: number, rows: PublishedPriceRow[]): Promise<void>;
  /** Deletes payloads; the changes are recorded in the same transaction, as for upsertPublished. */
  deletePublished(storeId: number, productIds: number[]): Promise<void>;
  /** The stored payload (UTF-8 JSON) of one product in the store. */
  publishedPayload(storeId: number, productId: number): Promise<Uint8Array | undefined>;
  /** Payloads of the store's products with fromId <= id <= toId, ascending, joined by commas. */
  publishedPage(storeId: number, fromId: number, toId: number): Promise<PublishedPage>;
  /**
   * The merchant's store (by slug, or its default store) and, in the same read (one consistent
   * view), the expected page of it when the store is still `expected.storeId` at
   * `expected.catalogVersion`: a page read without a snapshot's extra round trips.
   */
  publishedPageOfStore(merchantId: number, slug: string | undefined, expected: ExpectedStorePage): Promise<StorePageRead>;
  /** The merchant's store (by slug, or its default store) and the merchant's published version, in one read. */
  storeAtPublishedVersion(merchantId: number, slug: string | undefined): Promise<PublishedVersionRead>;
  /**
   * The hashes of up to `limit` products published for the store after `afterId`, by id ascending
   * (the primary key's range): a publish run's chunk compares its products with them and finds the
   * payloads whose product is gone, in one read rather than a probe per product.
   */
  publishedHashesAfter(storeId: number, afterId: number, limit: number): Promise<Map<number, PublishedHashes>>;
  /** Every product id published for the store, ascending (O(store): never on a request's path). */
  publishedProductIds(storeId: number): Promise<number[]>;
  /** The store's published products per block of ids, ascending by block, blocks with none left out (kept counts: O(blocks)). */
  publishedBlocks(storeId: number): Promise<PublishedBlock[]>;
  /**
   * The ids of a window of the store's id order, and the store's ids in `countIn` (a range within
   * one block), with the store's catalog version, in one bounded read: where a page begins and ends.
   */
  publishedWindow(storeId: number, window: PublishedIdWindow, countIn?: [number, number]): Promise<PublishedWindowRead>;
  /** Payloads of the listed products found in the store, ascending, joined by commas, their digests and count, and the published version, in one read. */
  publishedPayloadsByIds(storeId: number, productIds: number[]): Promise<PublishedPayloads>;
  /**
   * The store's payloads with id > afterId, ascending, at most `limit`, each followed by a newline
   * (NDJSON lines): one bounded step (a primary-key range) of a snapshot export.
   */
  publishedLinesAfter(storeId: number, afterId: number, limit: number): Promise<PublishedLines>;
  /**
   * Payloads of the store's products whose `sku` (or `ean`) is one of the values, ascending by id,
   * at most `limit`, as publishedPayloadsByIds reads them: from the field's index range per value.
   */
  publishedPayloadsByKeys(storeId: number, keys: PublishedKeys, limit: number): Promise<PublishedPayloads>;
  /** `{"id":…,"sku":…,"ean":…,"prices":[…]}` of the listed products found in the store, ascending, joined by commas. */
  publishedPricesByIds(storeId: number, productIds: number[]): Promise<Uint8Array>;
  /** publishedPricesByIds of the store's products whose `sku` (or `ean`) is one of the values, at most `limit`, and how many. */
  publishedPricesByKeys(storeId: number, keys: PublishedKeys, limit: number): Promise<PublishedPrices>;
  /**
   * The store's published products whose payload has exactly this `sku` and/or `ean` (every field
   * given must match), ascending by id, at most `limit`.
   */
  findPublishedProducts(storeId: number, match: { sku?: string; ean?: string }, limit: number): Promise<PublishedProductSummary[]>;
  /** The store's published products in the window, ascending by id. */
  publishedSummaries(storeId: number, window: PublishedSummaryWindow): Promise<PublishedProductSummary[]>;
  /** The store's published products, and the excluded ones per exclusion reason (every reason present, 0 when none). */
  publishedCountsByExclusion(storeId: number): Promise<PublishedExclusionCounts>;
}

/** A window of a store's feed as one statement reads it (ChangeStore.changeWindowOfStore). */
export interface StoreChangeWindow {
  /** The store the slug names, active or not; undefined when the merchant has none. */
  store: StoreRecord | undefined;
  /** The position of the newest change of the store deleted by retention. */
  horizon: FeedPosition | undefined;
  /** The store's changes after the position asked for, in position order. */
  changes: StoredChange[];
}

/** Changes (spec 2.6, 4.4) and the feed over them. */
export interface ChangeStore {
  /**
   * Records the merchant's changes at the next positions of its feed, in commit order. Ids come from
   * the merchant's own sequence (1, 2, …: a cursor reveals nothing of other merchants' activity),
   * and every change of the call gets one created_at: `now`'s whole second, or the merchant's last
   * created_at when that is later (`monotonicSecond`), so positions grow with the id. A change
   * that commits later never gets a smaller position than one readers can already see.
   */
  recordChanges(merchantId: number, changes: RecordedChange[], now: Date): Promise<void>;
  /** The store's changes strictly after the position, in position order, at most `limit`. */
  changesAfter(storeId: number, after: FeedPosition, limit: number): Promise<StoredChange[]>;
  /**
   * The position of the merchant's latest recorded change (its sequencer), undefined before its
   * first: in a snapshot, the feed cursor after which every change is one the snapshot does not show.
   */
  latestFeedPosition(merchantId: number): Promise<FeedPosition | undefined>;
  /** The position of the newest change of the store deleted by retention. */
  changeHorizon(storeId: number): Promise<FeedPosition | undefined>;
  /**
   * A window of the feed of the merchant's store named by slug (its default store when omitted), in
   * one statement, so on one snapshot without a transaction: the store, its horizon, and at most
   * `limit` of its changes after `after`, or after the horizon when `after` is undefined (cursor
   * rule 3). No changes when the store is inactive or `after` is before the horizon (410).
   */
  changeWindowOfStore(
    merchantId: number,
    slug: string | undefined,
    after: FeedPosition | undefined,
    limit: number,
  ): Promise<StoreChangeWindow>;
  /** Deletes at most `limit` of the changes created before `cutoff`, moving horizons; returns the count. */
  pruneChangesBefore(cutoff: string, limit: number): Promise<number>;
}

/** Receiver endpoints with their health record. */
/** An endpoint's health columns (what the dispatcher updates after each attempt). */
export type WebhookEndpointHealthRecord = Pick<
  WebhookEndpointRecord,
  | 'status'
  | 'consecutive_failures'
  | 'failure_streak_started_at'
  | 'paused_until'
  | 'owners_notified_at'
  | 'disabled_reason'
  | 'last_success_at'
  | 'last_failure_at'
>;

export interface WebhookEndpointStore {
  createWebhookEndpoint(input: WebhookEndpointInputRecord): Promise<WebhookEndpointRecord>;
  listWebhookEndpoints(merchantId: number): Promise<WebhookEndpointRecord[]>;
  /** The merchant's endpoint with this id (undefined for another merchant's). */
  findWebhookEndpoint(merchantId: number, id: number): Promise<WebhookEndpointRecord | undefined>;
  /** An endpoint by id, of any merchant: for an id the caller holds from a scoped read or a claim. */
  getWebhookEndpoint(id: number): Promise<WebhookEndpointRecord | undefined>;
  /** getWebhookEndpoint for several ids at once (any merchant's), those that exist, in id order. */
  getWebhookEndpoints(ids: number[]): Promise<WebhookEndpointRecord[]>;
  /**
   * The endpoint whose outbox rows a coalescing pass turns into deliveries, held to the end of the
   * pass against a drop of its pending deliveries (PostgreSQL: an advisory lock shared by passes,
   * never the row an attempt's health update locks; a paused or disabled endpoint, which the pass
   * may resume, locked as getWebhookEndpoint locks it in a write transaction); `busy` when another
   * transaction holds it (a drop under way; a paused endpoint's row), which this pass then leaves
   * for the next one rather than waiting; undefined when it was deleted.
   */
  coalescingEndpoint(id: number): Promise<WebhookEndpointRecord | 'busy' | undefined>;
  updateWebhookEndpoint(id: number, patch: Partial<Omit<WebhookEndpointRecord, 'id' | 'merchant_id' | 'created_at'>>): Promise<void>;
  /** updateWebhookEndpoint(id, health) for several endpoints at once (distinct ids). */
  updateWebhookEndpointsHealth(updates: { id: number; health: WebhookEndpointHealthRecord }[]): Promise<void>;
  /** Deletes it with its deliveries and attempts; notifications about it stay. */
  deleteWebhookEndpoint(id: number): Promise<void>;
}

/**
 * Changes waiting to be coalesced into deliveries, written in the change's transaction: a row per
 * (write, endpoint, event, store), carrying the products the write changed.
 */
export interface OutboxStore {
  insertOutbox(rows: OutboxRow[]): Promise<void>;
  /**
   * Waiting changes per (endpoint, event, store), with their count (product ids) and oldest time;
   * endpoint by endpoint (in id order). With `window`, among the oldest `window` rows only (a pass
   * over a bounded part of the backlog, oldest first), counted there.
   */
  outboxGroups(window?: number): Promise<OutboxGroup[]>;
  /**
   * The group's changes in arrival order, a product id each (with its row's id), at most `limit`.
   * In a transaction the rows they come from are the caller's until it ends (PostgreSQL): a
   * concurrent coalescer gets the rows after them.
   */
  outboxRows(
    group: Pick<OutboxGroup, 'endpointId' | 'event' | 'storeId'>,
    limit: number,
  ): Promise<{ id: number; productId: number; createdAt: string }[]>;
  /**
   * The oldest waiting rows (after row `afterId`, when given) up to `window` changes (product ids;
   * at least one row, whatever it carries), read once and grouped as outboxGroups groups them
   * (endpoint by endpoint in id order, then by each group's oldest row), each group with its rows
   * in arrival order: what a coalescing pass works on, in one statement rather than one per group.
   * Read without locks: a pass holds the rows it batches with holdOutboxRows.
   */
  outboxWindow(window: number, afterId?: number): Promise<OutboxWindowGroup[]>;
  /**
   * Of these rows (read by outboxWindow), those the caller now holds until its transaction ends, as
   * they are now: a concurrent coalescer (PostgreSQL) neither waits for them nor gets them, rows
   * another one holds or has batched meanwhile are left out, and a row another one trimmed since
   * the window was read carries only the products it left, so no change goes into two deliveries.
   * On SQLite the transaction is the only writer: all of them, as read.
   */
  holdOutboxRows(rows: OutboxEntry[]): Promise<OutboxEntry[]>;
  deleteOutboxRows(ids: number[]): Promise<void>;
  /** Rows the caller holds of which a pass batched some products: each keeps only the rest (in order). */
  trimOutboxRows(rows: { id: number; productIds: number[] }[]): Promise<void>;
}

/** An attempt and the delivery's state after it (recordAttemptOutcomes). */
export interface AttemptOutcome {
  deliveryId: number;
  attempt: NewAttempt;
  status: DeliveryStatus;
  attempts: number;
  next_attempt_at: string | null;
}

/** Deliveries and their attempts. */
export interface DeliveryStore {
  /** oldestChangeAt: when the oldest change it carries was recorded (default: created_at). */
  insertDelivery(input: NewDelivery, oldestChangeAt?: string): Promise<DeliveryRecord>;
  /**
   * A coalescing pass's new deliveries of one group, in order (ids in that order), neither read
   * back nor tests nor resends: insertDelivery for each, in one statement where the engine can.
   */
  insertCoalescedDeliveries(deliveries: { delivery: NewDelivery; oldestChangeAt: string }[]): Promise<void>;
  getDelivery(id: number): Promise<DeliveryRecord | undefined>;
  /**
   * Claims due deliveries (pending or failed, next attempt due, endpoint active) atomically, so
   * dispatchers in several processes never claim one delivery twice: leases them for
   * claim.leaseMs and gives first attempts their occurred_at. Endpoints take turns, so a backlog at
   * one endpoint never fills the whole claim, and per-endpoint concurrency holds across processes.
   * The lease ends when updateDelivery records the attempt's outcome, or when it expires.
   * An endpoint with `max_per_second` gets only the slots of its rate that start within the next
   * RATE_HORIZON_MS (delivery-turns.ts), each claimed delivery's `send_at` naming its slot.
   */
  claimDueDeliveries(claim: DeliveryClaim): Promise<ClaimedDelivery[]>;
  /**
   * Adds `productIds` to the newest delivery of the endpoint's event and store that
   * waits for its first attempt (pending, never attempted, not leased, neither a test nor a resend),
   * up to `batchSize` ids in all. Returns the ids it now carries of those offered (none: no such
   * delivery, or it was full).
   */
  fillWaitingDelivery(
    group: Pick<OutboxGroup, 'endpointId' | 'event' | 'storeId'>,
    productIds: number[],
    batchSize: number,
  ): Promise<number[]>;
  updateDelivery(id: number, patch: Partial<Omit<DeliveryRecord, 'id' | 'endpoint_id'>>): Promise<void>;
  /** Marks the endpoint's pending and failed deliveries dropped; returns how many. */
  dropPendingDeliveries(endpointId: number): Promise<number>;
  recordAttempt(deliveryId: number, attempt: NewAttempt): Promise<void>;
  /**
   * For each outcome in turn: recordAttempt, then updateDelivery with its status, attempts and
   * next_attempt_at (the lease ends); several attempts' bookkeeping in one call (distinct deliveries).
   * A delivery dropped while its attempt was under way (a pause, a resend) stays dropped unless the
   * attempt succeeded: an outcome never makes it due again.
   */
  recordAttemptOutcomes(outcomes: AttemptOutcome[]): Promise<void>;
  /**
   * recordAttemptOutcomes, then updateWebhookEndpointsHealth, in one statement: where each statement
   * is a round trip to the database (PostgreSQL); a storage without it gets the two calls.
   */
  recordAttemptOutcomesWithHealth?(
    outcomes: AttemptOutcome[],
    health: { id: number; health: WebhookEndpointHealthRecord }[],
  ): Promise<void>;
  /**
   * Successful outcomes (status `succeeded`) recorded as recordAttemptOutcomesWithHealth records
   * them, when each of their endpoints is active with no failure counted: a success then changes
   * nothing of its health but last_success_at (health.ts afterSuccess), so it is written unread, in
   * one statement that is a transaction of its own (where each statement is a round trip). False,
   * and nothing written, when an endpoint is not so (or gone): the caller records them as usual.
   */
  recordSuccessfulAttempts?(outcomes: AttemptOutcome[], endpoints: { id: number; lastSuccessAt: string }[]): Promise<boolean>;
  /**
   * Names `replacementId` as the latest resend of `originalId`. An original still waiting for a
   * retry (pending or failed) is dropped: it makes no further attempt; any other keeps its status.
   */
  replaceDelivery(originalId: number, replacementId: number): Promise<void>;
  /** Newest first; `webhookId`: only the delivery with that webhook-id (by its unique index). */
  listDeliveries(
    endpointId: number,
    filter: { status?: DeliveryStatus; limit: number; beforeId?: number; webhookId?: string },
  ): Promise<DeliveryRecord[]>;
  listAttempts(deliveryId: number): Promise<AttemptRecord[]>;
  /**
   * The endpoint's attempts of the UTC hours in [from, to) (instants on the hour), counted per hour
   * and outcome with their latency's sum and maximum, as the attempt log's trigger keeps them:
   * one primary-key range, at most 3 rows an hour, however many attempts.
   */
  attemptsPerHour(endpointId: number, from: string, to: string): Promise<AttemptHourRecord[]>;
  /** Failed, given-up or dropped deliveries of the endpoint created at or after `since`, not re-sent already. */
  unsuccessfulDeliveriesSince(endpointId: number, since: string): Promise<DeliveryRecord[]>;
  /**
   * When the merchant's oldest change not yet attempted for one of its active endpoints was
   * recorded: its outbox rows and its pending deliveries without an attempt (a delivery counts from
   * the oldest change it carries); null when none waits. The merchant's part of OperationalCounts.oldestWaitingAt.
   */
  oldestWaitingChangeAt(merchantId: number): Promise<string | null>;
}

/** Messages to a merchant's owners. */
export interface NotificationStore {
  insertNotification(input: Omit<NotificationRecord, 'id' | 'emailed_at' | 'ended_at'>): Promise<NotificationRecord>;
  /** The endpoint's notifications of these kinds whose condition still lasted end at `at`; returns how many. */
  endNotifications(endpointId: number, kinds: readonly NotificationKind[], at: string): Promise<number>;
  listNotifications(merchantId: number, limit: number): Promise<NotificationRecord[]>;
  markNotificationEmailed(id: number, at: string): Promise<void>;
}

/** The administration panel's accounts: users, invitations, sessions, sign-in failures, the audit log. */
export interface PanelStore {
  insertPanelInvitation(
    tokenHash: Buffer,
    invitation: Omit<PanelInvitationRecord, 'id' | 'used_at' | 'revoked_at'>,
  ): Promise<PanelInvitationRecord>;
  panelInvitation(tokenHash: Buffer): Promise<PanelInvitationRecord | undefined>;
  /** Marks the link used; false (nothing changed) when it was already used or revoked. */
  markPanelInvitationUsed(tokenHash: Buffer, at: string): Promise<boolean>;
  /** The merchant's links neither used nor revoked that expire after `now`, by id. */
  listPendingPanelInvitations(merchantId: number, now: string): Promise<PanelInvitationRecord[]>;
  /** Revokes the merchant's unused, unrevoked links: the one with this id, or every one for this e-mail. How many. */
  revokePanelInvitations(merchantId: number, which: { id: number } | { email: string }, at: string): Promise<number>;
  /** Ids of the merchant's owners (inside a transaction on PostgreSQL, locked until it ends). */
  panelOwnerIds(merchantId: number): Promise<number[]>;
  /** Creates the user, or sets a new password (and role) for the email's existing user of the same merchant. */
  upsertPanelUser(user: Omit<PanelUserRecord, 'id'>, passwordHash: string): Promise<PanelUserRecord>;
  panelUserByEmail(email: string): Promise<(PanelUserRecord & { password_hash: string }) | undefined>;
  panelUser(id: number): Promise<PanelUserRecord | undefined>;
  setPanelUserPassword(id: number, passwordHash: string): Promise<void>;
  listPanelUsers(merchantId: number): Promise<PanelUserRecord[]>;
  /** Deletes the user and its sessions. */
  deletePanelUser(merchantId: number, id: number): Promise<boolean>;
  insertPanelSession(tokenHash: Buffer, session: PanelSessionRecord): Promise<void>;
  panelSession(tokenHash: Buffer): Promise<PanelSessionRecord | undefined>;
  touchPanelSession(tokenHash: Buffer, at: string): Promise<void>;
  deletePanelSession(tokenHash: Buffer): Promise<void>;
  /** Ends every session of the user but `keep` (when given); how many ended. */
  deletePanelSessionsOfUser(userId: number, keep?: Buffer): Promise<number>;
  /** Keeps a sealed one-time message for a session until `expiresAt`; its id. */
  insertPanelFlash(sessionHash: Buffer, sealed: Buffer, expiresAt: string): Promise<number>;
  /** Deletes and returns the session's message with this id (a second take finds nothing). */
  takePanelFlash(sessionHash: Buffer, id: number): Promise<{ sealed: Buffer; expires_at: string } | undefined>;
  deleteExpiredPanelFlashes(now: string): Promise<number>;
  /** One failure per subject at `at`; the ids of the rows recorded (clearSignInFailures forgives them). */
  recordSignInFailure(subjects: string[], at: string): Promise<number[]>;
  /**
   * Failures per subject after `since`, with the first and the last of them. Inside a transaction the
   * subjects stay held until it ends (SQLite: its write lock; PostgreSQL: an advisory lock per
   * subject), so a count and the failure recorded after it are one step for every process.
   */
  countSignInFailures(subjects: string[], since: string): Promise<Map<string, { count: number; oldest: string; newest: string }>>;
  /** Deletes every failure of `subject` (none when null) and the failures with these ids. */
  clearSignInFailures(subject: string | null, ids?: readonly number[]): Promise<void>;
  insertAuditEntry(entry: Omit<AuditEntryRecord, 'id' | 'api_key_id'> & { api_key_id?: number | null }): Promise<void>;
  /** The newest entries first; with `apiKeyId`, only that key's. */
  listAuditEntries(merchantId: number, limit: number, apiKeyId?: number): Promise<ListedAuditEntryRecord[]>;
}

/** Work a commit can wake a worker for: deliveries to coalesce or claim, images to mirror. */
export type WorkTopic = 'deliveries' | 'images' | 'publishing';

/** The stores a commit recorded changes for, or 'any' when the engine cannot tell which (a wake-up may have been missed). */
export type ChangedStores = readonly number[] | 'any';

/** NDJSON imports' progress and outcome, so that every process (behind a load balancer) shows any import. */
export interface ImportJobStore {
  insertImportJob(job: Omit<ImportJobRecord, 'id'>): Promise<ImportJobRecord>;
  updateImportJob(id: number, progress: ImportJobProgress): Promise<void>;
  /** The merchant's import job with this id; undefined for another merchant's. */
  importJob(merchantId: number, id: number): Promise<ImportJobRecord | undefined>;
  /** The merchant's import jobs, newest first, those with an id below `beforeId` when given (keyset paging). */
  listImportJobs(merchantId: number, limit: number, beforeId?: number): Promise<ImportJobRecord[]>;
  /**
   * Ends as failed (`error_code` 'interrupted', `error` as given) every running job still checking
   * its file (nothing staged: `operations` null) whose progress was last written before
   * `updatedBefore`: the process that ran it is gone. Returns the jobs it ended.
   */
  interruptStalledImportJobs(updatedBefore: string, at: string, error: string): Promise<ImportJobRecord[]>;
  /** Stages the job's checked operations, a chunk per row (`operations`: the chunk's JSON), to be applied by its run. */
  insertImportChunks(jobId: number, chunks: { seq: number; operations: string }[]): Promise<void>;
  /** The job's first chunk not applied yet, or undefined when none is left. */
  nextImportChunk(jobId: number): Promise<{ seq: number; operations: string } | undefined>;
  /**
   * Deletes the job's first chunk not applied yet (in the caller's transaction: back with a
   * rollback) and returns it, its operations null when its seq is `heldSeq` (the caller holds
   * them); undefined when none is left.
   */
  takeImportChunk(jobId: number, heldSeq?: number): Promise<{ seq: number; operations: string | null } | undefined>;
  /**
   * Adds a chunk's applied counts to the job's progress, and finishes the job (succeeded) when every
   * operation is applied; undefined for an unknown job.
   */
  countImportChunk(
    jobId: number,
    applied: { products: number; upserted: number; deleted: number },
    at: string,
  ): Promise<{ finished: boolean } | undefined>;
  /** Deletes the job's chunk `seq`, or every chunk it has left (seq omitted). */
  deleteImportChunks(jobId: number, seq?: number): Promise<void>;
}

/**
 * The admin API's idempotency keys (admin/idempotency-keys.ts), per credential; every process
 * sees them. Writes by `owner` change the row only while that run still holds it.
 */
export interface IdempotencyKeyStore {
  /** The key's row (in a write transaction on PostgreSQL, locked until it ends). */
  idempotencyKey(credential: string, key: string): Promise<IdempotencyKeyRecord | undefined>;
  /** Inserts the claim (false: the key exists), or with `replacing` overwrites the existing row (false: it is gone). */
  claimIdempotencyKey(
    claim: Pick<IdempotencyKeyRecord, 'credential' | 'key' | 'request_hash' | 'created_at' | 'expires_at' | 'owner' | 'leased_until'>,
    replacing: boolean,
  ): Promise<boolean>;
  /** Marks that a write of the owner's request committed: called inside that write's transaction. */
  markIdempotentWrite(credential: string, key: string, owner: string): Promise<void>;
  renewIdempotencyLease(credential: string, key: string, owner: string, until: string): Promise<void>;
  /** The hash of a streamed request, known once its body was read to the end. */
  setIdempotentRequestHash(credential: string, key: string, owner: string, requestHash: string): Promise<void>;
  /** Keeps the answer and ends the owner's hold; false when the owner no longer holds the key. */
  keepIdempotentAnswer(credential: string, key: string, owner: string, answer: IdempotentAnswer): Promise<boolean>;
  /** Forgets the owner's claim (an answer not kept: a retry does the work). */
  releaseIdempotencyKey(credential: string, key: string, owner: string): Promise<void>;
  /** Deletes up to `limit` keys that expired by `expiredBy` (and are not held by a live request); how many. */
  pruneIdempotencyKeys(expiredBy: string, limit: number): Promise<number>;
}

/** Every aggregate's operations: what a transaction's tx and a snapshot's reader offer. */
/** Re-publishing runs (catalog/publish-runs.ts): one row per run, its position moved by every chunk. */
export interface PublishRunStore {
  insertPublishRun(run: Omit<PublishRunRecord, 'id'>): Promise<PublishRunRecord>;
  /** The run, locked until the transaction ends (PostgreSQL), or undefined once it ended. */
  publishRun(id: number): Promise<PublishRunRecord | undefined>;
  updatePublishRun(id: number, patch: Pick<PublishRunRecord, 'after_product_id' | 'leased_until'>): Promise<void>;
  deletePublishRun(id: number): Promise<void>;
  /** Ends `driver`'s hold on the run at once (another process may resume it now). */
  releasePublishRun(id: number, driver: string): Promise<void>;
  /** Takes the run for `driver` until `until` if its hold ended before `now`; the run taken, else undefined. */
  takePublishRun(id: number, driver: string, until: string, now: string): Promise<PublishRunRecord | undefined>;
  /** Runs whose hold ended before `now`, oldest first (at most `limit`). */
  stalledPublishRuns(now: string, limit: number): Promise<PublishRunRecord[]>;
}

export interface StorageOperations
  extends TenancyStore,
    CatalogSetupStore,
    ProductSourceStore,
    ImageStore,
    PublishedStore,
    ChangeStore,
    WebhookEndpointStore,
    OutboxStore,
    DeliveryStore,
    NotificationStore,
    PanelStore,
    ImportJobStore,
    PublishRunStore,
    IdempotencyKeyStore {}

/** The operations inside one write transaction. */
export type StorageTx = StorageOperations;

export interface CatalogStorage extends StorageOperations {
  /**
   * Runs fn in one write transaction: everything it does through tx commits together when its
   * promise resolves, and nothing when it rejects. Transactions do not nest: pass tx down.
   */
  transaction<T>(fn: (tx: StorageTx) => Promise<T>): Promise<T>;
  /**
   * Whether write transactions run at once, each locking the rows it writes until it commits
   * (PostgreSQL): independent writes are then cheapest in transactions of their own, none holding
   * what another waits for. Otherwise (SQLite: one writer at a time) one transaction for them is.
   */
  readonly concurrentWrites?: boolean;
  /** Runs fn's reads on one consistent snapshot of the committed data. */
  snapshot<T>(fn: (reader: StorageOperations) => Promise<T>): Promise<T>;
  close(): Promise<void>;
  /** Rejects unless the database answers a query. */
  ping(): Promise<void>;
  /** Ids of the migrations this version knows that the database has not applied. */
  missingMigrations(): Promise<number[]>;
  /**
   * Whole-service counts for the metrics (openapi/operations.yaml, getMetrics); no merchant's own.
   * The outbox and waiting deliveries are counted up to `countMax` (OPERATIONAL_COUNT_MAX): a scrape
   * never costs O(backlog).
   */
  operationalCounts(countMax?: number): Promise<OperationalCounts>;
  /**
   * Calls listener soon after a commit that added work of this topic (in any process on the
   * database where the engine can tell, or at least in this one); returns the unsubscribe. A
   * wake-up, never a guarantee: workers keep polling as the fallback.
   */
  onWork?(topic: WorkTopic, listener: () => void): () => void;
  /**
   * Whether onWork's wake-ups are heard now: on PostgreSQL while the listening connection is up
   * (every process's commits), on SQLite always (this process's commits). Idle workers back off
   * their polls only then (shared/idle-poll.ts).
   */
  wakeupsLive?(): boolean;
  /**
   * Calls listener soon after a commit that recorded changes (ChangeStore.recordChanges), with the
   * stores they are of: on SQLite the commits of this storage only, on PostgreSQL those of every
   * process on the database (LISTEN/NOTIFY). Returns the unsubscribe. A wake-up, never a
   * guarantee: the live feed (changes/live.ts) keeps a slow poll as the fallback.
   */
  onChanges?(listener: (stores: ChangedStores) => void): () => void;
}
