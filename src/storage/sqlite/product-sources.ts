// Product sources (what the merchant sent) on SQLite.
import type { ProductSourceStore } from '../port.js';
import type { ProductListPage, ProductListQuery, ProductRecord, ProductSourceDocument } from '../records.js';
import { yieldToOthers } from '../../shared/cooperative.js';
import { diffProductLinks } from '../product-links.js';
import { PAST_EVERY_REF_CHARACTER, productListPage, windowSize, type ProductListRow } from '../product-list.js';
import type { Row, SqliteConnection } from './connection.js';
import { LOWER_IMAGE_WORK_HINT, originOf } from './images.js';

const toProduct = (r: Row): ProductRecord => ({
  id: r.id as number,
  ref: r.ref as string,
  source: JSON.parse(r.source as string) as ProductSourceDocument,
});

export class SqliteProductSources implements ProductSourceStore {
  static readonly writes = ['upsertProductSource', 'upsertProductSources', 'deleteProduct'] as const;

  constructor(private readonly c: SqliteConnection) {}

  async findProductByRef(merchantId: number, ref: string): Promise<ProductRecord | undefined> {
    const row = this.c.stmt('SELECT id, ref, source FROM products WHERE merchant_id = ? AND ref = ?').get(merchantId, ref) as Row | undefined;
    return row && toProduct(row);
  }

  async upsertProductSource(merchantId: number, ref: string, source: ProductSourceDocument, at: string): Promise<{ id: number; created: boolean }> {
    const json = JSON.stringify(source);
    const existing = this.c.stmt('SELECT id FROM products WHERE merchant_id = ? AND ref = ?').get(merchantId, ref) as { id: number } | undefined;
    if (existing) {
      this.c.stmt('UPDATE products SET source = ?, updated_at = ? WHERE id = ?').run(json, at, existing.id);
      this.relink(merchantId, existing.id, source, false, at);
      return { id: existing.id, created: false };
    }
    const info = this.c.stmt('INSERT INTO products (merchant_id, ref, source, updated_at) VALUES (?, ?, ?, ?)').run(merchantId, ref, json, at);
    const id = Number(info.lastInsertRowid);
    this.relink(merchantId, id, source, true, at);
    return { id, created: true };
  }

  async upsertProductSources(merchantId: number, products: { ref: string; source: ProductSourceDocument }[], at: string): Promise<{ id: number; created: boolean }[]> {
    // Statements here are function calls: one product at a time costs no more than a batch would.
    // The loop is let go after its slice, every 16 products (as the import's loop did before it
    // called this).
    const results: { id: number; created: boolean }[] = [];
    for (const [index, { ref, source }] of products.entries()) {
      if (index > 0 && index % 16 === 0) await yieldToOthers();
      results.push(await this.upsertProductSource(merchantId, ref, source, at));
    }
    return results;
  }

  async deleteProduct(merchantId: number, productId: number): Promise<void> {
    const deleted = this.c.stmt('DELETE FROM products WHERE merchant_id = ? AND id = ?').run(merchantId, productId).changes;
    if (deleted > 0) this.relink(merchantId, productId, null, false, '');
  }

  /**
   * Keeps the product's links (product_links) and its images' mirror rows in step with its source,
   * in the source's transaction: new image URLs become pending work, and each image counts the
   * products that list it.
   */
  private relink(merchantId: number, productId: number, source: ProductSourceDocument | null, created: boolean, at: string): void {
    const before = created ? [] : this.c.stmt('SELECT kind, value FROM product_links WHERE product_id = ?').raw().all(productId) as [string, string][];
    const diff = diffProductLinks(before, source);
    const link = { merchant: merchantId, product: productId };
    if (diff.removed.length > 0) {
      this.c.stmt(`DELETE FROM product_links WHERE merchant_id = @merchant AND product_id = @product
        AND (kind, value) IN (SELECT value ->> 0, value ->> 1 FROM json_each(@links))`).run({ ...link, links: JSON.stringify(diff.removed) });
    }
    if (diff.added.length > 0) {
      this.c.stmt(`INSERT OR IGNORE INTO product_links (merchant_id, kind, value, product_id)
        SELECT @merchant, value ->> 0, value ->> 1, @product FROM json_each(@links)`).run({ ...link, links: JSON.stringify(diff.added) });
    }
    if (diff.removedImages.length > 0) {
      this.c.stmt('UPDATE image_mirrors SET listed = listed - 1 WHERE merchant_id = ? AND url IN (SELECT value FROM json_each(?))')
        .run(merchantId, JSON.stringify(diff.removedImages));
    }
    if (diff.addedImages.length === 0) return;
    // New URLs are pending work, due at once; known ones count one more product.
    const listed = this.c.stmt(`INSERT INTO image_mirrors (merchant_id, url, origin, state, updated_at, next_attempt_at, listed)
      SELECT @merchant, value, ${originOf('value')}, 'pending', @at, @at, 1 FROM json_each(@urls) WHERE true
      ON CONFLICT (merchant_id, url) DO UPDATE SET listed = listed + 1 RETURNING listed`)
      .pluck().all({ merchant: merchantId, at, urls: JSON.stringify(diff.addedImages) }) as number[];
    // Listed by one product now: new (or listed again, when the hint stays a lower bound all the same).
    if (listed.includes(1)) {
      this.c.stmt(LOWER_IMAGE_WORK_HINT).run({ merchant_id: merchantId, due_at: at });
      this.c.addedWork.add('images');
    }
  }

  async productsExcludedFrom(merchantId: number, slug: string): Promise<ProductRecord[]> {
    return (this.c.stmt(`SELECT p.id, p.ref, p.source FROM product_links AS l JOIN products AS p ON p.id = l.product_id
      WHERE l.merchant_id = ? AND l.kind = 'excluded_store' AND l.value = ? ORDER BY l.product_id`)
      .all(merchantId, slug) as Row[]).map(toProduct);
  }

  async productsAfter(merchantId: number, afterId: number, limit: number): Promise<ProductRecord[]> {
    return (this.c.stmt('SELECT id, ref, source FROM products WHERE merchant_id = ? AND id > ? ORDER BY id LIMIT ?')
      .all(merchantId, afterId, limit) as Row[]).map(toProduct);
  }

  async productList(merchantId: number, query: ProductListQuery): Promise<ProductListPage> {
    // A window of the (merchant_id, ref) index past the cursor (and inside the prefix), each product
    // marked whether the filters keep it; the exclusion is the store's published row, by its key.
    const excluded = query.excludedFromStore !== null;
    const rows = this.c.stmt(`SELECT p.id, p.ref, p.updated_at,
        (@since IS NULL OR p.updated_at >= @since) ${excluded ? 'AND pp.exclusion_reason IS NOT NULL' : ''} AS matches
      FROM products AS p ${excluded ? 'LEFT JOIN published_products AS pp ON pp.store_id = @store AND pp.product_id = p.id' : ''}
      WHERE p.merchant_id = @merchant AND p.ref > @after AND p.ref >= @low AND p.ref < @high
      ORDER BY p.ref LIMIT @window`).all({
      since: query.updatedSince, merchant: merchantId, after: query.afterRef ?? '',
      low: query.refPrefix ?? '', high: `${query.refPrefix ?? ''}${PAST_EVERY_REF_CHARACTER}`, window: windowSize(query),
      ...excluded ? { store: query.excludedFromStore } : {},
    }) as ProductListRow[];
    return productListPage(rows, query);
  }

  async productsByIds(merchantId: number, ids: number[]): Promise<ProductRecord[]> {
    if (ids.length === 0) return [];
    return (this.c.stmt(`SELECT id, ref, source FROM products
      WHERE merchant_id = ? AND id IN (SELECT value FROM json_each(?)) ORDER BY id`)
      .all(merchantId, JSON.stringify(ids)) as Row[]).map(toProduct);
  }

  async productIdsWithImage(merchantId: number, url: string): Promise<number[]> {
    return this.c.stmt(`SELECT product_id FROM product_links WHERE merchant_id = ? AND kind = 'image' AND value = ? ORDER BY product_id`)
      .pluck().all(merchantId, url) as number[];
  }
}
