// How a claim shares a dispatcher's free slots among merchants, then among each merchant's
// endpoints, on every engine: each engine selects each active endpoint's first due deliveries (with
// the endpoint's merchant), the leases its endpoints hold and the merchants of the endpoints this
// process has deliveries in flight to, and this chooses which of them to lease.
import type { DeliveryClaim } from './records.js';

export interface DueDelivery {
  id: number;
  endpointId: number;
  merchantId: number;
  nextAttemptAt: string;
}

const byDue = (a: Pick<DueDelivery, 'id' | 'nextAttemptAt'>, b: Pick<DueDelivery, 'id' | 'nextAttemptAt'>) =>
  a.nextAttemptAt < b.nextAttemptAt ? -1 : a.nextAttemptAt > b.nextAttemptAt ? 1 : a.id - b.id;

/**
 * Merchants take turns, and within a merchant its endpoints take turns (each endpoint's oldest
 * due delivery first, then each one's second, ...): a backlog, or receivers that hang, at one
 * merchant or endpoint never fill the whole claim. No endpoint gets more than its share in flight
 * (counting the ones it already has: `leases`, every process's unexpired leases, or this process's
 * own count when that is larger), and no merchant more than `claim.perMerchant` of this process's
 * slots (counting this process's deliveries in flight to its endpoints; `merchantOf` names the
 * merchant of each endpoint in `claim.inFlightByEndpoint`). Returns the ids to lease.
 */
export function takeTurns(
  candidates: DueDelivery[],
  claim: DeliveryClaim,
  leases: ReadonlyMap<number, number>,
  merchantOf: ReadonlyMap<number, number>,
  /** Per rate-limited endpoint, how many of its slots start within the horizon (rateSlots). */
  slotsOf: ReadonlyMap<number, number> = new Map(),
): number[] {
  // 1. Each endpoint's turns, after the deliveries it already has (in flight, or claimed ahead and
  // waiting in this process), and within its rate; up to claim.ahead more for an endpoint without a
  // rate whose every lease is this process's.
  const waiting = claim.waitingByEndpoint ?? new Map<number, number>();
  const ownOf = (endpointId: number) => (claim.inFlightByEndpoint.get(endpointId) ?? 0) + (waiting.get(endpointId) ?? 0);
  // This process's answered attempts waiting for their record hold a lease but no slot.
  const answered = claim.answeredByEndpoint ?? new Map<number, number>();
  const leasesOf = (endpointId: number) => Math.max(0, (leases.get(endpointId) ?? 0) - (answered.get(endpointId) ?? 0));
  const aheadOf = (endpointId: number) =>
    claim.ahead && !slotsOf.has(endpointId) && leasesOf(endpointId) <= ownOf(endpointId) ? claim.ahead : 0;
  const endpointTurns = new Map<number, number>();
  const taken = new Map<number, number>();
  const withinEndpoints = [...candidates]
    .sort((a, b) => a.endpointId - b.endpointId || byDue(a, b))
    .map((candidate) => {
      const held = Math.max(leasesOf(candidate.endpointId), ownOf(candidate.endpointId));
      const endpointTurn = (endpointTurns.get(candidate.endpointId) ?? held) + 1;
      endpointTurns.set(candidate.endpointId, endpointTurn);
      const nth = (taken.get(candidate.endpointId) ?? 0) + 1;
      taken.set(candidate.endpointId, nth);
      return { ...candidate, endpointTurn, nth };
    })
    .filter(
      (candidate) =>
        candidate.endpointTurn <= claim.perEndpoint + aheadOf(candidate.endpointId) &&
        candidate.nth <= (slotsOf.get(candidate.endpointId) ?? Infinity),
    );
  const ahead = withinEndpoints.filter((candidate) => candidate.endpointTurn > claim.perEndpoint);
  const now = withinEndpoints.filter((candidate) => candidate.endpointTurn <= claim.perEndpoint);

  // 2. Each merchant's turns, its endpoints taking theirs in order, after what this process already
  // sends to the merchant.
  const heldByMerchant = new Map<number, number>();
  for (const [endpointId, n] of claim.inFlightByEndpoint) {
    const merchantId = merchantOf.get(endpointId);
    if (merchantId !== undefined) heldByMerchant.set(merchantId, (heldByMerchant.get(merchantId) ?? 0) + n);
  }
  const merchantTurns = new Map<number, number>();
  const perMerchant = claim.perMerchant ?? Number.POSITIVE_INFINITY;
  const ranked = now
    .sort((a, b) => a.merchantId - b.merchantId || a.endpointTurn - b.endpointTurn || byDue(a, b))
    .map((candidate) => {
      const turn = (merchantTurns.get(candidate.merchantId) ?? heldByMerchant.get(candidate.merchantId) ?? 0) + 1;
      merchantTurns.set(candidate.merchantId, turn);
      return { ...candidate, turn };
    })
    .filter((candidate) => candidate.turn <= perMerchant);

  // 3. Merchants take turns: every merchant's first before any merchant's second; the longest due first within a turn.
  ranked.sort((a, b) => a.turn - b.turn || byDue(a, b));
  const chosen = ranked.slice(0, claim.limit);
  // 4. Turns ahead (beyond claim.limit and the merchant's share: they hold no slot until one of
  // their endpoint's own ends) only for an endpoint that now has all of its turns.
  const full = new Map<number, number>();
  for (const candidate of chosen) full.set(candidate.endpointId, Math.max(full.get(candidate.endpointId) ?? 0, candidate.endpointTurn));
  const held = (endpointId: number) => Math.max(leasesOf(endpointId), ownOf(endpointId));
  const extra = ahead.filter((candidate) => Math.max(full.get(candidate.endpointId) ?? 0, held(candidate.endpointId)) >= claim.perEndpoint);
  return [...chosen, ...extra].map((candidate) => candidate.id);
}

/**
 * How many rounds of an endpoint's concurrency a dispatcher claims ahead of its free slots
 * (DeliveryClaim.ahead = perEndpoint x this): as many as the lease's margin holds attempts that
 * each run to the time-out (a delivery claimed ahead is leased for its wait too, and one whose
 * lease would end before its attempt could is handed back), at least 1, at most 4. A claim is a
 * write transaction: with the defaults (a 10 s time-out, a 30 s margin) one claims 3 x 4 ahead, a
 * claim per ~12 attempts to a fast receiver rather than one per ~4.
 */
export function claimAheadRounds(timeoutMs: number, leaseMarginMs: number): number {
  return Math.max(1, Math.min(4, Math.floor(leaseMarginMs / Math.max(1, timeoutMs))));
}

/**
 * A claim reserves the slots of a rate-limited endpoint that start within this long
 * from now; each claimed delivery waits for its slot. The dispatcher claims again at least every
 * poll (CPS_WEBHOOK_POLL_INTERVAL_MS, 250 ms), so the next slots are claimed before these end.
 */
export const RATE_HORIZON_MS = 1000;

/** A rate-limited endpoint: its `max_per_second`, and when its next slot starts (null: at once). */
export interface EndpointRate {
  maxPerSecond: number;
  nextAt: string | null;
}

/**
 * Slots are this much further apart than 1000 / max_per_second ms: a delivery's arrival varies by
 * a few ms (the network, the event loop), and without it one second at the receiver could now and
 * then hold max_per_second + 1 of them.
 */
export const RATE_MARGIN = 0.05;

/** The time between two slots of an endpoint's rate, in ms. */
export const slotInterval = (maxPerSecond: number) => (1000 / maxPerSecond) * (1 + RATE_MARGIN);

const slotStart = (rate: EndpointRate, now: Date) => Math.max(rate.nextAt === null ? 0 : Date.parse(rate.nextAt), now.getTime());

/**
 * How many slots of each rate-limited endpoint start within RATE_HORIZON_MS of `now`: slots are
 * slotInterval apart (1000 / max_per_second ms and RATE_MARGIN), from the endpoint's next slot (or now, if that has passed), so
 * no second holds more than max_per_second starts, whichever processes claim them.
 */
export function rateSlots(rates: ReadonlyMap<number, EndpointRate>, now: Date): Map<number, number> {
  const slots = new Map<number, number>();
  for (const [endpointId, rate] of rates) {
    const interval = slotInterval(rate.maxPerSecond);
    const room = now.getTime() + RATE_HORIZON_MS - slotStart(rate, now);
    slots.set(endpointId, room <= 0 ? 0 : Math.min(rate.maxPerSecond, Math.ceil(room / interval)));
  }
  return slots;
}

/**
 * The slots the chosen deliveries of rate-limited endpoints take, in their due order: when each
 * may start (`sendAt`, by delivery id), and each endpoint's next free slot after them (`nextAt`).
 */
export function assignSlots(
  chosen: readonly DueDelivery[],
  rates: ReadonlyMap<number, EndpointRate>,
  now: Date,
): { sendAt: Map<number, string>; nextAt: Map<number, string> } {
  const sendAt = new Map<number, string>();
  const nextAt = new Map<number, string>();
  const next = new Map<number, number>();
  for (const delivery of [...chosen].sort(byDue)) {
    const rate = rates.get(delivery.endpointId);
    if (!rate) continue;
    const at = next.get(delivery.endpointId) ?? slotStart(rate, now);
    sendAt.set(delivery.id, new Date(at).toISOString());
    next.set(delivery.endpointId, at + slotInterval(rate.maxPerSecond));
  }
  for (const [endpointId, at] of next) nextAt.set(endpointId, new Date(Math.ceil(at)).toISOString());
  return { sendAt, nextAt };
}
