// How a write to a merchant's catalog runs (stores, customer groups, exchange rates, pricing rules,
// suppliers, attribute definitions, products, the merchant's own settings): in one transaction that
// first finds the merchant (404 otherwise), then changes the catalog through the merchant's scope
// (storage/merchant-scope.ts: no operation there takes a merchant id), records the change in the
// merchant's audit log as done by its actor, and re-publishes what the change can affect, in the
// same transaction (catalog/publish.ts) or through a publish run, a chunk per transaction
// (catalog/publish-runs.ts). The aggregates' modules see the scope and these verbs, never the
// transaction itself.
import { audit, OPERATOR, type Actor, type AuditAction } from '../admin/audit.js';
import { ProblemError } from '../shared/problem.js';
import type { CatalogStorage, PublishRunRecord, StorageOperations, StorageTx } from '../storage/port.js';
import { forMerchant, scopeToMerchant, type MerchantScope, type MerchantStorage } from '../storage/merchant-scope.js';
import type { MerchantContext, ProductRecord } from './model.js';
import type { CatalogPublisher, PublishSummary } from './publish.js';
import type { PublishRuns } from './publish-runs.js';
import type { MerchantRecord } from '../tenancy/model.js';

export const notFound = (what: string) => new ProblemError('not_found', `${what} does not exist.`);

/** A write in progress: the merchant's scope on the write's transaction, and what a write does besides. */
export interface CatalogWrite {
  /** The merchant's operations, in the write's transaction. */
  readonly tx: MerchantScope;
  /** The time now, as ISO 8601 (read at each use, as the clock moves). */
  readonly at: string;
  /** Records the change in the merchant's audit log; it commits with the change. */
  audit: (action: AuditAction, detail: string) => Promise<void>;
  /** Re-publishes these products of the merchant in the write's transaction. */
  publishProducts: (productIds: number[]) => Promise<PublishSummary>;
  /**
   * Re-publishes these products, as their sources were just written in the write's transaction
   * (`created`: those it created; `whileResolving`: sent once what they resolve from is read).
   */
  publishRecords: (
    products: ProductRecord[],
    created?: ReadonlySet<number>,
    whileResolving?: () => Promise<void>,
  ) => Promise<PublishSummary>;
  /** Removes these products of the merchant from every store, in the write's transaction. */
  unpublishProducts: (productIds: number[]) => Promise<PublishSummary>;
  /** Begins re-publishing the merchant's catalog (these stores; null: every store), driven to its end after the commit. */
  republish: (storeIds: number[] | null) => Promise<void>;
}

/** A read of one merchant's catalog on one snapshot. */
export interface CatalogSnapshot {
  readonly reader: MerchantScope;
  /** Everything merchant-wide that resolution reads, as this snapshot sees it. */
  context: () => Promise<MerchantContext>;
}

export class CatalogWrites {
  constructor(
    readonly storage: CatalogStorage,
    readonly publisher: CatalogPublisher,
    readonly publishRuns: PublishRuns,
    readonly now: () => Date,
  ) {}

  /** The merchant's scope over the storage, its reads each on their own (no check that the merchant exists). */
  of(merchantId: number): MerchantStorage {
    return forMerchant(this.storage, merchantId);
  }

  /** The merchant's scope over the storage, once it exists (404 otherwise): its reads each on their own. */
  async reads(merchantId: number): Promise<MerchantStorage> {
    const scope = forMerchant(this.storage, merchantId);
    await merchantIn(scope);
    return scope;
  }

  /** The merchant, or a 404. */
  merchant(merchantId: number): Promise<MerchantRecord> {
    return merchantIn(forMerchant(this.storage, merchantId));
  }

  /**
   * Runs a write of the merchant's in one transaction; a publish run it began is driven to its end
   * after the commit, and the write resolves then.
   */
  async write<T>(merchantId: number, actor: Actor, fn: (write: CatalogWrite) => Promise<T>): Promise<T> {
    const { result, run } = await this.storage.transaction(async (tx) => {
      const write = this.within(tx, merchantId, actor);
      await merchantIn(write.tx);
      return { result: await fn(write), run: write.run };
    });
    if (run) await this.publishRuns.complete(run);
    return result;
  }

  /**
   * Runs a write of the merchant's, then re-publishes every product of the merchant (or of the
   * stores `onlyStores` names, read after the write): the checks and the write see one state and
   * commit with a publish run; resolves when the run has ended.
   */
  writeAndRepublish<T>(
    merchantId: number,
    actor: Actor,
    fn: (write: CatalogWrite) => Promise<T>,
    onlyStores?: (tx: MerchantScope) => Promise<number[]>,
  ): Promise<T> {
    return this.write(merchantId, actor, async (write) => {
      const result = await fn(write);
      const stores = (await onlyStores?.(write.tx)) ?? null;
      // No store to re-publish: no run (it would read every product for nothing).
      if (stores?.length !== 0) await write.republish(stores);
      return result;
    });
  }

  /** A write in the caller's transaction (a chunk of an import's run: admin/import-jobs.ts); its run, if any, is the caller's to drive. */
  within(tx: StorageTx, merchantId: number, actor: Actor = OPERATOR): CatalogWrite & { run: PublishRunRecord | null } {
    const { publisher, publishRuns, now } = this;
    const merchant = scopeToMerchant(tx, merchantId);
    const write: CatalogWrite & { run: PublishRunRecord | null } = {
      tx: merchant,
      get at() {
        return now().toISOString();
      },
      run: null,
      audit: (action, detail) => audit(tx, merchantId, actor, action, detail, now()),
      publishProducts: (productIds) => publisher.publishProducts(tx, merchant, productIds),
      publishRecords: (products, created, whileResolving) => publisher.publishRecords(tx, merchant, products, created, whileResolving),
      unpublishProducts: (productIds) => publisher.unpublishProducts(tx, merchant, productIds),
      republish: async (storeIds) => {
        write.run = await publishRuns.begin(tx, merchantId, storeIds);
      },
    };
    return write;
  }

  /** Reads the merchant's catalog on one snapshot (404 unless the merchant exists). */
  async snapshot<T>(merchantId: number, fn: (snapshot: CatalogSnapshot) => Promise<T>): Promise<T> {
    await this.merchant(merchantId);
    return this.storage.snapshot((reader: StorageOperations) => {
      const scope = scopeToMerchant(reader, merchantId);
      return fn({ reader: scope, context: () => this.publisher.loadContext(scope) });
    });
  }
}

async function merchantIn(scope: MerchantScope): Promise<MerchantRecord> {
  const merchant = await scope.getMerchant();
  if (!merchant) throw notFound(`Merchant ${scope.merchantId}`);
  return merchant;
}
