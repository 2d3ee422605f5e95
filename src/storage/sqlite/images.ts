// Image mirroring state per (merchant, source URL) on SQLite.
import { claimImages, type DueImagesAsked, type FailingOrigin, type ImageClaimQueries, type ImageWorkHint } from '../image-claims.js';
import { UNCAPPED_IMAGE_CLAIM, type ImageClaimFairness, type ImageMirrorChange, type ImageStore } from '../port.js';
import type { ClaimedImageMirror, ImageOriginState } from '../records.js';
import type { ImageMirrorRecord, ImageMirrorWork, ImageStateCounts } from '../../catalog/model.js';
import type { SqliteConnection } from './connection.js';

/** The origin of an image URL column (ClaimedImageMirror.origin; the same rule on PostgreSQL), stored with the row. */
export const originOf = (url: string) =>
  `lower(substr(${url}, 1, instr(${url}, '://') + instr(substr(${url}, instr(${url}, '://') + 3) || '/', '/') + 1))`;

const IMAGE_FIELDS = ['state', 'mirrored_url', 'attempts', 'first_failure_at', 'next_attempt_at', 'last_error', 'updated_at'] as const;

/** The columns of image work as the port returns it (ImageMirrorWork, with its origin). */
const WORK_COLUMNS = 'merchant_id, url, state, mirrored_url, updated_at, attempts, first_failure_at, next_attempt_at, last_error, origin';

/**
 * Lowers the merchant's hint of due image work (image-claims.ts) to `@due_at`: run by every write
 * that makes a pending image due sooner than the hint may say.
 */
export const LOWER_IMAGE_WORK_HINT = `INSERT INTO image_work_merchants (merchant_id, due_at, version) VALUES (@merchant_id, @due_at, 0)
  ON CONFLICT (merchant_id) DO UPDATE SET due_at = min(due_at, excluded.due_at), version = version + 1`;

/** Mirror rows for URLs not known yet: pending, due at once, with their origin. */
const INSERT_MIRRORS = `INSERT OR IGNORE INTO image_mirrors (merchant_id, url, origin, state, updated_at, next_attempt_at)
  SELECT @merchant_id, value, ${originOf('value')}, 'pending', @at, @at FROM json_each(@urls)`;

/** Adds image mirror rows for new URLs (and lowers the merchant's hint): shared with product-sources.ts. */
export function ensureMirrorRows(c: SqliteConnection, merchantId: number, urls: string[], at: string): void {
  if (urls.length === 0) return;
  const added = c.stmt(INSERT_MIRRORS).run({ merchant_id: merchantId, urls: JSON.stringify(urls), at }).changes;
  if (added === 0) return;
  c.stmt(LOWER_IMAGE_WORK_HINT).run({ merchant_id: merchantId, due_at: at });
  c.addedWork.add('images');
}

/** The origins of merchant @merchant with pending images: a loose index scan of image_mirrors_pending_origin, one probe per origin. */
const PENDING_ORIGINS = `WITH RECURSIVE origins(origin) AS (
    SELECT min(origin) FROM image_mirrors WHERE merchant_id = @merchant AND state = 'pending'
    UNION ALL
    SELECT (SELECT min(i.origin) FROM image_mirrors AS i WHERE i.merchant_id = @merchant AND i.state = 'pending' AND i.origin > o.origin)
    FROM origins AS o WHERE o.origin IS NOT NULL
  )`;

/** The claim's statements on SQLite (claims run in a write transaction: no other process claims in between). */
class SqliteImageClaimQueries implements ImageClaimQueries {
  constructor(private readonly c: SqliteConnection) {}

  async dueMerchants(now: string, after: Pick<ImageWorkHint, 'dueAt' | 'merchantId'> | null, limit: number): Promise<ImageWorkHint[]> {
    return this.c
      .stmt(`SELECT merchant_id AS merchantId, due_at AS dueAt, version FROM image_work_merchants
      WHERE due_at <= @now AND (due_at, merchant_id) > (@after_due, @after_merchant) ORDER BY due_at, merchant_id LIMIT @limit`)
      .all({ now, after_due: after?.dueAt ?? '', after_merchant: after?.merchantId ?? 0, limit }) as ImageWorkHint[];
  }

  async dueImagesOf(now: string, asked: DueImagesAsked[]): Promise<ClaimedImageMirror[]> {
    // Per merchant (in process, a statement costs no round trip): a loose index scan of its origins
    // with pending work (one probe each), then each origin's oldest due images from the same index.
    const statement = this.c.stmt(`${PENDING_ORIGINS}
      SELECT ${WORK_COLUMNS.replace(/(\w+)/g, 'd.$1')} FROM origins AS o, image_mirrors AS d
      WHERE o.origin IS NOT NULL AND o.origin NOT IN (SELECT value FROM json_each(@full))
        AND d.rowid IN (SELECT e.rowid FROM image_mirrors AS e
          WHERE e.merchant_id = @merchant AND e.state = 'pending' AND e.origin = o.origin AND e.next_attempt_at <= @now
          ORDER BY e.next_attempt_at LIMIT @per_origin)`);
    return asked.flatMap(
      ({ merchantId, fullOrigins, perOrigin }) =>
        statement.all({ merchant: merchantId, now, full: JSON.stringify(fullOrigins), per_origin: perOrigin }) as ClaimedImageMirror[],
    );
  }

  async earliestPendingByOrigin(merchantIds: number[]): Promise<Map<number, Map<string, string>>> {
    // The earliest of each origin: one probe per origin (LIMIT 1 of an index range, never a min() over a
    // down origin's whole backlog), from the same index as the claim's.
    const statement = this.c.stmt(`${PENDING_ORIGINS}
      SELECT o.origin, (SELECT e.next_attempt_at FROM image_mirrors AS e
        WHERE e.merchant_id = @merchant AND e.state = 'pending' AND e.origin = o.origin AND e.next_attempt_at IS NOT NULL
        ORDER BY e.next_attempt_at LIMIT 1) AS at
      FROM origins AS o WHERE o.origin IS NOT NULL`);
    const earliest = new Map<number, Map<string, string>>();
    for (const merchantId of merchantIds) {
      const rows = statement.all({ merchant: merchantId }) as { origin: string; at: string | null }[];
      earliest.set(merchantId, new Map(rows.filter((r) => r.at !== null).map((r) => [r.origin, r.at!])));
    }
    return earliest;
  }

  async earliestFirstFailure(merchantId: number, origin: string): Promise<string | null> {
    return (
      (this.c
        .stmt(`SELECT first_failure_at FROM image_mirrors INDEXED BY image_mirrors_pending_first_failure
        WHERE merchant_id = ? AND origin = ? AND state = 'pending' AND first_failure_at IS NOT NULL ORDER BY first_failure_at LIMIT 1`)
        .pluck()
        .get(merchantId, origin) as string | null) ?? null
    );
  }

  async expiredImagesOf(
    merchantId: number,
    origin: string,
    cutoff: string,
    neverFetchedToo: boolean,
    limit: number,
  ): Promise<ClaimedImageMirror[]> {
    // Two ranges of two indexes (by first failure; by next attempt), each exact: every row read is one.
    const failed = this.c
      .stmt(`SELECT ${WORK_COLUMNS} FROM image_mirrors INDEXED BY image_mirrors_pending_first_failure
      WHERE merchant_id = @merchant AND origin = @origin AND state = 'pending' AND first_failure_at IS NOT NULL
        AND first_failure_at <= @cutoff
      ORDER BY first_failure_at LIMIT @limit`)
      .all({ merchant: merchantId, origin, cutoff, limit }) as ClaimedImageMirror[];
    if (!neverFetchedToo || failed.length >= limit) return failed;
    const seen = new Set(failed.map((image) => image.url));
    const waited = (
      this.c
        .stmt(`SELECT ${WORK_COLUMNS} FROM image_mirrors INDEXED BY image_mirrors_pending_origin
        WHERE merchant_id = @merchant AND origin = @origin AND state = 'pending' AND next_attempt_at <= @cutoff
        ORDER BY next_attempt_at LIMIT @limit`)
        .all({ merchant: merchantId, origin, cutoff, limit }) as ClaimedImageMirror[]
    ).filter((image) => !seen.has(image.url));
    return [...failed, ...waited].slice(0, limit);
  }

  async settleHints(settles: { hint: ImageWorkHint; dueAt: string | null }[]): Promise<void> {
    for (const { hint, dueAt } of settles) {
      if (dueAt === null) {
        this.c.stmt('DELETE FROM image_work_merchants WHERE merchant_id = ? AND version = ?').run(hint.merchantId, hint.version);
      } else {
        this.c
          .stmt('UPDATE image_work_merchants SET due_at = ? WHERE merchant_id = ? AND version = ?')
          .run(dueAt, hint.merchantId, hint.version);
      }
    }
  }

  async lease(images: ClaimedImageMirror[], leaseUntil: string): Promise<void> {
    const lease = this.c.stmt('UPDATE image_mirrors SET next_attempt_at = ? WHERE merchant_id = ? AND url = ?');
    for (const image of images) lease.run(leaseUntil, image.merchant_id, image.url);
  }

  async failingOrigins(merchantIds: number[]): Promise<Map<number, FailingOrigin[]>> {
    const statement = this.c.stmt('SELECT origin, down_since, next_probe_at, last_error FROM image_origins WHERE merchant_id = ?');
    return new Map(merchantIds.map((merchantId) => [merchantId, statement.all(merchantId) as FailingOrigin[]]));
  }

  async leaseProbe(merchantId: number, origin: string, until: string): Promise<void> {
    this.c.stmt('UPDATE image_origins SET next_probe_at = ? WHERE merchant_id = ? AND origin = ?').run(until, merchantId, origin);
  }
}

export class SqliteImages implements ImageStore {
  static readonly writes = [
    'ensureImageMirrors',
    'claimDueImageMirrors',
    'updateImageMirror',
    'updateImageMirrors',
    'countImageOriginFailure',
    'putImageOrigin',
    'clearImageOrigin',
  ] as const;

  private readonly claims: SqliteImageClaimQueries;

  constructor(private readonly c: SqliteConnection) {
    this.claims = new SqliteImageClaimQueries(c);
  }

  async imageMirrors(merchantId: number, urls: string[]): Promise<Map<string, ImageMirrorRecord>> {
    const mirrors = new Map<string, ImageMirrorRecord>();
    if (urls.length === 0) return mirrors;
    const rows = this.c
      .stmt(`SELECT url, state, mirrored_url FROM image_mirrors
      WHERE merchant_id = ? AND url IN (SELECT value FROM json_each(?))`)
      .all(merchantId, JSON.stringify(urls)) as ImageMirrorRecord[];
    for (const row of rows) mirrors.set(row.url, row);
    return mirrors;
  }

  async ensureImageMirrors(merchantId: number, urls: string[], at: string): Promise<void> {
    ensureMirrorRows(this.c, merchantId, urls, at);
  }

  async claimDueImageMirrors(
    now: string,
    limit: number,
    leaseUntil: string,
    fairness: ImageClaimFairness = UNCAPPED_IMAGE_CLAIM,
  ): Promise<ClaimedImageMirror[]> {
    return claimImages(this.claims, now, limit, leaseUntil, fairness);
  }

  async updateImageMirror(merchantId: number, url: string, patch: Partial<Omit<ImageMirrorWork, 'merchant_id' | 'url'>>): Promise<void> {
    const fields = IMAGE_FIELDS.filter((f) => f in patch);
    if (fields.length === 0) return;
    const row = this.c
      .stmt(`UPDATE image_mirrors SET ${fields.map((f) => `${f} = ?`).join(', ')} WHERE merchant_id = ? AND url = ?
      RETURNING state, next_attempt_at`)
      .get(...fields.map((f) => patch[f] as unknown), merchantId, url) as { state: string; next_attempt_at: string | null } | undefined;
    // Pending again (a release, a backoff, retry-dead): the merchant's hint must not be later than it.
    if (row?.state === 'pending' && row.next_attempt_at !== null) {
      this.c.stmt(LOWER_IMAGE_WORK_HINT).run({ merchant_id: merchantId, due_at: row.next_attempt_at });
    }
    // A dead image put back to pending (retry-dead) is work for the mirror.
    if (patch.state === 'pending') this.c.addedWork.add('images');
  }

  async updateImageMirrors(merchantId: number, changes: ImageMirrorChange[]): Promise<number[]> {
    // In process, a statement per image costs no round trip: each as updateImageMirror, then the
    // products of them all from the links (one writer at a time: no lock needed).
    const last = new Map(changes.map((change) => [change.url, change.patch]));
    for (const [url, patch] of last) await this.updateImageMirror(merchantId, url, patch);
    if (last.size === 0) return [];
    return this.c
      .stmt(`SELECT DISTINCT product_id FROM product_links
      WHERE merchant_id = ? AND kind = 'image' AND value IN (SELECT value FROM json_each(?)) ORDER BY product_id`)
      .pluck()
      .all(merchantId, JSON.stringify([...last.keys()])) as number[];
  }

  async imageStateCounts(merchantId: number): Promise<ImageStateCounts> {
    // Per distinct source URL that a product of the merchant still lists: counts the triggers of
    // migration 16 keep, not a count of the rows.
    const counts: ImageStateCounts = { pending: 0, mirrored: 0, dead: 0 };
    const rows = this.c.stmt('SELECT state, n FROM image_state_counts WHERE merchant_id = ?').all(merchantId) as {
      state: keyof ImageStateCounts;
      n: number;
    }[];
    for (const row of rows) counts[row.state] = row.n;
    return counts;
  }

  async deadImages(merchantId: number, limit: number): Promise<ImageMirrorWork[]> {
    // The ones imageStateCounts counts: a source URL no product lists any more is neither shown nor retried.
    return this.c
      .stmt(`SELECT ${WORK_COLUMNS} FROM image_mirrors
      WHERE merchant_id = @merchant AND state = 'dead' AND listed > 0 ORDER BY updated_at DESC, url LIMIT @limit`)
      .all({ merchant: merchantId, limit }) as ImageMirrorWork[];
  }

  async imageOrigins(merchantId: number): Promise<ImageOriginState[]> {
    return this.c
      .stmt(`SELECT origin, failures, down_since, next_probe_at, probe_ms, last_error FROM image_origins WHERE merchant_id = ?
      ORDER BY down_since IS NULL, down_since, origin`)
      .all(merchantId) as ImageOriginState[];
  }

  async pendingImageOrigins(merchantId: number, limit: number): Promise<string[]> {
    return this.c
      .stmt(`${PENDING_ORIGINS} SELECT origin FROM origins WHERE origin IS NOT NULL LIMIT @limit`)
      .pluck()
      .all({ merchant: merchantId, limit }) as string[];
  }

  async countPendingImagesOf(merchantId: number, origin: string, countMax: number): Promise<number> {
    return this.c
      .stmt(`SELECT count(*) FROM (SELECT 1 FROM image_mirrors INDEXED BY image_mirrors_pending_origin
      WHERE merchant_id = ? AND origin = ? AND state = 'pending' LIMIT ?)`)
      .pluck()
      .get(merchantId, origin, countMax) as number;
  }

  async countImageOriginFailure(merchantId: number, origin: string, error: string): Promise<ImageOriginState> {
    return this.c
      .stmt(`INSERT INTO image_origins (merchant_id, origin, failures, last_error) VALUES (?, ?, 1, ?)
      ON CONFLICT (merchant_id, origin) DO UPDATE SET failures = failures + 1, last_error = excluded.last_error
      RETURNING origin, failures, down_since, next_probe_at, probe_ms, last_error`)
      .get(merchantId, origin, error) as ImageOriginState;
  }

  async putImageOrigin(merchantId: number, state: ImageOriginState): Promise<void> {
    this.c
      .stmt(`INSERT INTO image_origins (merchant_id, origin, failures, down_since, next_probe_at, probe_ms, last_error)
      VALUES (@merchant_id, @origin, @failures, @down_since, @next_probe_at, @probe_ms, @last_error)
      ON CONFLICT (merchant_id, origin) DO UPDATE SET down_since = excluded.down_since,
        next_probe_at = excluded.next_probe_at, probe_ms = excluded.probe_ms`)
      .run({ merchant_id: merchantId, ...state });
  }

  async clearImageOrigin(merchantId: number, origin: string, at: string): Promise<void> {
    const cleared = this.c.stmt('DELETE FROM image_origins WHERE merchant_id = ? AND origin = ?').run(merchantId, origin).changes;
    // Its images wait no more: the merchant's hint (settled to the next probe, perhaps) must not be later.
    if (cleared === 0) return;
    this.c.stmt(LOWER_IMAGE_WORK_HINT).run({ merchant_id: merchantId, due_at: at });
    this.c.addedWork.add('images');
  }
}
