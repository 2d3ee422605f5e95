// Image mirroring state per (merchant, source URL) on SQLite.
import { UNCAPPED_IMAGE_CLAIM, type ImageClaimFairness, type ImageStore } from '../port.js';
import type { ClaimedImageMirror, ImageMirrorRecord, ImageMirrorWork, ImageStateCounts } from '../records.js';
import type { SqliteConnection } from './connection.js';

/** The origin of an image URL column (ClaimedImageMirror.origin; the same rule on PostgreSQL). */
const originOf = (url: string) => `lower(substr(${url}, 1, instr(${url}, '://') + instr(substr(${url}, instr(${url}, '://') + 3) || '/', '/') + 1))`;

// Fair claims (issue 13.2): per merchant, its oldest due work outside the origins the mirror has at
// their cap; then origins take turns within a merchant (counting the fetches busy) up to perOrigin,
// and merchants take turns (the fewest fetches first) up to perMerchant.
const CLAIM = `WITH busy AS (
    SELECT json_extract(value, '$.merchant_id') AS merchant_id, json_extract(value, '$.origin') AS origin,
      json_extract(value, '$.fetching') AS fetching FROM json_each(@busy)
  ), busy_merchants AS (
    SELECT merchant_id, sum(fetching) AS fetching FROM busy GROUP BY merchant_id
  ), candidates AS (
    SELECT i.*, ${originOf('i.url')} AS origin FROM merchants AS m
    JOIN image_mirrors AS i ON i.rowid IN (
      SELECT d.rowid FROM image_mirrors AS d WHERE d.merchant_id = m.id AND d.state = 'pending' AND d.next_attempt_at <= @now
        AND ${originOf('d.url')} NOT IN (SELECT origin FROM busy WHERE busy.merchant_id = m.id AND busy.fetching >= @per_origin)
      ORDER BY d.next_attempt_at LIMIT @window)
    WHERE coalesce((SELECT fetching FROM busy_merchants WHERE merchant_id = m.id), 0) < @per_merchant
  ), origin_turns AS (
    SELECT c.*, row_number() OVER (PARTITION BY c.merchant_id, c.origin ORDER BY c.next_attempt_at, c.url)
      + coalesce((SELECT fetching FROM busy WHERE busy.merchant_id = c.merchant_id AND busy.origin = c.origin), 0) AS origin_turn
    FROM candidates AS c
  ), merchant_turns AS (
    SELECT o.*, row_number() OVER (PARTITION BY o.merchant_id ORDER BY o.origin_turn, o.next_attempt_at, o.url)
      + coalesce((SELECT fetching FROM busy_merchants WHERE busy_merchants.merchant_id = o.merchant_id), 0) AS merchant_turn
    FROM origin_turns AS o WHERE o.origin_turn <= @per_origin
  )
  SELECT merchant_id, url, state, mirrored_url, updated_at, attempts, first_failure_at, next_attempt_at, last_error, origin
  FROM merchant_turns WHERE merchant_turn <= @per_merchant
  ORDER BY merchant_turn, next_attempt_at, url LIMIT @limit`;

const IMAGE_FIELDS = ['state', 'mirrored_url', 'attempts', 'first_failure_at', 'next_attempt_at', 'last_error', 'updated_at'] as const;

export class SqliteImages implements ImageStore {
  static readonly writes = ['ensureImageMirrors', 'claimDueImageMirrors', 'updateImageMirror'] as const;

  constructor(private readonly c: SqliteConnection) {}

  async imageMirrors(merchantId: number, urls: string[]): Promise<Map<string, ImageMirrorRecord>> {
    const mirrors = new Map<string, ImageMirrorRecord>();
    if (urls.length === 0) return mirrors;
    const rows = this.c.stmt(`SELECT url, state, mirrored_url FROM image_mirrors
      WHERE merchant_id = ? AND url IN (SELECT value FROM json_each(?))`).all(merchantId, JSON.stringify(urls)) as ImageMirrorRecord[];
    for (const row of rows) mirrors.set(row.url, row);
    return mirrors;
  }

  async ensureImageMirrors(merchantId: number, urls: string[], at: string): Promise<void> {
    if (urls.length === 0) return;
    const added = this.c.stmt(`INSERT OR IGNORE INTO image_mirrors (merchant_id, url, state, updated_at, next_attempt_at)
      SELECT ?, value, 'pending', ?, ? FROM json_each(?)`).run(merchantId, at, at, JSON.stringify(urls)).changes;
    if (added > 0) this.c.addedWork.add('images');
  }

  async claimDueImageMirrors(now: string, limit: number, leaseUntil: string, fairness: ImageClaimFairness = UNCAPPED_IMAGE_CLAIM): Promise<ClaimedImageMirror[]> {
    if (limit <= 0) return [];
    // Claims run in a write transaction (BEGIN IMMEDIATE): no other process claims in between.
    const due = this.c.stmt(CLAIM).all({
      now, limit, per_merchant: fairness.perMerchant, per_origin: fairness.perOrigin,
      // Each merchant's oldest due work, as many as could be taken from it: one index probe per merchant.
      window: Math.min(limit, fairness.perMerchant) + fairness.perOrigin,
      busy: JSON.stringify(fairness.busy),
    }) as ClaimedImageMirror[];
    const lease = this.c.stmt('UPDATE image_mirrors SET next_attempt_at = ? WHERE merchant_id = ? AND url = ?');
    for (const image of due) lease.run(leaseUntil, image.merchant_id, image.url);
    return due;
  }

  async updateImageMirror(merchantId: number, url: string, patch: Partial<Omit<ImageMirrorWork, 'merchant_id' | 'url'>>): Promise<void> {
    const fields = IMAGE_FIELDS.filter((f) => f in patch);
    if (fields.length === 0) return;
    this.c.stmt(`UPDATE image_mirrors SET ${fields.map((f) => `${f} = ?`).join(', ')} WHERE merchant_id = ? AND url = ?`)
      .run(...fields.map((f) => patch[f] as unknown), merchantId, url);
    // A dead image put back to pending (retry-dead) is work for the mirror.
    if (patch.state === 'pending') this.c.addedWork.add('images');
  }

  async imageStateCounts(merchantId: number): Promise<ImageStateCounts> {
    const counts: ImageStateCounts = { pending: 0, mirrored: 0, dead: 0 };
    // Per distinct source URL that a product of the merchant still lists.
    const rows = this.c.stmt(`SELECT m.state, count(*) AS n FROM image_mirrors AS m
      JOIN (SELECT DISTINCT json_extract(image.value, '$.url') AS url FROM products, json_each(products.source, '$.images') AS image
        WHERE products.merchant_id = @merchant) AS listed ON listed.url = m.url
      WHERE m.merchant_id = @merchant GROUP BY m.state`).all({ merchant: merchantId }) as { state: keyof typeof counts; n: number }[];
    for (const row of rows) {
      counts[row.state] = row.n;
    }
    return counts;
  }

  async deadImages(merchantId: number, limit: number): Promise<ImageMirrorWork[]> {
    // The ones imageStateCounts counts: a source URL no product lists any more is neither shown nor retried.
    return this.c.stmt(`SELECT m.* FROM image_mirrors AS m
      JOIN (SELECT DISTINCT json_extract(image.value, '$.url') AS url FROM products, json_each(products.source, '$.images') AS image
        WHERE products.merchant_id = @merchant) AS listed ON listed.url = m.url
      WHERE m.merchant_id = @merchant AND m.state = 'dead' ORDER BY m.updated_at DESC, m.url LIMIT @limit`)
      .all({ merchant: merchantId, limit }) as ImageMirrorWork[];
  }
}
