// Published payloads per (store, product) on SQLite, and the public API's reads over them: SQLite
// joins a page's payloads into one UTF-8 buffer that goes out unchanged.
import type { PublishedStore } from '../port.js';
import type {
  ExpectedStorePage, PublishedExclusionCounts, PublishedHashes, PublishedPage, PublishedProductSummary, PublishedRow,
  PublishedSummaryWindow, StorePageRead,
} from '../records.js';
import type { Row, SqliteConnection } from './connection.js';
import { toStore } from '../rows.js';

const EMPTY = new Uint8Array(0);

// The summary's fields as the payload states them; excluded is JSON true/false, which json_extract reads as 1/0.
const SUMMARY_COLUMNS = `product_id AS id, json_extract(payload, '$.title') AS title, json_extract(payload, '$.sku') AS sku,
  json_extract(payload, '$.ean') AS ean, json_extract(payload, '$.excluded') AS excluded,
  json_extract(payload, '$.exclusion_reason') AS exclusion_reason`;

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

export class SqlitePublished implements PublishedStore {
  static readonly writes = ['upsertPublished', 'deletePublished'] as const;

  constructor(private readonly c: SqliteConnection) {}

  async publishedHashes(storeId: number, productIds: number[]): Promise<Map<number, PublishedHashes>> {
    const hashes = new Map<number, PublishedHashes>();
    if (productIds.length === 0) return hashes;
    const rows = this.c.stmt(`SELECT product_id, price_hash, content_hash FROM published_products
      WHERE store_id = ? AND product_id IN (SELECT value FROM json_each(?))`).all(storeId, JSON.stringify(productIds)) as Row[];
    for (const r of rows) hashes.set(r.product_id as number, { priceHash: r.price_hash as string, contentHash: r.content_hash as string });
    return hashes;
  }

  async upsertPublished(storeId: number, rows: PublishedRow[]): Promise<void> {
    const upsert = this.c.stmt(`INSERT INTO published_products (store_id, product_id, payload, price_hash, content_hash)
      VALUES (?, ?, ?, ?, ?)
      ON CONFLICT (store_id, product_id) DO UPDATE SET payload = excluded.payload,
        price_hash = excluded.price_hash, content_hash = excluded.content_hash`);
    for (const row of rows) upsert.run(storeId, row.productId, row.payload, row.priceHash, row.contentHash);
  }

  async deletePublished(storeId: number, productIds: number[]): Promise<void> {
    if (productIds.length === 0) return;
    this.c.stmt('DELETE FROM published_products WHERE store_id = ? AND product_id IN (SELECT value FROM json_each(?))')
      .run(storeId, JSON.stringify(productIds));
  }

  async publishedPayload(storeId: number, productId: number): Promise<Uint8Array | undefined> {
    return this.c.stmt('SELECT CAST(payload AS BLOB) FROM published_products WHERE store_id = ? AND product_id = ?')
      .pluck().get(storeId, productId) as Uint8Array | undefined;
  }

  async publishedPage(storeId: number, fromId: number, toId: number): Promise<PublishedPage> {
    return this.pageOf(storeId, fromId, toId);
  }

  private pageOf(storeId: number, fromId: number, toId: number): PublishedPage {
    // One UTF-8 buffer built by SQLite: no per-row strings, no re-encoding on the way out; the
    // rows' hashes come from the same scan.
    const [bytes, digests] = this.c.stmt(`SELECT CAST(coalesce(group_concat(payload, ','), '') AS BLOB),
      CAST(coalesce(group_concat(price_hash || content_hash, ''), '') AS BLOB) FROM
      (SELECT payload, price_hash, content_hash FROM published_products WHERE store_id = ? AND product_id BETWEEN ? AND ? ORDER BY product_id)`)
      .raw().get(storeId, fromId, toId) as [Uint8Array, Uint8Array];
    return { bytes, digests };
  }

  async publishedPageOfStore(merchantId: number, slug: string | undefined, expected: ExpectedStorePage): Promise<StorePageRead> {
    // Both statements in one read transaction (or the snapshot's or transaction's own), so another
    // process's commit cannot come between the store row and the page.
    const read = (): StorePageRead => {
      const row = (slug === undefined
        ? this.c.stmt('SELECT * FROM stores WHERE merchant_id = ? AND is_default').get(merchantId)
        : this.c.stmt('SELECT * FROM stores WHERE merchant_id = ? AND slug = ?').get(merchantId, slug)) as Row | undefined;
      if (!row) return { store: undefined, page: null };
      const store = toStore(row);
      if (store.id !== expected.storeId || store.catalog_version !== expected.catalogVersion) return { store, page: null };
      if (!expected.range) return { store, page: { bytes: EMPTY, digests: EMPTY } };
      return { store, page: this.pageOf(store.id, expected.range[0], expected.range[1]) };
    };
    return this.c.db.inTransaction ? read() : this.c.db.transaction(read)();
  }

  async publishedProductIds(storeId: number): Promise<number[]> {
    return this.c.stmt('SELECT product_id FROM published_products WHERE store_id = ? ORDER BY product_id')
      .pluck().all(storeId) as number[];
  }

  async publishedPayloadsByIds(storeId: number, productIds: number[]): Promise<{ bytes: Uint8Array; count: number }> {
    const row = this.c.stmt(`SELECT CAST(coalesce(group_concat(payload, ','), '') AS BLOB) AS bytes, count(*) AS count FROM
      (SELECT payload FROM published_products
        WHERE store_id = ? AND product_id IN (SELECT value FROM json_each(?)) ORDER BY product_id)`)
      .get(storeId, JSON.stringify(productIds)) as { bytes: Uint8Array; count: number };
    return row;
  }

  async publishedPricesByIds(storeId: number, productIds: number[]): Promise<Uint8Array> {
    // json() keeps the stored number literals, so amounts keep the currency's exact precision.
    return this.c.stmt(`SELECT CAST(coalesce(group_concat(json_object('id', product_id, 'prices', json(json_extract(payload, '$.prices'))), ','), '') AS BLOB)
      FROM (SELECT product_id, payload FROM published_products
        WHERE store_id = ? AND product_id IN (SELECT value FROM json_each(?)) ORDER BY product_id)`)
      .pluck().get(storeId, JSON.stringify(productIds)) as Uint8Array;
  }

  async findPublishedProducts(storeId: number, match: { sku?: string; ean?: string }, limit: number): Promise<PublishedProductSummary[]> {
    // An equality on an indexed expression (migration 12) reads the index range of the store's
    // matches in product id order; the other field, when given too, filters that range.
    const fields = (['sku', 'ean'] as const).filter((field) => match[field] !== undefined);
    if (fields.length === 0) return [];
    const conditions = fields.map((field) => `AND json_extract(payload, '$.${field}') = @${field}`).join(' ');
    const rows = this.c.stmt(`SELECT ${SUMMARY_COLUMNS} FROM published_products
      WHERE store_id = @storeId ${conditions} ORDER BY product_id LIMIT @limit`)
      .all({ storeId, ...Object.fromEntries(fields.map((field) => [field, match[field]])), limit }) as Row[];
    return rows.map(toSummary);
  }

  async publishedSummaries(storeId: number, window: PublishedSummaryWindow): Promise<PublishedProductSummary[]> {
    const rows = this.c.stmt(`SELECT ${SUMMARY_COLUMNS} FROM published_products
      WHERE store_id = @storeId AND product_id > @afterId
        AND (@excludedOnly = 0 OR json_extract(payload, '$.excluded') = 1)
      ORDER BY product_id LIMIT @limit`)
      .all({ storeId, afterId: window.afterId, excludedOnly: window.excludedOnly ? 1 : 0, limit: window.limit }) as Row[];
    return rows.map(toSummary);
  }

  async publishedCountsByExclusion(storeId: number): Promise<PublishedExclusionCounts> {
    // One scan of the store's rows (the primary key's prefix); the reason is read from the payload as published.
    const rows = this.c.stmt(`SELECT json_extract(payload, '$.exclusion_reason') AS reason, count(*) AS n
      FROM published_products WHERE store_id = ? GROUP BY reason`).all(storeId) as { reason: string | null; n: number }[];
    const counts: PublishedExclusionCounts = { total: 0, excluded: { manual: 0, missing_title: 0, no_offers: 0, out_of_stock: 0 } };
    for (const { reason, n } of rows) {
      counts.total += n;
      if (reason !== null) counts.excluded[reason as keyof PublishedExclusionCounts['excluded']] = n;
    }
    return counts;
  }
}
