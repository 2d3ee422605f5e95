// How a claim shares a dispatcher's free slots among endpoints, on every engine: each engine
// selects each active endpoint's first due deliveries and the leases its endpoints hold, and this
// chooses which of them to lease.
import type { DeliveryClaim } from './records.js';

export interface DueDelivery {
  id: number;
  endpointId: number;
  nextAttemptAt: string;
}

/**
 * Endpoints take turns (each one's oldest due delivery first, then each one's second, ...), so a
 * backlog at one endpoint never fills the whole claim, and no endpoint gets more than its share
 * in flight (counting the ones it already has: `inFlight`, every process's unexpired leases, or
 * this process's own count when that is larger). Returns the ids to lease.
 */
export function takeTurns(candidates: DueDelivery[], claim: DeliveryClaim, inFlight: ReadonlyMap<number, number>): number[] {
  const byDue = (a: DueDelivery, b: DueDelivery) =>
    (a.nextAttemptAt < b.nextAttemptAt ? -1 : a.nextAttemptAt > b.nextAttemptAt ? 1 : a.id - b.id);
  const turns = new Map<number, number>();
  const ranked = [...candidates].sort((a, b) => a.endpointId - b.endpointId || byDue(a, b)).map((candidate) => {
    const held = Math.max(inFlight.get(candidate.endpointId) ?? 0, claim.inFlightByEndpoint.get(candidate.endpointId) ?? 0);
    const turn = (turns.get(candidate.endpointId) ?? held) + 1;
    turns.set(candidate.endpointId, turn);
    return { ...candidate, turn };
  }).filter((candidate) => candidate.turn <= claim.perEndpoint);
  ranked.sort((a, b) => a.turn - b.turn || byDue(a, b));
  return ranked.slice(0, claim.limit).map((candidate) => candidate.id);
}
