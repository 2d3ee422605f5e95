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
//   next probe is due; then one of its images is claimed, and the probe leased like the image.
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
  /** When the merchant's earliest pending image is due (null: none is pending). */
  earliestPending(merchantId: number): Promise<string | null>;
  /** Sets the hint to dueAt (null: removes it) if its version is still hint.version. */
  settleHint(hint: ImageWorkHint, dueAt: string | null): Promise<void>;
  /** Leases the images until leaseUntil. */
  lease(images: ClaimedImageMirror[], leaseUntil: string): Promise<void>;
  /** The merchant's origins whose last fetch failed (image_origins): a few rows. */
  failingOrigins(merchantId: number): Promise<Pick<ImageOriginState, 'origin' | 'down_since' | 'next_probe_at'>[]>;
  /** No other probe of the down origin until `until` (the probe's lease; its outcome sets the next one). */
  leaseProbe(merchantId: number, origin: string, until: string): Promise<void>;
}

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
      const probing = new Set<string>();
      for (const origin of failing) {
        if (origin.down_since === null) continue;
        if (origin.next_probe_at !== null && origin.next_probe_at > now) fullOrigins.push(origin.origin);
        else probing.add(origin.origin);
      }
      const failingOrigins = new Set(failing.map((o) => o.origin));
      const window = Math.min(limit, fairness.perMerchant - fetching, fairness.perOrigin);
      const probed = new Set<string>();
      const due = (await queries.dueImagesOf(hint.merchantId, now, fullOrigins, window))
        .sort(byDue)
        .filter((image) => {
          if (!probing.has(image.origin)) return true;
          if (probed.has(image.origin)) return false;
          probed.add(image.origin);
          return true;
        })
        .map((image) => ({
          ...image,
          origin_failing: failingOrigins.has(image.origin),
          probe: probing.has(image.origin),
        }));
      if (due.length > 0) {
        candidates.push(...due);
        if (fetching === 0) idleWithWork++;
        const earliest = due.reduce(
          (min, image) => (image.next_attempt_at! < min ? image.next_attempt_at! : min),
          due[0]!.next_attempt_at!,
        );
        // Still a lower bound (the earliest of the origins not full): sharper turn order next time.
        if (fullOrigins.length === 0 && earliest > hint.dueAt) await queries.settleHint(hint, earliest);
        continue;
      }
      // Nothing due here now (leased, backing off, or the origins with due work are full): the hint
      // moves to the merchant's earliest pending work, or goes when there is none.
      const earliest = await queries.earliestPending(hint.merchantId);
      if (earliest === null || earliest > now) await queries.settleHint(hint, earliest);
    }
    if (hints.length < page || idleWithWork >= limit) break;
    const last = hints[hints.length - 1]!;
    after = { dueAt: last.dueAt, merchantId: last.merchantId };
  }
  const chosen = takeImageTurns(candidates, limit, fairness, busyMerchant, busyOrigin);
  if (chosen.length > 0) await queries.lease(chosen, leaseUntil);
  for (const image of chosen) if (image.probe) await queries.leaseProbe(image.merchant_id, image.origin, leaseUntil);
  return chosen;
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
