// The records storage keeps, in one place beside the port. Where a document states a shape (a
// merchant, a store, a delivery, a change type, an image state, ...) the record is that generated
// type, or that type plus the bookkeeping storage keeps beside it; nothing here restates a schema.
import type { components as AdminComponents } from '../generated/admin-api.js';
import type { components as PublicComponents } from '../generated/public-api.js';

type AdminSchemas = AdminComponents['schemas'];
type PublicSchemas = PublicComponents['schemas'];

// Shapes the documents state

export type ChangeType = PublicSchemas['ChangeType'];
export type DeliveryStatus = AdminSchemas['DeliveryStatus'];
export type ImageState = AdminSchemas['SourceImage']['state'];
export type EndpointStatus = AdminSchemas['WebhookEndpoint']['status'];
export type NotificationKind = AdminSchemas['Notification']['kind'];

// Tenancy and keys

export type MerchantRecord = AdminSchemas['Merchant'];

export type ApiKeyRecord = AdminSchemas['ApiKey'] & { merchant_id: number };

/** A merchant's store as the admin API states it, plus what storage keeps beside it. */
export type StoreRecord = AdminSchemas['AdminStore'] & {
  merchant_id: number;
  /** Bumped when the set of products published for the store changes (read-side id index). */
  catalog_version: number;
};

export type StoreInputRecord = Pick<StoreRecord, 'name' | 'locale' | 'currency' | 'is_default' | 'active' | 'exclude_out_of_stock'>;

// Catalog setup: what resolution reads merchant-wide

export type CustomerGroupRecord = AdminSchemas['CustomerGroup'];
export type PricingRuleRecord = AdminSchemas['PricingRule'];
export type PricingRuleInputRecord = Omit<PricingRuleRecord, 'id' | 'is_catch_all'>;
export type ExchangeRateRecord = AdminSchemas['ExchangeRate'];
export type AttributeDefinitionRecord = AdminSchemas['AttributeDefinition'];
export type SupplierRecord = AdminSchemas['Supplier'];

// Product sources

export type OfferSource = AdminSchemas['Offer'];
export type OwnStockSource = NonNullable<AdminSchemas['ProductSource']['own_stock']>;

/** A product's source document as the merchant sent it, with every optional part filled in (images by URL only). */
export type ProductSourceDocument = Omit<AdminSchemas['ProductSource'], 'id' | 'ref' | 'images'> & { images: { url: string }[] };

export interface ProductRecord {
  id: number;
  ref: string;
  source: ProductSourceDocument;
}

/** What a page of the merchant's product list asks for (admin listProductSources). */
export interface ProductListQuery {
  /** Refs after this one (the previous page's `next_after`); null from the first. */
  afterRef: string | null;
  /** Only refs starting with this. */
  refPrefix: string | null;
  /** Only products whose source was written at or after this time. */
  updatedSince: string | null;
  /** Only products excluded (for any reason) from the store with this id. */
  excludedFromStore: number | null;
  /** Products returned at most. */
  limit: number;
  /** Products looked at at most, matching or not (the statement's bound). */
  scan: number;
}

/** A page of the product list: the products that match, and where the next page starts. */
export interface ProductListPage {
  products: { id: number; ref: string; updated_at: string }[];
  /** The last ref looked at, when more refs follow it (the next page's `afterRef`); else null. */
  nextAfter: string | null;
}

// Images

export type ImageMirrorRecord = AdminSchemas['SourceImage'];

/** An image source's mirroring state with its retry bookkeeping. */
export interface ImageMirrorWork extends ImageMirrorRecord {
  merchant_id: number;
  attempts: number;
  first_failure_at: string | null;
  next_attempt_at: string | null;
  last_error: string | null;
  updated_at: string;
}

/**
 * Claimed image work, with the origin of its URL (scheme://host[:port], lower-cased: everything
 * before the first `/` after `://`), the key the mirror caps fetches by.
 */
export interface ClaimedImageMirror extends ImageMirrorWork {
  origin: string;
}

export type ImageStateCounts = Record<ImageState, number>;

// Published payloads

export interface PublishedRow {
  productId: number;
  payload: string;
  priceHash: string;
  contentHash: string;
  /**
   * The payload's `exclusion_reason`, as resolution decided it (kept beside the payload: migration
   * 17); without it, the storage reads it from the payload (one more parse of it).
   */
  exclusionReason?: ExclusionReason | null;
}

/** Why a published product is excluded from its store (null: it is not). */
export type ExclusionReason = PublicSchemas['ExclusionReason'];

/** How many products a store publishes, and how many of those are excluded, per reason. */
export interface PublishedExclusionCounts {
  total: number;
  excluded: Record<NonNullable<ExclusionReason>, number>;
}

/** What the panel lists of a published product, read from its payload as integrators get it. */
export interface PublishedProductSummary {
  id: number;
  title: string | null;
  sku: string | null;
  ean: string | null;
  excluded: boolean;
  exclusion_reason: ExclusionReason;
}

/** A keyset window over a store's published products (id > afterId, ascending). */
export interface PublishedSummaryWindow {
  afterId: number;
  limit: number;
  /** Only the products whose payload says `excluded: true`. */
  excludedOnly?: boolean;
}

export interface PublishedHashes {
  priceHash: string;
  contentHash: string;
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

/** A store's published products are counted per block of 2^10 consecutive product ids (migration 20: `product_id >> 10`). */
export const PUBLISHED_BLOCK_BITS = 10;

/** How many of a store's published products have ids in one block (PUBLISHED_BLOCK_BITS). */
export interface PublishedBlock {
  block: number;
  count: number;
}

/**
 * A window of a store's id order: the `limit` ids that follow the first `skip` ids >= `fromId`
 * (skip stays under a block's size plus a page: a bounded index range).
 */
export interface PublishedIdWindow {
  fromId: number;
  skip: number;
  limit: number;
}

/** What publishedWindow read, in one read with the store's catalog version. */
export interface PublishedWindowRead {
  /** The store's catalog version as the same read saw it; undefined when the store is gone. */
  catalogVersion: number | undefined;
  /** The first and last id of the window (null when it is empty) and how many ids it holds. */
  firstId: number | null;
  lastId: number | null;
  count: number;
  /** The store's ids in [countIn[0], countIn[1]] (0 without countIn). */
  counted: number;
}

/** The page a reader expects of a store: it computed the range from the store's ids at that catalog version. */
export interface ExpectedStorePage {
  storeId: number;
  catalogVersion: number;
  /** [fromId, toId] of the page; null for a page past the end (the store alone is wanted). */
  range: [number, number] | null;
  /**
   * The reader already holds this page's rows as they were at this published version
   * (catalog/read-cache.ts): while the merchant's published version is still this one, the rows
   * are not read again.
   */
  heldVersion?: number;
}

/** A store and, when it was the expected store at the expected catalog version, its page, as one read saw them. */
export interface StorePageRead {
  /** The merchant's store by slug, or its default store; undefined when there is none. */
  store: StoreRecord | undefined;
  /** The merchant's published version as the same read saw it (see PublishedVersionRead); 0 without a store. */
  publishedVersion: number;
  /**
   * The page's rows; null when the store is another one or its published products have changed
   * since, and when the rows are the ones the reader holds (publishedVersion = expected.heldVersion).
   */
  page: PublishedPage | null;
}

/**
 * A merchant's store and its published version, as one read saw them. The published version is the
 * position of the merchant's latest recorded change (0 before any): every write of published payloads
 * records its changes in the same transaction (catalog/publish.ts), so while the version stays, no
 * published payload of the merchant has changed, and bytes read at it are still the stored bytes.
 */
export interface PublishedVersionRead {
  /** The merchant's store by slug, or its default store; undefined when there is none. */
  store: StoreRecord | undefined;
  publishedVersion: number;
}

/** Some products of a store, as publishedPayloadsByIds reads them in one statement. */
export interface PublishedPayloads {
  /** The payloads found (UTF-8 JSON), ascending by product id, joined by commas. */
  bytes: Uint8Array;
  /** Their stored price and content hashes, in the same order (as PublishedPage.digests). */
  digests: Uint8Array;
  count: number;
  /** The merchant's published version the same read saw (PublishedVersionRead). */
  publishedVersion: number;
}

/** A bounded step of a store's payloads as NDJSON lines (PublishedStore.publishedLinesAfter). */
export interface PublishedLines {
  /** The payloads (UTF-8 JSON), ascending by product id, each followed by a newline. */
  bytes: Uint8Array;
  count: number;
  /** The last product id of the step; null when it found none. */
  lastId: number | null;
}

// Changes and the feed

/** A change detected in a write, before the engine gives it its position in the merchant's feed. */
export interface RecordedChange {
  storeId: number;
  productId: number;
  changeType: ChangeType;
}

/** A recorded change: a ChangeEntry of the feed plus its position's id (from the merchant's sequence). */
export type StoredChange = PublicSchemas['ChangeEntry'] & { id: number };

/** A position in a store's feed: a whole UTC second and a change id. */
export interface FeedPosition {
  at: string;
  id: number;
}

// Webhooks: endpoints, outbox, deliveries, attempts, notifications

/** An endpoint's health record (spec 3), as the state machine in webhooks/health.ts moves it. */
export type EndpointHealth = Pick<AdminSchemas['WebhookEndpoint'],
  'status' | 'consecutive_failures' | 'paused_until' | 'disabled_reason' | 'last_success_at' | 'last_failure_at'> & {
  failure_streak_started_at: string | null;
  owners_notified_at: string | null;
};

export interface WebhookEndpointRecord extends EndpointHealth {
  id: number;
  merchant_id: number;
  url: string;
  /** null: every store of the merchant. */
  store_id: number | null;
  events: ChangeType[];
  /** Whether deliveries also carry the Standard Webhooks headers. */
  standard_webhooks: boolean;
  /** The most deliveries a second the endpoint receives, across processes; null: no limit. */
  max_per_second: number | null;
  /** The secret that signs; during a rotation, the old one (webhooks/signing.ts, secretsAt). */
  secret: string;
  /** A rotation's new secret: it signs from pending_secret_until on, or once confirmed. */
  pending_secret: string | null;
  /** When the pending secret was made (the rotation). */
  secret_rotated_at: string | null;
  /** The end of the rotation's grace period: until then `secret` signs. */
  pending_secret_until: string | null;
  created_at: string;
}

export type WebhookEndpointInputRecord = Pick<WebhookEndpointRecord, 'merchant_id' | 'url' | 'store_id' | 'events' | 'secret' | 'created_at'>
  & Partial<Pick<WebhookEndpointRecord, 'standard_webhooks' | 'max_per_second'>>;

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

export type DeliveryRecord = AdminSchemas['Delivery'];
/**
 * A delivery leased by a claim. `send_at`: for an endpoint with `max_per_second`, the time its
 * attempt may start (the claim reserved that slot of the endpoint's rate); null: at once.
 */
export type ClaimedDelivery = DeliveryRecord & { send_at: string | null };
/** A delivery to insert: a test or a resend says so (`replaced_by` is set later, by its resend). */
export type NewDelivery = Omit<DeliveryRecord, 'id' | 'test' | 'replaces' | 'replaced_by'> & Partial<Pick<DeliveryRecord, 'test' | 'replaces'>>;
export type AttemptRecord = AdminSchemas['Attempt'];
/** An attempt to record: the request it sent, when one was signed (read back as null otherwise). */
export type NewAttempt = Omit<AttemptRecord, 'request_url' | 'request_headers'> & Partial<Pick<AttemptRecord, 'request_url' | 'request_headers'>>;

/**
 * How an attempt ended, for the success-rate charts: `succeeded` (2xx), `failed` (the receiver
 * answered, but not with a 2xx, or its answer could not be recorded) or `no_response` (a time-out,
 * a refused or blocked connection: no status code).
 */
export type AttemptOutcomeKind = 'succeeded' | 'failed' | 'no_response';

/** An endpoint's attempts of one outcome in one UTC hour (`hour`: `YYYY-MM-DDTHH`). */
export interface AttemptHourRecord {
  hour: string;
  outcome: AttemptOutcomeKind;
  attempts: number;
  latencySumMs: number;
  latencyMaxMs: number;
}
export type NotificationRecord = AdminSchemas['Notification'] & { merchant_id: number };

/** What a dispatcher asks for when it claims due deliveries (one atomic statement). */
export interface DeliveryClaim {
  /**
   * The clock, read when the claim runs (it may wait for other writes): due means
   * next_attempt_at <= now; a first attempt's occurred_at is now's whole second (spec 6 rule 2).
   */
  now: () => Date;
  /** A claimed delivery is not due again for this long (the dispatcher's lease). */
  leaseMs: number;
  /** At most this many in all ... */
  limit: number;
  /**
   * ... and at most this many per endpoint, counting the ones already in flight: every process's
   * deliveries of the endpoint whose lease has not expired and whose attempt is not recorded yet
   * (the engine counts them), or this process's own count when that is larger.
   */
  perEndpoint: number;
  inFlightByEndpoint: Map<number, number>;
  /**
   * ... and at most this many to one merchant's endpoints, counting this process's deliveries in
   * flight to them (inFlightByEndpoint): a merchant whose receivers hang holds no more than this
   * share of a dispatcher's slots. Merchants take turns either way; absent, no per-merchant bound.
   */
  perMerchant?: number;
}

// Panel accounts: users, invitations, sessions, sign-in throttling, the audit log

export type PanelRole = 'owner' | 'member';

export interface PanelUserRecord {
  id: number;
  merchant_id: number;
  email: string;
  role: PanelRole;
  created_at: string;
}

/** `invitation`: the link creates the e-mail's account; `reset`: it sets a new password for the e-mail's existing account. */
export type PanelLinkPurpose = 'invitation' | 'reset';

export interface PanelInvitationRecord {
  id: number;
  merchant_id: number;
  email: string;
  role: PanelRole;
  purpose: PanelLinkPurpose;
  created_at: string;
  expires_at: string;
  used_at: string | null;
  /** Revoked by hand, by a newer link for the same e-mail, or by the removal of the user. */
  revoked_at: string | null;
}

export interface PanelSessionRecord {
  /** null: the operator's session. */
  user_id: number | null;
  csrf_token: string;
  created_at: string;
  last_seen_at: string;
  /** The absolute expiry; the idle expiry is counted from last_seen_at. */
  expires_at: string;
}

export interface AuditEntryRecord {
  id: number;
  merchant_id: number;
  at: string;
  /** `operator`, or the panel user's email. */
  actor: string;
  action: string;
  detail: string;
}

// Import jobs: an NDJSON import's progress and outcome, kept where every process can read it

export type ImportJobState = AdminSchemas['ImportJob']['state'];
/** Why an import failed (admin ImportJob `error_code`). */
export type ImportErrorCode = NonNullable<AdminSchemas['ImportJob']['error_code']>;

/** A bad line of a rejected import: its name (`line N`) and reason, as the admin API lists them. */
export type ImportProblemRecord = AdminSchemas['ImportJob']['problems'][number];

/**
 * A re-publishing of a merchant's whole catalog (a rate, rule, group or store setting changed),
 * committed a chunk at a time: where it is (`after_product_id`), and who drives it until when.
 */
/** The hold of a run given up: before any time, so the run is resumed by the next look. */
export const RELEASED_PUBLISH_RUN = '1970-01-01T00:00:00.000Z';

export interface PublishRunRecord {
  id: number;
  merchant_id: number;
  /** The stores to re-publish; null: every store of the merchant. */
  store_ids: number[] | null;
  /** Every product up to this id is re-published (a run of an import: the chunks applied so far). */
  after_product_id: number;
  /**
   * The import job whose staged chunks the run applies (admin/import-jobs.ts), one per transaction;
   * null for a re-publishing.
   */
  import_job_id: number | null;
  /** The driver holding the run (a random token per driver). */
  driver: string;
  /** The driver's hold ends then; a run whose hold ended is resumed by another. */
  leased_until: string;
  created_at: string;
}

/** An import job (admin ImportJob: the document states its shape), and its merchant. */
export type ImportJobRecord = AdminSchemas['ImportJob'] & { merchant_id: number };

export type ImportJobProgress = Partial<Omit<ImportJobRecord, 'id' | 'merchant_id' | 'started_by' | 'file_name' | 'started_at'>>;

// Operations

/**
 * The outbox depth and the waiting deliveries are counted up to this many (a re-pricing with many
 * endpoints leaves millions of outbox rows: counting them all took 44 ms per scrape at 11M).
 */
export const OPERATIONAL_COUNT_MAX = 100_000;

export interface OperationalCounts {
  endpoints: Record<EndpointStatus, number>;
  /** Outbox rows not yet batched into a delivery (at most the count's bound). */
  outboxDepth: number;
  waitingDeliveries: Record<'pending' | 'failed', number>;
  /** When the oldest change not yet attempted for an active endpoint (in the outbox or a pending delivery) was recorded; null when none. */
  oldestWaitingAt: string | null;
  images: ImageStateCounts;
}
