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
  (a.nextAttemptAt < b.nextAttemptAt ? -1 : a.nextAttemptAt > b.nextAttemptAt ? 1 : a.id - b.id);

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
  candidates: DueDelivery[], claim: DeliveryClaim, leases: ReadonlyMap<number, number>, merchantOf: ReadonlyMap<number, number>,
): number[] {
  // 1. Each endpoint's turns, after the deliveries it already has in flight.
  const endpointTurns = new Map<number, number>();
  const withinEndpoints = [...candidates].sort((a, b) => a.endpointId - b.endpointId || byDue(a, b)).map((candidate) => {
    const held = Math.max(leases.get(candidate.endpointId) ?? 0, claim.inFlightByEndpoint.get(candidate.endpointId) ?? 0);
    const endpointTurn = (endpointTurns.get(candidate.endpointId) ?? held) + 1;
    endpointTurns.set(candidate.endpointId, endpointTurn);
    return { ...candidate, endpointTurn };
  }).filter((candidate) => candidate.endpointTurn <= claim.perEndpoint);

  // 2. Each merchant's turns, its endpoints taking theirs in order, after what this process already
  // sends to the merchant.
  const heldByMerchant = new Map<number, number>();
  for (const [endpointId, n] of claim.inFlightByEndpoint) {
    const merchantId = merchantOf.get(endpointId);
    if (merchantId !== undefined) heldByMerchant.set(merchantId, (heldByMerchant.get(merchantId) ?? 0) + n);
  }
  const merchantTurns = new Map<number, number>();
  const perMerchant = claim.perMerchant ?? Number.POSITIVE_INFINITY;
  const ranked = withinEndpoints
    .sort((a, b) => a.merchantId - b.merchantId || a.endpointTurn - b.endpointTurn || byDue(a, b))
    .map((candidate) => {
      const turn = (merchantTurns.get(candidate.merchantId) ?? heldByMerchant.get(candidate.merchantId) ?? 0) + 1;
      merchantTurns.set(candidate.merchantId, turn);
      return { ...candidate, turn };
    })
    .filter((candidate) => candidate.turn <= perMerchant);

  // 3. Merchants take turns: every merchant's first before any merchant's second; the longest due first within a turn.
  ranked.sort((a, b) => a.turn - b.turn || byDue(a, b));
  return ranked.slice(0, claim.limit).map((candidate) => candidate.id);
}
