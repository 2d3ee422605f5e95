// The inputs of resolution (spec 2.1-2.3): what a merchant's catalog is made of, as stored.
// API shapes live in the generated types; these are the normalized records the domain works on.
import type { components as AdminComponents } from '../generated/admin-api.js';
import type { components as PublicComponents } from '../generated/public-api.js';

export type Product = PublicComponents['schemas']['Product'];
export type Store = PublicComponents['schemas']['Store'];
export type ExclusionReason = NonNullable<Product['exclusion_reason']>;

/** A merchant's store, with the settings resolution needs. */
export interface StoreRecord {
  id: number;
  merchant_id: number;
  slug: string;
  name: string;
  locale: string;
  currency: string;
  is_default: boolean;
  active: boolean;
  exclude_out_of_stock: boolean;
  catalog_version: number;
}

export interface CustomerGroupRecord {
  id: number;
  name: string;
}

/** A pricing rule exactly as the admin API states it (generated). */
export type PricingRuleRecord = AdminComponents['schemas']['PricingRule'];

export interface ExchangeRateRecord {
  base: string;
  quote: string;
  rate: string;
}

export interface AttributeDefinitionRecord {
  key: string;
  unit: string | null;
  labels: Record<string, string>;
}

export interface SupplierRecord {
  id: number;
  ref: string;
  name: string;
}

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
