// The catalog's types: what a merchant's catalog is made of (spec 1, 2.1-2.3: stores, customer
// groups, exchange rates, pricing rules, suppliers, attribute definitions, product sources and
// their images), as the admin API states them plus what is kept beside them, and what resolution
// reads. Types only: storage imports these, never the other way round.
import type { components as AdminComponents } from '../generated/admin-api.js';
import type { components as PublicComponents } from '../generated/public-api.js';

type AdminSchemas = AdminComponents['schemas'];

export type Product = PublicComponents['schemas']['Product'];
export type Store = PublicComponents['schemas']['Store'];
/** Why a published product is excluded from its store (a product that is not excluded has none). */
export type ExclusionReason = NonNullable<Product['exclusion_reason']>;

// Stores

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

// Images

export type ImageState = AdminSchemas['SourceImage']['state'];
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

export type ImageStateCounts = Record<ImageState, number>;

// Published products, as the admin API and the panel count and list them

/** How many products a store publishes, and how many of those are excluded, per reason. */
export interface PublishedExclusionCounts {
  total: number;
  excluded: Record<ExclusionReason, number>;
}

/** What the panel lists of a published product, read from its payload as integrators get it. */
export interface PublishedProductSummary {
  id: number;
  title: string | null;
  sku: string | null;
  ean: string | null;
  excluded: boolean;
  exclusion_reason: ExclusionReason | null;
}

// Resolution

/** Everything merchant-wide that resolving one product for one store reads. */
export interface MerchantContext {
  merchantId: number;
  skuPattern: string | null;
  stores: StoreRecord[];
  customerGroups: CustomerGroupRecord[];
  /** Sorted by priority, then id (the order rules are tried in). */
  pricingRules: PricingRuleRecord[];
  exchangeRates: ExchangeRateRecord[];
  attributeDefinitions: Map<string, AttributeDefinitionRecord>;
  suppliersByRef: Map<string, SupplierRecord>;
}
