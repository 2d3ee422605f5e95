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

/** What an engine answers a claim with: each a bounded statement, for one merchant or a page of them. */
export interface ImageClaimQueries {
  /** Hints due at `now`, in (dueAt, merchantId) order after `after`, at most `limit`. */
  dueMerchants(now: string, after: Pick<ImageWorkHint, 'dueAt' | 'merchantId'> | null, limit: number): Promise<ImageWorkHint[]>;
  /**
   * Each asked merchant's oldest due images of each origin with pending work (its `fullOrigins`
   * skipped), at most its `perOrigin` of each: a page of merchants at once (PostgreSQL: one
   * statement; locked, another claim skips them).
   */
  dueImagesOf(now: string, asked: DueImagesAsked[]): Promise<ClaimedImageMirror[]>;
  /** When each origin's earliest pending image of each merchant is due (one probe per origin; none: nothing pending). */
  earliestPendingByOrigin(merchantIds: number[]): Promise<Map<number, Map<string, string>>>;
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
  /** Sets each hint to its dueAt (null: removes it) if its version is still hint.version. */
  settleHints(settles: { hint: ImageWorkHint; dueAt: string | null }[]): Promise<void>;
  /** Leases the images until leaseUntil. */
  lease(images: ClaimedImageMirror[], leaseUntil: string): Promise<void>;
  /**
   * Leases the images and settles the hints (each as settleHints would) at once: an engine that
   * can do both in one round trip offers it (PostgreSQL); otherwise lease, then settleHints.
   */
  leaseAndSettle?(images: ClaimedImageMirror[], leaseUntil: string, settles: { hint: ImageWorkHint; dueAt: string }[]): Promise<void>;
  /** The merchants' origins whose last fetch failed (image_origins): a few rows each. */
  failingOrigins(merchantIds: number[]): Promise<Map<number, FailingOrigin[]>>;
  /** No other probe of the down origin until `until` (the probe's lease; its outcome sets the next one). */
  leaseProbe(merchantId: number, origin: string, until: string): Promise<void>;
}

/** A merchant whose due images a claim asks for. */
export interface DueImagesAsked {
  merchantId: number;
  /** Origins not asked (full, or down and not due for a probe). */
  fullOrigins: string[];
  /** At most this many of each origin. */
  perOrigin: number;
}

export type FailingOrigin = Pick<ImageOriginState, 'origin' | 'down_since' | 'next_probe_at' | 'last_error'>;
type DownOrigin = FailingOrigin & { down_since: string };

const later = (a: string, b: string) => (a > b ? a : b);
const earlier = (a: string | null, b: string | null) => (a === null ? b : b === null ? a : a < b ? a : b);

const byDue = (a: ClaimedImageMirror, b: ClaimedImageMirror) => {
  const at = a.next_attempt_at ?? '';
  const bt = b.next_attempt_at ?? '';
  return at < bt ? -1 : at > bt ? 1 : a.url < b.url ? -1 : a.url > b.url ? 1 : 0;
};

/** What a claim knows of a due merchant of its page once it has looked at its origins. */
interface Visit {
  hint: ImageWorkHint;
  fetching: number;
  fullOrigins: string[];
  down: DownOrigin[];
  probing: Set<string>;
  failing: Set<string>;
  window: number;
  expired: ClaimedImageMirror[];
}

/**
 * Claims up to `limit` due images: merchants take turns (the fewest fetches first, then the oldest
 * due work), and within a merchant its origins; nothing past `perMerchant` fetches of a merchant nor
 * `perOrigin` of one origin of a merchant, counting those busy. See ImageStore.claimDueImageMirrors.
 * Each page of due merchants is looked at with a few statements whatever its size (their failing
 * origins, their due images); the hints to settle are settled together at the end.
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
  const settleAfterLease: { hint: ImageWorkHint; down: DownOrigin[] }[] = [];
  // Merchants with nothing due now: their hints move to when their work may be due next.
  const settleIdle: { hint: ImageWorkHint; down: DownOrigin[] }[] = [];
  // Hints sharpened to the earliest image claimed of them: settled with the lease.
  const sharpened: { hint: ImageWorkHint; dueAt: string }[] = [];
  let idleWithWork = 0;
  let after: Pick<ImageWorkHint, 'dueAt' | 'merchantId'> | null = null;
  for (;;) {
    const hints = await queries.dueMerchants(now, after, page);
    const open = hints.filter((hint) => (busyMerchant.get(hint.merchantId) ?? 0) < fairness.perMerchant);
    const failingOf = open.length > 0 ? await queries.failingOrigins(open.map((h) => h.merchantId)) : new Map<number, FailingOrigin[]>();
    const visits: Visit[] = [];
    for (const hint of open) {
      const fetching = busyMerchant.get(hint.merchantId) ?? 0;
      const fullOrigins = fairness.busy
        .filter((b) => b.merchant_id === hint.merchantId && (busyOrigin.get(`${b.merchant_id} ${b.origin}`) ?? 0) >= fairness.perOrigin)
        .map((b) => b.origin);
      // Down origins wait for their probe time; then one image of each is their probe.
      const failing = failingOf.get(hint.merchantId) ?? [];
      const down = failing.filter((o): o is DownOrigin => o.down_since !== null);
      const probing = new Set<string>();
      for (const origin of down) {
        if (origin.next_probe_at !== null && origin.next_probe_at > now) fullOrigins.push(origin.origin);
        else probing.add(origin.origin);
      }
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
      visits.push({ hint, fetching, fullOrigins, down, probing, failing: new Set(failing.map((o) => o.origin)), window, expired });
    }
    // Each merchant's window first cut to its share of the claim when the page has more merchants
    // than the claim has room for windows: merchants take turns, so none is given more than its
    // share while the others fill theirs. A merchant whose cut window came back full is asked again
    // with its whole window when its next image could take a turn the claim reaches (the claim
    // short, or the merchant's turns coming before others' taken): the same outcome as asking
    // everyone for whole windows, without locking and reading windows the claim cannot take.
    const share = Math.max(1, Math.ceil(limit / Math.max(1, visits.length)));
    const cut = (v: Visit) => Math.min(v.window, share);
    const found = new Map<number, ClaimedImageMirror[]>();
    const collect = (images: ClaimedImageMirror[]) => {
      for (const image of images) {
        const of = found.get(image.merchant_id) ?? [];
        found.set(image.merchant_id, of);
        if (!of.some((i) => i.url === image.url)) of.push(image);
      }
    };
    if (visits.length > 0)
      collect(
        await queries.dueImagesOf(
          now,
          visits.map((v) => ({ merchantId: v.hint.merchantId, fullOrigins: v.fullOrigins, perOrigin: cut(v) })),
        ),
      );
    // The merchant's due images as the claim can take them: not those expired, one probe of a down origin.
    const dueOf = (visit: Visit): ClaimedImageMirror[] => {
      const expiredUrls = new Set(visit.expired.map((image) => image.url));
      const probed = new Set<string>();
      return (found.get(visit.hint.merchantId) ?? [])
        .filter((image) => !expiredUrls.has(image.url))
        .sort(byDue)
        .filter((image) => {
          if (!visit.probing.has(image.origin)) return true;
          if (probed.has(image.origin)) return false;
          probed.add(image.origin);
          return true;
        });
    };
    // An origin (not probed) that gave a whole window may have more due.
    const wholeWindows = (visit: Visit, window: number) => {
      const perOrigin = new Map<string, number>();
      for (const image of found.get(visit.hint.merchantId) ?? []) perOrigin.set(image.origin, (perOrigin.get(image.origin) ?? 0) + 1);
      return [...perOrigin].filter(([origin, n]) => n >= window && !visit.probing.has(origin)).map(([origin]) => origin);
    };
    const truncated = visits.filter((v) => cut(v) < v.window && wholeWindows(v, cut(v)).length > 0);
    const askedWhole = new Set<number>();
    if (truncated.length > 0) {
      const pageCandidates = visits.flatMap((v) => [...dueOf(v), ...v.expired]);
      const taken = takeImageTurns([...candidates, ...pageCandidates], limit, fairness, busyMerchant, busyOrigin);
      // The last merchant turn the claim reaches: a truncated merchant whose next image would take a
      // turn up to it could change the outcome (the claim short of its limit: any could).
      const takenOf = new Map<number, number>();
      for (const image of taken) takenOf.set(image.merchant_id, (takenOf.get(image.merchant_id) ?? 0) + 1);
      const lastTurn = Math.max(0, ...[...takenOf].map(([merchantId, n]) => (busyMerchant.get(merchantId) ?? 0) + n));
      const couldGain = (v: Visit) => {
        const merchantId = v.hint.merchantId;
        // Each candidate's turn within its origin; an image past an origin's cut window comes after all of that origin's.
        const originTurns: number[] = [];
        const seen = new Map<string, number>();
        for (const image of [...dueOf(v), ...v.expired].sort(byDue)) {
          const turn = (seen.get(image.origin) ?? busyOrigin.get(`${merchantId} ${image.origin}`) ?? 0) + 1;
          seen.set(image.origin, turn);
          originTurns.push(turn);
        }
        return wholeWindows(v, cut(v)).some((origin) => {
          const originTurn = (busyOrigin.get(`${merchantId} ${origin}`) ?? 0) + cut(v) + 1;
          if (originTurn > fairness.perOrigin) return false;
          const merchantTurn = (busyMerchant.get(merchantId) ?? 0) + originTurns.filter((t) => t < originTurn).length + 1;
          return merchantTurn <= fairness.perMerchant && merchantTurn <= lastTurn;
        });
      };
      const again = taken.length < limit ? truncated : truncated.filter(couldGain);
      if (again.length > 0) {
        collect(
          await queries.dueImagesOf(
            now,
            again.map((v) => ({ merchantId: v.hint.merchantId, fullOrigins: v.fullOrigins, perOrigin: v.window })),
          ),
        );
        for (const v of again) askedWhole.add(v.hint.merchantId);
      }
    }
    for (const visit of visits) {
      const { hint, fetching, fullOrigins, down, probing, failing, expired } = visit;
      // An up origin that gave a whole window (as asked) may have more due now: the merchant's work is due still.
      const window = askedWhole.has(hint.merchantId) ? visit.window : cut(visit);
      const moreDue = wholeWindows(visit, window).some((origin) => !down.some((o) => o.origin === origin));
      const due = dueOf(visit).map((image) => {
        const claimed: ClaimedImageMirror = {
          ...image,
          origin_failing: failing.has(image.origin),
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
      // hint moves to when the merchant's work may be due next, or goes when there is none (its
      // pending images are not claimed: the same whether looked at now or after the lease).
      settleIdle.push({ hint, down });
    }
    if (hints.length < page || idleWithWork >= limit) break;
    const last = hints[hints.length - 1]!;
    after = { dueAt: last.dueAt, merchantId: last.merchantId };
  }
  const chosen = takeImageTurns(candidates, limit, fairness, busyMerchant, busyOrigin);
  if (chosen.length > 0 && queries.leaseAndSettle) await queries.leaseAndSettle(chosen, leaseUntil, sharpened);
  else {
    if (chosen.length > 0) await queries.lease(chosen, leaseUntil);
    if (sharpened.length > 0) await queries.settleHints(sharpened);
  }
  for (const image of chosen) if (image.probe) await queries.leaseProbe(image.merchant_id, image.origin, leaseUntil);
  const toSettle = [...settleIdle];
  for (const { hint, down } of settleAfterLease) {
    // Nothing chosen of it (the claim was full): its work is still due, the hint stays.
    if (!chosen.some((i) => i.merchant_id === hint.merchantId)) continue;
    const probed = new Set(chosen.filter((i) => i.probe && i.merchant_id === hint.merchantId).map((i) => i.origin));
    toSettle.push({ hint, down: down.map((o) => (probed.has(o.origin) ? { ...o, next_probe_at: leaseUntil } : o)) });
  }
  if (toSettle.length > 0) {
    const settles: { hint: ImageWorkHint; dueAt: string | null }[] = [];
    const pendingOf = await queries.earliestPendingByOrigin(toSettle.map((s) => s.hint.merchantId));
    for (const { hint, down } of toSettle) {
      const next = await nextWorkAt(
        queries,
        hint.merchantId,
        pendingOf.get(hint.merchantId) ?? new Map<string, string>(),
        down,
        fairness.deadAfterMs,
      );
      if (next === null || next > now) settles.push({ hint, dueAt: next });
    }
    if (settles.length > 0) await queries.settleHints(settles);
  }
  return chosen;
}

/**
 * When the merchant's pending work may be claimed next (a lower bound; null: nothing is pending),
 * from the earliest pending image of each of its origins: an up origin's; a down origin's next
 * probe (once one of its images is due) or the first of its images' own times to be up, whichever
 * comes first.
 */
async function nextWorkAt(
  queries: ImageClaimQueries,
  merchantId: number,
  earliestByOrigin: Map<string, string>,
  down: DownOrigin[],
  deadAfterMs: number | undefined,
): Promise<string | null> {
  const downByOrigin = new Map(down.map((o) => [o.origin, o]));
  let next: string | null = null;
  for (const [origin, earliest] of earliestByOrigin) {
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
