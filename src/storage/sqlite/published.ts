// Published payloads per (store, product) on SQLite, and the public API's reads over them: SQLite
// joins a page's payloads into one UTF-8 buffer that goes out unchanged.
import type { PublishedStore } from '../port.js';
import type {
  ExpectedStorePage,
  PublishedHashes,
  PublishedLines,
  PublishedPage,
  PublishedKeys,
  PublishedPayloads,
  PublishedPrices,
  PublishedRow,
  PublishedPriceRow,
  PublishedBlock,
  PublishedIdWindow,
  PublishedSummaryWindow,
  PublishedVersionRead,
  PublishedWindowRead,
  StorePageRead,
} from '../records.js';
import type { PublishedExclusionCounts, PublishedProductSummary } from '../../catalog/model.js';
import { yieldToOthers } from '../../shared/cooperative.js';
import { ROWS_PER_STEP, type Row, type SqliteConnection } from './connection.js';
import { inBatches, valueRows } from './batches.js';
import { toStore } from '../rows.js';
import { PUBLISHED_BLOCK_BITS } from '../records.js';

/** A page's payloads joined by commas and their digests, from one scan of the (ordered) rows of the FROM. */
const PAGE_AGGREGATES = `CAST(coalesce(group_concat(payload, ','), '') AS BLOB) AS page_bytes,
  CAST(coalesce(group_concat(price_hash || content_hash, ''), '') AS BLOB) AS page_digests`;

/** The merchant's published version (records.ts PublishedVersionRead): the position of its latest change. `merchantId`: a parameter or a column qualified by its table. */
const PUBLISHED_VERSION = (merchantId: string) => `coalesce((SELECT last_id FROM change_sequences WHERE merchant_id = ${merchantId}), 0)`;

/**
 * A merchant's store as `which` picks it, the merchant's published version, and the page of the
 * store's rows when it is store @storeId at catalog version @catalogVersion and the version is not
 * @heldVersion. Those conditions are the scan's LIMIT (all rows, or none): SQLite computes a LIMIT
 * once, before the scan, and skips the scan at 0; as WHERE terms they were tested on every row,
 * after reading it.
 */
const PAGE_OF_STORE_SQL = (which: string) => `SELECT s.*, ${PUBLISHED_VERSION('@merchantId')} AS published_version,
    page.page_bytes, page.page_digests
  FROM stores AS s, (SELECT ${PAGE_AGGREGATES} FROM
    (SELECT payload, price_hash, content_hash FROM published_products
      WHERE store_id = @storeId AND product_id BETWEEN @fromId AND @toId
      ORDER BY product_id
      LIMIT CASE WHEN (SELECT catalog_version FROM stores WHERE id = @storeId AND merchant_id = @merchantId) = @catalogVersion
        AND ${PUBLISHED_VERSION('@merchantId')} IS NOT @heldVersion THEN -1 ELSE 0 END)) AS page
  WHERE s.merchant_id = @merchantId AND ${which}`;

// The summary's fields as the payload states them; excluded is JSON true/false, which json_extract reads as 1/0.
const SUMMARY_COLUMNS = `product_id AS id, json_extract(payload, '$.title') AS title, json_extract(payload, '$.sku') AS sku,
  json_extract(payload, '$.ean') AS ean, json_extract(payload, '$.excluded') AS excluded,
  json_extract(payload, '$.exclusion_reason') AS exclusion_reason`;

/**
 * The store's rows whose `field` is one of the JSON array @values, the first @limit by id: their ids
 * from the field's index alone (migration 44; an equality range per value, sorted), then each row by
 * its primary key, so a value that hundreds of products share reads no more rows than the answer
 * holds. The index is named: with ORDER BY product_id and a LIMIT the planner may prefer walking
 * the whole store in id order by its primary key over sorting the matches.
 */
const STORE_ROWS_OF_KEYS = (field: PublishedKeys['field']) => `published_products WHERE store_id = @storeId AND product_id IN
  (SELECT product_id FROM published_products INDEXED BY published_products_${field}
    WHERE store_id = @storeId AND ${field} IN (SELECT value FROM json_each(@values)) ORDER BY product_id LIMIT @limit)`;

/**
 * `{"id":…,"sku":…,"ean":…,"prices":[…]}` per row of the (ordered) FROM, joined by commas: json()
 * keeps the stored text of each member (number literals and all, so amounts keep the currency's
 * exact precision), as PostgreSQL's json operators do.
 */
const PRICE_AGGREGATE = `CAST(coalesce(group_concat(json_object('id', product_id, 'sku', json(coalesce(payload -> '$.sku', 'null')),
  'ean', json(coalesce(payload -> '$.ean', 'null')), 'prices', json(json_extract(payload, '$.prices'))), ','), '') AS BLOB)`;

function toSummary(row: Row): PublishedProductSummary {
  return {
    id: row.id as number,
    title: row.title as string | null,
    sku: row.sku as string | null,
    ean: row.ean as string | null,
    excluded: row.excluded === 1,
    exclusion_reason: row.exclusion_reason as PublishedProductSummary['exclusion_reason'],
  };
}

/**
 * A write's changes to a store's counts per exclusion reason (published_counts: '' for none) and
 * per block of product ids (published_blocks), gathered row by row and written a statement per key
 * at the end of the write, in its transaction: where a trigger per row upserted both counts rows for
 * each payload inserted, updated or deleted (migration 49 dropped those triggers).
 */
class PublishedCountDeltas {
  private readonly reasons = new Map<string, number>();
  private readonly blocks = new Map<number, number>();

  constructor(private readonly storeId: number) {}

  /** A row's reason before (undefined: no row) and after (undefined: deleted). */
  replaced(productId: number, before: string | null | undefined, after: string | null | undefined): void {
    if (before === after) return;
    if (before !== undefined) this.add(this.reasons, before ?? '', -1);
    if (after !== undefined) this.add(this.reasons, after ?? '', 1);
    if (before === undefined) this.add(this.blocks, productId >> PUBLISHED_BLOCK_BITS, 1);
    else if (after === undefined) this.add(this.blocks, productId >> PUBLISHED_BLOCK_BITS, -1);
  }

  apply(c: SqliteConnection): void {
    for (const [reason, n] of this.reasons) {
      if (n === 0) continue;
      c.stmt(`INSERT INTO published_counts (store_id, exclusion_reason, n) VALUES (?, ?, ?)
        ON CONFLICT (store_id, exclusion_reason) DO UPDATE SET n = n + excluded.n`).run(this.storeId, reason, n);
    }
    for (const [block, n] of this.blocks) {
      if (n === 0) continue;
      c.stmt(`INSERT INTO published_blocks (store_id, block, n) VALUES (?, ?, ?)
        ON CONFLICT (store_id, block) DO UPDATE SET n = n + excluded.n`).run(this.storeId, block, n);
    }
  }

  private add<K>(map: Map<K, number>, key: K, n: number): void {
    map.set(key, (map.get(key) ?? 0) + n);
  }
}

export class SqlitePublished implements PublishedStore {
  static readonly writes = ['upsertPublished', 'updatePublishedPrices', 'deletePublished'] as const;

  constructor(private readonly c: SqliteConnection) {}

  async publishedHashes(storeId: number, productIds: number[]): Promise<Map<number, PublishedHashes>> {
    const hashes = new Map<number, PublishedHashes>();
    if (productIds.length === 0) return hashes;
    // Rows as arrays: an object per row read cost more than the row.
    const rows = this.c
      .stmt(`SELECT product_id, price_hash, content_hash FROM published_products
      WHERE store_id = ? AND product_id IN (SELECT value FROM json_each(?))`)
      .raw()
      .all(storeId, JSON.stringify(productIds)) as [number, string, string][];
    for (const [productId, priceHash, contentHash] of rows) hashes.set(productId, { priceHash, contentHash });
    return hashes;
  }

  async upsertPublished(storeId: number, rows: PublishedRow[], created?: ReadonlySet<number>): Promise<void> {
    if (rows.length === 0) return;
    // The store's counts per exclusion reason and per block of ids follow the rows (kept in code,
    // a delta per key a call: migration 49), from the reasons stored before and written now (none
    // for a product created in this transaction: not looked for).
    const counts = new PublishedCountDeltas(storeId);
    const stored = new Map<number, string | null>();
    const existing = created === undefined ? rows : rows.filter((row) => !created.has(row.productId));
    if (existing.length > 0) {
      for (const [productId, reason] of this.c
        .stmt(
          'SELECT product_id, exclusion_reason FROM published_products WHERE store_id = ? AND product_id IN (SELECT value FROM json_each(?))',
        )
        .raw()
        .all(storeId, JSON.stringify(existing.map((row) => row.productId))) as [number, string | null][]) {
        stored.set(productId, reason);
      }
    }
    const written = (productId: number, reason: string | null) => {
      counts.replaced(productId, stored.has(productId) ? stored.get(productId)! : undefined, reason);
      stored.set(productId, reason);
    };
    // Kept beside the payload: the exclusion reason (the store's counts follow it) and the sku and
    // ean (migration 44's indexes), as resolution decided them, bound by position, up to
    // ROWS_PER_STATEMENT rows a statement (batches.ts); a row without them has them read
    // from its payload by the statement.
    const decided: unknown[] = [];
    let decidedRows = 0;
    for (const [i, row] of rows.entries()) {
      if (i % ROWS_PER_STEP === 0) await yieldToOthers();
      const { exclusionReason, sku, ean } = row;
      if (exclusionReason !== undefined && sku !== undefined && ean !== undefined) {
        decided.push(storeId, row.productId, row.payload, row.priceHash, row.contentHash, exclusionReason, sku, ean);
        decidedRows++;
        continue;
      }
      const reason = this.c
        .stmt(`INSERT INTO published_products (store_id, product_id, payload, price_hash, content_hash, exclusion_reason, sku, ean)
        VALUES (@store, @product, @payload, @price, @content,
          CASE WHEN @knownReason THEN @reason ELSE json_extract(@payload, '$.exclusion_reason') END,
          CASE WHEN @knownFields THEN @sku ELSE json_extract(@payload, '$.sku') END,
          CASE WHEN @knownFields THEN @ean ELSE json_extract(@payload, '$.ean') END)
        ON CONFLICT (store_id, product_id) DO UPDATE SET payload = excluded.payload, price_hash = excluded.price_hash,
          content_hash = excluded.content_hash, exclusion_reason = excluded.exclusion_reason, sku = excluded.sku, ean = excluded.ean
        RETURNING exclusion_reason`)
        .pluck()
        .get({
          store: storeId,
          product: row.productId,
          payload: row.payload,
          price: row.priceHash,
          content: row.contentHash,
          knownReason: exclusionReason === undefined ? 0 : 1,
          reason: exclusionReason ?? null,
          knownFields: sku !== undefined && ean !== undefined ? 1 : 0,
          sku: sku ?? null,
          ean: ean ?? null,
        }) as string | null;
      written(row.productId, reason);
    }
    // The same rows in the same order as a statement a row (SQLite's upsert takes a statement's rows one after another).
    await inBatches(decidedRows, async (from, count) => {
      this.c
        .stmt(`INSERT INTO published_products (store_id, product_id, payload, price_hash, content_hash, exclusion_reason, sku, ean)
        VALUES ${valueRows(count, 8)}
        ON CONFLICT (store_id, product_id) DO UPDATE SET payload = excluded.payload, price_hash = excluded.price_hash,
          content_hash = excluded.content_hash, exclusion_reason = excluded.exclusion_reason, sku = excluded.sku, ean = excluded.ean`)
        .run(decided.slice(from * 8, (from + count) * 8));
    });
    for (let i = 0; i < decidedRows; i++) written(decided[i * 8 + 1] as number, decided[i * 8 + 5] as string | null);
    counts.apply(this.c);
  }

  async updatePublishedPrices(storeId: number, rows: PublishedPriceRow[]): Promise<void> {
    // The row alone is rewritten: no column of an index or of the counting triggers is set. Up to
    // ROWS_PER_STATEMENT rows a statement, matched by (store, product) from a VALUES list.
    await inBatches(rows.length, async (from, count) => {
      const values: unknown[] = [];
      for (let i = from; i < from + count; i++) values.push(rows[i]!.productId, rows[i]!.payload, rows[i]!.priceHash);
      this.c
        .stmt(`WITH v(product_id, payload, price_hash) AS (VALUES ${valueRows(count, 3)})
        UPDATE published_products SET payload = v.payload, price_hash = v.price_hash FROM v
        WHERE published_products.store_id = ? AND published_products.product_id = v.product_id`)
        .run(...values, storeId);
    });
  }

  async deletePublished(storeId: number, productIds: number[]): Promise<void> {
    if (productIds.length === 0) return;
    const counts = new PublishedCountDeltas(storeId);
    for (const [productId, reason] of this.c
      .stmt(
        'DELETE FROM published_products WHERE store_id = ? AND product_id IN (SELECT value FROM json_each(?)) RETURNING product_id, exclusion_reason',
      )
      .raw()
      .all(storeId, JSON.stringify(productIds)) as [number, string | null][]) {
      counts.replaced(productId, reason, undefined);
    }
    counts.apply(this.c);
  }

  async publishedPayload(storeId: number, productId: number): Promise<Uint8Array | undefined> {
    return this.c
      .stmt('SELECT CAST(payload AS BLOB) FROM published_products WHERE store_id = ? AND product_id = ?')
      .pluck()
      .get(storeId, productId) as Uint8Array | undefined;
  }

  async publishedPage(storeId: number, fromId: number, toId: number): Promise<PublishedPage> {
    return this.pageOf(storeId, fromId, toId);
  }

  private pageOf(storeId: number, fromId: number, toId: number): PublishedPage {
    // One UTF-8 buffer built by SQLite: no per-row strings, no re-encoding on the way out; the
    // rows' hashes come from the same scan.
    const [bytes, digests] = this.c
      .stmt(`SELECT ${PAGE_AGGREGATES} FROM
      (SELECT payload, price_hash, content_hash FROM published_products WHERE store_id = ? AND product_id BETWEEN ? AND ? ORDER BY product_id)`)
      .raw()
      .get(storeId, fromId, toId) as [Uint8Array, Uint8Array];
    return { bytes, digests };
  }

  async publishedPageOfStore(merchantId: number, slug: string | undefined, expected: ExpectedStorePage): Promise<StorePageRead> {
    // One statement, so one read transaction (no BEGIN and COMMIT): the store row, the merchant's
    // published version and the page agree; the page's rows are read only when they are wanted.
    const [fromId, toId] = expected.range ?? [1, 0];
    const row = this.c.stmt(slug === undefined ? PAGE_OF_STORE_SQL('s.is_default') : PAGE_OF_STORE_SQL('s.slug = @slug')).get({
      merchantId,
      storeId: expected.storeId,
      catalogVersion: expected.catalogVersion,
      fromId,
      toId,
      heldVersion: expected.heldVersion ?? null,
      ...(slug === undefined ? {} : { slug }),
    }) as Row | undefined;
    if (!row) return { store: undefined, publishedVersion: 0, page: null };
    const store = toStore(row);
    const publishedVersion = row.published_version as number;
    if (store.id !== expected.storeId || store.catalog_version !== expected.catalogVersion || publishedVersion === expected.heldVersion) {
      return { store, publishedVersion, page: null };
    }
    return { store, publishedVersion, page: { bytes: row.page_bytes as Uint8Array, digests: row.page_digests as Uint8Array } };
  }

  async storeAtPublishedVersion(merchantId: number, slug: string | undefined): Promise<PublishedVersionRead> {
    const columns = `*, ${PUBLISHED_VERSION('@merchantId')} AS published_version`;
    const row = (
      slug === undefined
        ? this.c.stmt(`SELECT ${columns} FROM stores WHERE merchant_id = @merchantId AND is_default`).get({ merchantId })
        : this.c.stmt(`SELECT ${columns} FROM stores WHERE merchant_id = @merchantId AND slug = @slug`).get({ merchantId, slug })
    ) as Row | undefined;
    return row ? { store: toStore(row), publishedVersion: row.published_version as number } : { store: undefined, publishedVersion: 0 };
  }

  async publishedHashesAfter(storeId: number, afterId: number, limit: number): Promise<Map<number, PublishedHashes>> {
    const rows = this.c
      .stmt(
        'SELECT product_id, price_hash, content_hash FROM published_products WHERE store_id = ? AND product_id > ? ORDER BY product_id LIMIT ?',
      )
      .raw()
      .all(storeId, afterId, limit) as [number, string, string][];
    const hashes = new Map<number, PublishedHashes>();
    for (const [productId, priceHash, contentHash] of rows) hashes.set(productId, { priceHash, contentHash });
    return hashes;
  }

  async publishedProductIds(storeId: number): Promise<number[]> {
    return this.c.stmt('SELECT product_id FROM published_products WHERE store_id = ? ORDER BY product_id').pluck().all(storeId) as number[];
  }

  async publishedBlocks(storeId: number): Promise<PublishedBlock[]> {
    return this.c
      .stmt('SELECT block, n AS count FROM published_blocks WHERE store_id = ? AND n > 0 ORDER BY block')
      .all(storeId) as PublishedBlock[];
  }

  async publishedWindow(storeId: number, window: PublishedIdWindow, countIn?: [number, number]): Promise<PublishedWindowRead> {
    // One statement (one read): the window from the primary key's index range, skipping at most a
    // block's ids plus a page's, and the count within one block.
    const row = this.c
      .stmt(`WITH w AS (SELECT product_id FROM published_products WHERE store_id = @store AND product_id >= @fromId
        ORDER BY product_id LIMIT @limit OFFSET @skip)
      SELECT (SELECT catalog_version FROM stores WHERE id = @store) AS catalog_version, min(product_id) AS first_id, max(product_id) AS last_id,
        count(*) AS n, (SELECT count(*) FROM published_products WHERE store_id = @store AND product_id BETWEEN @countFrom AND @countTo) AS counted
      FROM w`)
      .get({ store: storeId, ...window, countFrom: countIn?.[0] ?? 1, countTo: countIn?.[1] ?? 0 }) as Row;
    return {
      catalogVersion: (row.catalog_version as number | null) ?? undefined,
      firstId: row.first_id as number | null,
      lastId: row.last_id as number | null,
      count: row.n as number,
      counted: row.counted as number,
    };
  }

  async publishedPayloadsByIds(storeId: number, productIds: number[]): Promise<PublishedPayloads> {
    const [bytes, digests, count, publishedVersion] = this.c
      .stmt(`SELECT ${PAGE_AGGREGATES}, count(*),
        ${PUBLISHED_VERSION('(SELECT merchant_id FROM stores WHERE id = @storeId)')} FROM
      (SELECT payload, price_hash, content_hash FROM published_products
        WHERE store_id = @storeId AND product_id IN (SELECT value FROM json_each(@ids)) ORDER BY product_id)`)
      .raw()
      .get({ storeId, ids: JSON.stringify(productIds) }) as [Uint8Array, Uint8Array, number, number];
    return { bytes, digests, count, publishedVersion };
  }

  async publishedLinesAfter(storeId: number, afterId: number, limit: number): Promise<PublishedLines> {
    // One range of the primary key, joined by SQLite into one UTF-8 buffer (as a page is).
    const [bytes, count, lastId] = this.c
      .stmt(`SELECT CAST(coalesce(group_concat(payload, char(10)) || char(10), '') AS BLOB), count(*), max(product_id)
      FROM (SELECT product_id, payload FROM published_products WHERE store_id = ? AND product_id > ? ORDER BY product_id LIMIT ?)`)
      .raw()
      .get(storeId, afterId, limit) as [Uint8Array, number, number | null];
    return { bytes, count, lastId };
  }

  async publishedPayloadsByKeys(storeId: number, keys: PublishedKeys, limit: number): Promise<PublishedPayloads> {
    const [bytes, digests, count, publishedVersion] = this.c
      .stmt(`SELECT ${PAGE_AGGREGATES}, count(*),
        ${PUBLISHED_VERSION('(SELECT merchant_id FROM stores WHERE id = @storeId)')} FROM
      (SELECT payload, price_hash, content_hash FROM ${STORE_ROWS_OF_KEYS(keys.field)} ORDER BY product_id LIMIT @limit)`)
      .raw()
      .get({ storeId, values: JSON.stringify(keys.values), limit }) as [Uint8Array, Uint8Array, number, number];
    return { bytes, digests, count, publishedVersion };
  }

  async publishedPricesByIds(storeId: number, productIds: number[]): Promise<Uint8Array> {
    return this.c
      .stmt(`SELECT ${PRICE_AGGREGATE} FROM (SELECT product_id, payload FROM published_products
        WHERE store_id = ? AND product_id IN (SELECT value FROM json_each(?)) ORDER BY product_id)`)
      .pluck()
      .get(storeId, JSON.stringify(productIds)) as Uint8Array;
  }

  async publishedPricesByKeys(storeId: number, keys: PublishedKeys, limit: number): Promise<PublishedPrices> {
    const [bytes, count] = this.c
      .stmt(`SELECT ${PRICE_AGGREGATE}, count(*) FROM
      (SELECT product_id, payload FROM ${STORE_ROWS_OF_KEYS(keys.field)} ORDER BY product_id LIMIT @limit)`)
      .raw()
      .get({ storeId, values: JSON.stringify(keys.values), limit }) as [Uint8Array, number];
    return { bytes, count };
  }

  async findPublishedProducts(storeId: number, match: { sku?: string; ean?: string }, limit: number): Promise<PublishedProductSummary[]> {
    // An equality on an indexed column (migration 44) reads the index range of the store's matches
    // in product id order; the other field, when given too, filters that range.
    const fields = (['sku', 'ean'] as const).filter((field) => match[field] !== undefined);
    if (fields.length === 0) return [];
    const conditions = fields.map((field) => `AND published_products.${field} = @${field}`).join(' ');
    const rows = this.c
      .stmt(`SELECT ${SUMMARY_COLUMNS} FROM published_products
      WHERE store_id = @storeId ${conditions} ORDER BY product_id LIMIT @limit`)
      .all({ storeId, ...Object.fromEntries(fields.map((field) => [field, match[field]])), limit }) as Row[];
    return rows.map(toSummary);
  }

  async publishedSummaries(storeId: number, window: PublishedSummaryWindow): Promise<PublishedProductSummary[]> {
    // The excluded ones from their own index range (migration 17), not a filter over every row.
    const sql = window.excludedOnly
      ? `SELECT ${SUMMARY_COLUMNS} FROM published_products INDEXED BY published_products_excluded
        WHERE store_id = @storeId AND product_id > @afterId AND exclusion_reason IS NOT NULL ORDER BY product_id LIMIT @limit`
      : `SELECT ${SUMMARY_COLUMNS} FROM published_products WHERE store_id = @storeId AND product_id > @afterId ORDER BY product_id LIMIT @limit`;
    const rows = this.c.stmt(sql).all({ storeId, afterId: window.afterId, limit: window.limit }) as Row[];
    return rows.map(toSummary);
  }

  async publishedCountsByExclusion(storeId: number): Promise<PublishedExclusionCounts> {
    // The counts kept per store and reason (migration 17's triggers), not a count of the rows.
    const rows = this.c.stmt('SELECT exclusion_reason AS reason, n FROM published_counts WHERE store_id = ?').all(storeId) as {
      reason: string;
      n: number;
    }[];
    const counts: PublishedExclusionCounts = { total: 0, excluded: { manual: 0, missing_title: 0, no_offers: 0, out_of_stock: 0 } };
    for (const { reason, n } of rows) {
      counts.total += n;
      if (reason !== '') counts.excluded[reason as keyof PublishedExclusionCounts['excluded']] = n;
    }
    return counts;
  }
}
