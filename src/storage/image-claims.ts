// How a claim picks image work on every engine (fair turns: docs/operating.md#image-mirroring; a
// bounded cost: docs/architecture.md#every-statement-bounded). Each
// statement it runs is bounded by the work it can take, never by the catalog nor by the number of
// merchants:
// - merchants with work come from image_work_merchants, one row per merchant with pending images:
//   `due_at` is a lower bound of its earliest pending image's next attempt (every write that makes an
//   image due sooner lowers it; leases and backoffs leave it), settled to the exact value by the claim
//   that finds nothing due there; `version` moves with every lowering, so a settle never hides work
//   a concurrent write just added (PostgreSQL: the settle is a compare-and-set on it);
// - within a merchant, its origins come from a loose index scan of (merchant, origin, next attempt)
//   over the pending images, and each origin's oldest due work from a range of that index;
// - a down origin (image_origins: CPS_IMAGE_ORIGIN_FAILURES failures in a row) is skipped until its
//   next probe is due; then one of its images is claimed, and the probe leased like the image;
// - a down origin's images whose own time is up (CPS_IMAGE_DEAD_AFTER_HOURS since their first
//   failure, or since the origin went down for one never fetched) come from two index ranges and are
//   claimed `expired`: they become dead without a fetch, as a fetch would have failed;
// - a merchant whose only pending work is on down origins is settled to its next probe or the first
//   of its images' own times, whichever is first: claims do not visit it before.
import type { ImageClaimFairness } from './port.js';
import type { ClaimedImageMirror, ImageOriginState } from './records.js';

export interface ImageWorkHint {
  merchantId: number;
  dueAt: string;
  version: number;
}

/** What an engine answers a claim with: each a bounded statement. */
export interface ImageClaimQueries {
  /** Hints due at `now`, in (dueAt, merchantId) order after `after`, at most `limit`. */
  dueMerchants(now: string, after: Pick<ImageWorkHint, 'dueAt' | 'merchantId'> | null, limit: number): Promise<ImageWorkHint[]>;
  /**
   * The merchant's oldest due images of each origin with pending work (origins in `fullOrigins`
   * skipped), at most `perOrigin` of each. PostgreSQL: locked (another claim skips them).
   */
  dueImagesOf(merchantId: number, now: string, fullOrigins: string[], perOrigin: number): Promise<ClaimedImageMirror[]>;
  /** When each origin's earliest pending image of the merchant is due (one probe per origin; none: nothing pending). */
  earliestPendingByOrigin(merchantId: number): Promise<Map<string, string>>;
  /** The earliest first failure of the origin's pending images (from its index; null: none failed). */
  earliestFirstFailure(merchantId: number, origin: string): Promise<string | null>;
  /**
   * The origin's pending images whose own time is up at `cutoff` (now less the dead-after period):
   * their first failure at or before it and, when `neverFetchedToo`, those due at or before it
   * (an image due by then and not failed yet waited on the down origin since). At most `limit`;
   * PostgreSQL: locked (another claim skips them).
   */
  expiredImagesOf(
    merchantId: number,
    origin: string,
    cutoff: string,
    neverFetchedToo: boolean,
    limit: number,
  ): Promise<ClaimedImageMirror[]>;
  /** Sets the hint to dueAt (null: removes it) if its version is still hint.version. */
  settleHint(hint: ImageWorkHint, dueAt: string | null): Promise<void>;
  /** Leases the images until leaseUntil. */
  lease(images: ClaimedImageMirror[], leaseUntil: string): Promise<void>;
  /**
   * Leases the images and settles the hints (each as settleHint would) at once: an engine that
   * can do both in one round trip offers it (PostgreSQL); otherwise lease, then settleHint each.
   */
  leaseAndSettle?(images: ClaimedImageMirror[], leaseUntil: string, settles: { hint: ImageWorkHint; dueAt: string }[]): Promise<void>;
  /** The merchant's origins whose last fetch failed (image_origins): a few rows. */
  failingOrigins(merchantId: number): Promise<FailingOrigin[]>;
  /** No other probe of the down origin until `until` (the probe's lease; its outcome sets the next one). */
  leaseProbe(merchantId: number, origin: string, until: string): Promise<void>;
}

type FailingOrigin = Pick<ImageOriginState, 'origin' | 'down_since' | 'next_probe_at' | 'last_error'>;

const later = (a: string, b: string) => (a > b ? a : b);
const earlier = (a: string | null, b: string | null) => (a === null ? b : b === null ? a : a < b ? a : b);

const byDue = (a: ClaimedImageMirror, b: ClaimedImageMirror) => {
  const at = a.next_attempt_at ?? '';
  const bt = b.next_attempt_at ?? '';
  return at < bt ? -1 : at > bt ? 1 : a.url < b.url ? -1 : a.url > b.url ? 1 : 0;
};

/**
 * Claims up to `limit` due images: merchants take turns (the fewest fetches first, then the oldest
 * due work), and within a merchant its origins; nothing past `perMerchant` fetches of a merchant nor
 * `perOrigin` of one origin of a merchant, counting those busy. See ImageStore.claimDueImageMirrors.
 */
export async function claimImages(
  queries: ImageClaimQueries,
  now: string,
  limit: number,
  leaseUntil: string,
  fairness: ImageClaimFairness,
): Promise<ClaimedImageMirror[]> {
  if (limit <= 0) return [];
  const busyMerchant = new Map<number, number>();
  const busyOrigin = new Map<string, number>();
  for (const busy of fairness.busy) {
    busyMerchant.set(busy.merchant_id, (busyMerchant.get(busy.merchant_id) ?? 0) + busy.fetching);
    busyOrigin.set(`${busy.merchant_id} ${busy.origin}`, (busyOrigin.get(`${busy.merchant_id} ${busy.origin}`) ?? 0) + busy.fetching);
  }
  // Merchants with no fetch busy come first in turn order: `limit` of them with work fill the claim,
  // so looking further than the busy ones and `limit` more could not change the outcome.
  const page = Math.min(limit, 1000) + busyMerchant.size;
  const candidates: ClaimedImageMirror[] = [];
  // Merchants with a down origin that had due work: settled once their images and probes are leased.
  const settleAfterLease: { hint: ImageWorkHint; down: (FailingOrigin & { down_since: string })[] }[] = [];
  // Hints sharpened to the earliest image claimed of them: settled with the lease.
  const sharpened: { hint: ImageWorkHint; dueAt: string }[] = [];
  let idleWithWork = 0;
  let after: Pick<ImageWorkHint, 'dueAt' | 'merchantId'> | null = null;
  for (;;) {
    const hints = await queries.dueMerchants(now, after, page);
    for (const hint of hints) {
      const fetching = busyMerchant.get(hint.merchantId) ?? 0;
      if (fetching >= fairness.perMerchant) continue;
      const fullOrigins = fairness.busy
        .filter((b) => b.merchant_id === hint.merchantId && (busyOrigin.get(`${b.merchant_id} ${b.origin}`) ?? 0) >= fairness.perOrigin)
        .map((b) => b.origin);
      // Down origins wait for their probe time; then one image of each is their probe.
      const failing = await queries.failingOrigins(hint.merchantId);
      const down = failing.filter((o): o is FailingOrigin & { down_since: string } => o.down_since !== null);
      const probing = new Set<string>();
      for (const origin of down) {
        if (origin.next_probe_at !== null && origin.next_probe_at > now) fullOrigins.push(origin.origin);
        else probing.add(origin.origin);
      }
      const failingOrigins = new Set(failing.map((o) => o.origin));
      const window = Math.min(limit, fairness.perMerchant - fetching, fairness.perOrigin);
      // A down origin's backlog still ages: the images whose own time is up, at most a window of each.
      const expired: ClaimedImageMirror[] = [];
      if (fairness.deadAfterMs !== undefined) {
        const cutoff = new Date(Date.parse(now) - fairness.deadAfterMs).toISOString();
        for (const origin of down) {
          for (const image of await queries.expiredImagesOf(hint.merchantId, origin.origin, cutoff, origin.down_since <= cutoff, window)) {
            const firstFailure = image.first_failure_at ?? later(origin.down_since, image.next_attempt_at ?? origin.down_since);
            const lastError = origin.last_error ?? image.last_error ?? 'connection_error';
            expired.push({ ...image, origin_failing: true, expired: { first_failure_at: firstFailure, last_error: lastError } });
          }
        }
      }
      const expiredUrls = new Set(expired.map((image) => image.url));
      const probed = new Set<string>();
      const found = await queries.dueImagesOf(hint.merchantId, now, fullOrigins, window);
      // An up origin that gave a whole window may have more due now: the merchant's work is due still.
      const perOrigin = new Map<string, number>();
      for (const image of found) perOrigin.set(image.origin, (perOrigin.get(image.origin) ?? 0) + 1);
      const moreDue = [...perOrigin].some(([origin, n]) => n >= window && !down.some((o) => o.origin === origin));
      const due = found
        .filter((image) => !expiredUrls.has(image.url))
        .sort(byDue)
        .filter((image) => {
          if (!probing.has(image.origin)) return true;
          if (probed.has(image.origin)) return false;
          probed.add(image.origin);
          return true;
        })
        .map((image) => {
          const claimed: ClaimedImageMirror = {
            ...image,
            origin_failing: failingOrigins.has(image.origin),
            probe: probing.has(image.origin),
          };
          const downSince = probing.has(image.origin) ? down.find((o) => o.origin === image.origin)!.down_since : null;
          if (downSince !== null && image.first_failure_at === null)
            claimed.waiting_since = later(downSince, image.next_attempt_at ?? downSince);
          return claimed;
        });
      if (due.length > 0 || expired.length > 0) {
        candidates.push(...due, ...expired);
        if (fetching === 0) idleWithWork++;
        if (due.length === 0) continue;
        // A down origin's due backlog keeps the hint at its oldest image: once the claim's leases are
        // taken, the hint moves to the next probe (or whatever else is due first), so that polls do
        // not visit the merchant in between.
        // (Not when an up origin has more due: the hint would stay where it is, at or before now.)
        if (down.length > 0 && expired.length === 0) {
          if (!moreDue) settleAfterLease.push({ hint, down });
          continue;
        }
        const earliest = due.reduce(
          (min, image) => (image.next_attempt_at! < min ? image.next_attempt_at! : min),
          due[0]!.next_attempt_at!,
        );
        // Still a lower bound (the earliest of the origins not full): sharper turn order next time.
        if (fullOrigins.length === 0 && expired.length === 0 && earliest > hint.dueAt) sharpened.push({ hint, dueAt: earliest });
        continue;
      }
      // Nothing due here now (leased, backing off, down, or the origins with due work are full): the
      // hint moves to when the merchant's work may be due next, or goes when there is none.
      const next = await nextWorkAt(queries, hint.merchantId, down, fairness.deadAfterMs);
      if (next === null || next > now) await queries.settleHint(hint, next);
    }
    if (hints.length < page || idleWithWork >= limit) break;
    const last = hints[hints.length - 1]!;
    after = { dueAt: last.dueAt, merchantId: last.merchantId };
  }
  const chosen = takeImageTurns(candidates, limit, fairness, busyMerchant, busyOrigin);
  if (chosen.length > 0 && queries.leaseAndSettle) await queries.leaseAndSettle(chosen, leaseUntil, sharpened);
  else {
    if (chosen.length > 0) await queries.lease(chosen, leaseUntil);
    for (const { hint, dueAt } of sharpened) await queries.settleHint(hint, dueAt);
  }
  for (const image of chosen) if (image.probe) await queries.leaseProbe(image.merchant_id, image.origin, leaseUntil);
  for (const { hint, down } of settleAfterLease) {
    // Nothing chosen of it (the claim was full): its work is still due, the hint stays.
    const probed = new Set(chosen.filter((i) => i.probe && i.merchant_id === hint.merchantId).map((i) => i.origin));
    if (!chosen.some((i) => i.merchant_id === hint.merchantId)) continue;
    const leased = down.map((o) => (probed.has(o.origin) ? { ...o, next_probe_at: leaseUntil } : o));
    const next = await nextWorkAt(queries, hint.merchantId, leased, fairness.deadAfterMs);
    if (next === null || next > now) await queries.settleHint(hint, next);
  }
  return chosen;
}

/**
 * When the merchant's pending work may be claimed next (a lower bound; null: nothing is pending):
 * an up origin's earliest pending image; a down origin's next probe (once one of its images is due)
 * or the first of its images' own times to be up, whichever comes first.
 */
async function nextWorkAt(
  queries: ImageClaimQueries,
  merchantId: number,
  down: (FailingOrigin & { down_since: string })[],
  deadAfterMs: number | undefined,
): Promise<string | null> {
  const downByOrigin = new Map(down.map((o) => [o.origin, o]));
  let next: string | null = null;
  for (const [origin, earliest] of await queries.earliestPendingByOrigin(merchantId)) {
    const isDown = downByOrigin.get(origin);
    if (!isDown) {
      next = earlier(next, earliest);
      continue;
    }
    next = earlier(next, later(earliest, isDown.next_probe_at ?? earliest));
    if (deadAfterMs === undefined) continue;
    // Its images' own times: the earliest first failure, or since the origin is down for those never failed.
    const firstFailure = await queries.earliestFirstFailure(merchantId, origin);
    const start = earlier(firstFailure, later(isDown.down_since, earliest))!;
    next = earlier(next, new Date(Date.parse(start) + deadAfterMs).toISOString());
  }
  return next;
}

/** The fair turn order over the candidates: origins within a merchant, then merchants. */
function takeImageTurns(
  candidates: ClaimedImageMirror[],
  limit: number,
  fairness: ImageClaimFairness,
  busyMerchant: ReadonlyMap<number, number>,
  busyOrigin: ReadonlyMap<string, number>,
): ClaimedImageMirror[] {
  const originTurns = new Map<string, number>();
  const withinOrigins = [...candidates]
    .sort(byDue)
    .map((image) => {
      const key = `${image.merchant_id} ${image.origin}`;
      const turn = (originTurns.get(key) ?? busyOrigin.get(key) ?? 0) + 1;
      originTurns.set(key, turn);
      return { image, originTurn: turn };
    })
    .filter((c) => c.originTurn <= fairness.perOrigin);
  const merchantTurns = new Map<number, number>();
  const ranked = withinOrigins
    .sort((a, b) => a.originTurn - b.originTurn || byDue(a.image, b.image))
    .map((c) => {
      const turn = (merchantTurns.get(c.image.merchant_id) ?? busyMerchant.get(c.image.merchant_id) ?? 0) + 1;
      merchantTurns.set(c.image.merchant_id, turn);
      return { image: c.image, merchantTurn: turn };
    })
    .filter((c) => c.merchantTurn <= fairness.perMerchant);
  ranked.sort((a, b) => a.merchantTurn - b.merchantTurn || byDue(a.image, b.image));
  return ranked.slice(0, limit).map((c) => c.image);
}
