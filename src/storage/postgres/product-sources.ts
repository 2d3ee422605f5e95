// Product sources (what the merchant sent) on PostgreSQL: the document is kept as the JSON text
// the domain wrote, and read with json's operators where a query looks inside it.
import type { ProductSourceStore } from '../port.js';
import type { ProductRecord, ProductSourceDocument } from '../records.js';
import { productLinks } from '../product-links.js';
import type { PgConnection, Row } from './connection.js';
import { originOf } from './images.js';
import { IMAGE_WORK_CHANNEL } from './wakeups.js';

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
    if (updated) {
      await this.relink(merchantId, updated.id, source, at);
      return { id: updated.id, created: false };
    }
    const inserted = await this.c.one<{ id: number }>('INSERT INTO products (merchant_id, ref, source, updated_at) VALUES ($1, $2, $3, $4) RETURNING id',
      [merchantId, ref, json, at]);
    await this.relink(merchantId, inserted!.id, source, at);
    return { id: inserted!.id, created: true };
  }

  async deleteProduct(merchantId: number, productId: number): Promise<void> {
    const deleted = await this.c.run('DELETE FROM products WHERE merchant_id = $1 AND id = $2', [merchantId, productId]);
    if (deleted > 0) await this.relink(merchantId, productId, null, '');
  }

  /**
   * Keeps the product's links (product_links) and its images' mirror rows in step with its source,
   * in the source's transaction and in one statement: new image URLs become pending work (waking
   * the mirrors at commit), and each image counts the products that list it.
   */
  private async relink(merchantId: number, productId: number, source: ProductSourceDocument | null, at: string): Promise<void> {
    const links = [...productLinks(source)].map((key) => key.split(' '));
    await this.c.run(`WITH wanted(kind, value) AS (SELECT * FROM unnest($3::text[], $4::text[])),
      gone AS (
        DELETE FROM product_links AS l WHERE l.merchant_id = $1 AND l.product_id = $2
          AND NOT EXISTS (SELECT 1 FROM wanted AS w WHERE w.kind = l.kind AND w.value = l.value)
        RETURNING l.kind, l.value
      ), added AS (
        INSERT INTO product_links (merchant_id, kind, value, product_id) SELECT $1, kind, value, $2 FROM wanted
        ON CONFLICT DO NOTHING RETURNING kind, value
      ), unlisted AS (
        UPDATE image_mirrors AS m SET listed = m.listed - 1 FROM gone WHERE gone.kind = 'image' AND m.merchant_id = $1 AND m.url = gone.value
      ), listed AS (
        -- In URL order: two transactions counting the same images lock their rows in one order.
        INSERT INTO image_mirrors (merchant_id, url, origin, state, updated_at, next_attempt_at, listed)
          SELECT $1, value, ${originOf('value')}, 'pending', $5, $5, 1 FROM added WHERE kind = 'image' ORDER BY value
        ON CONFLICT (merchant_id, url) DO UPDATE SET listed = image_mirrors.listed + 1
        RETURNING (xmax = 0) AS inserted
      ), hinted AS (
        INSERT INTO image_work_merchants (merchant_id, due_at, version) SELECT $1, $5, 0 WHERE EXISTS (SELECT 1 FROM listed WHERE inserted)
        ON CONFLICT (merchant_id) DO UPDATE SET due_at = least(image_work_merchants.due_at, excluded.due_at), version = image_work_merchants.version + 1
      )
      SELECT pg_notify('${IMAGE_WORK_CHANNEL}', '') FROM listed WHERE inserted LIMIT 1`,
    [merchantId, productId, links.map((l) => l[0]), links.map((l) => l.slice(1).join(' ')), at]);
  }

  async productsExcludedFrom(merchantId: number, slug: string): Promise<ProductRecord[]> {
    return (await this.c.rows(`SELECT p.id, p.ref, p.source FROM product_links AS l JOIN products AS p ON p.id = l.product_id
      WHERE l.merchant_id = $1 AND l.kind = 'excluded_store' AND l.value = $2 ORDER BY l.product_id`,
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
    return (await this.c.rows<{ id: number }>(`SELECT p.id FROM product_links AS l JOIN products AS p ON p.id = l.product_id
      WHERE l.merchant_id = $1 AND l.kind = 'image' AND l.value = $2 ORDER BY p.id
      ${this.c.inWriteTransaction ? 'FOR NO KEY UPDATE OF p' : ''}`,
    [merchantId, url])).map((r) => r.id);
  }
}
