// Deliveries a claim took ahead for an endpoint whose slots were all taken: they wait in this
// process for its slots (a fast receiver costs a claim every few attempts, not one per attempt),
// and go back to the database, due at once, when their leases would run out first or at stop.
import type { Logger } from '../operations/log.js';
import type { CatalogStorage } from '../storage/port.js';
import type { ClaimedDelivery, WebhookEndpointRecord } from './model.js';

/** A delivery claimed ahead, waiting in this process for one of its endpoint's slots. */
export interface WaitingDelivery {
  delivery: ClaimedDelivery;
  endpoint: Promise<WebhookEndpointRecord | undefined>;
  /** When its lease runs out (ms on the dispatcher's clock). */
  leaseEnds: number;
  /** Whether its claim gave it its occurred_at (a first dispatch that has not happened yet). */
  claimDated: boolean;
}

/** The dispatcher's deliveries claimed ahead, per endpoint in claim order (WebhookDispatcher.claimFreeSlots). */
export class ClaimedAhead {
  private readonly waiting = new Map<number, WaitingDelivery[]>();

  constructor(
    private readonly storage: CatalogStorage,
    private readonly now: () => Date,
    private readonly log: Logger,
  ) {}

  /** How many endpoints have deliveries waiting here. */
  get size(): number {
    return this.waiting.size;
  }

  /** Whether deliveries of the endpoint wait here (a new one waits behind them). */
  has(endpointId: number): boolean {
    return this.waiting.has(endpointId);
  }

  add(entry: WaitingDelivery): void {
    const queue = this.waiting.get(entry.delivery.endpoint_id);
    if (queue) queue.push(entry);
    else this.waiting.set(entry.delivery.endpoint_id, [entry]);
  }

  /** How many wait per endpoint (DeliveryClaim.waitingByEndpoint). */
  counts(): Map<number, number> {
    return new Map([...this.waiting].map(([endpointId, queue]) => [endpointId, queue.length]));
  }

  /**
   * Starts deliveries claimed ahead in the free slots of their endpoints. One whose endpoint an
   * outcome since left paused or disabled is left to its lease (due again when it runs out, unless
   * it was dropped meanwhile); one whose lease would run out before its attempt could end is handed
   * back, due again at once (the next claim, here or in another process, takes it with a new lease).
   */
  async startFree(
    /** Whether a slot of the endpoint (and of the dispatcher) is free now. */
    hasSlot: (endpointId: number) => boolean,
    inactive: (endpointId: number) => boolean,
    /** An attempt's time-out: one that could not end within its lease is handed back. */
    timeoutMs: number,
    start: (delivery: ClaimedDelivery, endpoint: Promise<WebhookEndpointRecord | undefined>) => void,
  ): Promise<void> {
    if (this.waiting.size === 0) return;
    const now = this.now().getTime();
    const stale: WaitingDelivery[] = [];
    for (const [endpointId, queue] of this.waiting) {
      while (queue.length > 0 && hasSlot(endpointId)) {
        const next = queue.shift()!;
        if (inactive(endpointId)) continue;
        if (now + timeoutMs > next.leaseEnds) {
          stale.push(next);
          continue;
        }
        start(next.delivery, next.endpoint);
      }
      if (queue.length === 0) this.waiting.delete(endpointId);
    }
    await this.handBack(stale);
  }

  /**
   * At stop: deliveries claimed ahead and never started are due again at once, for any process, as
   * if never claimed (the occurred_at their claim gave them is the first dispatch's, which did not happen).
   */
  async releaseAll(): Promise<void> {
    const waiting = [...this.waiting.values()].flat();
    this.waiting.clear();
    await this.handBack(waiting);
  }

  /** Deliveries claimed and not started, due again at once as if never claimed (their leases end now). */
  private async handBack(waiting: WaitingDelivery[]): Promise<void> {
    if (waiting.length === 0) return;
    const now = this.now().toISOString();
    try {
      await this.storage.transaction(async (tx) => {
        for (const { delivery, claimDated } of waiting)
          await tx.updateDelivery(delivery.id, claimDated ? { next_attempt_at: now, occurred_at: null } : { next_attempt_at: now });
      });
    } catch (error) {
      // Their leases run out instead.
      this.log.error({ err: error }, 'webhook deliveries claimed ahead could not be released');
    }
  }
}
