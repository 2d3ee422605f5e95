// Product sources (what the merchant sent) on PostgreSQL: the document is kept as the JSON text
// the domain wrote, and read with json's operators where a query looks inside it.
import type { ProductSourceStore } from '../port.js';
import type { ProductRecord, ProductSourceDocument } from '../records.js';
import type { PgConnection, Row } from './connection.js';

const toProduct = (r: Row): ProductRecord => ({
  id: r.id as number,
  ref: r.ref as string,
  source: JSON.parse(r.source as string) as ProductSourceDocument,
});

export class PgProductSources implements ProductSourceStore {
  static readonly writes = ['upsertProductSource', 'deleteProduct'] as const;

  constructor(private readonly c: PgConnection) {}

  async findProductByRef(merchantId: number, ref: string): Promise<ProductRecord | undefined> {
    const row = await this.c.one('SELECT id, ref, source FROM products WHERE merchant_id = $1 AND ref = $2', [merchantId, ref]);
    return row && toProduct(row);
  }

  async upsertProductSource(merchantId: number, ref: string, source: ProductSourceDocument, at: string): Promise<{ id: number; created: boolean }> {
    const json = JSON.stringify(source);
    // Update, else insert: INSERT ... ON CONFLICT would draw an identity value on every update too.
    const updated = await this.c.one<{ id: number }>('UPDATE products SET source = $3, updated_at = $4 WHERE merchant_id = $1 AND ref = $2 RETURNING id',
      [merchantId, ref, json, at]);
    if (updated) return { id: updated.id, created: false };
    const inserted = await this.c.one<{ id: number }>('INSERT INTO products (merchant_id, ref, source, updated_at) VALUES ($1, $2, $3, $4) RETURNING id',
      [merchantId, ref, json, at]);
    return { id: inserted!.id, created: true };
  }

  async deleteProduct(merchantId: number, productId: number): Promise<void> {
    await this.c.run('DELETE FROM products WHERE merchant_id = $1 AND id = $2', [merchantId, productId]);
  }

  async productsExcludedFrom(merchantId: number, slug: string): Promise<ProductRecord[]> {
    return (await this.c.rows(`SELECT id, ref, source FROM products WHERE merchant_id = $1 AND EXISTS
      (SELECT 1 FROM json_array_elements_text(products.source::json -> 'excluded_stores') AS excluded WHERE excluded = $2) ORDER BY id`,
    [merchantId, slug])).map(toProduct);
  }

  async productsAfter(merchantId: number, afterId: number, limit: number): Promise<ProductRecord[]> {
    return (await this.c.rows('SELECT id, ref, source FROM products WHERE merchant_id = $1 AND id > $2 ORDER BY id LIMIT $3',
      [merchantId, afterId, limit])).map(toProduct);
  }

  async productsByIds(merchantId: number, ids: number[]): Promise<ProductRecord[]> {
    if (ids.length === 0) return [];
    return (await this.c.rows('SELECT id, ref, source FROM products WHERE merchant_id = $1 AND id = ANY($2::bigint[]) ORDER BY id',
      [merchantId, ids])).map(toProduct);
  }

  async productIdsWithImage(merchantId: number, url: string): Promise<number[]> {
    // In a write transaction the products are locked (in id order) before they are re-published:
    // two image transitions of one product take turns, and the second resolves it with the first's
    // state change committed (without the lock each saw the other image as it was, and the payload
    // committed last showed a dead image by its supplier URL).
    return (await this.c.rows<{ id: number }>(`SELECT id FROM products WHERE merchant_id = $1 AND EXISTS
      (SELECT 1 FROM json_array_elements(products.source::json -> 'images') AS image WHERE image ->> 'url' = $2) ORDER BY id
      ${this.c.inWriteTransaction ? 'FOR NO KEY UPDATE' : ''}`,
    [merchantId, url])).map((r) => r.id);
  }
}
