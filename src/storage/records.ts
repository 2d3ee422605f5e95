// The records only storage keeps: the bookkeeping of published payloads, the outbox, delivery
// claims, publish runs and the operational counts, and the shapes of the port's bounded reads. The
// domain's own types live with the domain (catalog/model.ts, changes/model.ts, tenancy/model.ts,
// webhooks/model.ts, admin/model.ts): storage imports those types, never a module with behaviour.
import type { ExclusionReason, ImageMirrorWork, ImageStateCounts, StoreRecord } from '../catalog/model.js';
import type { ChangeType } from '../changes/model.js';
import type { EndpointStatus } from '../webhooks/model.js';

// Product sources

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

/**
 * Claimed image work, with the origin of its URL (scheme://host[:port], lower-cased: everything
 * before the first `/` after `://`), the key the mirror caps fetches by.
 */
export interface ClaimedImageMirror extends ImageMirrorWork {
  origin: string;
  /** Its origin failed last (a row in image_origins): a success clears it. */
  origin_failing?: boolean;
  /** The one probe of a down origin: its failure lengthens the origin's probe interval. */
  probe?: boolean;
  /**
   * A probe never failed before: since when it waited on its down origin (the later of the origin's
   * down_since and when it was due), its first failure should the probe fail.
   */
  waiting_since?: string;
  /**
   * An image of a down origin whose own time is up (ImageClaimFairness.deadAfterMs): it becomes dead
   * without a fetch, as a fetch would have failed, with this first failure and error.
   */
  expired?: { first_failure_at: string; last_error: string };
}

/**
 * An image origin (scheme, host, port) of a merchant whose last fetch failed: failures in a row and,
 * once down (CPS_IMAGE_ORIGIN_FAILURES reached), since when, its next probe and the probe interval.
 */
export interface ImageOriginState {
  origin: string;
  failures: number;
  down_since: string | null;
  next_probe_at: string | null;
  probe_ms: number | null;
  /** The error of its last failed fetch (`blocked_address`, `timeout`, `http_503`, …). */
  last_error: string | null;
}

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
  /** The payload's `sku` and `ean`, as resolution wrote them; without them, the storage reads them from the payload. */
  sku?: string | null;
  ean?: string | null;
}

/** A published product's new payload and price hash, its content hash unchanged (updatePublishedPrices). */
export type PublishedPriceRow = Pick<PublishedRow, 'productId' | 'payload' | 'priceHash'>;

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

/** Exact values of a published payload's `sku` or `ean` (kept beside it, indexed per store): a look-up by an integrator's own key. */
export interface PublishedKeys {
  field: 'sku' | 'ean';
  values: string[];
}

/** `{"id":…,"sku":…,"ean":…,"prices":[…]}` of some products of a store, joined by commas, and how many. */
export interface PublishedPrices {
  bytes: Uint8Array;
  count: number;
}

/** A bounded step of a store's payloads as NDJSON lines (PublishedStore.publishedLinesAfter). */
export interface PublishedLines {
  /** The payloads (UTF-8 JSON), ascending by product id, each followed by a newline. */
  bytes: Uint8Array;
  count: number;
  /** The last product id of the step; null when it found none. */
  lastId: number | null;
}

// Webhooks: the outbox and delivery claims

/** The changes of one write for one (endpoint, event, store): their products, in the order the write changed them. */
export interface OutboxRow {
  endpointId: number;
  event: ChangeType;
  storeId: number | null;
  productIds: number[];
  createdAt: string;
}

export interface OutboxGroup {
  endpointId: number;
  event: ChangeType;
  storeId: number | null;
  /** Its changes: the product ids its rows carry. */
  count: number;
  oldestAt: string;
}

/** A waiting outbox row as a coalescing pass reads it: the products of one write, in the order it changed them. */
export interface OutboxEntry {
  id: number;
  productIds: number[];
  createdAt: string;
}

/** A group of an outbox window with its rows, in arrival order (outboxWindow). */
export interface OutboxWindowGroup extends OutboxGroup {
  rows: OutboxEntry[];
}

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
  /**
   * Claimed ahead: up to this many more per endpoint (beyond perEndpoint, claim.limit and the
   * merchant's share) for an endpoint that has all of its perEndpoint turns, no rate, and whose
   * every unexpired lease is this process's (in flight or waiting): the dispatcher starts them as
   * its own attempts to the endpoint end, without a claim each. With another process's lease on the
   * endpoint, none are: per-endpoint concurrency holds across processes.
   */
  ahead?: number;
  /** This process's deliveries claimed ahead and not started yet, per endpoint: held like those in flight. */
  waitingByEndpoint?: ReadonlyMap<number, number>;
  /**
   * This process's attempts answered 2xx and not recorded yet, per endpoint (not in
   * inFlightByEndpoint): their leases still count them in other processes, but here they hold no slot.
   */
  answeredByEndpoint?: ReadonlyMap<number, number>;
  /**
   * Told the endpoints with due deliveries that this claim skipped because another process was
   * claiming them at that moment (PostgreSQL; never waited for): the caller claims again soon.
   */
  busy?: (endpointIds: number[]) => void;
}

// Publish runs

/** The hold of a run given up: before any time, so the run is resumed by the next look. */
export const RELEASED_PUBLISH_RUN = '1970-01-01T00:00:00.000Z';

/**
 * A re-publishing of a merchant's whole catalog (a rate, rule, group or store setting changed),
 * committed a chunk at a time: where it is (`after_product_id`), and who drives it until when.
 */
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

// Operations

/**
 * The operational counts are each counted up to this many when the caller names no bound (a
 * re-pricing with many endpoints once left millions of outbox rows: counting them all took 44 ms
 * per scrape at 11M; 100,000 images behind a down origin took 23 ms a scrape on SQLite). /metrics
 * passes CPS_METRICS_COUNT_MAX, whose default this is.
 */
export const OPERATIONAL_COUNT_MAX = 10_000;

export interface OperationalCounts {
  endpoints: Record<EndpointStatus, number>;
  /** Outbox rows not yet batched into a delivery (at most the count's bound). */
  outboxDepth: number;
  waitingDeliveries: Record<'pending' | 'failed', number>;
  /** When the oldest change not yet attempted for an active endpoint (in the outbox or a pending delivery) was recorded; null when none. */
  oldestWaitingAt: string | null;
  images: ImageStateCounts;
  /** Image origins of all merchants failing in a row but not down yet, and down (each counted up to the bound). */
  imageOrigins: Record<'failing' | 'down', number>;
  /** Pending images whose origin is down (at most the count's bound). */
  imagesWaitingOnDownOrigins: number;
}
