// The webhook dispatcher (spec 3, 4.5; docs/decisions.md#webhook-delivery): turns outbox rows
// into coalesced deliveries, sends the due ones with bounded concurrency, retries with backoff,
// and drives each endpoint's health. Runs in `serve` and alone as `worker`; all state is in the
// database, so a crash at any point loses nothing and at worst re-sends (at-least-once).
import type { Config } from '../config.js';
import { WEBHOOKS, type WebhookPayload, type WebhookSchemaError } from '../generated/public-webhooks.js';
import type { AttemptOutcome, CatalogStorage, StorageTx } from '../storage/port.js';
import type { OutboxEntry, OutboxWindowGroup } from '../storage/records.js';
import type { ClaimedDelivery, DeliveryRecord, NotificationRecord, WebhookEndpointRecord } from './model.js';
import { afterFailure, afterGone, afterSuccess, conditionsEnded, onChange, type EndpointHealth, type HealthPolicy } from './health.js';
import { silentLogger, type Logger } from '../operations/log.js';
import type { DeliveryObserver, DeliveryOutcome } from '../operations/metrics.js';
import { AddressGuard } from '../outbound/address-guard.js';
import { wholeSecondIso } from '../shared/time.js';
import { attemptRecord, type SentRequest } from './attempt-record.js';
import { OwnerNotifier, type Notifier } from './notifier.js';
import { nextAttemptAt, parseRetryAfter } from './retry.js';
import { HttpDeliverySender, type DeliverySender, type SendResult } from './sender.js';
import { type IdlePoll, startIdlePoll } from '../shared/idle-poll.js';
import { claimAheadRounds, RATE_HORIZON_MS, slotInterval } from '../storage/delivery-turns.js';
import { secretsAt, signedHeaders } from './signing.js';

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

export function healthPolicy(config: WebhookConfig): HealthPolicy {
  return {
    notifyAfterFailures: config.notifyAfterFailures,
    renotifyAfterMs: config.renotifyHours * 3600_000,
    pauseAfterFailures: config.pauseAfterFailures,
    pauseMinStreakMs: config.pauseMinStreakMinutes * 60_000,
    cooldownMs: config.cooldownMinutes * 60_000,
  };
}

const healthOf = (e: WebhookEndpointRecord): EndpointHealth => ({
  status: e.status,
  consecutive_failures: e.consecutive_failures,
  failure_streak_started_at: e.failure_streak_started_at,
  paused_until: e.paused_until,
  owners_notified_at: e.owners_notified_at,
  disabled_reason: e.disabled_reason,
  last_success_at: e.last_success_at,
  last_failure_at: e.last_failure_at,
});

/** A delivery's JSON body, or why its payload breaks the document and must not be sent. */
export type DeliveryBody = { ok: true; body: string } | { ok: false; errors: WebhookSchemaError[] };

/**
 * The JSON body of a delivery (spec 2.7), in the spec's field order, checked before it is signed
 * against its event's payload schema in the document's `webhooks:` section (the generated
 * registry): what no receiver could accept is never signed nor sent.
 */
export function deliveryBody(delivery: Pick<DeliveryRecord, 'event' | 'store_id' | 'product_ids'>, occurredAt: string): DeliveryBody {
  const payload = {
    event: delivery.event,
    store_id: delivery.store_id,
    product_ids: delivery.product_ids,
    occurred_at: occurredAt,
  } satisfies WebhookPayload;
  const errors = WEBHOOKS[payload.event].validate(payload);
  return errors.length ? { ok: false, errors } : { ok: true, body: JSON.stringify(payload) };
}

/** The attempt log's error for a payload the document rejects: a bug of ours, never retried. */
export const INVALID_PAYLOAD = 'invalid_payload';

/** The attempt log's error for an attempt whose outcome could not be recorded: a failed attempt. */
export const RECORDING_FAILED = 'recording_failed';

/** The owners' notifications whose condition a health transition ended end with it, in its transaction. */
async function endConditions(tx: StorageTx, endpoint: WebhookEndpointRecord, after: EndpointHealth, at: Date): Promise<void> {
  const ended = conditionsEnded(healthOf(endpoint), after);
  if (ended.length > 0) await tx.endNotifications(endpoint.id, ended, at.toISOString());
}

/** Outcomes recorded in one transaction at most. */
export const OUTCOMES_PER_TRANSACTION = 64;

/**
 * An ended attempt waits this long at most for the attempts still awaiting their responses, to be
 * recorded with them in one transaction (WebhookDispatcher.record).
 */
export const RECORD_GATHER_MS = 2;

/**
 * Successes (whose slots their answers freed) wait this long at most after the first of them
 * ended for more to record with them, up to OUTCOMES_PER_TRANSACTION: sends go on meanwhile, and
 * each record is a round trip on PostgreSQL.
 */
export const RECORD_BATCH_MS = 10;

/** An attempt that ended, waiting to be recorded (WebhookDispatcher.record). */
interface EndedAttempt {
  delivery: DeliveryRecord;
  endpoint: WebhookEndpointRecord;
  request: SentRequest;
  result: SendResult;
  at: Date;
  /** When it ended (performance.now()). */
  endedAt: number;
  resolve: (outcome: DeliveryOutcome | null) => void;
  reject: (error: unknown) => void;
}

/** A delivery a coalescing pass makes, with when the oldest change it carries was recorded. */
type CoalescedDelivery = Parameters<StorageTx['insertCoalescedDeliveries']>[0][number];

/**
 * A coalescing pass takes at most this many batches' worth of the oldest outbox rows (batchSize
 * each). A pass costs ~8 round trips on PostgreSQL whatever its size: at 20 a backlog cost 0.4 of
 * them a delivery, as many as the claims and records together.
 */
export const OUTBOX_WINDOW_BATCHES = 64;

/**
 * Coalescing passes of a running dispatcher start at most this often: a tenth of the coalescing
 * window (`CPS_WEBHOOK_COALESCE_MS`), at most 100 ms. A batch is sent this much later at worst.
 */
export function coalescePassGapMs(coalesceMs: number): number {
  return Math.min(100, coalesceMs / 10);
}

/**
 * A claim that skipped endpoints another process was claiming (DeliveryClaim.busy) is made again
 * this much later, until none is skipped or a poll's interval has passed: that claim takes a few ms.
 */
export const BUSY_CLAIM_RETRY_MS = 5;

/** A delivery claimed ahead, waiting in this process for one of its endpoint's slots. */
interface WaitingDelivery {
  delivery: ClaimedDelivery;
  endpoint: Promise<WebhookEndpointRecord | undefined>;
  /** When its lease runs out (ms on deps.now). */
  leaseEnds: number;
  /** Whether its claim gave it its occurred_at (a first dispatch that has not happened yet). */
  claimDated: boolean;
}

export class WebhookDispatcher {
  /** Per endpoint, this process's attempts not recorded yet (their leases count them in every process). */
  private readonly inflightByEndpoint = new Map<number, number>();
  /**
   * Per endpoint, the attempts holding one of its slots: sent and not answered 2xx, or not recorded
   * yet (sendingSlots in all). A success frees its slot before it is recorded (send()).
   */
  private readonly sendingByEndpoint = new Map<number, number>();
  private sendingSlots = 0;
  /** Deliveries claimed ahead per endpoint, in claim order (claimFreeSlots). */
  private readonly waiting = new Map<number, WaitingDelivery[]>();
  /** Endpoints whose sends ended since the last claim (claimFreeSlots). */
  private readonly freed = new Set<number>();
  /** Endpoints a recorded outcome left paused or disabled: their waiting deliveries are not started. */
  private readonly inactive = new Set<number>();
  /** When this process last started an attempt to each rate-limited endpoint (ms on deps.now). */
  private readonly lastStartByEndpoint = new Map<number, number>();
  /** This process's attempts until they are recorded, by delivery id. */
  private readonly inflight = new Map<number, Promise<void>>();
  private readonly policy: HealthPolicy;
  private readonly rounds = new Set<Promise<unknown>>();
  /** The claim running or last run: claims of overlapping rounds take turns. */
  private claiming: Promise<void> = Promise.resolve();
  /** Attempts that ended while outcomes were being recorded: the next transaction records them together. */
  private ended: EndedAttempt[] = [];
  private recording = false;
  /** Per endpoint, its attempts sent and still waiting for their response (or failure). */
  private readonly awaitingResponse = new Map<number, number>();
  /** The wait for more attempts to end before recording (record()): null when none is set. */
  private gathering: NodeJS.Timeout | null = null;
  /** The fallback poll's schedule, while started. */
  private schedule: IdlePoll | null = null;
  /** Whether the last claim skipped endpoints another process was claiming: they may have due deliveries. */
  private claimSkipped = false;
  /** Whether the last coalescing pass saw outbox rows (a batch waiting for its time is work in progress). */
  private outboxSeen = false;
  /** A coalescing pass asked for within the gap after the last one (start()). */
  private nextPass: NodeJS.Timeout | null = null;
  private stopping = false;
  private readonly log: Logger;

  constructor(
    private readonly storage: CatalogStorage,
    private readonly config: WebhookConfig,
    private readonly deps: DispatcherDependencies,
  ) {
    this.policy = healthPolicy(config);
    this.log = (deps.logger ?? silentLogger).child({ component: 'webhook-dispatcher' });
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
      busy: () => this.outboxSeen || this.claimSkipped || this.inflight.size > 0 || this.waiting.size > 0,
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
    await this.releaseWaiting();
    await this.deps.notifier.flush();
    await this.deps.sender.close();
  }

  /**
   * Coalescing: changes of one event kind for one endpoint and store are batched for up to
   * coalesceMs or batchSize product ids, whichever comes first. Returns the deliveries created.
   */
  async coalesce(): Promise<number> {
    // A pass (one transaction) takes the oldest OUTBOX_WINDOW rows of the outbox, never
    // the whole backlog (a re-pricing with many endpoints writes millions); passes follow each other,
    // the event loop free between two, while they create deliveries and find the window full.
    const window = OUTBOX_WINDOW_BATCHES * this.config.batchSize;
    let created = 0;
    // The passes of one call each start after the window of the pass before: rows a pass left (a busy
    // endpoint, a batch waiting for its time) wait for the next call, and a pass never walks again
    // what the passes before it deleted (on PostgreSQL, index entries of dead rows until a vacuum).
    let afterId = 0;
    for (;;) {
      const now = this.deps.now();
      const pass = await this.storage.transaction(async (tx) => {
        // The window read once; the rows batched go in one statement.
        const groups = await tx.outboxWindow(window, afterId);
        this.outboxSeen = groups.length > 0;
        for (const group of groups) afterId = Math.max(afterId, group.rows.at(-1)!.id);
        const taken: number[] = [];
        const trimmed: { id: number; productIds: number[] }[] = [];
        // Each endpoint read (PostgreSQL: its pass lock taken) once a pass, for all of its groups.
        const endpoints = new Map<number, WebhookEndpointRecord | 'busy' | undefined>();
        const due: OutboxWindowGroup[] = [];
        for (const group of groups) if (await this.dueGroup(tx, group, now, endpoints)) due.push(group);
        // The rows of every due group held in one statement, and their deliveries inserted in one:
        // on PostgreSQL each is a round trip, and a pass has a few groups per endpoint.
        const held = await this.holdRows(tx, due);
        const deliveries: CoalescedDelivery[] = [];
        for (const group of due) await this.coalesceGroup(tx, group, held.get(group)!, now, taken, trimmed, endpoints, deliveries);
        await tx.insertCoalescedDeliveries(deliveries);
        await tx.deleteOutboxRows(taken);
        await tx.trimOutboxRows(trimmed);
        return { made: deliveries.length, full: groups.reduce((rows, group) => rows + group.count, 0) >= window };
      });
      created += pass.made;
      if (!pass.full || pass.made === 0 || this.stopping) return created;
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }

  /**
   * Whether the group's batch is due (its time is up, or it has a batch's worth) and its endpoint
   * not busy; reads the endpoint (PostgreSQL: takes its pass lock) once a pass, into `endpoints`.
   */
  private async dueGroup(
    tx: StorageTx,
    group: OutboxWindowGroup,
    now: Date,
    endpoints: Map<number, WebhookEndpointRecord | 'busy' | undefined>,
  ): Promise<boolean> {
    const waitedMs = now.getTime() - Date.parse(group.oldestAt);
    if (waitedMs < this.config.coalesceMs && group.count < this.config.batchSize) return false;
    if (!endpoints.has(group.endpointId)) endpoints.set(group.endpointId, await tx.coalescingEndpoint(group.endpointId));
    // Busy (PostgreSQL: a drop of its pending deliveries under way, or a paused endpoint's row held
    // by an attempt's health update or another pass): its rows wait for the next pass.
    return endpoints.get(group.endpointId) !== 'busy';
  }

  /**
   * The due groups' rows of the window that no other coalescer took meanwhile, held to the pass's
   * end, with the products they carry now (another coalescer may have trimmed one), by group.
   */
  private async holdRows(tx: StorageTx, groups: OutboxWindowGroup[]): Promise<Map<OutboxWindowGroup, OutboxEntry[]>> {
    const held = new Map((await tx.holdOutboxRows(groups.flatMap((group) => group.rows))).map((row) => [row.id, row]));
    return new Map(groups.map((group) => [group, group.rows.flatMap((row) => held.get(row.id) ?? [])]));
  }

  /**
   * Adds the group's due deliveries to `deliveries`; the ids of the rows they took (or that no
   * endpoint wants) go into `taken`, the rows of which they took only some products into `trimmed`
   * with the rest.
   */
  private async coalesceGroup(
    tx: StorageTx,
    group: OutboxWindowGroup,
    /** The group's rows this pass holds (holdRows). */
    rows: OutboxEntry[],
    now: Date,
    taken: number[],
    trimmed: { id: number; productIds: number[] }[],
    /** The endpoints this pass has read, by id: what the pass holds and has written of each is as read here. */
    endpoints: Map<number, WebhookEndpointRecord | 'busy' | undefined>,
    deliveries: CoalescedDelivery[],
  ): Promise<void> {
    const timeIsUp = now.getTime() - Date.parse(group.oldestAt) >= this.config.coalesceMs;
    const endpoint = endpoints.get(group.endpointId);
    if (rows.length === 0 || endpoint === 'busy') return;
    if (!endpoint) {
      for (const row of rows) taken.push(row.id);
      return;
    }
    // spec 3: a change after the cooldown resumes a paused endpoint; during it, nothing is sent:
    // the changes become `dropped` deliveries, which an operator can recover.
    const { health, deliver } = onChange(healthOf(endpoint), now);
    if (health.status !== endpoint.status) {
      await tx.updateWebhookEndpoint(endpoint.id, health);
      await endConditions(tx, endpoint, health, now);
      endpoints.set(endpoint.id, { ...endpoint, ...health });
    }
    // An endpoint with a rate has deliveries waiting for their turn; the changes go
    // into the newest of them first, up to batchSize ids, so a storm arrives as few full ones.
    const filled = new Set<number>();
    if (endpoint.max_per_second !== null && deliver) {
      const offered = [...new Set(rows.flatMap((r) => r.productIds))];
      for (const id of await tx.fillWaitingDelivery(group, offered, this.config.batchSize)) filled.add(id);
    }
    const batches: { productIds: number[]; oldestAt: string }[] = [];
    let current = { productIds: [] as number[], ids: new Set<number>(), oldestAt: '' };
    // Per row, the products that went into the batch still open (the one that may wait for more).
    const open = new Map<number, number[]>();
    for (const row of rows) {
      for (const productId of row.productIds) {
        if (filled.has(productId)) continue;
        if (!current.ids.has(productId)) {
          if (current.productIds.length === this.config.batchSize) {
            batches.push(current);
            current = { productIds: [], ids: new Set(), oldestAt: '' };
            open.clear();
          }
          current.productIds.push(productId);
          current.ids.add(productId);
        }
        // Rows come in arrival order: the first of a batch is its oldest change.
        if (!current.oldestAt) current.oldestAt = row.createdAt;
        let rest = open.get(row.id);
        if (!rest) open.set(row.id, (rest = []));
        rest.push(productId);
      }
    }
    // A partial batch waits for more ids until its time is up: its rows keep its products.
    if (current.productIds.length === this.config.batchSize || (timeIsUp && current.productIds.length > 0)) {
      batches.push(current);
      open.clear();
    }
    const createdAt = now.toISOString();
    deliveries.push(
      ...batches.map(
        (batch): CoalescedDelivery => ({
          delivery: {
            endpoint_id: endpoint.id,
            event: group.event,
            store_id: group.storeId,
            product_ids: batch.productIds.sort((a, b) => a - b),
            occurred_at: null,
            status: deliver ? 'pending' : 'dropped',
            attempts: 0,
            next_attempt_at: deliver ? createdAt : null,
            created_at: createdAt,
          },
          oldestChangeAt: batch.oldestAt,
        }),
      ),
    );
    // The batched rows are deleted (or trimmed to what waits) in the pass's transaction: together
    // with their deliveries or not at all.
    for (const row of rows) {
      const rest = open.get(row.id);
      if (!rest) taken.push(row.id);
      else if (rest.length < row.productIds.length) trimmed.push({ id: row.id, productIds: rest });
    }
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
      await this.startWaiting(start);
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
        const queue = this.waiting.get(delivery.endpoint_id);
        if (
          !queue &&
          this.sendingTo(delivery.endpoint_id) < this.config.perEndpointConcurrency &&
          this.sendingSlots < this.config.overallConcurrency
        ) {
          start(delivery, endpoint);
          continue;
        }
        const leaseEnds = claimedAt + this.leaseMs() + (delivery.send_at === null ? 0 : RATE_HORIZON_MS);
        const claimDated = delivery.attempts === 0 && delivery.occurred_at === wholeSecondIso(new Date(claimedAt));
        const entry: WaitingDelivery = { delivery, endpoint, leaseEnds, claimDated };
        if (queue) queue.push(entry);
        else this.waiting.set(delivery.endpoint_id, [entry]);
      }
      return skipped;
    });
    this.claiming = turn.then(
      () => undefined,
      () => undefined,
    );
    return turn;
  }

  /**
   * Starts deliveries claimed ahead in the free slots of their endpoints. One whose endpoint an
   * outcome since left paused or disabled is left to its lease (due again when it runs out, unless
   * it was dropped meanwhile); one whose lease would run out before its attempt could end is handed
   * back, due again at once (the next claim, here or in another process, takes it with a new lease).
   */
  private async startWaiting(
    start: (delivery: ClaimedDelivery, endpoint: Promise<WebhookEndpointRecord | undefined>) => void,
  ): Promise<void> {
    if (this.waiting.size === 0) return;
    const now = this.deps.now().getTime();
    const stale: WaitingDelivery[] = [];
    for (const [endpointId, queue] of this.waiting) {
      while (queue.length > 0 && this.sendingSlots < this.config.overallConcurrency) {
        if (this.sendingTo(endpointId) >= this.config.perEndpointConcurrency) break;
        const next = queue.shift()!;
        if (this.inactive.has(endpointId)) continue;
        if (now + this.config.timeoutMs > next.leaseEnds) {
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
  private async releaseWaiting(): Promise<void> {
    const waiting = [...this.waiting.values()].flat();
    this.waiting.clear();
    await this.handBack(waiting);
  }

  /** Deliveries claimed and not started, due again at once as if never claimed (their leases end now). */
  private async handBack(waiting: WaitingDelivery[]): Promise<void> {
    if (waiting.length === 0) return;
    const now = this.deps.now().toISOString();
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
      waitingByEndpoint: new Map([...this.waiting].map(([endpointId, queue]) => [endpointId, queue.length])),
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
    const done = this.attempt(delivery, endpoint, answered).finally(() => {
      this.inflight.delete(delivery.id);
      add(this.inflightByEndpoint, -1);
      release();
    });
    this.inflight.set(delivery.id, done);
    return { slot, done };
  }

  /**
   * Records an ended attempt: its attempt log row, the delivery's new state and the endpoint's
   * health, committed before it resolves. Attempts that end while a transaction records others
   * wait for it and are then recorded together in the next one (group commit): one transaction,
   * one lock of each endpoint and one statement for all their attempts and deliveries, instead of
   * one transaction each. The outcomes are applied in the order the attempts ended, each from the
   * endpoint's health as the one before left it, exactly as one transaction after another would.
   */
  private record(
    delivery: DeliveryRecord,
    endpoint: WebhookEndpointRecord,
    request: SentRequest,
    result: SendResult,
    at: Date,
  ): Promise<DeliveryOutcome | null> {
    return new Promise((resolve, reject) => {
      this.ended.push({ delivery, endpoint, request, result, at, endedAt: performance.now(), resolve, reject });
      if (this.gathering && !this.stillAwaited()) this.recordSoon();
      if (this.recording) return;
      this.recording = true;
      // Recorded once the other attempts to the same endpoints have their responses too, or after
      // RECORD_GATHER_MS, whichever comes first: the attempts to a receiver end one after another,
      // a fraction of a millisecond apart, and together they share one transaction (its BEGIN and
      // COMMIT, the endpoint's read and health write, the pages it writes) instead of one each.
      // Attempts to other endpoints are not waited for (a receiver that hangs delays none of
      // theirs); a receiver that hangs delays its own endpoint's recording by RECORD_GATHER_MS at most.
      if (!this.stillAwaited()) this.recordSoon();
      else this.gathering = setTimeout(() => this.recordSoon(), RECORD_GATHER_MS);
    });
  }

  /** Whether an attempt to the endpoint of an ended attempt still waits for its response. */
  private stillAwaited(): boolean {
    return this.ended.some((item) => (this.awaitingResponse.get(item.endpoint.id) ?? 0) > 0);
  }

  /** Records what has ended, once the event loop has handled what else arrived with the last response. */
  private recordSoon(): void {
    if (this.gathering) clearTimeout(this.gathering);
    this.gathering = null;
    setImmediate(() => void this.recordEnded());
  }

  /** An attempt's response (or failure) came: the last one awaited ends the wait for more (record()). */
  private responded(endpointId: number): void {
    const left = (this.awaitingResponse.get(endpointId) ?? 1) - 1;
    if (left > 0) this.awaitingResponse.set(endpointId, left);
    else this.awaitingResponse.delete(endpointId);
  }

  /** Records what has ended until nothing is left (never rejects: each failure rejects its own attempt). */
  private async recordEnded(): Promise<void> {
    while (this.ended.length > 0) {
      // Only successes, fewer than a transaction's worth: their slots are free, more may end meanwhile.
      const wait = this.ended[0]!.endedAt + RECORD_BATCH_MS - performance.now();
      if (wait > 0 && this.ended.length < OUTCOMES_PER_TRANSACTION && this.ended.every((item) => item.result.error === null)) {
        await sleep(wait);
        continue;
      }
      // A delivery appears once per transaction (a re-claimed one in flight twice waits for the next).
      const batch: EndedAttempt[] = [];
      const ids = new Set<number>();
      for (const item of this.ended) {
        if (batch.length === OUTCOMES_PER_TRANSACTION) break;
        if (ids.has(item.delivery.id)) break;
        ids.add(item.delivery.id);
        batch.push(item);
      }
      this.ended.splice(0, batch.length);
      try {
        await this.recordTogether(batch);
      } catch {
        // One outcome's failure must not fail the others': each alone, as before.
        for (const item of batch) await this.recordTogether([item]).catch((error: unknown) => this.recordAsFailed(item, error));
      }
    }
    // Nothing is left, in the turn that looked: an attempt ending later starts recording again.
    this.recording = false;
  }

  /**
   * An attempt whose outcome could not be recorded counts as a failed attempt
   * `recording_failed`, nothing of the response kept: retried on the backoff (or given up), the
   * endpoint's health counting it; should even that fail, the attempt and the retry alone. Left to
   * its lease, it would be sent again each time the lease ran out, forever, at `attempts: 0`.
   */
  private async recordAsFailed(item: EndedAttempt, error: unknown): Promise<void> {
    const { delivery, endpoint, request, at } = item;
    const ids = { delivery_id: delivery.id, endpoint_id: endpoint.id, merchant_id: endpoint.merchant_id };
    this.log.error({ ...ids, err: error }, 'webhook attempt could not be recorded: recorded as a failed attempt');
    const failed: SendResult = { ...item.result, error: RECORDING_FAILED, responseSnippet: null, retryAfter: null };
    try {
      return await this.recordTogether([{ ...item, result: failed }]);
    } catch (again) {
      this.log.error({ ...ids, err: again }, "webhook attempt could not be recorded with its endpoint's health: recorded without it");
    }
    try {
      const attempts = delivery.attempts + 1;
      const nextAt = nextAttemptAt(attempts, at, this.config.backoffSeconds, null, this.deps.random);
      const status = nextAt ? 'failed' : 'given_up';
      await this.storage.transaction((tx) =>
        tx.recordAttemptOutcomes([
          {
            deliveryId: delivery.id,
            attempt: attemptRecord(failed, at, request),
            status,
            attempts,
            next_attempt_at: nextAt?.toISOString() ?? null,
          },
        ]),
      );
      item.resolve(status);
    } catch (last) {
      // The database refuses even this: the lease runs out and the delivery is sent again.
      item.reject(last);
    }
  }

  /** One transaction for the batch; settles each item after the commit. Rejects (settling none) when it fails. */
  private async recordTogether(batch: EndedAttempt[]): Promise<void> {
    if (await this.recordSuccesses(batch)) return;
    let notifications: NotificationRecord[] = [];
    let statuses = new Map<number, WebhookEndpointRecord['status']>();
    const outcomes = await this.storage.transaction(async (tx) => {
      notifications = [];
      statuses = new Map();
      return this.applyOutcomes(tx, batch, notifications, statuses);
    });
    // Deliveries claimed ahead for an endpoint these outcomes paused or disabled are not started.
    for (const [id, status] of statuses) {
      if (status === 'active') this.inactive.delete(id);
      else this.inactive.add(id);
    }
    for (const notification of notifications) this.deps.notifier.email(notification);
    for (const [i, item] of batch.entries()) item.resolve(outcomes[i]!);
  }

  /**
   * A batch of successes to endpoints that are healthy is recorded in one statement where the
   * storage has it (PostgreSQL: one round trip, where a transaction that reads each endpoint under
   * its lock first took four): their health moves by last_success_at alone. False, nothing
   * recorded, for any other batch, or when an endpoint turned out not to be healthy.
   */
  private async recordSuccesses(batch: EndedAttempt[]): Promise<boolean> {
    if (!this.storage.recordSuccessfulAttempts || batch.some((item) => item.result.error !== null)) return false;
    /** Each endpoint's last success of the batch: its last_success_at after the outcomes, applied in order. */
    const lastSuccessAt = new Map<number, string>();
    const outcomes = batch.map(({ delivery, endpoint, request, result, at }): AttemptOutcome => {
      lastSuccessAt.set(endpoint.id, at.toISOString());
      return {
        deliveryId: delivery.id,
        attempt: attemptRecord(result, at, request),
        status: 'succeeded',
        attempts: delivery.attempts + 1,
        next_attempt_at: null,
      };
    });
    const endpoints = [...lastSuccessAt].map(([id, at]) => ({ id, lastSuccessAt: at }));
    if (!(await this.storage.recordSuccessfulAttempts(outcomes, endpoints))) return false;
    for (const id of lastSuccessAt.keys()) this.inactive.delete(id);
    for (const item of batch) item.resolve('succeeded');
    return true;
  }

  private async applyOutcomes(
    tx: StorageTx,
    batch: EndedAttempt[],
    notifications: NotificationRecord[],
    /** Filled with each endpoint's status after the outcomes. */
    statuses: Map<number, WebhookEndpointRecord['status']>,
  ): Promise<(DeliveryOutcome | null)[]> {
    // Each endpoint read under its row lock once, in id order (as claims lock them): concurrent
    // attempts to one endpoint, in this process or another, lose no failure count.
    const current = new Map((await tx.getWebhookEndpoints(batch.map((item) => item.endpoint.id))).map((e) => [e.id, e]));
    const changed = new Set<number>();
    let written: AttemptOutcome[] = [];
    /** Writes what the outcomes so far decided (before a step that reads or changes deliveries in bulk). */
    const write = async () => {
      const health = [...changed].sort((a, b) => a - b).map((id) => ({ id, health: healthOf(current.get(id)!) }));
      // One statement for both where the storage has it (a round trip fewer on PostgreSQL).
      if (tx.recordAttemptOutcomesWithHealth) await tx.recordAttemptOutcomesWithHealth(written, health);
      else {
        await tx.recordAttemptOutcomes(written);
        await tx.updateWebhookEndpointsHealth(health);
      }
      written = [];
      changed.clear();
    };
    const results: (DeliveryOutcome | null)[] = [];
    for (const { delivery, endpoint, request, result, at } of batch) {
      const attempt = attemptRecord(result, at, request);
      const attempts = delivery.attempts + 1;
      const state = current.get(endpoint.id);
      if (!state) {
        await tx.recordAttempt(delivery.id, attempt);
        results.push(null);
        continue;
      }
      const health = healthOf(state);
      const settle = (outcome: DeliveryOutcome, status: AttemptOutcome['status'], next_attempt_at: string | null) => {
        written.push({ deliveryId: delivery.id, attempt, status, attempts, next_attempt_at });
        results.push(outcome);
      };
      if (result.error === null) {
        const healed = { ...state, ...afterSuccess(health, at) };
        current.set(state.id, healed);
        changed.add(state.id);
        await endConditions(tx, state, healed, at);
        settle('succeeded', 'succeeded', null);
        continue;
      }
      // A receiver that answers 410 Gone asks for no more deliveries.
      const transition = result.statusCode === 410 ? afterGone(health, at) : afterFailure(health, at, this.policy);
      const next = { ...state, ...transition.health };
      current.set(state.id, next);
      changed.add(state.id);
      await endConditions(tx, state, next, at);
      if (transition.health.status !== state.status) {
        this.log.warn(
          {
            endpoint_id: state.id,
            merchant_id: state.merchant_id,
            from: state.status,
            to: transition.health.status,
            consecutive_failures: transition.health.consecutive_failures,
            reason: transition.health.disabled_reason ?? undefined,
          },
          `webhook endpoint ${transition.health.status}`,
        );
      }
      if (transition.notify) {
        await write();
        notifications.push(await this.deps.notifier.notify(tx, next, transition.notify));
      }
      // Paused or disabled (by this attempt, or by another one that ended while this was in
      // flight): no retry; pending retries are dropped (spec 3: nothing sent during the cooldown).
      if (transition.dropPending || transition.health.status !== 'active') {
        settle('dropped', 'dropped', null);
        if (transition.dropPending) {
          await write();
          await tx.dropPendingDeliveries(state.id);
        }
        continue;
      }
      // Honoured up to the last backoff step (a receiver cannot park a delivery for years).
      const retryAfter =
        result.statusCode === 429 || result.statusCode === 503
          ? parseRetryAfter(result.retryAfter, at, this.config.backoffSeconds.at(-1) ?? 0)
          : null;
      const nextAt = nextAttemptAt(attempts, at, this.config.backoffSeconds, retryAfter, this.deps.random);
      if (nextAt) settle('failed', 'failed', nextAt.toISOString());
      else settle('given_up', 'given_up', null);
    }
    await write();
    for (const [id, endpoint] of current) statuses.set(id, endpoint.status);
    return results;
  }

  /**
   * A payload that breaks the document (a bug here, not the receiver's fault): given up at once,
   * `invalid_payload` in the attempt log, the endpoint's health untouched, the schema errors logged.
   */
  private async giveUpInvalid(
    delivery: DeliveryRecord,
    endpoint: WebhookEndpointRecord,
    errors: WebhookSchemaError[],
    at: Date,
  ): Promise<void> {
    const detail = errors.map((e) => `${e.instancePath || '/'} ${e.message}`).join('; ');
    await this.storage.transaction(async (tx) => {
      await tx.recordAttempt(delivery.id, {
        at: at.toISOString(),
        status_code: null,
        error: INVALID_PAYLOAD,
        latency_ms: 0,
        response_snippet: null,
      });
      await tx.updateDelivery(delivery.id, { status: 'given_up', attempts: delivery.attempts + 1, next_attempt_at: null });
    });
    this.deps.metrics?.observeDelivery('given_up', 0);
    this.log.error(
      {
        delivery_id: delivery.id,
        endpoint_id: endpoint.id,
        merchant_id: endpoint.merchant_id,
        event: delivery.event,
        errors: detail,
      },
      'webhook payload breaks the document: not sent',
    );
  }

  private async attempt(
    delivery: ClaimedDelivery,
    endpointRead: Promise<WebhookEndpointRecord | undefined>,
    /** Called when the receiver answered 2xx, before the outcome is recorded. */
    succeeded: () => void,
  ): Promise<void> {
    const endpoint = await endpointRead;
    // Paused or disabled since the claim: the lease runs out and the delivery waits for the endpoint.
    if (!endpoint || endpoint.status !== 'active') return;
    // The slot of the endpoint's rate the claim reserved for this attempt, and no
    // sooner than a slot's length after this process's last start for the endpoint (a send that
    // started late must not bunch with the next one on time).
    if (delivery.send_at !== null && endpoint.max_per_second !== null) {
      const interval = slotInterval(endpoint.max_per_second);
      // Waited for again when another attempt to the endpoint started meanwhile (it moves the
      // earliest start on); otherwise this one's turn has come, however late its timer fired.
      // Nothing runs between the last check and the start.
      for (;;) {
        const last = this.lastStartByEndpoint.get(endpoint.id);
        const at = Math.max(Date.parse(delivery.send_at), last === undefined ? 0 : last + interval);
        if (at <= this.deps.now().getTime()) break;
        await (this.deps.waitUntil?.(new Date(at)) ?? sleep(at - this.deps.now().getTime()));
        if (this.lastStartByEndpoint.get(endpoint.id) === last) break;
      }
      this.lastStartByEndpoint.set(endpoint.id, this.deps.now().getTime());
    }
    const now = this.deps.now();
    const payload = deliveryBody(delivery, delivery.occurred_at ?? wholeSecondIso(now));
    if (!payload.ok) return this.giveUpInvalid(delivery, endpoint, payload.errors, now);
    const { body } = payload;
    const { signing, pending } = secretsAt(endpoint, now);
    const headers = signedHeaders(
      {
        signing,
        pending: pending?.secret,
        deliveryId: delivery.id,
        replaces: delivery.replaces,
        standardWebhooks: endpoint.standard_webhooks,
      },
      body,
      now,
    );
    const request: SentRequest = { url: endpoint.url, headers };
    this.awaitingResponse.set(endpoint.id, (this.awaitingResponse.get(endpoint.id) ?? 0) + 1);
    let result: SendResult;
    try {
      result = await this.deps.sender.send(request.url, request.headers, body, endpoint.id);
    } finally {
      this.responded(endpoint.id);
    }
    const at = this.deps.now();
    if (result.error === null) succeeded();
    const outcome = await this.record(delivery, endpoint, request, result, at);
    if (!outcome) return;
    this.deps.metrics?.observeDelivery(outcome, result.latencyMs / 1000);
    // Never the URL (it may carry the receiver's own token) nor the secret: the ids lead to both.
    const fields = {
      delivery_id: delivery.id,
      endpoint_id: endpoint.id,
      merchant_id: endpoint.merchant_id,
      event: delivery.event,
      attempt: delivery.attempts + 1,
      outcome,
      status_code: result.statusCode,
      latency_ms: result.latencyMs,
    };
    if (outcome === 'succeeded') this.log.debug(fields, 'webhook delivered');
    else this.log.warn({ ...fields, error: result.error }, 'webhook delivery failed');
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
