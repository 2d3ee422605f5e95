// A merchant's scope over the storage port (as Svix's `secure_find(app_id)`): every operation of
// tenant data that the port keys by merchant, with the merchant already bound, so code handling one
// merchant's request holds no operation that takes a merchant id and cannot query another
// merchant's rows by accident. Obtained once, from the merchant the request was authenticated for
// (`scopeToMerchant(tx, merchantId)`, `forMerchant(storage, merchantId)`). The statements are the
// port's own: a scope binds arguments, it adds no query.
//
// Operations keyed by a store take the store record itself (read through the scope), and refuse a
// store of another merchant. What the port offers beyond the scope is cross-tenant by nature
// (workers' claims, the operator's merchant list, key lookups by hash, retention) or keyed by an id
// the domain only holds after a scoped read.
import type { StoreRecord } from '../catalog/model.js';
import type { CatalogStorage, StorageOperations } from './port.js';

/** The port's operations whose first parameter is the merchant's id. */
export const MERCHANT_KEYED = [
  'getMerchant',
  'updateMerchant',
  'listApiKeys',
  'countActiveApiKeys',
  'updateApiKey',
  'revokeApiKey',
  'expireApiKey',
  'listStores',
  'findStore',
  'findDefaultStore',
  'upsertStore',
  'catalogSetup',
  'listCustomerGroups',
  'createCustomerGroup',
  'updateCustomerGroup',
  'deleteCustomerGroup',
  'listExchangeRates',
  'upsertExchangeRate',
  'deleteExchangeRate',
  'listPricingRules',
  'getPricingRule',
  'createPricingRule',
  'updatePricingRule',
  'deletePricingRule',
  'listSuppliers',
  'upsertSupplier',
  'deleteSupplier',
  'isSupplierReferenced',
  'currenciesInUse',
  'listAttributeDefinitions',
  'upsertAttributeDefinition',
  'deleteAttributeDefinition',
  'sourceReferenceNames',
  'findProductByRef',
  'upsertProductSource',
  'upsertProductSources',
  'deleteProduct',
  'productsExcludedFrom',
  'productsAfter',
  'productsByIds',
  'productList',
  'productIdsWithImage',
  'imageMirrors',
  'ensureImageMirrors',
  'updateImageMirror',
  'updateImageMirrors',
  'imageStateCounts',
  'deadImages',
  'imageOrigins',
  'pendingImageOrigins',
  'countPendingImagesOf',
  'countImageOriginFailure',
  'putImageOrigin',
  'clearImageOrigin',
  'publishedPageOfStore',
  'storeAtPublishedVersion',
  'recordChanges',
  'latestFeedPosition',
  'changeWindowOfStore',
  'listWebhookEndpoints',
  'findWebhookEndpoint',
  'oldestWaitingChangeAt',
  'listNotifications',
  'listPendingPanelInvitations',
  'revokePanelInvitations',
  'panelOwnerIds',
  'listPanelUsers',
  'deletePanelUser',
  'listAuditEntries',
  'importJob',
  'listImportJobs',
] as const satisfies readonly (keyof StorageOperations)[];

/** The port's operations whose first parameter is a new row carrying `merchant_id`. */
export const MERCHANT_IN_ROW = [
  'insertApiKey',
  'insertAuditEntry',
  'createWebhookEndpoint',
  'insertNotification',
  'insertImportJob',
] as const satisfies readonly (keyof StorageOperations)[];

/** The port's operations whose first parameter is a store's id: in a scope, they take the merchant's store. */
export const STORE_KEYED = [
  'deleteStore',
  'publishedCountsByExclusion',
  'publishedSummaries',
  'findPublishedProducts',
] as const satisfies readonly (keyof StorageOperations)[];

type MerchantKeyed = (typeof MERCHANT_KEYED)[number];
type MerchantInRow = (typeof MERCHANT_IN_ROW)[number];
type StoreKeyed = (typeof STORE_KEYED)[number];

type WithoutMerchant<F> = F extends (merchantId: number, ...rest: infer A) => infer R ? (...rest: A) => R : never;
type WithoutMerchantInRow<F> = F extends (row: infer I, ...rest: infer A) => infer R
  ? (row: Omit<I, 'merchant_id'>, ...rest: A) => R
  : never;
type OfStore<F> = F extends (storeId: number, ...rest: infer A) => infer R ? (store: MerchantStore, ...rest: A) => R : never;

/** A store as a scope takes it: read through the scope, so its merchant is known. */
export type MerchantStore = Pick<StoreRecord, 'id' | 'merchant_id'>;

/** One merchant's operations: no method takes a merchant id, none reaches another merchant's rows by its merchant key. */
export type MerchantScope = { readonly merchantId: number } & { readonly [K in MerchantKeyed]: WithoutMerchant<StorageOperations[K]> } & {
  readonly [K in MerchantInRow]: WithoutMerchantInRow<StorageOperations[K]>;
} & { readonly [K in StoreKeyed]: OfStore<StorageOperations[K]> };

/** A merchant's scope over the whole storage: its operations each on their own, or in one transaction or snapshot. */
export type MerchantStorage = MerchantScope & {
  transaction<T>(fn: (tx: MerchantScope) => Promise<T>): Promise<T>;
  snapshot<T>(fn: (reader: MerchantScope) => Promise<T>): Promise<T>;
};

type Call = (...args: unknown[]) => unknown;
type Operations = Record<string, Call>;

class BoundScope {
  constructor(
    readonly ops: StorageOperations,
    readonly merchantId: number,
  ) {}
}

// The bound operations live on the prototype, written once: a scope is two fields, cheap per request.
for (const name of MERCHANT_KEYED) {
  Object.defineProperty(BoundScope.prototype, name, {
    value(this: BoundScope, ...args: unknown[]) {
      return (this.ops as unknown as Operations)[name]!(this.merchantId, ...args);
    },
  });
}
for (const name of MERCHANT_IN_ROW) {
  Object.defineProperty(BoundScope.prototype, name, {
    value(this: BoundScope, row: object, ...args: unknown[]) {
      return (this.ops as unknown as Operations)[name]!({ ...row, merchant_id: this.merchantId }, ...args);
    },
  });
}
for (const name of STORE_KEYED) {
  Object.defineProperty(BoundScope.prototype, name, {
    value(this: BoundScope, store: MerchantStore, ...args: unknown[]) {
      if (store.merchant_id !== this.merchantId) {
        return Promise.reject(new Error(`store ${store.id} is not merchant ${this.merchantId}'s`));
      }
      return (this.ops as unknown as Operations)[name]!(store.id, ...args);
    },
  });
}

class BoundStorage extends BoundScope {
  constructor(
    private readonly storage: CatalogStorage,
    merchantId: number,
  ) {
    super(storage, merchantId);
  }

  transaction<T>(fn: (tx: MerchantScope) => Promise<T>): Promise<T> {
    return this.storage.transaction((tx) => fn(scopeToMerchant(tx, this.merchantId)));
  }

  snapshot<T>(fn: (reader: MerchantScope) => Promise<T>): Promise<T> {
    return this.storage.snapshot((reader) => fn(scopeToMerchant(reader, this.merchantId)));
  }
}

/** The merchant's scope over these operations (a transaction's tx, a snapshot's reader, or the storage itself). */
export function scopeToMerchant(ops: StorageOperations, merchantId: number): MerchantScope {
  return new BoundScope(ops, merchantId) as unknown as MerchantScope;
}

/** The merchant's scope over the storage, with its own transactions and snapshots. */
export function forMerchant(storage: CatalogStorage, merchantId: number): MerchantStorage {
  return new BoundStorage(storage, merchantId) as unknown as MerchantStorage;
}
