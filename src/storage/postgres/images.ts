// Image mirroring state per (merchant, source URL) on PostgreSQL, claimed by several mirrors at once.
import { claimImages, type DueImagesAsked, type FailingOrigin, type ImageClaimQueries, type ImageWorkHint } from '../image-claims.js';
import { UNCAPPED_IMAGE_CLAIM, type ImageClaimFairness, type ImageMirrorChange, type ImageStore } from '../port.js';
import type { ClaimedImageMirror, ImageOriginState } from '../records.js';
import type { ImageMirrorRecord, ImageMirrorWork, ImageStateCounts } from '../../catalog/model.js';
import type { PgConnection } from './connection.js';
import { notifyWork } from './wakeups.js';

const IMAGE_FIELDS = ['state', 'mirrored_url', 'attempts', 'first_failure_at', 'next_attempt_at', 'last_error', 'updated_at'] as const;

type WorkRow = ImageMirrorWork & Record<string, unknown>;
type ClaimedRow = ClaimedImageMirror & Record<string, unknown>;

/** The origin of an image URL column (ClaimedImageMirror.origin; the same rule on SQLite), stored with the row. */
export const originOf = (url: string) =>
  `lower(substr(${url}, 1, strpos(${url}, '://') + strpos(substr(${url}, strpos(${url}, '://') + 3) || '/', '/') + 1))`;

/** The columns of image work as the port returns it (ImageMirrorWork, with its origin). */
const WORK_COLUMNS = 'merchant_id, url, state, mirrored_url, updated_at, attempts, first_failure_at, next_attempt_at, last_error, origin';

/**
 * Lowers the merchant's hint of due image work (image-claims.ts) to $2: run by every write that
 * makes a pending image due sooner than the hint may say. The version moves, so a claim's settle
 * (a compare-and-set on it) never hides this work.
 */
const LOWER_IMAGE_WORK_HINT = `INSERT INTO image_work_merchants (merchant_id, due_at, version) VALUES ($1, $2, 0)
  ON CONFLICT (merchant_id) DO UPDATE SET due_at = least(image_work_merchants.due_at, excluded.due_at), version = image_work_merchants.version + 1`;

/** Adds image mirror rows for new URLs (and lowers the merchant's hint): shared with product-sources.ts. */
export async function ensureMirrorRows(c: PgConnection, merchantId: number, urls: string[], at: string): Promise<void> {
  if (urls.length === 0) return;
  const added = await c.run(
    `INSERT INTO image_mirrors (merchant_id, url, origin, state, updated_at, next_attempt_at)
    SELECT $1, url, ${originOf('url')}, 'pending', $2, $2 FROM unnest($3::text[]) AS url ON CONFLICT DO NOTHING`,
    [merchantId, at, urls],
  );
  if (added === 0) return;
  await c.run(LOWER_IMAGE_WORK_HINT, [merchantId, at]);
  await notifyWork(c, 'images');
}

/**
 * The origins of merchant $1 with pending images: a loose index scan of image_mirrors_pending_origin,
 * one probe per origin. Every statement on a merchant's pending images goes through it (migration 28
 * dropped the (merchant, next attempt) index, which the planner took for an origin with a few images,
 * walking every pending image of the merchant's big origin to find them).
 */
const PENDING_ORIGINS = `WITH RECURSIVE origins(origin) AS (
    SELECT min(origin) FROM image_mirrors WHERE merchant_id = $1 AND state = 'pending'
    UNION ALL
    SELECT (SELECT min(i.origin) FROM image_mirrors AS i WHERE i.merchant_id = $1 AND i.state = 'pending' AND i.origin > o.origin)
    FROM origins AS o WHERE o.origin IS NOT NULL
  )`;

/**
 * The origins with pending images of each merchant of $1 (bigint[]): the same loose index scan, for
 * a page of merchants at once.
 */
const PENDING_ORIGINS_OF = `WITH RECURSIVE asked(merchant_id) AS (SELECT DISTINCT unnest($1::bigint[])),
  origins(merchant_id, origin) AS (
    SELECT a.merchant_id, (SELECT min(i.origin) FROM image_mirrors AS i WHERE i.merchant_id = a.merchant_id AND i.state = 'pending')
    FROM asked AS a
    UNION ALL
    SELECT o.merchant_id, (SELECT min(i.origin) FROM image_mirrors AS i
      WHERE i.merchant_id = o.merchant_id AND i.state = 'pending' AND i.origin > o.origin)
    FROM origins AS o WHERE o.origin IS NOT NULL
  )`;

/** The claim's statements on PostgreSQL, in the claim's transaction: rows are locked, and another mirror's claim skips them. */
class PgImageClaimQueries implements ImageClaimQueries {
  constructor(private readonly c: PgConnection) {}

  async dueMerchants(now: string, after: Pick<ImageWorkHint, 'dueAt' | 'merchantId'> | null, limit: number): Promise<ImageWorkHint[]> {
    return this.c.preparedRows<ImageWorkHint & Record<string, unknown>>(
      'images.dueMerchants',
      `SELECT merchant_id AS "merchantId", due_at AS "dueAt", version FROM image_work_merchants
      WHERE due_at <= $1 AND (due_at, merchant_id) > ($2, $3) ORDER BY due_at, merchant_id LIMIT $4`,
      [now, after?.dueAt ?? '', after?.merchantId ?? 0, limit],
    );
  }

  async dueImagesOf(now: string, asked: DueImagesAsked[]): Promise<ClaimedImageMirror[]> {
    // One statement for the page of merchants: a loose index scan of each one's origins with pending
    // work (one probe each), then each origin's oldest due images from the same index, at most the
    // merchant's window of each (its full origins skipped).
    const full = asked.flatMap((a) => a.fullOrigins.map((origin) => [a.merchantId, origin] as const));
    return this.c.preparedRows<ClaimedRow>(
      'images.dueImagesOfMerchants',
      `${PENDING_ORIGINS_OF}
      SELECT d.* FROM origins AS o JOIN unnest($1::bigint[], $2::integer[]) AS w(merchant_id, per_origin) ON w.merchant_id = o.merchant_id
      CROSS JOIN LATERAL (
        SELECT ${WORK_COLUMNS} FROM image_mirrors AS e
        WHERE e.merchant_id = o.merchant_id AND e.state = 'pending' AND e.origin = o.origin AND e.next_attempt_at <= $3
        ORDER BY e.next_attempt_at LIMIT w.per_origin FOR UPDATE SKIP LOCKED
      ) AS d
      WHERE o.origin IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM unnest($4::bigint[], $5::text[]) AS f(merchant_id, origin) WHERE f.merchant_id = o.merchant_id AND f.origin = o.origin)`,
      [asked.map((a) => a.merchantId), asked.map((a) => a.perOrigin), now, full.map(([m]) => m), full.map(([, origin]) => origin)],
    );
  }

  async earliestPendingByOrigin(merchantIds: number[]): Promise<Map<number, Map<string, string>>> {
    // The earliest of each origin of each merchant (one probe per origin, from the same index as the claim's).
    const rows = await this.c.preparedRows<{ merchant_id: number; origin: string; at: string } & Record<string, unknown>>(
      'images.earliestPendingByOrigin',
      `${PENDING_ORIGINS_OF}
      SELECT o.merchant_id, o.origin, d.at FROM origins AS o CROSS JOIN LATERAL (
        SELECT e.next_attempt_at AS at FROM image_mirrors AS e WHERE e.merchant_id = o.merchant_id AND e.state = 'pending' AND e.origin = o.origin
        ORDER BY e.next_attempt_at LIMIT 1
      ) AS d WHERE o.origin IS NOT NULL AND d.at IS NOT NULL`,
      [merchantIds],
    );
    const earliest = new Map<number, Map<string, string>>(merchantIds.map((id) => [id, new Map()]));
    for (const row of rows) earliest.get(Number(row.merchant_id))?.set(row.origin, row.at);
    return earliest;
  }

  async earliestFirstFailure(merchantId: number, origin: string): Promise<string | null> {
    const [row] = await this.c.preparedRows<{ at: string | null }>(
      'images.earliestFirstFailure',
      `SELECT first_failure_at AS at FROM image_mirrors
      WHERE merchant_id = $1 AND origin = $2 AND state = 'pending' AND first_failure_at IS NOT NULL
      ORDER BY first_failure_at LIMIT 1`,
      [merchantId, origin],
    );
    return row?.at ?? null;
  }

  async expiredImagesOf(
    merchantId: number,
    origin: string,
    cutoff: string,
    neverFetchedToo: boolean,
    limit: number,
  ): Promise<ClaimedImageMirror[]> {
    // Two ranges of two indexes (by first failure; by next attempt), each exact: every row read is one.
    // Prepared: a claim beside a down origin runs them at every claim (planning was most of their cost).
    const failed = await this.c.preparedRows<ClaimedRow>(
      'images.expiredFailed',
      `SELECT ${WORK_COLUMNS} FROM image_mirrors
      WHERE merchant_id = $1 AND origin = $2 AND state = 'pending' AND first_failure_at IS NOT NULL AND first_failure_at <= $3
      ORDER BY first_failure_at LIMIT $4 FOR UPDATE SKIP LOCKED`,
      [merchantId, origin, cutoff, limit],
    );
    if (!neverFetchedToo || failed.length >= limit) return failed;
    const seen = new Set(failed.map((image) => image.url));
    const waited = (
      await this.c.preparedRows<ClaimedRow>(
        'images.expiredWaited',
        `SELECT ${WORK_COLUMNS} FROM image_mirrors
        WHERE merchant_id = $1 AND origin = $2 AND state = 'pending' AND next_attempt_at <= $3
        ORDER BY next_attempt_at LIMIT $4 FOR UPDATE SKIP LOCKED`,
        [merchantId, origin, cutoff, limit],
      )
    ).filter((image) => !seen.has(image.url));
    return [...failed, ...waited].slice(0, limit);
  }

  async settleHints(settles: { hint: ImageWorkHint; dueAt: string | null }[]): Promise<void> {
    // One statement: each hint's compare-and-set on its version (a hint another transaction is
    // lowering is left to it, SKIP LOCKED: its version moves anyway); a null due time removes it.
    await this.c.preparedRows(
      'images.settleHints',
      `WITH s AS (SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[]) AS s(merchant_id, version, due_at)),
      locked AS (
        SELECT h.merchant_id FROM image_work_merchants AS h JOIN s ON h.merchant_id = s.merchant_id AND h.version = s.version
        FOR UPDATE OF h SKIP LOCKED
      ), removed AS (
        DELETE FROM image_work_merchants AS w USING s
        WHERE w.merchant_id = s.merchant_id AND s.due_at IS NULL AND w.merchant_id IN (SELECT merchant_id FROM locked)
        RETURNING 1
      ), settled AS (
        UPDATE image_work_merchants AS w SET due_at = s.due_at FROM s
        WHERE w.merchant_id = s.merchant_id AND s.due_at IS NOT NULL AND w.merchant_id IN (SELECT merchant_id FROM locked)
        RETURNING 1
      ) SELECT (SELECT count(*) FROM removed)::integer AS removed, (SELECT count(*) FROM settled)::integer AS settled`,
      [settles.map((s) => s.hint.merchantId), settles.map((s) => s.hint.version), settles.map((s) => s.dueAt)],
    );
  }

  async lease(images: ClaimedImageMirror[], leaseUntil: string): Promise<void> {
    await this.c.preparedRun(
      'images.lease',
      `UPDATE image_mirrors AS m SET next_attempt_at = $1
      FROM unnest($2::bigint[], $3::text[]) AS leased(merchant_id, url) WHERE m.merchant_id = leased.merchant_id AND m.url = leased.url`,
      [leaseUntil, images.map((i) => i.merchant_id), images.map((i) => i.url)],
    );
  }

  async leaseAndSettle(images: ClaimedImageMirror[], leaseUntil: string, settles: { hint: ImageWorkHint; dueAt: string }[]): Promise<void> {
    // One round trip: the lease, and each hint's compare-and-set on its version (a hint another
    // transaction is lowering is left to it, SKIP LOCKED, as settleHint leaves it).
    await this.c.preparedRows(
      'images.leaseAndSettle',
      `WITH leased AS (
        UPDATE image_mirrors AS m SET next_attempt_at = $1
        FROM unnest($2::bigint[], $3::text[]) AS leased(merchant_id, url) WHERE m.merchant_id = leased.merchant_id AND m.url = leased.url
        RETURNING 1
      ), settled AS (
        UPDATE image_work_merchants AS w SET due_at = s.due_at
        FROM unnest($4::bigint[], $5::text[]) AS s(merchant_id, due_at)
        WHERE w.merchant_id = s.merchant_id AND w.merchant_id IN (
          SELECT h.merchant_id FROM image_work_merchants AS h JOIN unnest($4::bigint[], $6::bigint[]) AS v(merchant_id, version)
            ON h.merchant_id = v.merchant_id AND h.version = v.version
          FOR UPDATE OF h SKIP LOCKED)
        RETURNING 1
      ) SELECT (SELECT count(*) FROM leased)::integer AS leased, (SELECT count(*) FROM settled)::integer AS settled`,
      [
        leaseUntil,
        images.map((i) => i.merchant_id),
        images.map((i) => i.url),
        settles.map((s) => s.hint.merchantId),
        settles.map((s) => s.dueAt),
        settles.map((s) => s.hint.version),
      ],
    );
  }

  async failingOrigins(merchantIds: number[]): Promise<Map<number, FailingOrigin[]>> {
    const rows = await this.c.preparedRows<FailingOrigin & { merchant_id: number } & Record<string, unknown>>(
      'images.failingOriginsOf',
      'SELECT merchant_id, origin, down_since, next_probe_at, last_error FROM image_origins WHERE merchant_id = ANY($1::bigint[])',
      [merchantIds],
    );
    const failing = new Map<number, FailingOrigin[]>(merchantIds.map((id) => [id, []]));
    for (const { merchant_id, ...origin } of rows) failing.get(Number(merchant_id))?.push(origin);
    return failing;
  }

  async leaseProbe(merchantId: number, origin: string, until: string): Promise<void> {
    await this.c.run('UPDATE image_origins SET next_probe_at = $1 WHERE merchant_id = $2 AND origin = $3', [until, merchantId, origin]);
  }
}

export class PgImages implements ImageStore {
  static readonly writes = [
    'ensureImageMirrors',
    'claimDueImageMirrors',
    'updateImageMirror',
    'updateImageMirrors',
    'countImageOriginFailure',
    'putImageOrigin',
    'clearImageOrigin',
  ] as const;

  private readonly claims: PgImageClaimQueries;

  constructor(private readonly c: PgConnection) {
    this.claims = new PgImageClaimQueries(c);
  }

  async imageMirrors(merchantId: number, urls: string[]): Promise<Map<string, ImageMirrorRecord>> {
    const mirrors = new Map<string, ImageMirrorRecord>();
    if (urls.length === 0) return mirrors;
    // An index probe per URL, each its own subquery (OFFSET 0 keeps it one): as `url = ANY($2)` a
    // table without statistics yet (a large import's first chunks publish while it grows) had the
    // planner filter every image of the merchant.
    const rows = await this.c.rows<ImageMirrorRecord & Record<string, unknown>>(
      `SELECT m.url, m.state, m.mirrored_url FROM unnest($2::text[]) AS u(url)
      CROSS JOIN LATERAL (SELECT url, state, mirrored_url FROM image_mirrors WHERE merchant_id = $1 AND url = u.url OFFSET 0) AS m`,
      [merchantId, urls],
    );
    for (const row of rows) mirrors.set(row.url, row);
    return mirrors;
  }

  async ensureImageMirrors(merchantId: number, urls: string[], at: string): Promise<void> {
    await ensureMirrorRows(this.c, merchantId, urls, at);
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
    const row = await this.c.one<{ state: string; next_attempt_at: string | null }>(
      `UPDATE image_mirrors SET ${fields.map((f, i) => `${f} = $${i + 1}`).join(', ')}
      WHERE merchant_id = $${fields.length + 1} AND url = $${fields.length + 2} RETURNING state, next_attempt_at`,
      [...fields.map((f) => patch[f] as unknown), merchantId, url],
    );
    // Pending again (a release, a backoff, retry-dead): the merchant's hint must not be later than it.
    if (row?.state === 'pending' && row.next_attempt_at !== null)
      await this.c.run(LOWER_IMAGE_WORK_HINT, [merchantId, row.next_attempt_at]);
    // A dead image put back to pending (retry-dead) is work for the mirrors.
    if (patch.state === 'pending') await notifyWork(this.c, 'images');
  }

  async updateImageMirrors(merchantId: number, changes: ImageMirrorChange[]): Promise<number[]> {
    // The changes with the same fields (a batch's mirrored ones, its dead ones) in one UPDATE from
    // their arrays; a URL given twice: its last change.
    const last = new Map(changes.map((change) => [change.url, change.patch]));
    const groups = new Map<string, { fields: (typeof IMAGE_FIELDS)[number][]; urls: string[]; values: unknown[][] }>();
    for (const [url, patch] of last) {
      const fields = IMAGE_FIELDS.filter((f) => f in patch);
      if (fields.length === 0) continue;
      const key = fields.join(' ');
      const group = groups.get(key) ?? { fields, urls: [], values: fields.map(() => []) };
      groups.set(key, group);
      group.urls.push(url);
      fields.forEach((f, i) => group.values[i]!.push(patch[f] ?? null));
    }
    let dueAt: string | null = null;
    for (const { fields, urls, values } of groups.values()) {
      // Prepared per set of fields (a few: mirrored, dead, released, backed off), named by its
      // bits in IMAGE_FIELDS (a statement's name is at most 63 bytes).
      const set = fields.reduce((bits, f) => bits | (1 << IMAGE_FIELDS.indexOf(f)), 0);
      const rows = await this.c.preparedRows<{ state: string; next_attempt_at: string | null }>(
        `images.updateMirrors.${set}`,
        // The merchant a column of the rows, not a constant: with `m.merchant_id = $1` a table
        // without statistics yet (right after a large import) is estimated at a few dozen rows of
        // the merchant, and the planner hash-joined all of them; here it can only probe the
        // primary key once per URL (or scan a table too small to matter).
        `UPDATE image_mirrors AS m SET ${fields.map((f) => `${f} = u.${f}`).join(', ')}
        FROM unnest($1::bigint[], $2::text[], ${fields.map((f, i) => `$${i + 3}::${f === 'attempts' ? 'integer' : 'text'}[]`).join(', ')})
          AS u(merchant_id, url, ${fields.join(', ')})
        WHERE m.merchant_id = u.merchant_id AND m.url = u.url RETURNING m.state, m.next_attempt_at`,
        [urls.map(() => merchantId), urls, ...values],
      );
      // Pending again (a release, a backoff, retry-dead): the merchant's hint must not be later than it.
      for (const row of rows)
        if (row.state === 'pending' && row.next_attempt_at !== null && (dueAt === null || row.next_attempt_at < dueAt))
          dueAt = row.next_attempt_at;
    }
    if (dueAt !== null) await this.c.preparedRun('images.lowerHint', LOWER_IMAGE_WORK_HINT, [merchantId, dueAt]);
    if ([...last.values()].some((patch) => patch.state === 'pending')) await notifyWork(this.c, 'images');
    if (last.size === 0) return [];
    // Their products, locked in id order as productIdsWithImage locks them (in a write transaction).
    // Their ids from the links first, then those rows by primary key: as a semi-join under ORDER BY
    // p.id the planner walked every product of the merchant in id order (22 ms a commit at 22,000
    // products, for a few dozen). The links an index range per URL, each its own subquery (OFFSET 0
    // keeps it one): as `value = ANY($2)` a table without statistics yet had it filter every image
    // link of the merchant (21 ms a commit of 30 images at 20,000 products).
    const lock = this.c.inWriteTransaction;
    return (
      await this.c.preparedRows<{ id: number }>(
        lock ? 'images.productsOfImages.locked' : 'images.productsOfImages',
        `SELECT p.id FROM products AS p WHERE p.id = ANY(ARRAY(SELECT l.product_id FROM unnest($2::text[]) AS u(url)
          CROSS JOIN LATERAL (SELECT product_id FROM product_links
            WHERE merchant_id = $1 AND kind = 'image' AND value = u.url OFFSET 0) AS l)) AND p.merchant_id = $1
        ORDER BY p.id ${lock ? 'FOR NO KEY UPDATE OF p' : ''}`,
        [merchantId, [...last.keys()]],
      )
    ).map((r) => Number(r.id));
  }

  async imageStateCounts(merchantId: number): Promise<ImageStateCounts> {
    // Per distinct source URL that a product of the merchant still lists: counts the triggers keep
    // (migration 48: the counts rows plus the deltas not folded into them yet), not a count of the rows.
    const counts: ImageStateCounts = { pending: 0, mirrored: 0, dead: 0 };
    const rows = await this.c.rows<{ state: keyof ImageStateCounts; n: number }>(
      `SELECT state, sum(n)::integer AS n FROM (SELECT state, n FROM image_state_counts WHERE merchant_id = $1
      UNION ALL SELECT state, n FROM image_state_count_deltas WHERE merchant_id = $1) AS kept GROUP BY state`,
      [merchantId],
    );
    for (const row of rows) counts[row.state] = row.n;
    return counts;
  }

  async deadImages(merchantId: number, limit: number): Promise<ImageMirrorWork[]> {
    // The ones imageStateCounts counts: a source URL no product lists any more is neither shown nor retried.
    return this.c.rows<WorkRow>(
      `SELECT ${WORK_COLUMNS} FROM image_mirrors
      WHERE merchant_id = $1 AND state = 'dead' AND listed > 0 ORDER BY updated_at DESC, url LIMIT $2`,
      [merchantId, limit],
    );
  }

  async imageOrigins(merchantId: number): Promise<ImageOriginState[]> {
    return this.c.rows<ImageOriginState & Record<string, unknown>>(
      `SELECT origin, failures, down_since, next_probe_at, probe_ms, last_error FROM image_origins WHERE merchant_id = $1
      ORDER BY down_since IS NULL, down_since, origin`,
      [merchantId],
    );
  }

  async pendingImageOrigins(merchantId: number, limit: number): Promise<string[]> {
    const rows = await this.c.rows<{ origin: string }>(`${PENDING_ORIGINS} SELECT origin FROM origins WHERE origin IS NOT NULL LIMIT $2`, [
      merchantId,
      limit,
    ]);
    return rows.map((r) => r.origin);
  }

  async countPendingImagesOf(merchantId: number, origin: string, countMax: number): Promise<number> {
    const row = await this.c.one<{ n: number }>(
      `SELECT count(*)::integer AS n FROM (SELECT 1 FROM image_mirrors
      WHERE merchant_id = $1 AND origin = $2 AND state = 'pending' LIMIT $3) AS waiting`,
      [merchantId, origin, countMax],
    );
    return row?.n ?? 0;
  }

  async countImageOriginFailure(merchantId: number, origin: string, error: string): Promise<ImageOriginState> {
    return (await this.c.one<ImageOriginState & Record<string, unknown>>(
      `INSERT INTO image_origins (merchant_id, origin, failures, last_error) VALUES ($1, $2, 1, $3)
      ON CONFLICT (merchant_id, origin) DO UPDATE SET failures = image_origins.failures + 1, last_error = excluded.last_error
      RETURNING origin, failures, down_since, next_probe_at, probe_ms, last_error`,
      [merchantId, origin, error],
    ))!;
  }

  async putImageOrigin(merchantId: number, state: ImageOriginState): Promise<void> {
    await this.c.run(
      `INSERT INTO image_origins (merchant_id, origin, failures, down_since, next_probe_at, probe_ms, last_error)
      VALUES ($1, $2, $3, $4, $5, $6, $7)
      ON CONFLICT (merchant_id, origin) DO UPDATE SET down_since = excluded.down_since,
        next_probe_at = excluded.next_probe_at, probe_ms = excluded.probe_ms`,
      [merchantId, state.origin, state.failures, state.down_since, state.next_probe_at, state.probe_ms, state.last_error],
    );
  }

  async clearImageOrigin(merchantId: number, origin: string, at: string): Promise<void> {
    const cleared = await this.c.run('DELETE FROM image_origins WHERE merchant_id = $1 AND origin = $2', [merchantId, origin]);
    // Its images wait no more: the merchant's hint (settled to the next probe, perhaps) must not be later.
    if (cleared > 0) {
      await this.c.run(LOWER_IMAGE_WORK_HINT, [merchantId, at]);
      await notifyWork(this.c, 'images');
    }
  }
}
