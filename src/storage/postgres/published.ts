// Published payloads per (store, product) on PostgreSQL, and the public API's reads over them. A
// page is one range scan of the primary key that PostgreSQL joins into one string (string_agg in
// product id order): no OFFSET, no per-row values, no JSON parsing; the string's UTF-8 bytes are
// the payloads exactly as the domain wrote them (the database encoding must be UTF8).
// Payloads are text, not bytea: measured on a 50-row page (132 KB), text answered in ~1.0 ms against
// bytea's ~1.2 ms (bytea travels as hex, twice the bytes) for the same Node CPU (~0.8 ms), and json's
// operators read text directly. `pg` (8.23) decodes every field as UTF-8 into a string, also with
// `binary: true` (brianc/node-postgres#3495), so the page's bytes cost a decode and a Buffer.from;
// measured on the demo's 155 KB page 1 (docs/benchmarks/log.md), sending them as bytea (hex) or as base64 of
// them saved node at most ~0.1 ms of that and cost PostgreSQL ~0.4 ms more to encode: text stays.
import { booleanArray, integerArray, joinJsonTexts, splitJsonTexts, textArray } from './json-texts.js';
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
import type { PgConnection, Row } from './connection.js';
import { toStore } from '../rows.js';
import { STORE_COLUMNS } from '../sql/tenancy.js';

// The summary's fields as the payload states them, each payload parsed once (json keeps the text;
// a field that is not a JSON string reads as its JSON text, like SQLite's json_extract).
const SUMMARY_FROM = `published_products,
  LATERAL json_to_record(payload::json) AS p(title text, sku text, ean text, excluded boolean, exclusion_reason text)`;
const SUMMARY_COLUMNS = 'product_id AS id, p.title, p.sku, p.ean, coalesce(p.excluded, false) AS excluded, p.exclusion_reason';

function toSummary(row: Row): PublishedProductSummary {
  return {
    id: row.id as number,
    title: row.title as string | null,
    sku: row.sku as string | null,
    ean: row.ean as string | null,
    excluded: row.excluded as boolean,
    exclusion_reason: row.exclusion_reason as PublishedProductSummary['exclusion_reason'],
  };
}

const utf8 = (text: string) => Buffer.from(text, 'utf8');

/**
 * The payload's sku and ean as `payload::json ->> field` reads them, when both are a JSON string or
 * null (or absent); undefined otherwise (another JSON value, whose text only the payload has, or a
 * payload that is not a JSON object, or not JSON: the statement's own parse refuses it), and the
 * statement reads them from the payload.
 */
function skuAndEan(payload: string): { sku: string | null; ean: string | null } | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(payload);
  } catch {
    return undefined;
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return undefined;
  const { sku = null, ean = null } = parsed as { sku?: unknown; ean?: unknown };
  return (sku === null || typeof sku === 'string') && (ean === null || typeof ean === 'string') ? { sku, ean } : undefined;
}

/** A page's payloads and their digests from one scan of the rows the WHERE clause keeps. */
const PAGE_AGGREGATES = `coalesce(string_agg(payload, ',' ORDER BY product_id), '') AS page_bytes,
  coalesce(string_agg(price_hash || content_hash, '' ORDER BY product_id), '') AS page_digests`;

const EMPTY = Buffer.alloc(0);

/**
 * The store's rows of the ids in $2 (each once), a probe of the primary key per id, each its own
 * subquery (OFFSET 0 keeps it one): as `product_id = ANY($2)` a table without statistics yet (a
 * large import's first chunks, before autovacuum's ANALYZE) had the planner filter every row of the store.
 */
const STORE_ROWS_OF_IDS = (columns: string) => `(SELECT DISTINCT id FROM unnest($2::bigint[]) AS i(id)) AS u
  CROSS JOIN LATERAL (SELECT ${columns} FROM published_products WHERE store_id = $1 AND product_id = u.id OFFSET 0) AS p`;

/**
 * The store's rows whose `field` is one of the values in $2 (each once), ascending by id, at most
 * $3: an equality range of the field's index (migration 23) per value, each its own subquery read
 * in id order and cut at $3 (a value that hundreds of products share reads no more than the answer
 * may hold), then the first $3 of them all.
 */
const STORE_ROWS_OF_KEYS = (field: PublishedKeys['field'], columns: string) => `(SELECT p.* FROM
  (SELECT DISTINCT value FROM unnest($2::text[]) AS k(value)) AS k
  CROSS JOIN LATERAL (SELECT ${columns} FROM published_products WHERE store_id = $1 AND ${field} = k.value ORDER BY product_id LIMIT $3) AS p
  ORDER BY p.product_id LIMIT $3) AS published_products`;

/**
 * `{"id":…,"sku":…,"ean":…,"prices":[…]}` per row, in id order, joined by commas: json (not jsonb)
 * keeps the stored text of each member, number literals and all, so amounts keep the currency's
 * exact precision: the same bytes as SQLite's json().
 */
const PRICE_AGGREGATE = `coalesce(string_agg('{"id":' || product_id || ',"sku":' || coalesce((j -> 'sku')::text, 'null')
  || ',"ean":' || coalesce((j -> 'ean')::text, 'null') || ',"prices":' || coalesce((j -> 'prices')::text, 'null')
  || '}', ',' ORDER BY product_id), '')`;

/** The rows of `from` with their payload parsed once (as `j`), for PRICE_AGGREGATE. */
const PARSED = (from: string) => `(SELECT product_id, payload::json AS j FROM ${from}) AS parsed`;

/** The merchant's published version (records.ts PublishedVersionRead): the position of its latest change. */
const PUBLISHED_VERSION = (merchantId: string) => `coalesce((SELECT last_id FROM change_sequences WHERE merchant_id = ${merchantId}), 0)`;

/**
 * A merchant's store as `which` picks it, the merchant's published version, and the page of its rows
 * when it is store $2 at catalog version $3 and the version is not $6 (the one whose rows the reader holds).
 */
const PAGE_OF_STORE_SQL = (which: string) => `SELECT ${STORE_COLUMNS.map((column) => `s.${column}`).join(', ')},
    version.published_version, page.page_bytes, page.page_digests
  FROM stores AS s CROSS JOIN (SELECT ${PUBLISHED_VERSION('$1')} AS published_version) AS version
  CROSS JOIN LATERAL (SELECT ${PAGE_AGGREGATES} FROM published_products
    WHERE s.id = $2 AND s.catalog_version = $3 AND version.published_version IS DISTINCT FROM $6::bigint
      AND store_id = $2 AND product_id BETWEEN $4 AND $5) AS page
  WHERE s.merchant_id = $1 AND ${which}`;

export class PgPublished implements PublishedStore {
  static readonly writes = ['upsertPublished', 'updatePublishedPrices', 'deletePublished'] as const;

  constructor(private readonly c: PgConnection) {}

  async publishedHashes(storeId: number, productIds: number[]): Promise<Map<number, PublishedHashes>> {
    const hashes = new Map<number, PublishedHashes>();
    if (productIds.length === 0) return hashes;
    const rows = await this.c.rows<{ product_id: number; price_hash: string; content_hash: string }>(
      `SELECT product_id, price_hash, content_hash FROM ${STORE_ROWS_OF_IDS('product_id, price_hash, content_hash')} ORDER BY product_id`,
      [storeId, integerArray(productIds)],
    );
    for (const r of rows) hashes.set(r.product_id, { priceHash: r.price_hash, contentHash: r.content_hash });
    return hashes;
  }

  async upsertPublished(storeId: number, rows: PublishedRow[], created?: ReadonlySet<number>): Promise<void> {
    if (rows.length === 0) return;
    // One statement for the batch; a product listed twice keeps its last row (as one upsert per row would).
    const last = new Map(rows.map((row) => [row.productId, row]));
    const batch = [...last.values()];
    // The rows of products created in this transaction are inserted without ON CONFLICT: no row of
    // theirs can exist, and the conflict check cost a probe of the primary key and a speculative
    // insertion per row (a third of an insert's time); any other row may meet one.
    const fresh = created === undefined || created.size === 0 ? [] : batch.filter((row) => created.has(row.productId));
    if (fresh.length === batch.length) return this.writePublished(storeId, batch, false);
    if (fresh.length > 0) await this.writePublished(storeId, fresh, false);
    await this.writePublished(storeId, fresh.length > 0 ? batch.filter((row) => !created!.has(row.productId)) : batch, true);
  }

  /** upsertPublished's statement: the rows inserted, replacing a stored one only when `replacing`. */
  private async writePublished(storeId: number, batch: PublishedRow[], replacing: boolean): Promise<void> {
    // Kept beside the payload: the exclusion reason (the store's counts follow it: migration 17) as
    // resolution decided it, and the SKU and EAN (migration 23's indexes) as read here; a value not
    // known here is read from the payload by the statement.
    const fields = batch.map((r) => (r.sku !== undefined && r.ean !== undefined ? { sku: r.sku, ean: r.ean } : skuAndEan(r.payload)));
    await this.c.run(
      `INSERT INTO published_products (store_id, product_id, payload, price_hash, content_hash, exclusion_reason, sku, ean)
      SELECT $1, product_id, payload, price_hash, content_hash, CASE WHEN known THEN reason ELSE payload::json ->> 'exclusion_reason' END,
        CASE WHEN fields_known THEN sku ELSE payload::json ->> 'sku' END, CASE WHEN fields_known THEN ean ELSE payload::json ->> 'ean' END
      FROM unnest($2::bigint[], ${splitJsonTexts('$3')}, $4::text[], $5::text[], $6::boolean[], $7::text[], $8::boolean[], $9::text[], $10::text[])
        AS row (product_id, payload, price_hash, content_hash, known, reason, fields_known, sku, ean)
      ${
        replacing
          ? `ON CONFLICT (store_id, product_id) DO UPDATE SET payload = excluded.payload, price_hash = excluded.price_hash,
        content_hash = excluded.content_hash, exclusion_reason = excluded.exclusion_reason, sku = excluded.sku, ean = excluded.ean`
          : ''
      }`,
      [
        storeId,
        integerArray(batch.map((r) => r.productId)),
        joinJsonTexts(batch.map((r) => r.payload)),
        textArray(batch.map((r) => r.priceHash)),
        textArray(batch.map((r) => r.contentHash)),
        booleanArray(batch.map((r) => r.exclusionReason !== undefined)),
        textArray(batch.map((r) => r.exclusionReason ?? null)),
        booleanArray(fields.map((f) => f !== undefined)),
        textArray(fields.map((f) => f?.sku ?? null)),
        textArray(fields.map((f) => f?.ean ?? null)),
      ],
    );
  }

  async updatePublishedPrices(storeId: number, rows: PublishedPriceRow[]): Promise<void> {
    if (rows.length === 0) return;
    // One statement for the batch (a product listed twice keeps its last row); no indexed column is
    // set, so each row can be updated in place (HOT). The store a column of the rows, as in deletePublished.
    const batch = [...new Map(rows.map((row) => [row.productId, row])).values()];
    await this.c.run(
      `UPDATE published_products AS p SET payload = u.payload, price_hash = u.price_hash
      FROM unnest($1::bigint[], $2::bigint[], ${splitJsonTexts('$3')}, $4::text[]) AS u (store_id, product_id, payload, price_hash)
      WHERE p.store_id = u.store_id AND p.product_id = u.product_id`,
      [
        integerArray(batch.map(() => storeId)),
        integerArray(batch.map((r) => r.productId)),
        joinJsonTexts(batch.map((r) => r.payload)),
        textArray(batch.map((r) => r.priceHash)),
      ],
    );
  }

  async deletePublished(storeId: number, productIds: number[]): Promise<void> {
    if (productIds.length === 0) return;
    // The store a column of the rows, not a constant: with `store_id = $1` a table without
    // statistics yet is estimated at a few dozen rows of the store, and the planner read all of them
    // (20,000 for a chunk of 500); here its choice is a probe of the primary key per id or a scan of
    // the whole table, whose size it knows without statistics.
    await this.c.run(
      `DELETE FROM published_products AS p USING unnest($1::bigint[], $2::bigint[]) AS u(store_id, product_id)
      WHERE p.store_id = u.store_id AND p.product_id = u.product_id`,
      [integerArray(productIds.map(() => storeId)), integerArray(productIds)],
    );
  }

  async publishedPayload(storeId: number, productId: number): Promise<Uint8Array | undefined> {
    const row = await this.c.one<{ payload: string }>('SELECT payload FROM published_products WHERE store_id = $1 AND product_id = $2', [
      storeId,
      productId,
    ]);
    return row && utf8(row.payload);
  }

  async publishedPage(storeId: number, fromId: number, toId: number): Promise<PublishedPage> {
    // The rows' hashes come from the same scan.
    const row = await this.c.one<{ page_bytes: string; page_digests: string }>(
      `SELECT ${PAGE_AGGREGATES}
      FROM published_products WHERE store_id = $1 AND product_id BETWEEN $2 AND $3`,
      [storeId, fromId, toId],
    );
    return { bytes: utf8(row!.page_bytes), digests: utf8(row!.page_digests) };
  }

  async publishedPageOfStore(merchantId: number, slug: string | undefined, expected: ExpectedStorePage): Promise<StorePageRead> {
    // One statement, so one snapshot: the store row, the merchant's published version and the page
    // agree without BEGIN and COMMIT round trips. The page's scan runs only when the row is the
    // expected store at the expected catalog version and the reader does not hold the rows at this
    // published version (otherwise its conditions are false before any row is read). Prepared:
    // planning it cost about as much as running it.
    const [fromId, toId] = expected.range ?? [1, 0];
    const row = await this.c.prepared(
      slug === undefined ? 'publishedPageOfDefaultStore' : 'publishedPageOfStore',
      slug === undefined ? PAGE_OF_STORE_SQL('s.is_default') : PAGE_OF_STORE_SQL('s.slug = $7'),
      [
        merchantId,
        expected.storeId,
        expected.catalogVersion,
        fromId,
        toId,
        expected.heldVersion ?? null,
        ...(slug === undefined ? [] : [slug]),
      ],
    );
    if (!row) return { store: undefined, publishedVersion: 0, page: null };
    const store = toStore(row);
    const publishedVersion = row.published_version as number;
    if (store.id !== expected.storeId || store.catalog_version !== expected.catalogVersion || publishedVersion === expected.heldVersion) {
      return { store, publishedVersion, page: null };
    }
    return { store, publishedVersion, page: { bytes: utf8(row.page_bytes as string), digests: utf8(row.page_digests as string) } };
  }

  async storeAtPublishedVersion(merchantId: number, slug: string | undefined): Promise<PublishedVersionRead> {
    const columns = `${STORE_COLUMNS.join(', ')}, ${PUBLISHED_VERSION('$1')} AS published_version`;
    const row =
      slug === undefined
        ? await this.c.one(`SELECT ${columns} FROM stores WHERE merchant_id = $1 AND is_default`, [merchantId])
        : await this.c.one(`SELECT ${columns} FROM stores WHERE merchant_id = $1 AND slug = $2`, [merchantId, slug]);
    return row ? { store: toStore(row), publishedVersion: row.published_version as number } : { store: undefined, publishedVersion: 0 };
  }

  async publishedHashesAfter(storeId: number, afterId: number, limit: number): Promise<Map<number, PublishedHashes>> {
    const rows = await this.c.rows<{ product_id: number; price_hash: string; content_hash: string }>(
      'SELECT product_id, price_hash, content_hash FROM published_products WHERE store_id = $1 AND product_id > $2 ORDER BY product_id LIMIT $3',
      [storeId, afterId, limit],
    );
    const hashes = new Map<number, PublishedHashes>();
    for (const r of rows) hashes.set(r.product_id, { priceHash: r.price_hash, contentHash: r.content_hash });
    return hashes;
  }

  async publishedProductIds(storeId: number): Promise<number[]> {
    return (
      await this.c.rows<{ product_id: number }>('SELECT product_id FROM published_products WHERE store_id = $1 ORDER BY product_id', [
        storeId,
      ])
    ).map((r) => r.product_id);
  }

  async publishedBlocks(storeId: number): Promise<PublishedBlock[]> {
    return this.c.rows<PublishedBlock & Row>(
      'SELECT block, n AS count FROM published_blocks WHERE store_id = $1 AND n > 0 ORDER BY block',
      [storeId],
    );
  }

  async publishedWindow(storeId: number, window: PublishedIdWindow, countIn?: [number, number]): Promise<PublishedWindowRead> {
    // One statement (one read): the window from the primary key's index range, skipping at most a
    // block's ids plus a page's, and the count within one block.
    const row = await this.c.one(
      `WITH w AS (SELECT product_id FROM published_products WHERE store_id = $1 AND product_id >= $2
        ORDER BY product_id LIMIT $3 OFFSET $4)
      SELECT (SELECT catalog_version FROM stores WHERE id = $1) AS catalog_version, min(product_id) AS first_id, max(product_id) AS last_id,
        count(*)::integer AS n, (SELECT count(*)::integer FROM published_products WHERE store_id = $1 AND product_id BETWEEN $5 AND $6) AS counted
      FROM w`,
      [storeId, window.fromId, window.limit, window.skip, countIn?.[0] ?? 1, countIn?.[1] ?? 0],
    );
    return {
      catalogVersion: (row!.catalog_version as number | null) ?? undefined,
      firstId: row!.first_id as number | null,
      lastId: row!.last_id as number | null,
      count: row!.n as number,
      counted: row!.counted as number,
    };
  }

  async publishedPayloadsByIds(storeId: number, productIds: number[]): Promise<PublishedPayloads> {
    const row = await this.c.one<{ page_bytes: string; page_digests: string; count: number; published_version: number }>(
      `SELECT
        ${PAGE_AGGREGATES}, count(*) AS count, ${PUBLISHED_VERSION('(SELECT merchant_id FROM stores WHERE id = $1)')} AS published_version
      FROM ${STORE_ROWS_OF_IDS('product_id, payload, price_hash, content_hash')}`,
      [storeId, productIds],
    );
    return { bytes: utf8(row!.page_bytes), digests: utf8(row!.page_digests), count: row!.count, publishedVersion: row!.published_version };
  }

  async publishedLinesAfter(storeId: number, afterId: number, limit: number): Promise<PublishedLines> {
    // One range of the primary key, joined by PostgreSQL into one string (as a page is).
    const row = await this.c.one<{ lines: string; n: number; last_id: number | null }>(
      `SELECT
        coalesce(string_agg(payload, chr(10) ORDER BY product_id) || chr(10), '') AS lines, count(*)::integer AS n, max(product_id) AS last_id
      FROM (SELECT product_id, payload FROM published_products WHERE store_id = $1 AND product_id > $2 ORDER BY product_id LIMIT $3) AS step`,
      [storeId, afterId, limit],
    );
    return { bytes: row!.n === 0 ? EMPTY : utf8(row!.lines), count: row!.n, lastId: row!.last_id };
  }

  async publishedPayloadsByKeys(storeId: number, keys: PublishedKeys, limit: number): Promise<PublishedPayloads> {
    const row = await this.c.one<{ page_bytes: string; page_digests: string; count: number; published_version: number }>(
      `SELECT
        ${PAGE_AGGREGATES}, count(*) AS count, ${PUBLISHED_VERSION('(SELECT merchant_id FROM stores WHERE id = $1)')} AS published_version
      FROM ${STORE_ROWS_OF_KEYS(keys.field, 'product_id, payload, price_hash, content_hash')}`,
      [storeId, textArray(keys.values), limit],
    );
    return { bytes: utf8(row!.page_bytes), digests: utf8(row!.page_digests), count: row!.count, publishedVersion: row!.published_version };
  }

  async publishedPricesByIds(storeId: number, productIds: number[]): Promise<Uint8Array> {
    if (productIds.length === 0) return EMPTY;
    const row = await this.c.one<{ bytes: string }>(
      `SELECT ${PRICE_AGGREGATE} AS bytes FROM ${PARSED(STORE_ROWS_OF_IDS('product_id, payload'))}`,
      [storeId, productIds],
    );
    return utf8(row!.bytes);
  }

  async publishedPricesByKeys(storeId: number, keys: PublishedKeys, limit: number): Promise<PublishedPrices> {
    const row = await this.c.one<{ bytes: string; count: number }>(
      `SELECT ${PRICE_AGGREGATE} AS bytes, count(*)::integer AS count FROM ${PARSED(STORE_ROWS_OF_KEYS(keys.field, 'product_id, payload'))}`,
      [storeId, textArray(keys.values), limit],
    );
    return { bytes: utf8(row!.bytes), count: row!.count };
  }

  async findPublishedProducts(storeId: number, match: { sku?: string; ean?: string }, limit: number): Promise<PublishedProductSummary[]> {
    // An equality on an indexed column (migration 23) reads the index range of the store's matches
    // in product id order; the other field, when given too, filters that range.
    const fields = (['sku', 'ean'] as const).filter((field) => match[field] !== undefined);
    if (fields.length === 0) return [];
    const conditions = fields.map((field, i) => `AND published_products.${field} = $${i + 3}`).join(' ');
    const rows = await this.c.rows(
      `SELECT ${SUMMARY_COLUMNS} FROM ${SUMMARY_FROM}
      WHERE store_id = $1 ${conditions} ORDER BY product_id LIMIT $2`,
      [storeId, limit, ...fields.map((field) => match[field])],
    );
    return rows.map(toSummary);
  }

  async publishedSummaries(storeId: number, window: PublishedSummaryWindow): Promise<PublishedProductSummary[]> {
    // The excluded ones from their own index range (migration 17), not a filter over every row.
    const rows = await this.c.rows(
      `SELECT ${SUMMARY_COLUMNS} FROM ${SUMMARY_FROM}
      WHERE store_id = $1 AND product_id > $2 ${window.excludedOnly ? 'AND published_products.exclusion_reason IS NOT NULL' : ''}
      ORDER BY product_id LIMIT $3`,
      [storeId, window.afterId, window.limit],
    );
    return rows.map(toSummary);
  }

  async publishedCountsByExclusion(storeId: number): Promise<PublishedExclusionCounts> {
    // The counts kept per store and reason (migration 17's trigger), not a count of the rows.
    const rows = await this.c.rows<{ reason: string; n: number }>(
      'SELECT exclusion_reason AS reason, n::integer AS n FROM published_counts WHERE store_id = $1',
      [storeId],
    );
    const counts: PublishedExclusionCounts = { total: 0, excluded: { manual: 0, missing_title: 0, no_offers: 0, out_of_stock: 0 } };
    for (const { reason, n } of rows) {
      counts.total += n;
      if (reason !== '') counts.excluded[reason as keyof PublishedExclusionCounts['excluded']] = n;
    }
    return counts;
  }
}
