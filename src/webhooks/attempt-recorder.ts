// Recording ended attempts: each attempt's log row, its delivery's new state (retry with backoff,
// given up, dropped) and its endpoint's health, several attempts in one transaction (group commit).
import type { Config } from '../config.js';
import type { WebhookSchemaError } from '../generated/public-webhooks.js';
import type { Logger } from '../operations/log.js';
import type { DeliveryObserver, DeliveryOutcome } from '../operations/metrics.js';
import type { AttemptOutcome, CatalogStorage, StorageTx } from '../storage/port.js';
import { attemptRecord, type SentRequest } from './attempt-record.js';
import { INVALID_PAYLOAD } from './delivery-body.js';
import { afterFailure, afterGone, afterSuccess, type HealthPolicy } from './health.js';
import { endConditions, healthOf } from './health-records.js';
import type { DeliveryRecord, NotificationRecord, WebhookEndpointRecord } from './model.js';
import type { Notifier } from './notifier.js';
import { nextAttemptAt, parseRetryAfter } from './retry.js';
import type { SendResult } from './sender.js';

/** The attempt log's error for an attempt whose outcome could not be recorded: a failed attempt. */
export const RECORDING_FAILED = 'recording_failed';

/** Outcomes recorded in one transaction at most. */
export const OUTCOMES_PER_TRANSACTION = 64;

/**
 * An ended attempt waits this long at most for the attempts still awaiting their responses, to be
 * recorded with them in one transaction (AttemptRecorder.record).
 */
export const RECORD_GATHER_MS = 2;

/**
 * Successes (whose slots their answers freed) wait this long at most after the first of them
 * ended for more to record with them, up to OUTCOMES_PER_TRANSACTION: sends go on meanwhile, and
 * each record is a round trip on PostgreSQL.
 */
export const RECORD_BATCH_MS = 10;

/** An attempt that ended, waiting to be recorded (AttemptRecorder.record). */
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

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** The dispatcher's recording of its attempts (WebhookDispatcher.send). */
export class AttemptRecorder {
  /** Attempts that ended while outcomes were being recorded: the next transaction records them together. */
  private ended: EndedAttempt[] = [];
  private recording = false;
  /** Per endpoint, its attempts sent and still waiting for their response (or failure). */
  private readonly awaitingResponse = new Map<number, number>();
  /** The wait for more attempts to end before recording (record()): null when none is set. */
  private gathering: NodeJS.Timeout | null = null;

  constructor(
    private readonly storage: CatalogStorage,
    private readonly config: Config['webhooks'],
    private readonly policy: HealthPolicy,
    private readonly deps: { notifier: Notifier; random?: () => number; metrics?: DeliveryObserver },
    private readonly log: Logger,
    /** Each endpoint's status after recorded outcomes (paused or disabled: its deliveries claimed ahead wait). */
    private readonly endpointStatus: (endpointId: number, status: WebhookEndpointRecord['status']) => void,
  ) {}

  /** An attempt to the endpoint was sent and waits for its response (responded() when it comes). */
  awaiting(endpointId: number): void {
    this.awaitingResponse.set(endpointId, (this.awaitingResponse.get(endpointId) ?? 0) + 1);
  }

  /**
   * Records an ended attempt: its attempt log row, the delivery's new state and the endpoint's
   * health, committed before it resolves. Attempts that end while a transaction records others
   * wait for it and are then recorded together in the next one (group commit): one transaction,
   * one lock of each endpoint and one statement for all their attempts and deliveries, instead of
   * one transaction each. The outcomes are applied in the order the attempts ended, each from the
   * endpoint's health as the one before left it, exactly as one transaction after another would.
   */
  record(
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
  responded(endpointId: number): void {
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
    for (const [id, status] of statuses) this.endpointStatus(id, status);
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
    for (const id of lastSuccessAt.keys()) this.endpointStatus(id, 'active');
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
  async giveUpInvalid(delivery: DeliveryRecord, endpoint: WebhookEndpointRecord, errors: WebhookSchemaError[], at: Date): Promise<void> {
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
}
