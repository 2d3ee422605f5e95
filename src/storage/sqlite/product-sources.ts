// Product sources (what the merchant sent) on SQLite: sql/product-sources.ts, with SQLite's writes
// (a statement per step, on the event loop) and its image lookup.
import type { ProductSourceDocument } from '../../catalog/model.js';
import { yieldToOthers } from '../../shared/cooperative.js';
import { diffProductLinks } from '../product-links.js';
import { SqlProductSources } from '../sql/product-sources.js';
import type { SqliteConnection } from './connection.js';
import { inBatches, valueRows } from './batches.js';
import { LOWER_IMAGE_WORK_HINT, originOf } from './images.js';

/** The links ([kind, value, product id]) and image URLs a run of upserts adds, written at its end. */
class RunLinks {
  /** The stored links of the run's changed products, read in one statement. */
  readonly stored = new Map<number, [string, string][]>();
  readonly added: [string, string, number][] = [];
  readonly addedImages: string[] = [];
}

/** Products written by one run of statements at most (upsertProductSources). */
const RUN = 100;

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

  /**
   * The products a run of up to RUN at a time (runOf), in order: the same rows, ids and statements
   * as the import's runs of that size gave before PostgreSQL took larger ones.
   */
  async upsertProductSources(
    merchantId: number,
    products: { ref: string; source: ProductSourceDocument; json?: string }[],
    at: string,
  ): Promise<{ id: number; created: boolean; unchanged: boolean }[]> {
    if (new Set(products.map((p) => p.ref)).size !== products.length) throw new TypeError('upsertProductSources: refs must be distinct');
    const results: { id: number; created: boolean; unchanged: boolean }[] = [];
    for (let from = 0; from < products.length; from += RUN) {
      if (from > 0) await yieldToOthers();
      results.push(...(await this.runOf(merchantId, products.slice(from, from + RUN), at)));
    }
    return results;
  }

  private async runOf(
    merchantId: number,
    products: { ref: string; source: ProductSourceDocument; json?: string }[],
    at: string,
  ): Promise<{ id: number; created: boolean; unchanged: boolean }[]> {
    // A few statements a run: the run's stored sources are read in one statement (compared here),
    // the new rows and the changed sources written a batch of up to 64 a statement (batches.ts), the
    // sources sent again unchanged have their time of the last write moved in one, the changed
    // products' links are read in one, and the links and image rows the run adds are written
    // together at its end (one statement each), where one product at a time took ~8 statements per
    // new product (its probe, its row, its links one by one, its image rows).
    // The loop is let go after its slice, every 16 products (as the import's loop did before it called this).
    const refs = products.map((p) => p.ref);
    const stored = new Map<string, [number, string]>();
    for (const [id, ref, text] of this.c
      .stmt('SELECT id, ref, source FROM products WHERE merchant_id = ? AND ref IN (SELECT value FROM json_each(?))')
      .raw()
      .all(merchantId, JSON.stringify(refs)) as [number, string, string][]) {
      stored.set(ref, [id, text]);
    }
    const texts = products.map(({ source, json }) => json ?? JSON.stringify(source));
    const unchanged: number[] = [];
    const links = new RunLinks();
    const changed: number[] = [];
    for (const [index, { ref }] of products.entries()) {
      const existing = stored.get(ref);
      if (!existing) continue;
      if (existing[1] === texts[index]) unchanged.push(existing[0]);
      else changed.push(existing[0]);
    }
    if (changed.length > 0) {
      for (const [id, kind, value] of this.c
        .stmt('SELECT product_id, kind, value FROM product_links WHERE product_id IN (SELECT value FROM json_each(?))')
        .raw()
        .all(JSON.stringify(changed)) as [number, string, string][]) {
        const list = links.stored.get(id);
        if (list) list.push([kind, value]);
        else links.stored.set(id, [[kind, value]]);
      }
      for (const id of changed) if (!links.stored.has(id)) links.stored.set(id, []);
    }
    // The new products' rows first, up to ROWS_PER_STATEMENT a statement in the given order (so
    // their ids are drawn in that order), each id read back by its ref.
    const createdIds = new Map<string, number>();
    const fresh = products.flatMap((product, index) => (stored.has(product.ref) ? [] : [index]));
    await inBatches(fresh.length, (from, count) => {
      const values: unknown[] = [];
      for (const index of fresh.slice(from, from + count)) values.push(merchantId, products[index]!.ref, texts[index], at);
      for (const [id, ref] of this.c
        .stmt(`INSERT INTO products (merchant_id, ref, source, updated_at) VALUES ${valueRows(count, 4)} RETURNING id, ref`)
        .raw()
        .all(values) as [number, string][]) {
        createdIds.set(ref, id);
      }
    });
    const results: { id: number; created: boolean; unchanged: boolean }[] = [];
    // The changed sources' [id, text] pairs, rewritten together below.
    const rewritten: unknown[] = [];
    for (const [index, { ref, source }] of products.entries()) {
      if (index > 0 && index % 16 === 0) await yieldToOthers();
      const json = texts[index]!;
      const existing = stored.get(ref);
      if (existing) {
        const [id, text] = existing;
        results.push({ id, created: false, unchanged: text === json });
        if (text === json) continue;
        rewritten.push(id, json);
        this.relink(merchantId, id, source, false, at, links);
        continue;
      }
      const id = createdIds.get(ref)!;
      results.push({ id, created: true, unchanged: false });
      this.relink(merchantId, id, source, true, at, links);
    }
    await inBatches(rewritten.length / 2, (from, count) => {
      this.c
        .stmt(`WITH v(id, source) AS (VALUES ${valueRows(count, 2)})
        UPDATE products SET source = v.source, updated_at = ? FROM v WHERE products.id = v.id`)
        .run(...rewritten.slice(from * 2, (from + count) * 2), at);
    });
    if (unchanged.length > 0) {
      this.c.stmt('UPDATE products SET updated_at = ? WHERE id IN (SELECT value FROM json_each(?))').run(at, JSON.stringify(unchanged));
    }
    if (await this.writeRunLinks(merchantId, links, at)) this.lowerImageWorkHint(merchantId, at);
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

  /**
   * The links and image rows a run of upserts added, written a few statements each; whether an
   * image is listed by one product alone now (new, or listed again). A URL two products of the run
   * add is counted twice: SQLite's upsert takes the statement's rows one after another.
   */
  private async writeRunLinks(merchantId: number, links: RunLinks, at: string): Promise<boolean> {
    // Up to ROWS_PER_STATEMENT links a statement, bound by position (batches.ts): json_each's
    // array and its three `->>` a row cost a third more than the links' own B-tree writes.
    const { added } = links;
    await inBatches(added.length, (from, count) => {
      const values: unknown[] = [];
      for (let i = from; i < from + count; i++) {
        const [kind, value, productId] = added[i]!;
        values.push(merchantId, kind, value, productId);
      }
      this.c.stmt(`INSERT OR IGNORE INTO product_links (merchant_id, kind, value, product_id) VALUES ${valueRows(count, 4)}`).run(values);
    });
    if (links.addedImages.length === 0) return false;
    return this.addImageRows(merchantId, links.addedImages, at);
  }

  /** New URLs are pending work, due at once; known ones count one more product. True when one is listed by one product now. */
  private addImageRows(merchantId: number, urls: string[], at: string): boolean {
    const listed = this.c
      .stmt(`INSERT INTO image_mirrors (merchant_id, url, origin, state, updated_at, next_attempt_at, listed)
      SELECT @merchant, value, ${originOf('value')}, 'pending', @at, @at, 1 FROM json_each(@urls) WHERE true
      ON CONFLICT (merchant_id, url) DO UPDATE SET listed = listed + 1 RETURNING listed`)
      .pluck()
      .all({ merchant: merchantId, at, urls: JSON.stringify(urls) }) as number[];
    // Listed by one product now: new (or listed again, when the hint stays a lower bound all the same).
    return listed.includes(1);
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
  private relink(
    merchantId: number,
    productId: number,
    source: ProductSourceDocument | null,
    created: boolean,
    at: string,
    run?: RunLinks,
  ): boolean {
    const before = created
      ? []
      : (run?.stored.get(productId) ??
        (this.c.stmt('SELECT kind, value FROM product_links WHERE product_id = ?').raw().all(productId) as [string, string][]));
    const diff = diffProductLinks(before, source);
    const link = { merchant: merchantId, product: productId };
    if (diff.removed.length > 0) {
      this.c
        .stmt(`DELETE FROM product_links WHERE merchant_id = @merchant AND product_id = @product
        AND (kind, value) IN (SELECT value ->> 0, value ->> 1 FROM json_each(@links))`)
        .run({ ...link, links: JSON.stringify(diff.removed) });
    }
    if (run) {
      // Written with the rest of the run's (writeRunLinks).
      for (const [kind, value] of diff.added) run.added.push([kind, value, productId]);
      run.addedImages.push(...diff.addedImages);
    } else if (diff.added.length > 0) {
      // A row a statement (a few per product): cheaper than writing them as JSON for json_each to read.
      const insert = this.c.stmt('INSERT OR IGNORE INTO product_links (merchant_id, kind, value, product_id) VALUES (?, ?, ?, ?)');
      for (const [kind, value] of diff.added) insert.run(merchantId, kind, value, productId);
    }
    if (diff.removedImages.length > 0) {
      this.c
        .stmt('UPDATE image_mirrors SET listed = listed - 1 WHERE merchant_id = ? AND url IN (SELECT value FROM json_each(?))')
        .run(merchantId, JSON.stringify(diff.removedImages));
    }
    if (run || diff.addedImages.length === 0) return false;
    return this.addImageRows(merchantId, diff.addedImages, at);
  }

  async productIdsWithImage(merchantId: number, url: string): Promise<number[]> {
    // From the links alone: one writer at a time, so the products need no lock (PgProductSources locks them).
    return this.c
      .stmt(`SELECT product_id FROM product_links WHERE merchant_id = ? AND kind = 'image' AND value = ? ORDER BY product_id`)
      .pluck()
      .all(merchantId, url) as number[];
  }
}
