// Image mirroring state per (merchant, source URL) on SQLite.
import type { ImageStore } from '../port.js';
import type { ImageMirrorRecord, ImageMirrorWork, ImageStateCounts } from '../records.js';
import type { SqliteConnection } from './connection.js';

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

  async claimDueImageMirrors(now: string, limit: number, leaseUntil: string): Promise<ImageMirrorWork[]> {
    // Claims run in a write transaction (BEGIN IMMEDIATE): no other process claims in between.
    const due = this.c.stmt(`SELECT * FROM image_mirrors WHERE state = 'pending' AND next_attempt_at <= ?
      ORDER BY next_attempt_at LIMIT ?`).all(now, limit) as ImageMirrorWork[];
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
