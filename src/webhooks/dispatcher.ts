// The webhook dispatcher (spec 3, 4.5; docs/decisions.md#webhook-delivery): turns outbox rows
// into coalesced deliveries, sends the due ones with bounded concurrency, retries with backoff,
// and drives each endpoint's health. Runs in `serve` and alone as `worker`; all state is in the
// database, so a crash at any point loses nothing and at worst re-sends (at-least-once).
import type { Config } from '../config.js';
import { silentLogger, type Logger } from '../operations/log.js';
import type { DeliveryObserver } from '../operations/metrics.js';
import { AddressGuard } from '../outbound/address-guard.js';
import { type IdlePoll, startIdlePoll } from '../shared/idle-poll.js';
import { wholeSecondIso } from '../shared/time.js';
import { claimAheadRounds, RATE_HORIZON_MS } from '../storage/delivery-turns.js';
import type { CatalogStorage } from '../storage/port.js';
import { AttemptRecorder, OUTCOMES_PER_TRANSACTION } from './attempt-recorder.js';
import { DeliveryAttempts } from './attempts.js';
import { ClaimedAhead } from './claimed-ahead.js';
import { coalescePassGapMs, OutboxCoalescer } from './coalescer.js';
import { healthPolicy } from './health-records.js';
import type { ClaimedDelivery, WebhookEndpointRecord } from './model.js';
import { OwnerNotifier, type Notifier } from './notifier.js';
import { HttpDeliverySender, type DeliverySender } from './sender.js';

export type WebhookConfig = Config['webhooks'];

export interface DispatcherDependencies {
  now: () => Date;
  sender: DeliverySender;
  notifier: Notifier;
  random?: () => number;
  logger?: Logger;
  /** Counts attempts by outcome for /metrics. */
  metrics?: DeliveryObserver;
  /** Waits until `at` on the clock `now` reads (a delivery waiting for its endpoint's rate slot); tests with a fake clock pass their own. */
  waitUntil?: (at: Date) => Promise<void>;
}

/**
 * A claim that skipped endpoints another process was claiming (DeliveryClaim.busy) is made again
 * this much later, until none is skipped or a poll's interval has passed: that claim takes a few ms.
 */
export const BUSY_CLAIM_RETRY_MS = 5;

export class WebhookDispatcher {
  /** Per endpoint, this process's attempts not recorded yet (their leases count them in every process). */
  private readonly inflightByEndpoint = new Map<number, number>();
  /**
   * Per endpoint, the attempts holding one of its slots: sent and not answered 2xx, or not recorded
   * yet (sendingSlots in all). A success frees its slot before it is recorded (send()).
   */
  private readonly sendingByEndpoint = new Map<number, number>();
  private sendingSlots = 0;
  /** Deliveries claimed ahead, waiting here for their endpoints' slots (claimFreeSlots). */
  private readonly ahead: ClaimedAhead;
  /** Endpoints whose sends ended since the last claim (claimFreeSlots). */
  private readonly freed = new Set<number>();
  /** Endpoints a recorded outcome left paused or disabled: their waiting deliveries are not started. */
  private readonly inactive = new Set<number>();
  /** This process's attempts until they are recorded, by delivery id. */
  private readonly inflight = new Map<number, Promise<void>>();
  private readonly coalescer: OutboxCoalescer;
  private readonly attempts: DeliveryAttempts;
  private readonly rounds = new Set<Promise<unknown>>();
  /** The claim running or last run: claims of overlapping rounds take turns. */
  private claiming: Promise<void> = Promise.resolve();
  /** The fallback poll's schedule, while started. */
  private schedule: IdlePoll | null = null;
  /** Whether the last claim skipped endpoints another process was claiming: they may have due deliveries. */
  private claimSkipped = false;
  /** A coalescing pass asked for within the gap after the last one (start()). */
  private nextPass: NodeJS.Timeout | null = null;
  private stopping = false;
  private readonly log: Logger;

  constructor(
    private readonly storage: CatalogStorage,
    private readonly config: WebhookConfig,
    private readonly deps: DispatcherDependencies,
  ) {
    this.log = (deps.logger ?? silentLogger).child({ component: 'webhook-dispatcher' });
    this.ahead = new ClaimedAhead(storage, deps.now, this.log);
    this.coalescer = new OutboxCoalescer(storage, config, deps.now, () => this.stopping);
    const recorder = new AttemptRecorder(storage, config, healthPolicy(config), deps, this.log, (endpointId, status) => {
      if (status === 'active') this.inactive.delete(endpointId);
      else this.inactive.add(endpointId);
    });
    const published = {
      read: async (storeId: number, productIds: number[]) => (await storage.publishedPayloadsByIds(storeId, productIds)).bytes,
      maxBytes: config.fullPayloadBytes,
    };
    this.attempts = new DeliveryAttempts({ ...deps, published }, recorder, this.log);
  }

  /** One round: coalesce waiting changes, then send what is due; resolves when those sends ended. */
  async tick(): Promise<void> {
    await this.coalesce();
    await this.sendDue();
  }

  /**
   * Polls for work every pollIntervalMs (backing off while idle: shared/idle-poll.ts) until stop(),
   * and at once when the storage tells of new work (a wake-up after another write's commit, in any
   * process; polling stays the fallback). A poll does not wait for the previous round's sends: a receiver that hangs until the time-out
   * holds its workers, not every other endpoint.
   */
  start(): void {
    if (this.schedule) return;
    let coalescing: Promise<unknown> | null = null;
    let wokenMeanwhile = false;
    let lastPassAt = -Infinity;
    const gapMs = coalescePassGapMs(this.config.coalesceMs);
    /** A sending round, when a slot is free: it claims only what it can send at once. */
    const sendRound = (after: Promise<unknown> = Promise.resolve()) => {
      const round: Promise<unknown> = after
        .then(() => (this.sendingSlots < this.config.overallConcurrency && !this.stopping ? this.sendDue() : 0))
        .then((sent) => sent > 0 && this.schedule?.work())
        .catch((error: unknown) => this.log.error({ err: error }, 'webhook dispatcher round failed'))
        .finally(() => this.rounds.delete(round));
      this.rounds.add(round);
      return round;
    };
    /** The round started during a pass (one at a time: it claims again whenever a send ends). */
    let duringPass: Promise<unknown> | null = null;
    const poll = () => {
      // One coalescing pass at a time (it may wait for the write lock); sending rounds overlap,
      // each claiming only what it can send at once. A wake-up during a pass gets a pass after it,
      // and a round of sends now: a pass through a backlog of millions of outbox rows (a re-pricing
      // with 20 endpoints) takes minutes, and the deliveries it has made meanwhile must not wait for it.
      if (coalescing) {
        wokenMeanwhile = true;
        if (!duringPass && this.sendingSlots < this.config.overallConcurrency && !this.stopping) {
          duringPass = sendRound().finally(() => {
            duringPass = null;
          });
        }
        return;
      }
      if (this.stopping) return;
      // Passes start at most every gapMs: every commit that adds outbox rows or pending deliveries
      // (a pass's own included) wakes the dispatcher, and a pass groups its window of the outbox
      // whether or not a group is due, so a stream of small commits (the mirror's, an import's)
      // would otherwise run one pass per commit. Wake-ups within the gap get one pass at its end.
      const wait = lastPassAt + gapMs - performance.now();
      if (wait > 0) {
        this.nextPass ??= setTimeout(() => {
          this.nextPass = null;
          poll();
        }, wait);
        return;
      }
      lastPassAt = performance.now();
      const pass = this.coalesce().finally(() => {
        coalescing = null;
        if (wokenMeanwhile) {
          wokenMeanwhile = false;
          poll();
        }
      });
      coalescing = pass;
      void sendRound(pass); // logs its own failure; stop() waits for this.rounds
    };
    // The fallback poll backs off while it finds nothing and wake-ups are heard (shared/idle-poll.ts):
    // work is a pass that saw outbox rows (a batch waiting for its time) or made deliveries, a round
    // that sent, sends in flight or deliveries claimed ahead waiting here.
    this.schedule = startIdlePoll(this.storage, 'deliveries', this.config, {
      busy: () => this.coalescer.outboxSeen || this.claimSkipped || this.inflight.size > 0 || this.ahead.size > 0,
      poll,
    });
  }

  /** Stops polling, waits for deliveries in flight and e-mails being sent, and closes connections. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.schedule?.stop();
    this.schedule = null;
    if (this.nextPass) clearTimeout(this.nextPass);
    this.nextPass = null;
    await Promise.all(this.rounds);
    await Promise.all(this.inflight.values());
    await this.ahead.releaseAll();
    await this.deps.notifier.flush();
    await this.deps.sender.close();
  }

  /**
   * Coalescing: changes of one event kind for one endpoint and store are batched for up to
   * coalesceMs or batchSize product ids, whichever comes first. Returns the deliveries created.
   */
  coalesce(): Promise<number> {
    return this.coalescer.coalesce();
  }

  /**
   * Sends due deliveries: claims (atomically, so several dispatchers can run) as many as there are
   * free slots, at most overallConcurrency in flight, perMerchantConcurrency to one merchant's
   * endpoints and perEndpointConcurrency per endpoint, merchants then endpoints taking turns, and
   * claims again whenever a slot is free again, until nothing more is due. Resolves, with how many
   * were sent, once every attempt it started is recorded; rejects with the first that failed.
   */
  async sendDue(): Promise<number> {
    let sent = 0;
    /** Slots this call's attempts hold: each settles when its attempt frees it. */
    const sending = new Set<Promise<void>>();
    /** This call's attempts until recorded. */
    const attempts = new Set<Promise<void>>();
    let failure: { error: unknown } | null = null;
    const start = (delivery: ClaimedDelivery, endpoint: Promise<WebhookEndpointRecord | undefined>) => {
      const { slot, done } = this.send(delivery, endpoint);
      const held: Promise<void> = slot.finally(() => sending.delete(held));
      sending.add(held);
      const recorded: Promise<void> = done
        .then(
          () => {
            sent++;
          },
          (error: unknown) => {
            failure ??= { error };
          },
        )
        .finally(() => attempts.delete(recorded));
      attempts.add(recorded);
    };
    const ended = async () => {
      await Promise.all(attempts);
      if (failure) throw failure.error;
      return sent;
    };
    let afterSends = false;
    let skippedSince: number | null = null;
    for (;;) {
      const skipped = !this.stopping && (await this.claimFreeSlots(start, afterSends));
      if (failure) return ended();
      if (sending.size === 0) {
        // Endpoints another process was claiming: claimed again soon, not at the next poll.
        if (!skipped || this.stopping) return ended();
        skippedSince ??= performance.now();
        if (performance.now() - skippedSince >= this.config.pollIntervalMs) return ended();
        afterSends = false;
        await sleep(BUSY_CLAIM_RETRY_MS);
        continue;
      }
      skippedSince = null;
      afterSends = true;
      await Promise.race(sending);
      // Sends that end together free their slots together: one claim for all of them.
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }

  /**
   * Claims for this process's free slots and starts the sends, one claim at a time (rounds
   * overlap): each claim counts the sends the claims before it started, per endpoint and per
   * merchant, so no merchant's share is handed out twice. A free slot of an endpoint is first given
   * to a delivery claimed ahead for it; a claim takes, besides the free slots, up to claimAheadRounds
   * x perEndpointConcurrency more per endpoint whose leases are all this process's (DeliveryClaim.ahead),
   * which wait here for their endpoint's slots: a fast receiver costs a claim every few attempts,
   * not one per attempt. True when the claim skipped endpoints another process was claiming.
   */
  private claimFreeSlots(
    start: (delivery: ClaimedDelivery, endpoint: Promise<WebhookEndpointRecord | undefined>) => void,
    /** Called because sends ended: no claim when deliveries claimed ahead took every slot they freed. */
    afterSends = false,
  ): Promise<boolean> {
    const turn = this.claiming.then(async () => {
      if (this.stopping) return false;
      // Those whose lease ran short are handed back first: this claim can take them again.
      await this.ahead.startFree(
        (endpointId) =>
          this.sendingTo(endpointId) < this.config.perEndpointConcurrency && this.sendingSlots < this.config.overallConcurrency,
        (endpointId) => this.inactive.has(endpointId),
        this.config.timeoutMs,
        start,
      );
      const freed = [...this.freed];
      this.freed.clear();
      if (afterSends && freed.every((id) => this.sendingTo(id) >= this.config.perEndpointConcurrency)) return false;
      const free = this.config.overallConcurrency - this.sendingSlots;
      if (free <= 0) return false;
      // send() counts each delivery in flight before it yields: the next claim sees it. Each
      // endpoint of the claim is read once for all its deliveries, as they start.
      const claimedAt = this.deps.now().getTime();
      const { claimed, skipped } = await this.claim(free);
      this.claimSkipped = skipped;
      if (claimed.length === 0) return skipped;
      // The endpoints the claim did not read with the deliveries (ClaimedDelivery.endpoint), read once.
      const unread = claimed.filter((d) => !d.endpoint).map((d) => d.endpoint_id);
      const endpoints =
        unread.length === 0
          ? Promise.resolve(new Map<number, WebhookEndpointRecord>())
          : this.storage.getWebhookEndpoints(unread).then((list) => new Map(list.map((e) => [e.id, e])));
      // A failed read fails the attempts that await it, not this claim (nor an unhandled rejection).
      endpoints.catch(() => {});
      for (const claimedDelivery of claimed) {
        const { endpoint: read, ...delivery } = claimedDelivery;
        // The claim found its endpoint active: fresher than an outcome recorded before it.
        this.inactive.delete(delivery.endpoint_id);
        const endpoint = read ? Promise.resolve(read) : endpoints.then((byId) => byId.get(delivery.endpoint_id));
        if (
          !this.ahead.has(delivery.endpoint_id) &&
          this.sendingTo(delivery.endpoint_id) < this.config.perEndpointConcurrency &&
          this.sendingSlots < this.config.overallConcurrency
        ) {
          start(delivery, endpoint);
          continue;
        }
        const leaseEnds = claimedAt + this.leaseMs() + (delivery.send_at === null ? 0 : RATE_HORIZON_MS);
        const claimDated = delivery.attempts === 0 && delivery.occurred_at === wholeSecondIso(new Date(claimedAt));
        this.ahead.add({ delivery, endpoint, leaseEnds, claimDated });
      }
      return skipped;
    });
    this.claiming = turn.then(
      () => undefined,
      () => undefined,
    );
    return turn;
  }

  private leaseMs(): number {
    // Should this process die mid-send, the lease expires and the delivery is re-sent.
    return this.config.timeoutMs + this.config.leaseMarginMs;
  }

  private async claim(limit: number): Promise<{ claimed: ClaimedDelivery[]; skipped: boolean }> {
    let skipped = false;
    const claimed = await this.storage.claimDueDeliveries({
      now: this.deps.now,
      leaseMs: this.leaseMs(),
      limit,
      perEndpoint: this.config.perEndpointConcurrency,
      // Both as they are now: an attempt answered while the claim runs would otherwise leave one and not the other.
      inFlightByEndpoint: new Map(this.sendingByEndpoint),
      answeredByEndpoint: new Map(
        [...this.inflightByEndpoint].flatMap(([endpointId, n]): [number, number][] =>
          n > this.sendingTo(endpointId) ? [[endpointId, n - this.sendingTo(endpointId)]] : [],
        ),
      ),
      waitingByEndpoint: this.ahead.counts(),
      // Slots a merchant's hanging receivers cannot take stay free for the other merchants.
      perMerchant: this.config.perMerchantConcurrency,
      ahead: this.config.perEndpointConcurrency * claimAheadRounds(this.config.timeoutMs, this.config.leaseMarginMs),
      busy: () => {
        skipped = true;
      },
    });
    return { claimed, skipped };
  }

  /** The attempts holding a slot of the endpoint (sendingByEndpoint). */
  private sendingTo(endpointId: number): number {
    return this.sendingByEndpoint.get(endpointId) ?? 0;
  }

  /**
   * One attempt of a claimed delivery, counted in flight for its endpoint until it is recorded
   * (`done`). It holds one of the endpoint's slots (`slot` settles when it frees it) until then,
   * or until a 2xx answer when fewer than OUTCOMES_PER_TRANSACTION successes wait for their
   * record: the receiver is done with it, and the next attempts are sent while it is recorded
   * (with them, in one statement: RECORD_BATCH_MS). A failure keeps its slot
   * until recorded: the endpoint's pause is known before its next attempt. Other processes count
   * it by its lease either way.
   */
  private send(
    delivery: ClaimedDelivery,
    endpoint: Promise<WebhookEndpointRecord | undefined>,
  ): { slot: Promise<void>; done: Promise<void> } {
    const endpointId = delivery.endpoint_id;
    const add = (counts: Map<number, number>, n: number) => {
      const left = (counts.get(endpointId) ?? 0) + n;
      if (left > 0) counts.set(endpointId, left);
      else counts.delete(endpointId);
    };
    add(this.inflightByEndpoint, 1);
    add(this.sendingByEndpoint, 1);
    this.sendingSlots++;
    let held = true;
    let freeSlot = () => {};
    const slot = new Promise<void>((resolve) => (freeSlot = resolve));
    const release = () => {
      if (!held) return;
      held = false;
      add(this.sendingByEndpoint, -1);
      this.sendingSlots--;
      this.freed.add(endpointId);
      freeSlot();
    };
    // Freed a turn of the event loop after the answer: undici hands its connection back on a
    // setImmediate of its own, and a request sent before that opens another connection.
    const answered = () =>
      setImmediate(() => {
        if (!held) return;
        if (this.inflight.size - this.sendingSlots < OUTCOMES_PER_TRANSACTION) release();
      });
    const done = this.attempts.run(delivery, endpoint, answered).finally(() => {
      this.inflight.delete(delivery.id);
      add(this.inflightByEndpoint, -1);
      release();
    });
    this.inflight.set(delivery.id, done);
    return { slot, done };
  }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** The dispatcher as `serve` and `worker` run it: real HTTP sender through the SSRF guard, owner notifier. */
export function createWebhookDispatcher(
  storage: CatalogStorage,
  config: Config,
  options: { now?: () => Date; logger?: Logger; metrics?: DeliveryObserver; guard?: AddressGuard } = {},
): WebhookDispatcher {
  const { now = () => new Date(), logger, metrics, guard = new AddressGuard(config.webhooks.allowHosts) } = options;
  // As many connections per endpoint as deliveries in flight to it: none waits for a connection.
  const sender = new HttpDeliverySender(guard, {
    timeoutMs: config.webhooks.timeoutMs,
    connectionsPerEndpoint: config.webhooks.perEndpointConcurrency,
  });
  const notifier = new OwnerNotifier(storage, config.smtp, now, logger);
  return new WebhookDispatcher(storage, config.webhooks, { now, sender, notifier, logger, metrics });
}
