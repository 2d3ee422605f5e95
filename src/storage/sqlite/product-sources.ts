// Product sources (what the merchant sent) on SQLite: sql/product-sources.ts, with SQLite's writes
// (a statement per step, on the event loop) and its image lookup.
import type { ProductSourceDocument } from '../../catalog/model.js';
import { yieldToOthers } from '../../shared/cooperative.js';
import { diffProductLinks } from '../product-links.js';
import { SqlProductSources } from '../sql/product-sources.js';
import type { SqliteConnection } from './connection.js';
import { LOWER_IMAGE_WORK_HINT, originOf } from './images.js';

export class SqliteProductSources extends SqlProductSources<SqliteConnection> {
  async upsertProductSource(
    merchantId: number,
    ref: string,
    source: ProductSourceDocument,
    at: string,
  ): Promise<{ id: number; created: boolean }> {
    const { id, created, newImages } = this.upsertOne(merchantId, ref, source, at);
    if (newImages) this.lowerImageWorkHint(merchantId, at);
    return { id, created };
  }

  async upsertProductSources(
    merchantId: number,
    products: { ref: string; source: ProductSourceDocument }[],
    at: string,
  ): Promise<{ id: number; created: boolean }[]> {
    // Statements here are function calls: one product at a time costs no more than a batch would,
    // but the merchant's image work hint is lowered once for all of them. The loop is let go after
    // its slice, every 16 products (as the import's loop did before it called this).
    const results: { id: number; created: boolean }[] = [];
    let newImages = false;
    for (const [index, { ref, source }] of products.entries()) {
      if (index > 0 && index % 16 === 0) await yieldToOthers();
      const { id, created, newImages: added } = this.upsertOne(merchantId, ref, source, at);
      newImages ||= added;
      results.push({ id, created });
    }
    if (newImages) this.lowerImageWorkHint(merchantId, at);
    return results;
  }

  /** One product's source written and relinked; whether it listed an image no product listed before. */
  private upsertOne(
    merchantId: number,
    ref: string,
    source: ProductSourceDocument,
    at: string,
  ): { id: number; created: boolean; newImages: boolean } {
    const json = JSON.stringify(source);
    // The stored text compared in SQL (never read out): a source sent again unchanged keeps its row
    // and its links as they are, only its time of the last write moves.
    const existing = this.c
      .stmt('SELECT id, source = ? AS same FROM products WHERE merchant_id = ? AND ref = ?')
      .raw()
      .get(json, merchantId, ref) as [number, number] | undefined;
    if (existing) {
      const [id, same] = existing;
      if (same) {
        this.c.stmt('UPDATE products SET updated_at = ? WHERE id = ?').run(at, id);
        return { id, created: false, newImages: false };
      }
      this.c.stmt('UPDATE products SET source = ?, updated_at = ? WHERE id = ?').run(json, at, id);
      return { id, created: false, newImages: this.relink(merchantId, id, source, false, at) };
    }
    const info = this.c
      .stmt('INSERT INTO products (merchant_id, ref, source, updated_at) VALUES (?, ?, ?, ?)')
      .run(merchantId, ref, json, at);
    const id = Number(info.lastInsertRowid);
    return { id, created: true, newImages: this.relink(merchantId, id, source, true, at) };
  }

  /** New images of the merchant are pending work due `at`: the mirror's hint is lowered, and woken at COMMIT. */
  private lowerImageWorkHint(merchantId: number, at: string): void {
    this.c.stmt(LOWER_IMAGE_WORK_HINT).run({ merchant_id: merchantId, due_at: at });
    this.c.addedWork.add('images');
  }

  async deleteProduct(merchantId: number, productId: number): Promise<void> {
    const deleted = this.c.stmt('DELETE FROM products WHERE merchant_id = ? AND id = ?').run(merchantId, productId).changes;
    if (deleted > 0) this.relink(merchantId, productId, null, false, '');
  }

  /**
   * Keeps the product's links (product_links) and its images' mirror rows in step with its source,
   * in the source's transaction: new image URLs become pending work, and each image counts the
   * products that list it. True when an image is listed by this product alone now (new, or listed
   * again): the caller lowers the merchant's image work hint.
   */
  private relink(merchantId: number, productId: number, source: ProductSourceDocument | null, created: boolean, at: string): boolean {
    const before = created
      ? []
      : (this.c.stmt('SELECT kind, value FROM product_links WHERE product_id = ?').raw().all(productId) as [string, string][]);
    const diff = diffProductLinks(before, source);
    const link = { merchant: merchantId, product: productId };
    if (diff.removed.length > 0) {
      this.c
        .stmt(`DELETE FROM product_links WHERE merchant_id = @merchant AND product_id = @product
        AND (kind, value) IN (SELECT value ->> 0, value ->> 1 FROM json_each(@links))`)
        .run({ ...link, links: JSON.stringify(diff.removed) });
    }
    if (diff.added.length > 0) {
      // A row a statement (a few per product): cheaper than writing them as JSON for json_each to read.
      const insert = this.c.stmt('INSERT OR IGNORE INTO product_links (merchant_id, kind, value, product_id) VALUES (?, ?, ?, ?)');
      for (const [kind, value] of diff.added) insert.run(merchantId, kind, value, productId);
    }
    if (diff.removedImages.length > 0) {
      this.c
        .stmt('UPDATE image_mirrors SET listed = listed - 1 WHERE merchant_id = ? AND url IN (SELECT value FROM json_each(?))')
        .run(merchantId, JSON.stringify(diff.removedImages));
    }
    if (diff.addedImages.length === 0) return false;
    // New URLs are pending work, due at once; known ones count one more product.
    const listed = this.c
      .stmt(`INSERT INTO image_mirrors (merchant_id, url, origin, state, updated_at, next_attempt_at, listed)
      SELECT @merchant, value, ${originOf('value')}, 'pending', @at, @at, 1 FROM json_each(@urls) WHERE true
      ON CONFLICT (merchant_id, url) DO UPDATE SET listed = listed + 1 RETURNING listed`)
      .pluck()
      .all({ merchant: merchantId, at, urls: JSON.stringify(diff.addedImages) }) as number[];
    // Listed by one product now: new (or listed again, when the hint stays a lower bound all the same).
    return listed.includes(1);
  }

  async productIdsWithImage(merchantId: number, url: string): Promise<number[]> {
    // From the links alone: one writer at a time, so the products need no lock (PgProductSources locks them).
    return this.c
      .stmt(`SELECT product_id FROM product_links WHERE merchant_id = ? AND kind = 'image' AND value = ? ORDER BY product_id`)
      .pluck()
      .all(merchantId, url) as number[];
  }
}
