// Product sources (what the merchant sent) on SQLite.
import type { ProductSourceStore } from '../port.js';
import type { ProductRecord, ProductSourceDocument } from '../records.js';
import type { Row, SqliteConnection } from './connection.js';

const toProduct = (r: Row): ProductRecord => ({
  id: r.id as number,
  ref: r.ref as string,
  source: JSON.parse(r.source as string) as ProductSourceDocument,
});

export class SqliteProductSources implements ProductSourceStore {
  static readonly writes = ['upsertProductSource', 'deleteProduct'] as const;

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
      return { id: existing.id, created: false };
    }
    const info = this.c.stmt('INSERT INTO products (merchant_id, ref, source, updated_at) VALUES (?, ?, ?, ?)').run(merchantId, ref, json, at);
    return { id: Number(info.lastInsertRowid), created: true };
  }

  async deleteProduct(merchantId: number, productId: number): Promise<void> {
    this.c.stmt('DELETE FROM products WHERE merchant_id = ? AND id = ?').run(merchantId, productId);
  }

  async productsExcludedFrom(merchantId: number, slug: string): Promise<ProductRecord[]> {
    return (this.c.stmt(`SELECT id, ref, source FROM products WHERE merchant_id = ? AND EXISTS
      (SELECT 1 FROM json_each(products.source, '$.excluded_stores') WHERE value = ?) ORDER BY id`)
      .all(merchantId, slug) as Row[]).map(toProduct);
  }

  async productsAfter(merchantId: number, afterId: number, limit: number): Promise<ProductRecord[]> {
    return (this.c.stmt('SELECT id, ref, source FROM products WHERE merchant_id = ? AND id > ? ORDER BY id LIMIT ?')
      .all(merchantId, afterId, limit) as Row[]).map(toProduct);
  }

  async productsByIds(merchantId: number, ids: number[]): Promise<ProductRecord[]> {
    if (ids.length === 0) return [];
    return (this.c.stmt(`SELECT id, ref, source FROM products
      WHERE merchant_id = ? AND id IN (SELECT value FROM json_each(?)) ORDER BY id`)
      .all(merchantId, JSON.stringify(ids)) as Row[]).map(toProduct);
  }

  async productIdsWithImage(merchantId: number, url: string): Promise<number[]> {
    return this.c.stmt(`SELECT id FROM products WHERE merchant_id = ? AND EXISTS
      (SELECT 1 FROM json_each(products.source, '$.images') WHERE json_extract(value, '$.url') = ?) ORDER BY id`)
      .pluck().all(merchantId, url) as number[];
  }
}
