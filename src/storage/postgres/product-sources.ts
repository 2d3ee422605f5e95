// Product sources (what the merchant sent) on PostgreSQL: sql/product-sources.ts, with
// PostgreSQL's writes (a run of products in one statement, the links of those whose source changed in another) and its image lookup,
// which locks the products it finds. The document is kept as the JSON text the domain wrote.
import { booleanArray, integerArray, joinJsonTexts, splitJsonTexts, textArray } from './json-texts.js';
import type { ProductSourceDocument } from '../../catalog/model.js';
import { hash } from 'node:crypto';
import { productLinks } from '../product-links.js';
import { SqlProductSources } from '../sql/product-sources.js';
import type { PgConnection } from './connection.js';
import { originOf } from './images.js';
import { IMAGE_WORK_CHANNEL } from './wakeups.js';

export class PgProductSources extends SqlProductSources<PgConnection> {
  async upsertProductSource(
    merchantId: number,
    ref: string,
    source: ProductSourceDocument,
    at: string,
  ): Promise<{ id: number; created: boolean }> {
    const json = JSON.stringify(source);
    // Update, else insert: INSERT ... ON CONFLICT would draw an identity value on every update too.
    const updated = await this.c.one<{ id: number }>(
      // Relinked one by one, without the run's key of its links (a later run relinks it once more).
      'UPDATE products SET source = $3, updated_at = $4, links_key = NULL WHERE merchant_id = $1 AND ref = $2 RETURNING id',
      [merchantId, ref, json, at],
    );
    if (updated) {
      await this.relink(merchantId, updated.id, source, at);
      return { id: updated.id, created: false };
    }
    const inserted = await this.c.one<{ id: number }>(
      'INSERT INTO products (merchant_id, ref, source, updated_at) VALUES ($1, $2, $3, $4) RETURNING id',
      [merchantId, ref, json, at],
    );
    await this.relink(merchantId, inserted!.id, source, at, true);
    return { id: inserted!.id, created: true };
  }

  /**
   * Many products in two statements instead of three per product (a bulk import's chunk): the rows
   * updated, else inserted in the given order (ids as one upsertProductSource after another would
   * draw them), then the links of the products whose links changed relinked (relinkMany). A source
   * sent again unchanged keeps its links, and so does a changed one whose links are the same (a new
   * cost): each row keeps a key of the links it was last relinked to by a run (links_key, migration
   * 54; null when unknown), compared with the new source's, so their links are not sent again.
   * The keys are worked out (productLinks and a SHA-1 a line) only where the merchant's previous run
   * in this process had a source that changed or was new: after an unchanged run the sources are
   * compared first, and only the changed and new ones get theirs, sent with their relinking (a
   * second write of those rows, the price of a file that changes midway).
   * With `linkLater`, the relinking statement is handed there instead of run: the caller sends it
   * while it resolves the products (the database writes the links meanwhile).
   */
  async upsertProductSources(
    merchantId: number,
    products: { ref: string; source: ProductSourceDocument; json?: string }[],
    at: string,
    linkLater?: (link: () => Promise<void>) => void,
  ): Promise<{ id: number; created: boolean; unchanged: boolean }[]> {
    if (products.length === 0) return [];
    if (new Set(products.map((p) => p.ref)).size !== products.length) throw new TypeError('upsertProductSources: refs must be distinct');
    const keyed = !lastRunUnchanged.has(merchantId);
    const links = keyed ? products.map(({ source }) => productLinks(source)) : undefined;
    // Each ref found by one probe of (merchant_id, ref) (OFFSET 0 keeps the probe per ref: a planner
    // whose statistics predate a bulk load would rather read the merchant's every product and hash
    // them), the rows then updated by id; the stored text and links key compared with the ones sent.
    // Without keys ($6 false) a row keeps its stored key, returned for the changed ones to compare.
    const rows = await this.c.rows<{ id: number; created: boolean; same: boolean; relink: boolean; stored_key: string | null }>(
      `WITH input AS (
        SELECT * FROM unnest($2::text[], ${splitJsonTexts('$3')}, $5::text[]) WITH ORDINALITY AS i(ref, source, links_key, ordinal)
      ), found AS (
        SELECT x.id, i.ref, i.source, i.links_key, x.same, x.links_same, x.stored_key FROM input AS i CROSS JOIN LATERAL (
          SELECT q.id, q.source = i.source AS same, q.links_key IS NOT DISTINCT FROM i.links_key AS links_same, q.links_key AS stored_key
          FROM products AS q WHERE q.merchant_id = $1 AND q.ref = i.ref OFFSET 0) AS x
      ), updated AS (
        UPDATE products AS p SET source = f.source, updated_at = $4, links_key = CASE WHEN $6 THEN f.links_key ELSE p.links_key END
        FROM found AS f
        WHERE p.id = ANY(ARRAY(SELECT id FROM found)) AND p.id = f.id RETURNING p.id, p.ref, f.same, f.links_same, f.stored_key
      ), inserted AS (
        -- Update, else insert (as upsertProductSource: no identity value drawn for an update), in order.
        INSERT INTO products (merchant_id, ref, source, updated_at, links_key)
          SELECT $1, i.ref, i.source, $4, i.links_key FROM input AS i WHERE NOT EXISTS (SELECT 1 FROM updated AS u WHERE u.ref = i.ref)
          ORDER BY i.ordinal
        RETURNING id, ref
      )
      SELECT coalesce(u.id, n.id) AS id, n.id IS NOT NULL AS created, coalesce(u.same, false) AS same,
        n.id IS NOT NULL OR NOT (u.same OR ($6 AND u.links_same)) AS relink, u.stored_key
      FROM input AS i LEFT JOIN updated AS u ON u.ref = i.ref LEFT JOIN inserted AS n ON n.ref = i.ref
      ORDER BY i.ordinal`,
      [
        merchantId,
        textArray(products.map((p) => p.ref)),
        joinJsonTexts(products.map((p) => p.json ?? JSON.stringify(p.source))),
        at,
        links ? textArray(links.map(linksKey)) : null,
        keyed,
      ],
    );
    const relinked: Relinked[] = [];
    rows.forEach((row, index) => {
      if (!row.relink) return;
      const { source } = products[index]!;
      if (links) {
        relinked.push({ productId: row.id, source, created: row.created, links: links[index] });
        return;
      }
      // Not keyed: a changed source whose links have the key stored keeps them; the others are
      // relinked and their key written.
      const own = productLinks(source);
      const key = linksKey(own);
      if (!row.created && row.stored_key === key) return;
      relinked.push({ productId: row.id, source, created: row.created, links: own, key });
    });
    if (rows.every((row) => row.same)) lastRunUnchanged.add(merchantId);
    else lastRunUnchanged.delete(merchantId);
    if (relinked.length > 0) {
      if (linkLater) linkLater(() => this.relinkMany(merchantId, relinked, at));
      else await this.relinkMany(merchantId, relinked, at);
    }
    return rows.map((r) => ({ id: r.id, created: r.created, unchanged: r.same }));
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
  private relink(merchantId: number, productId: number, source: ProductSourceDocument | null, at: string, created = false): Promise<void> {
    return this.relinkMany(merchantId, [{ productId, source, created }], at);
  }

  /**
   * relink for several distinct products in one statement. An image one product drops and another
   * adds is counted once by its net change (one statement may not update a row twice): the same
   * counts, rows and work as relinking the products one after another. A product just created has
   * no links to look for.
   */
  private async relinkMany(merchantId: number, products: Relinked[], at: string): Promise<void> {
    const ids: number[] = [];
    const kinds: string[] = [];
    const values: string[] = [];
    const fresh: boolean[] = [];
    const keyed = products.filter((p) => p.key !== undefined);
    for (const { productId, source, created, links } of products) {
      for (const key of links ?? productLinks(source)) {
        const space = key.indexOf(' ');
        ids.push(productId);
        kinds.push(key.slice(0, space));
        values.push(key.slice(space + 1));
        fresh.push(created);
      }
    }
    await this.c.run(
      `WITH wanted(product_id, kind, value, fresh) AS (SELECT * FROM unnest($3::bigint[], $4::text[], $5::text[], $7::boolean[])),
      existing AS MATERIALIZED (
        -- Each product's links from the products' index, one probe per product (OFFSET 0 keeps it
        -- so; merchant_id + 0 is not a prefix of the primary key: a planner whose statistics predate
        -- a bulk load chose that range, or a scan of the whole table).
        SELECT p.id AS product_id, x.ctid, x.kind, x.value FROM unnest($2::bigint[]) AS p(id) CROSS JOIN LATERAL (
          SELECT k.ctid, k.kind, k.value FROM product_links AS k WHERE k.product_id = p.id AND k.merchant_id + 0 = $1 OFFSET 0) AS x
      ), gone AS (
        -- The links a product no longer has, deleted by row address.
        DELETE FROM product_links AS l WHERE l.ctid = ANY(ARRAY(
          SELECT e.ctid FROM existing AS e
          WHERE NOT EXISTS (SELECT 1 FROM wanted AS w WHERE w.product_id = e.product_id AND w.kind = e.kind AND w.value = e.value)))
        RETURNING l.kind, l.value
      ), added_fresh AS (
        -- A product just created has no links: its own are inserted without ON CONFLICT (whose
        -- check cost a probe of the primary key and a speculative insertion per link).
        INSERT INTO product_links (merchant_id, kind, value, product_id) SELECT $1, w.kind, w.value, w.product_id FROM wanted AS w
          WHERE w.fresh RETURNING kind, value
      ), added_kept AS (
        -- Only the links a product did not have (a new price keeps them all): no probe of the
        -- primary key for each link kept.
        INSERT INTO product_links (merchant_id, kind, value, product_id) SELECT $1, w.kind, w.value, w.product_id FROM wanted AS w
          WHERE NOT w.fresh AND NOT EXISTS (SELECT 1 FROM existing AS e WHERE e.product_id = w.product_id AND e.kind = w.kind AND e.value = w.value)
        ON CONFLICT DO NOTHING RETURNING kind, value
      ), added AS (
        SELECT kind, value FROM added_fresh UNION ALL SELECT kind, value FROM added_kept
      ), keyed AS (
        -- The keys of the links relinked here that the sources' write did not know (not keyed).
        UPDATE products AS p SET links_key = k.key FROM unnest($8::bigint[], $9::text[]) AS k(id, key) WHERE p.id = k.id
      ), ${imageCounting('$6')}
      SELECT pg_notify('${IMAGE_WORK_CHANNEL}', '') FROM listed WHERE inserted LIMIT 1`,
      [
        merchantId,
        integerArray(products.filter((p) => !p.created).map((p) => p.productId)),
        integerArray(ids),
        textArray(kinds),
        textArray(values),
        at,
        booleanArray(fresh),
        integerArray(keyed.map((p) => p.productId)),
        textArray(keyed.map((p) => p.key!)),
      ],
    );
  }

  async productIdsWithImage(merchantId: number, url: string): Promise<number[]> {
    // In a write transaction the products are locked (in id order) before they are re-published:
    // two image transitions of one product take turns, and the second resolves it with the first's
    // state change committed (without the lock each saw the other image as it was, and the payload
    // committed last showed a dead image by its supplier URL).
    return (
      await this.c.rows<{ id: number }>(
        `SELECT p.id FROM product_links AS l JOIN products AS p ON p.id = l.product_id
      WHERE l.merchant_id = $1 AND l.kind = 'image' AND l.value = $2 ORDER BY p.id
      ${this.c.inWriteTransaction ? 'FOR NO KEY UPDATE OF p' : ''}`,
        [merchantId, url],
      )
    ).map((r) => r.id);
  }
}

/**
 * The CTEs that follow a statement's `added` and `gone` links (each `RETURNING kind, value`): the
 * products listing each image counted up or down (`listed`), new URLs pending work due `at` (a
 * parameter such as `$4`), and the merchant's image work hint lowered when one is new. `listed`
 * returns whether each image row is new (`inserted`).
 */
function imageCounting(at: string): string {
  return `delta AS (
        SELECT value, sum(n)::integer AS n FROM (
          SELECT value, 1 AS n FROM added WHERE kind = 'image' UNION ALL SELECT value, -1 FROM gone WHERE kind = 'image') AS d
        GROUP BY value HAVING sum(n) <> 0
      ), unlisted AS (
        UPDATE image_mirrors AS m SET listed = m.listed + delta.n FROM delta WHERE delta.n < 0 AND m.merchant_id = $1 AND m.url = delta.value
      ), listed AS (
        -- In URL order: two transactions counting the same images lock their rows in one order.
        INSERT INTO image_mirrors (merchant_id, url, origin, state, updated_at, next_attempt_at, listed)
          SELECT $1, value, ${originOf('value')}, 'pending', ${at}, ${at}, n FROM delta WHERE n > 0 ORDER BY value
        ON CONFLICT (merchant_id, url) DO UPDATE SET listed = image_mirrors.listed + excluded.listed
        RETURNING (xmax = 0) AS inserted
      ), hinted AS (
        INSERT INTO image_work_merchants (merchant_id, due_at, version) SELECT $1, ${at}, 0 WHERE EXISTS (SELECT 1 FROM listed WHERE inserted)
        ON CONFLICT (merchant_id) DO UPDATE SET due_at = least(image_work_merchants.due_at, excluded.due_at), version = image_work_merchants.version + 1
      )`;
}

/** A product relinked by relinkMany: its links when worked out already, and their key to write when its row lacks it. */
interface Relinked {
  productId: number;
  source: ProductSourceDocument | null;
  created: boolean;
  links?: Set<string>;
  key?: string;
}

/**
 * The merchants whose last run of upserts in this process had every source unchanged: their next
 * run compares the sources before working out any links key (upsertProductSources). A hint only:
 * either way the same rows and links are written.
 */
const lastRunUnchanged = new Set<number>();

/**
 * A key of a product's links (productLinks' members, in its order): equal keys, equal links. Two
 * sources listing the same links in another order get different keys, and are relinked.
 */
function linksKey(links: Set<string>): string {
  return hash('sha1', [...links].join('\n'), 'base64url');
}
