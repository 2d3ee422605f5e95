// The inputs of resolution (spec 2.1-2.3): what a merchant's catalog is made of, as stored.
// API shapes live in the generated types; these are the normalized records the domain works on.
import type { components as AdminComponents } from '../generated/admin-api.js';
import type { components as PublicComponents } from '../generated/public-api.js';

/** Records that are exactly an admin API shape are that generated type, not a copy of it. */
type AdminSchemas = AdminComponents['schemas'];

export type Product = PublicComponents['schemas']['Product'];
export type Store = PublicComponents['schemas']['Store'];
export type ExclusionReason = NonNullable<Product['exclusion_reason']>;

/** A merchant's store as the admin API states it, plus what storage keeps beside it. */
export type StoreRecord = AdminSchemas['AdminStore'] & {
  merchant_id: number;
  /** Bumped when the set of products published for the store changes (read-side id index). */
  catalog_version: number;
};

export type CustomerGroupRecord = AdminSchemas['CustomerGroup'];

/** A pricing rule exactly as the admin API states it (generated). */
export type PricingRuleRecord = AdminSchemas['PricingRule'];

export type ExchangeRateRecord = AdminSchemas['ExchangeRate'];

export type AttributeDefinitionRecord = AdminSchemas['AttributeDefinition'];

export type SupplierRecord = AdminSchemas['Supplier'];

export interface OfferSource {
  supplier_ref: string;
  quantity: number;
  cost: string;
  currency: string;
}

export interface OwnStockSource {
  quantity: number;
  cost: string | null;
  currency: string | null;
}

/** A product's source document as the merchant sent it, with every optional part filled in. */
export interface ProductSourceDocument {
  eans: string[];
  manufacturer: string | null;
  content: Record<string, { title: string | null; description: string | null }>;
  images: { url: string }[];
  offers: OfferSource[];
  own_stock: OwnStockSource | null;
  supplier_attributes: { supplier_ref: string; key: string; value: string }[];
  overrides: Record<string, string>;
  excluded_stores: string[];
}

export interface ProductRecord {
  id: number;
  ref: string;
  source: ProductSourceDocument;
}

export type ImageState = 'pending' | 'mirrored' | 'dead';

export interface ImageMirrorRecord {
  url: string;
  state: ImageState;
  mirrored_url: string | null;
}

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
