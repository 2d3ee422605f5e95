// Image mirroring state per (merchant, source URL) on PostgreSQL, claimed by several mirrors at once.
import { UNCAPPED_IMAGE_CLAIM, type ImageClaimFairness, type ImageStore } from '../port.js';
import type { ClaimedImageMirror, ImageMirrorRecord, ImageMirrorWork, ImageStateCounts } from '../records.js';
import type { PgConnection } from './connection.js';
import { notifyWork } from './wakeups.js';

const IMAGE_FIELDS = ['state', 'mirrored_url', 'attempts', 'first_failure_at', 'next_attempt_at', 'last_error', 'updated_at'] as const;

// The distinct image URLs the merchant's products list ($1: the merchant); a source whose `images`
// is missing or not an array lists none.
const LISTED_URLS = `SELECT DISTINCT image ->> 'url' AS url FROM products,
    json_array_elements(CASE json_typeof(products.source::json -> 'images') WHEN 'array' THEN products.source::json -> 'images' ELSE '[]'::json END) AS image
  WHERE products.merchant_id = $1`;

type WorkRow = ImageMirrorWork & Record<string, unknown>;
type ClaimedRow = ClaimedImageMirror & Record<string, unknown>;

/** The origin of an image URL column (ClaimedImageMirror.origin; the same rule on SQLite). */
const originOf = (url: string) => `lower(substr(${url}, 1, strpos(${url}, '://') + strpos(substr(${url}, strpos(${url}, '://') + 3) || '/', '/') + 1))`;

export class PgImages implements ImageStore {
  static readonly writes = ['ensureImageMirrors', 'claimDueImageMirrors', 'updateImageMirror'] as const;

  constructor(private readonly c: PgConnection) {}

  async imageMirrors(merchantId: number, urls: string[]): Promise<Map<string, ImageMirrorRecord>> {
    const mirrors = new Map<string, ImageMirrorRecord>();
    if (urls.length === 0) return mirrors;
    const rows = await this.c.rows<ImageMirrorRecord & Record<string, unknown>>(`SELECT url, state, mirrored_url FROM image_mirrors
      WHERE merchant_id = $1 AND url = ANY($2::text[])`, [merchantId, urls]);
    for (const row of rows) mirrors.set(row.url, row);
    return mirrors;
  }

  async ensureImageMirrors(merchantId: number, urls: string[], at: string): Promise<void> {
    if (urls.length === 0) return;
    const added = await this.c.run(`INSERT INTO image_mirrors (merchant_id, url, state, updated_at, next_attempt_at)
      SELECT $1, url, 'pending', $2, $2 FROM unnest($3::text[]) AS url ON CONFLICT DO NOTHING`, [merchantId, at, urls]);
    if (added > 0) await notifyWork(this.c, 'images');
  }

  async claimDueImageMirrors(now: string, limit: number, leaseUntil: string, fairness: ImageClaimFairness = UNCAPPED_IMAGE_CLAIM): Promise<ClaimedImageMirror[]> {
    if (limit <= 0) return [];
    // One statement: another mirror's claim skips the rows this one locks (and then leases).
    const window = Math.min(limit, fairness.perMerchant) + fairness.perOrigin;
    return this.c.rows<ClaimedRow>(`WITH busy AS (
        SELECT * FROM json_to_recordset($4::json) AS b(merchant_id bigint, origin text, fetching integer)
      ), busy_merchants AS (
        SELECT merchant_id, sum(fetching) AS fetching FROM busy GROUP BY merchant_id
      ), candidates AS (
        SELECT d.*, ${originOf('d.url')} AS origin FROM merchants AS m
        CROSS JOIN LATERAL (
          SELECT * FROM image_mirrors AS i WHERE i.merchant_id = m.id AND i.state = 'pending' AND i.next_attempt_at <= $1
            AND ${originOf('i.url')} NOT IN (SELECT origin FROM busy WHERE busy.merchant_id = m.id AND busy.fetching >= $6)
          ORDER BY i.next_attempt_at LIMIT $7 FOR UPDATE SKIP LOCKED
        ) AS d
        WHERE coalesce((SELECT fetching FROM busy_merchants WHERE busy_merchants.merchant_id = m.id), 0) < $5
      ), origin_turns AS (
        SELECT c.*, row_number() OVER (PARTITION BY c.merchant_id, c.origin ORDER BY c.next_attempt_at, c.url)
          + coalesce((SELECT fetching FROM busy WHERE busy.merchant_id = c.merchant_id AND busy.origin = c.origin), 0) AS origin_turn
        FROM candidates AS c
      ), merchant_turns AS (
        SELECT o.*, row_number() OVER (PARTITION BY o.merchant_id ORDER BY o.origin_turn, o.next_attempt_at, o.url)
          + coalesce((SELECT fetching FROM busy_merchants WHERE busy_merchants.merchant_id = o.merchant_id), 0) AS merchant_turn
        FROM origin_turns AS o WHERE o.origin_turn <= $6
      ), chosen AS (
        SELECT * FROM merchant_turns WHERE merchant_turn <= $5 ORDER BY merchant_turn, next_attempt_at, url LIMIT $2
      ), leased AS (
        UPDATE image_mirrors AS m SET next_attempt_at = $3 FROM chosen WHERE m.merchant_id = chosen.merchant_id AND m.url = chosen.url
      )
      SELECT merchant_id, url, state, mirrored_url, updated_at, attempts, first_failure_at, next_attempt_at, last_error, origin
      FROM chosen ORDER BY merchant_turn, next_attempt_at, url`,
    [now, limit, leaseUntil, JSON.stringify(fairness.busy), fairness.perMerchant, fairness.perOrigin, window]);
  }

  async updateImageMirror(merchantId: number, url: string, patch: Partial<Omit<ImageMirrorWork, 'merchant_id' | 'url'>>): Promise<void> {
    const fields = IMAGE_FIELDS.filter((f) => f in patch);
    if (fields.length === 0) return;
    await this.c.run(`UPDATE image_mirrors SET ${fields.map((f, i) => `${f} = $${i + 1}`).join(', ')}
      WHERE merchant_id = $${fields.length + 1} AND url = $${fields.length + 2}`, [...fields.map((f) => patch[f] as unknown), merchantId, url]);
    // A dead image put back to pending (retry-dead) is work for the mirrors.
    if (patch.state === 'pending') await notifyWork(this.c, 'images');
  }

  async imageStateCounts(merchantId: number): Promise<ImageStateCounts> {
    const counts: ImageStateCounts = { pending: 0, mirrored: 0, dead: 0 };
    // Per distinct source URL that a product of the merchant still lists.
    const rows = await this.c.rows<{ state: keyof ImageStateCounts; n: number }>(`SELECT m.state, count(*)::integer AS n FROM image_mirrors AS m
      JOIN (${LISTED_URLS}) AS listed ON listed.url = m.url
      WHERE m.merchant_id = $1 GROUP BY m.state`, [merchantId]);
    for (const row of rows) counts[row.state] = row.n;
    return counts;
  }

  async deadImages(merchantId: number, limit: number): Promise<ImageMirrorWork[]> {
    // The ones imageStateCounts counts: a source URL no product lists any more is neither shown nor retried.
    return this.c.rows<WorkRow>(`SELECT m.* FROM image_mirrors AS m
      JOIN (${LISTED_URLS}) AS listed ON listed.url = m.url
      WHERE m.merchant_id = $1 AND m.state = 'dead' ORDER BY m.updated_at DESC, m.url LIMIT $2`, [merchantId, limit]);
  }
}
