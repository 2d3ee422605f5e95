// A merchant's products as it sends them (spec 2.1: product sources): each write re-publishes the
// product in its transaction; an import applies upserts and deletes a chunk per transaction. Also
// the admin's reads of them: a source with its images' mirroring state, the product list, and why a
// product resolves as it does.
import { OPERATOR, type Actor } from '../admin/audit.js';
import { yieldToOthers } from '../shared/cooperative.js';
import { invalidInput, ProblemError, type InvalidParam } from '../shared/problem.js';
import type { MerchantScope } from '../storage/merchant-scope.js';
import type { ProductListPage, StorageTx } from '../storage/port.js';
import { notFound, type CatalogWrite, type CatalogWrites } from './catalog-writes.js';
import type { ProductRecord, ProductSourceDocument } from './model.js';
import { DEFAULT_PRODUCT_LIMITS, productLimitProblems, type ProductLimits } from './product-limits.js';
import {
  normalizeSource,
  sourceJson,
  sourceProblems,
  sourceReferences,
  type ProductOperation,
  type ProductSourceInput,
  type ProductSourceView,
} from './product-sources.js';
import type { PublishSummary } from './publish.js';
import { explainResolution, type ResolutionExplanation } from './resolve.js';

/**
 * Upserts written in one storage call at most (more than an import chunk's 500 lines by default): a bound
 * on one call's statements (PostgreSQL writes them in two; SQLite a run of 100 at a time, yielding
 * the loop between its steps).
 */
const UPSERT_RUN = 1000;

export class Products {
  constructor(
    private readonly writes: CatalogWrites,
    /** The bounds of one product's source (configuration: `config.limits`). */
    readonly limits: ProductLimits = DEFAULT_PRODUCT_LIMITS,
  ) {}

  /** The product limits a source exceeds (JSON pointers under `base`), each naming its limit. */
  limitProblems(source: ProductSourceDocument, base = ''): InvalidParam[] {
    return productLimitProblems(source, this.limits, base);
  }

  async get(merchantId: number, ref: string): Promise<ProductRecord> {
    const product = await (await this.writes.reads(merchantId)).findProductByRef(ref);
    if (!product) throw notFound(`Product "${ref}"`);
    return product;
  }

  /** The product with the service's id (the public API's `id`); 404 outside the merchant. */
  async byId(merchantId: number, productId: number): Promise<ProductRecord> {
    const [product] = await (await this.writes.reads(merchantId)).productsByIds([productId]);
    if (!product) throw notFound(`Product ${productId}`);
    return product;
  }

  /**
   * A page of the merchant's products in ref order (admin listProductSources), filtered
   * by ref prefix, time of the last write, and exclusion from a store; at most `scan` products are
   * looked at for one page, so a rare filter answers short pages, each with where to go on.
   */
  async list(
    merchantId: number,
    filters: {
      after?: string;
      limit: number;
      ref_prefix?: string;
      updated_since?: string;
      excluded_from?: string;
    },
    scan: number,
  ): Promise<{ data: ProductListPage['products']; next_after: string | null }> {
    const merchant = await this.writes.reads(merchantId);
    let excludedFromStore: number | null = null;
    if (filters.excluded_from !== undefined) {
      const store = await merchant.findStore(filters.excluded_from);
      if (!store) throw notFound(`Store "${filters.excluded_from}"`);
      excludedFromStore = store.id;
    }
    const page = await merchant.productList({
      afterRef: filters.after ?? null,
      refPrefix: filters.ref_prefix ?? null,
      limit: filters.limit,
      scan,
      excludedFromStore,
      // Stored times are ISO 8601 in UTC with milliseconds: compared as text, after the same normalisation.
      updatedSince: filters.updated_since === undefined ? null : new Date(filters.updated_since).toISOString(),
    });
    return { data: page.products, next_after: page.nextAfter };
  }

  /** The product's source as the admin API shows it, each image with its mirroring state. */
  async source(merchantId: number, ref: string): Promise<ProductSourceView> {
    return sourceView(this.writes.of(merchantId), await this.get(merchantId, ref));
  }

  /**
   * Why the product resolves as it does in each of the merchant's stores (the chosen supplier, the
   * pricing rule per customer group), from one snapshot of its source and the merchant's setup: the
   * decisions the published payloads were written from, which this leaves as they are.
   */
  explain(merchantId: number, ref: string): Promise<ResolutionExplanation[]> {
    return this.writes.snapshot(merchantId, async ({ reader, context }) => {
      const product = await reader.findProductByRef(ref);
      if (!product) throw notFound(`Product "${ref}"`);
      const merchant = await context();
      return merchant.stores.map((store) => explainResolution(product, store, merchant));
    });
  }

  upsert(
    merchantId: number,
    ref: string,
    input: ProductSourceInput,
    actor: Actor = OPERATOR,
  ): Promise<ProductSourceView & { created: boolean }> {
    const source = normalizeSource(input);
    const aboveLimits = this.limitProblems(source);
    if (aboveLimits.length) return Promise.reject(invalidInput('body', aboveLimits));
    return this.writes.write(merchantId, actor, (write) => writeSource(write, ref, source));
  }

  /**
   * Replaces an existing product's source with what `edit` makes of it (a merge patch: the
   * admin API's PATCH), read and written in one transaction: on PostgreSQL the product's row is
   * locked from the read on, so two edits of one product take turns and neither loses the
   * other's change. Whatever `edit` throws (a refused document) changes nothing.
   */
  edit(
    merchantId: number,
    ref: string,
    edit: (current: ProductSourceView) => ProductSourceInput,
    actor: Actor = OPERATOR,
  ): Promise<ProductSourceView & { created: boolean }> {
    return this.writes.write(merchantId, actor, async (write) => {
      const product = await write.tx.findProductByRef(ref);
      if (!product) throw notFound(`Product "${ref}"`);
      const source = normalizeSource(edit(await sourceView(write.tx, product)));
      const aboveLimits = this.limitProblems(source);
      if (aboveLimits.length) throw invalidInput('body', aboveLimits);
      return writeSource(write, ref, source);
    });
  }

  delete(merchantId: number, ref: string, actor: Actor = OPERATOR): Promise<void> {
    return this.writes.write(merchantId, actor, async ({ tx, unpublishProducts, audit }) => {
      const product = await tx.findProductByRef(ref);
      if (!product) throw notFound(`Product "${ref}"`);
      await tx.deleteProduct(product.id);
      await unpublishProducts([product.id]);
      await audit('product.delete', `product "${ref}" (id ${product.id})`);
    });
  }

  /**
   * Applies upserts and deletes as one unit per chunk (used by the NDJSON import). The sources'
   * references are checked again in the chunk's transaction: a supplier or store deleted since
   * the lines were read is a 409, and nothing of the chunk is applied.
   */
  applyBatch(merchantId: number, operations: ProductOperation[]): Promise<{ upserted: number; deleted: number } & PublishSummary> {
    return this.writes.storage.transaction((tx) => this.applyBatchIn(tx, merchantId, operations));
  }

  /** applyBatch in the caller's transaction (a chunk of an import's run: admin/import-jobs.ts). */
  applyBatchIn(
    tx: StorageTx,
    merchantId: number,
    operations: ProductOperation[],
  ): Promise<{ upserted: number; deleted: number } & PublishSummary> {
    return applyOperations(this.writes.within(tx, merchantId), operations);
  }
}

async function applyOperations(
  write: CatalogWrite,
  operations: ProductOperation[],
): Promise<{ upserted: number; deleted: number } & PublishSummary> {
  const { tx } = write;
  const references = await sourceReferences(tx);
  const stale = operations.filter(
    (operation) => operation.op === 'upsert_product' && sourceProblems(references, operation.source).length > 0,
  );
  if (stale.length > 0) {
    const lines = stale.slice(0, 10).map((operation) => (operation.line ? `line ${operation.line}` : `"${operation.ref}"`));
    throw new ProblemError(
      'conflict',
      `A supplier or store that ${lines.join(', ')}${stale.length > lines.length ? ' and others' : ''} ` +
        'refer to was deleted while the import ran.',
    );
  }
  const at = write.at;
  // The upserted products as written (the last write of an id wins), re-published from these records.
  const upserted = new Map<number, ProductRecord>();
  // Those the chunk created: no store has a payload of theirs to look for.
  const created = new Set<number>();
  let upsertCount = 0;
  const deletedIds: number[] = [];
  // Runs of upserts with distinct refs are written together (upsertProductSources: the same
  // rows and ids as one after another, in a few statements on PostgreSQL instead of three per
  // product); a delete, or a ref seen again in the run, ends the run first, so every operation
  // still applies in line order.
  let run: { ref: string; source: ProductSourceDocument; json: string }[] = [];
  let runRefs = new Set<string>();
  // The runs' links and image rows, where the engine leaves them to a statement of their own
  // (PostgreSQL): sent once the chunk's publishing has read what it resolves from, so that the
  // database writes them while the products resolve; before a delete (which reads links), or at the end.
  const links: (() => Promise<void>)[] = [];
  const link = async () => {
    for (const write of links.splice(0)) await write();
  };
  const flush = async () => {
    if (run.length === 0) return;
    const written = await tx.upsertProductSources(run, at, (write) => links.push(write));
    for (const [index, { id, created: isNew, unchanged }] of written.entries()) {
      if (isNew) created.add(id);
      // A source sent again unchanged resolves to the payloads it has (every write that changes what
      // resolution reads re-publishes, in its own transaction or its publish run): nothing to
      // publish, unless an earlier line of the chunk changed it.
      if (unchanged && !upserted.has(id)) continue;
      upserted.delete(id);
      const { ref, source } = run[index]!;
      upserted.set(id, { id, ref, source });
    }
    upsertCount += written.length;
    run = [];
    runRefs = new Set();
    await yieldToOthers();
  };
  for (const operation of operations) {
    if (operation.op === 'upsert_product') {
      if (runRefs.has(operation.ref) || run.length >= UPSERT_RUN) await flush();
      // The source's text as the import checked and staged it (sourceJson: not written again).
      run.push({ ref: operation.ref, source: operation.source, json: sourceJson(operation.source) });
      runRefs.add(operation.ref);
    } else {
      await flush();
      await link();
      const existing = await tx.findProductByRef(operation.ref);
      if (!existing) continue;
      await tx.deleteProduct(existing.id);
      upserted.delete(existing.id);
      deletedIds.push(existing.id);
    }
  }
  await flush();
  const published = await write.publishRecords([...upserted.values()], created, link);
  await link();
  const removed = await write.unpublishProducts(deletedIds);
  return {
    upserted: upsertCount,
    deleted: deletedIds.length,
    resolved: published.resolved,
    changes: published.changes + removed.changes,
  };
}

/** Writes one product's source in the write's transaction and re-publishes it (upsert and edit). */
async function writeSource(
  write: CatalogWrite,
  ref: string,
  source: ProductSourceDocument,
): Promise<ProductSourceView & { created: boolean }> {
  const { tx } = write;
  const problems = sourceProblems(await sourceReferences(tx), source);
  if (problems.length) throw invalidInput('body', problems);
  // The mirror learns of new image sources with the write (state is per source URL).
  const { id, created } = await tx.upsertProductSource(ref, source, write.at);
  await write.publishProducts([id]);
  await write.audit(created ? 'product.create' : 'product.update', `product "${ref}" (id ${id})`);
  return { ...(await sourceView(tx, { id, ref, source })), created };
}

async function sourceView(merchant: MerchantScope, product: ProductRecord): Promise<ProductSourceView> {
  const mirrors = await merchant.imageMirrors(product.source.images.map((i) => i.url));
  return {
    id: product.id,
    ref: product.ref,
    ...product.source,
    images: product.source.images.map(({ url }) => ({
      url,
      state: mirrors.get(url)?.state ?? 'pending',
      mirrored_url: mirrors.get(url)?.mirrored_url ?? null,
    })),
  };
}
