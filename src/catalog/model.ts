// The inputs of resolution (spec 2.1-2.3): what a merchant's catalog is made of, as stored.
// API shapes live in the generated types, stored records in storage/records.ts.
import type { components as PublicComponents } from '../generated/public-api.js';
import type {
  AttributeDefinitionRecord, CustomerGroupRecord, ExchangeRateRecord, PricingRuleRecord, StoreRecord, SupplierRecord,
} from '../storage/records.js';

export type Product = PublicComponents['schemas']['Product'];
export type Store = PublicComponents['schemas']['Store'];
export type ExclusionReason = NonNullable<Product['exclusion_reason']>;

// The stored records resolution works on live beside storage (storage/records.ts).
export type {
  AttributeDefinitionRecord, CustomerGroupRecord, ExchangeRateRecord, ImageMirrorRecord, ImageState, OfferSource,
  OwnStockSource, PricingRuleRecord, ProductRecord, ProductSourceDocument, StoreRecord, SupplierRecord,
} from '../storage/records.js';

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
