// Product sources (what the merchant sent), their reads written once for both engines (dialect.ts).
// Their writes keep the product's links and image rows in step, each engine's own way:
// SqliteProductSources (a statement per step on the event loop), PgProductSources (a chunk's
// products and links in two statements).
import type { ProductSourceStore } from '../port.js';
import type { ProductListPage, ProductListQuery } from '../records.js';
import type { ProductRecord, ProductSourceDocument } from '../../catalog/model.js';
import { PAST_EVERY_REF_CHARACTER, productListPage, windowSize, type ProductListRow } from '../product-list.js';
import type { Row, SqlConnection } from './dialect.js';

const toProduct = (r: Row): ProductRecord => ({
  id: r.id as number,
  ref: r.ref as string,
  source: JSON.parse(r.source as string) as ProductSourceDocument,
});

export abstract class SqlProductSources<C extends SqlConnection = SqlConnection> implements ProductSourceStore {
  static readonly writes = ['upsertProductSource', 'upsertProductSources', 'deleteProduct'] as const;

  constructor(protected readonly c: C) {}

  async sourceReferenceNames(merchantId: number): Promise<{ suppliers: string[]; stores: string[] }> {
    // One round trip where listSuppliers and listStores took two (each chunk of an import checks them again).
    const names = { suppliers: [] as string[], stores: [] as string[] };
    for (const { store, name } of await this.c.rows<{ store: number; name: string }>(
      'SELECT 0 AS store, ref AS name FROM suppliers WHERE merchant_id = $1 UNION ALL SELECT 1, slug FROM stores WHERE merchant_id = $1',
      [merchantId],
    )) {
      (Number(store) === 1 ? names.stores : names.suppliers).push(name);
    }
    return names;
  }

  abstract upsertProductSource(
    merchantId: number,
    ref: string,
    source: ProductSourceDocument,
    at: string,
  ): Promise<{ id: number; created: boolean }>;
  abstract upsertProductSources(
    merchantId: number,
    products: { ref: string; source: ProductSourceDocument; json?: string }[],
    at: string,
    linkLater?: (link: () => Promise<void>) => void,
  ): Promise<{ id: number; created: boolean; unchanged: boolean }[]>;
  abstract deleteProduct(merchantId: number, productId: number): Promise<void>;
  abstract productIdsWithImage(merchantId: number, url: string): Promise<number[]>;

  async findProductByRef(merchantId: number, ref: string): Promise<ProductRecord | undefined> {
    // In a write transaction the row is locked (PostgreSQL) until it ends: a write that replaces
    // the source with one made from what it read (a merge patch) never overwrites another's change.
    const row = await this.c.one(
      `SELECT id, ref, source FROM products WHERE merchant_id = $1 AND ref = $2${this.c.locksRows ? ' FOR NO KEY UPDATE' : ''}`,
      [merchantId, ref],
    );
    return row && toProduct(row);
  }

  async productsExcludedFrom(merchantId: number, slug: string): Promise<ProductRecord[]> {
    return (
      await this.c.rows(
        `SELECT p.id, p.ref, p.source FROM product_links AS l JOIN products AS p ON p.id = l.product_id
      WHERE l.merchant_id = $1 AND l.kind = 'excluded_store' AND l.value = $2 ORDER BY l.product_id`,
        [merchantId, slug],
      )
    ).map(toProduct);
  }

  async productsAfter(merchantId: number, afterId: number, limit: number): Promise<ProductRecord[]> {
    // In a write transaction the rows are locked (PostgreSQL), in id order, until it ends: a publish
    // run's chunk writes payloads resolved from these sources, and an import committing a product
    // meanwhile would otherwise have its new payload replaced by one resolved from the older source.
    return (
      await this.c.rows(
        `SELECT id, ref, source FROM products WHERE merchant_id = $1 AND id > $2 ORDER BY id LIMIT $3${this.c.locksRows ? ' FOR NO KEY UPDATE' : ''}`,
        [merchantId, afterId, limit],
      )
    ).map(toProduct);
  }

  async productList(merchantId: number, query: ProductListQuery): Promise<ProductListPage> {
    // A window of the (merchant_id, ref) index past the cursor (and inside the prefix), each product
    // marked whether the filters keep it; the exclusion is the store's published row, by its key.
    const excluded = query.excludedFromStore !== null;
    const rows = await this.c.rows<ProductListRow & Row>(
      `SELECT p.id, p.ref, p.updated_at,
        (${this.c.dialect.typed('$2', 'text')} IS NULL OR p.updated_at >= $2) ${excluded ? 'AND pp.exclusion_reason IS NOT NULL' : ''} AS matches
      FROM products AS p ${excluded ? 'LEFT JOIN published_products AS pp ON pp.store_id = $7 AND pp.product_id = p.id' : ''}
      WHERE p.merchant_id = $1 AND p.ref > $3 AND p.ref >= $4 AND p.ref < $5
      ORDER BY p.ref LIMIT $6`,
      [
        merchantId,
        query.updatedSince,
        query.afterRef ?? '',
        query.refPrefix ?? '',
        `${query.refPrefix ?? ''}${PAST_EVERY_REF_CHARACTER}`,
        windowSize(query),
        ...(excluded ? [query.excludedFromStore] : []),
      ],
    );
    return productListPage(rows, query);
  }

  async productsByIds(merchantId: number, ids: number[]): Promise<ProductRecord[]> {
    if (ids.length === 0) return [];
    return (
      await this.c.rows(
        `SELECT id, ref, source FROM products WHERE merchant_id = $1 AND ${this.c.dialect.inList('id', '$2', 'bigint')} ORDER BY id`,
        [merchantId, this.c.dialect.list(ids)],
      )
    ).map(toProduct);
  }
}
