// Webhook deliveries and their attempts on PostgreSQL, claimed by several dispatchers at once.
import type { AttemptOutcome, DeliveryStore, WebhookEndpointHealthRecord } from '../port.js';
import { HEALTH_UPDATE, healthParams } from './endpoint-health.js';
import { ENDPOINT_PASS_LOCK } from './webhook-endpoints.js';
import type { DeliveryClaim, OutboxGroup } from '../records.js';
import type {
  AttemptHourRecord,
  AttemptRecord,
  ClaimedDelivery,
  DeliveryRecord,
  DeliveryStatus,
  NewAttempt,
  NewDelivery,
} from '../../webhooks/model.js';
import { ATTEMPT_COLUMNS, DELIVERY_COLUMNS, DELIVERY_FIELDS, fillIds, hourOf, toAttempt, toDelivery, toEndpoint } from '../rows.js';
import { wholeSecondIso } from '../../shared/time.js';
import { assignSlots, rateSlots, RATE_HORIZON_MS, takeTurns, type DueDelivery, type EndpointRate } from '../delivery-turns.js';
import { newWebhookId } from '../delivery-ids.js';
import type { PgConnection, Row } from './connection.js';
import { notifyWork } from './wakeups.js';

/** The channel NOTIFY cps_deliveries uses (wakeups.ts, topic `deliveries`), for pg_notify inside a statement. */
export const DELIVERY_WORK_CHANNEL = 'cps_deliveries';

/** The outcomes as the arrays $1 to $9 of OUTCOME_ROWS: their attempts', then the deliveries' attempts count. */
function attemptColumns(outcomes: AttemptOutcome[]): unknown[][] {
  return [
    outcomes.map((o) => o.deliveryId),
    outcomes.map((o) => o.attempt.at),
    outcomes.map((o) => o.attempt.status_code),
    outcomes.map((o) => o.attempt.error),
    outcomes.map((o) => o.attempt.latency_ms),
    outcomes.map((o) => o.attempt.response_snippet),
    outcomes.map((o) => o.attempt.request_url ?? null),
    outcomes.map((o) => (o.attempt.request_headers ? JSON.stringify(o.attempt.request_headers) : null)),
    outcomes.map((o) => o.attempts),
  ];
}

/** The outcomes' rows (`outcome`) from attemptColumns' arrays and the columns `more` names ($10 on). */
const OUTCOME_ROWS = (more: { column: string; type: string }[]) => `outcome AS (
        SELECT * FROM unnest($1::bigint[], $2::text[], $3::integer[], $4::text[], $5::integer[], $6::text[], $7::text[], $8::text[],
            $9::integer[]${more.map((m, i) => `, $${10 + i}::${m.type}[]`).join('')})
          WITH ORDINALITY AS o(delivery_id, at, status_code, error, latency_ms, response_snippet, request_url, request_headers,
            attempts${more.map((m) => `, ${m.column}`).join('')}, ordinal))`;

/** The outcomes' attempts inserted (in their order, with ORDER BY ordinal after it). */
const ATTEMPT_INSERT = `INSERT INTO webhook_attempts (delivery_id, at, status_code, error, latency_ms, response_snippet, request_url, request_headers)
          SELECT delivery_id, at, status_code, error, latency_ms, response_snippet, request_url, request_headers FROM outcome`;

export class PgDeliveries implements DeliveryStore {
  static readonly writes = [
    'insertDelivery',
    'insertCoalescedDeliveries',
    'claimDueDeliveries',
    'updateDelivery',
    'dropPendingDeliveries',
    'recordAttempt',
    'recordAttemptOutcomes',
    'recordAttemptOutcomesWithHealth',
    'replaceDelivery',
    'fillWaitingDelivery',
    // Not recordSuccessfulAttempts: one statement, committed on its own without BEGIN and COMMIT.
  ] as const;

  constructor(private readonly c: PgConnection) {}

  async insertDelivery(input: NewDelivery, oldestChangeAt = input.created_at): Promise<DeliveryRecord> {
    // A pending delivery wakes the dispatchers at commit: pg_notify in the same statement (one round
    // trip, not a NOTIFY after it; PostgreSQL sends a channel's notification once per transaction).
    const row = await this.c.one(
      `WITH inserted AS (
        INSERT INTO webhook_deliveries (endpoint_id, event, store_id, product_ids, occurred_at, status, attempts,
          next_attempt_at, created_at, oldest_change_at, test, replaces, webhook_id, replaces_webhook_id)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13,
          (SELECT r.webhook_id FROM webhook_deliveries AS r WHERE r.id = $12)) RETURNING ${DELIVERY_COLUMNS})
      SELECT inserted.* FROM inserted${input.status === 'pending' ? `, (SELECT pg_notify('${DELIVERY_WORK_CHANNEL}', '')) AS woken` : ''}`,
      [
        input.endpoint_id,
        input.event,
        input.store_id,
        JSON.stringify(input.product_ids),
        input.occurred_at,
        input.status,
        input.attempts,
        input.next_attempt_at,
        input.created_at,
        oldestChangeAt,
        input.test ?? false,
        input.replaces ?? null,
        newWebhookId(),
      ],
    );
    return toDelivery(row!);
  }

  async insertCoalescedDeliveries(deliveries: { delivery: NewDelivery; oldestChangeAt: string }[]): Promise<void> {
    if (deliveries.length === 0) return;
    const column = <K extends keyof NewDelivery>(key: K) => deliveries.map(({ delivery }) => delivery[key]);
    // One statement (unnest keeps the order, so ids follow it); a pending one wakes the dispatchers at commit.
    await this.c.preparedRun(
      'deliveries.insertCoalesced',
      `WITH inserted AS (
        INSERT INTO webhook_deliveries (endpoint_id, event, store_id, product_ids, occurred_at, status, attempts,
          next_attempt_at, created_at, oldest_change_at, webhook_id)
        SELECT * FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::integer[], $8::text[],
          $9::text[], $10::text[], $11::text[])
        RETURNING status)
      SELECT pg_notify('${DELIVERY_WORK_CHANNEL}', '') WHERE EXISTS (SELECT 1 FROM inserted WHERE status = 'pending')`,
      [
        column('endpoint_id'),
        column('event'),
        column('store_id'),
        deliveries.map(({ delivery }) => JSON.stringify(delivery.product_ids)),
        column('occurred_at'),
        column('status'),
        column('attempts'),
        column('next_attempt_at'),
        column('created_at'),
        deliveries.map((d) => d.oldestChangeAt),
        deliveries.map(() => newWebhookId()),
      ],
    );
  }

  async getDelivery(id: number): Promise<DeliveryRecord | undefined> {
    const row = await this.c.one(`SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries WHERE id = $1`, [id]);
    return row && toDelivery(row);
  }

  async claimDueDeliveries(claim: DeliveryClaim): Promise<ClaimedDelivery[]> {
    const at = claim.now();
    const now = at.toISOString();
    // 1. The active endpoints with due deliveries, each claim-locked to the end of this transaction
    // if no other claim holds it, so one claim at a time counts an endpoint's leases and adds to
    // them: per-endpoint concurrency holds across processes. An endpoint another process is claiming
    // is skipped, not waited for (three dispatchers on one endpoint took turns, each waiting claim
    // holding a connection), and reported busy: the dispatcher claims again soon. The claim lock is
    // an advisory lock of its own, not the endpoint's row: a claim never meets a coalescing pass or
    // an attempt's health update that holds the row.
    // 2. A new statement (READ COMMITTED: a new snapshot) sees every lease committed by the claims
    // that held these endpoints before: each one's first due deliveries, and the leases it holds;
    // with the merchants of the endpoints this process sends to (a merchant's share counts all of
    // them), and the rates of rate-limited endpoints (one claim at a time reserves an endpoint's
    // slots). Both in one round trip: statements of their own in a function (migration 53), its
    // rows tagged by what they are.
    const inFlightIds = [...claim.inFlightByEndpoint.keys()];
    const found = await this.c.preparedRows<{
      kind: 'endpoint' | 'busy' | 'candidate' | 'leases' | 'merchant' | 'rate';
      id: number | null;
      endpointId: number;
      nextAttemptAt: string | null;
      n: number | null;
    }>(
      'deliveries.claim.candidates',
      `SELECT kind, id, endpoint_id AS "endpointId", next_attempt_at AS "nextAttemptAt", n
      FROM delivery_claim_candidates($1, $2, $3::bigint[])`,
      [now, claim.perEndpoint + (claim.ahead ?? 0), inFlightIds],
    );
    const busy = found.filter((r) => r.kind === 'busy').map((r) => r.endpointId);
    if (busy.length > 0) claim.busy?.(busy);
    const merchantOfDue = new Map(found.filter((r) => r.kind === 'endpoint').map((r) => [r.endpointId, r.id!]));
    if (merchantOfDue.size === 0) return [];
    const candidates = found
      .filter((r) => r.kind === 'candidate')
      .map(
        (c): DueDelivery => ({
          id: c.id!,
          endpointId: c.endpointId,
          merchantId: merchantOfDue.get(c.endpointId)!,
          nextAttemptAt: c.nextAttemptAt!,
        }),
      );
    if (candidates.length === 0) return [];
    const leases = found.filter((r) => r.kind === 'leases').map((r) => ({ endpointId: r.endpointId, n: r.n! }));
    const merchantOf = new Map(found.filter((r) => r.kind === 'merchant').map((r) => [r.endpointId, r.id!]));
    const rates = new Map<number, EndpointRate>(
      found.filter((r) => r.kind === 'rate').map((r) => [r.endpointId, { maxPerSecond: r.n!, nextAt: r.nextAttemptAt }]),
    );
    const chosen = takeTurns(candidates, claim, new Map(leases.map((r) => [r.endpointId, r.n])), merchantOf, rateSlots(rates, at));
    if (chosen.length === 0) return [];
    const chosenIds = new Set(chosen);
    const slots = assignSlots(
      candidates.filter((c) => chosenIds.has(c.id)),
      rates,
      at,
    );
    // 3. The lease: next_attempt_at keeps the delivery from being due again; leased_until counts it
    // in flight for its endpoint, in every process, until its attempt is recorded. A delivery
    // waiting for its rate's slot holds its lease that much longer; the endpoints' next slots are
    // written in the same statement (its own table: the endpoint's row is never waited for). The
    // candidates' row locks (this transaction's) kept them as read: found by id alone, from the
    // primary key (with their status and due time checked again, a generic plan walked every due
    // delivery of the due index instead).
    const leaseUntil = new Date(at.getTime() + claim.leaseMs + (slots.sendAt.size > 0 ? RATE_HORIZON_MS : 0)).toISOString();
    const rows = await this.c.preparedRows(
      'deliveries.claim.lease',
      `WITH rates AS (
        INSERT INTO webhook_endpoint_rates (endpoint_id, next_at) SELECT * FROM unnest($4::bigint[], $5::text[])
        ON CONFLICT (endpoint_id) DO UPDATE SET next_at = excluded.next_at)
      , leased AS (
        UPDATE webhook_deliveries SET next_attempt_at = $1, leased_until = $1, occurred_at = coalesce(occurred_at, $2)
        WHERE id = ANY($3::bigint[])
        RETURNING ${DELIVERY_COLUMNS})
      SELECT leased.*, row_to_json(e) AS endpoint FROM leased JOIN webhook_endpoints AS e ON e.id = leased.endpoint_id`,
      [leaseUntil, wholeSecondIso(at), chosen, [...slots.nextAt.keys()], [...slots.nextAt.values()]],
    );
    // Each with its endpoint as this statement read it: the dispatcher needs no read of its own.
    return rows
      .map(
        ({ endpoint, ...row }): ClaimedDelivery => ({
          ...toDelivery(row),
          send_at: slots.sendAt.get(Number(row.id)) ?? null,
          endpoint: toEndpoint(endpoint as Row),
        }),
      )
      .sort((a, b) => a.id - b.id);
  }

  async fillWaitingDelivery(
    group: Pick<OutboxGroup, 'endpointId' | 'event' | 'storeId'>,
    productIds: number[],
    batchSize: number,
  ): Promise<number[]> {
    // The endpoint's pending deliveries newest first (webhook_deliveries_endpoint_status): the first
    // of the group's event and store that was never attempted nor leased. One a claim holds is
    // skipped; the update checks again that no claim leased it meanwhile.
    const row = await this.c.one<{ id: number; product_ids: string }>(
      `SELECT id, product_ids FROM webhook_deliveries
      WHERE endpoint_id = $1 AND status = 'pending' AND event = $2 AND store_id IS NOT DISTINCT FROM $3 AND attempts = 0
        AND leased_until IS NULL AND NOT test AND replaces IS NULL
      ORDER BY id DESC LIMIT 1 FOR UPDATE SKIP LOCKED`,
      [group.endpointId, group.event, group.storeId],
    );
    if (!row) return [];
    const merged = fillIds(JSON.parse(row.product_ids) as number[], productIds, batchSize);
    if (!merged.added) return merged.carried;
    const updated = await this.c.run(
      `UPDATE webhook_deliveries SET product_ids = $1
      WHERE id = $2 AND status = 'pending' AND attempts = 0 AND leased_until IS NULL`,
      [JSON.stringify(merged.ids), row.id],
    );
    return updated === 1 ? merged.carried : [];
  }

  async updateDelivery(id: number, patch: Partial<Omit<DeliveryRecord, 'id' | 'endpoint_id'>>): Promise<void> {
    const fields = DELIVERY_FIELDS.filter((f) => f in patch);
    if (fields.length === 0) return;
    const values = fields.map((f) => (f === 'product_ids' ? JSON.stringify(patch.product_ids) : (patch[f] as unknown)));
    // An update records the outcome of the attempt the lease was for: the delivery is in flight no more.
    await this.c.run(
      `UPDATE webhook_deliveries SET ${fields.map((f, i) => `${f} = $${i + 1}`).join(', ')}, leased_until = NULL
      WHERE id = $${fields.length + 1}`,
      [...values, id],
    );
    // Pending again, or due again (deliveries claimed ahead handed back at a stop): work for every dispatcher.
    if (patch.status === 'pending' || (patch.status === undefined && patch.next_attempt_at)) await notifyWork(this.c, 'deliveries');
  }

  async dropPendingDeliveries(endpointId: number): Promise<number> {
    // The endpoint's pass lock, exclusively (PgWebhookEndpoints.coalescingEndpoint): the passes under
    // way commit first, and this statement's snapshot, taken after, sees the deliveries they made.
    await this.c.run(`SELECT pg_advisory_xact_lock(${ENDPOINT_PASS_LOCK}, ($1::bigint % 2147483648)::integer)`, [endpointId]);
    return this.c.run(
      `UPDATE webhook_deliveries SET status = 'dropped', next_attempt_at = NULL
      WHERE endpoint_id = $1 AND status IN ('pending', 'failed')`,
      [endpointId],
    );
  }

  async recordAttempt(deliveryId: number, attempt: NewAttempt): Promise<void> {
    await this.c.run(
      `INSERT INTO webhook_attempts (delivery_id, at, status_code, error, latency_ms, response_snippet, request_url, request_headers)
      VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
      [
        deliveryId,
        attempt.at,
        attempt.status_code,
        attempt.error,
        attempt.latency_ms,
        attempt.response_snippet,
        attempt.request_url ?? null,
        attempt.request_headers ? JSON.stringify(attempt.request_headers) : null,
      ],
    );
  }

  async recordAttemptOutcomes(outcomes: AttemptOutcome[]): Promise<void> {
    if (outcomes.length === 0) return;
    await this.recordAttemptOutcomesWithHealth(outcomes, []);
  }

  /**
   * The attempts, their deliveries and (when given) the endpoints' health in one statement: one
   * round trip where the two calls took two. The endpoints are those the caller's transaction read
   * under their row lock (getWebhookEndpoints), so the update waits for no one.
   */
  async recordAttemptOutcomesWithHealth(
    outcomes: AttemptOutcome[],
    health: { id: number; health: WebhookEndpointHealthRecord }[],
  ): Promise<void> {
    if (outcomes.length === 0) {
      if (health.length > 0) await this.c.run(HEALTH_UPDATE(1), healthParams(health));
      return;
    }
    if (new Set(outcomes.map((o) => o.deliveryId)).size !== outcomes.length)
      throw new TypeError('recordAttemptOutcomes: deliveries must be distinct');
    // One statement for every attempt and its delivery (the attempts' ids in the given order); an
    // outcome never makes a delivery pending again, so nothing is notified.
    if (outcomes.some((o) => o.status === 'pending')) throw new TypeError('recordAttemptOutcomes: an outcome is never pending');
    const outcomeParams = [...attemptColumns(outcomes), outcomes.map((o) => o.status), outcomes.map((o) => o.next_attempt_at)];
    const withHealth = health.length > 0;
    await this.c.preparedRun(
      withHealth ? 'deliveries.outcomesWithHealth' : 'deliveries.outcomes',
      `WITH ${OUTCOME_ROWS([
        { column: 'status', type: 'text' },
        { column: 'next_attempt_at', type: 'text' },
      ])}, attempt AS (${ATTEMPT_INSERT} ORDER BY ordinal)${withHealth ? `, health AS (${HEALTH_UPDATE(12)})` : ''}
      -- Dropped meanwhile (a pause, a resend): only a success changes it; a failure never makes it due again.
      UPDATE webhook_deliveries AS d SET attempts = o.attempts, leased_until = NULL,
          status = CASE WHEN d.status = 'dropped' AND o.status <> 'succeeded' THEN 'dropped' ELSE o.status END,
          next_attempt_at = CASE WHEN d.status = 'dropped' AND o.status <> 'succeeded' THEN NULL ELSE o.next_attempt_at END
        FROM outcome AS o WHERE d.id = o.delivery_id AND d.id = ANY($1::bigint[])`,
      withHealth ? [...outcomeParams, ...healthParams(health)] : outcomeParams,
    );
  }

  async recordSuccessfulAttempts(outcomes: AttemptOutcome[], endpoints: { id: number; lastSuccessAt: string }[]): Promise<boolean> {
    if (outcomes.length === 0) return true;
    if (new Set(outcomes.map((o) => o.deliveryId)).size !== outcomes.length)
      throw new TypeError('recordSuccessfulAttempts: deliveries must be distinct');
    if (outcomes.some((o) => o.status !== 'succeeded')) throw new TypeError('recordSuccessfulAttempts: every outcome is a success');
    const sorted = [...endpoints].sort((a, b) => a.id - b.id);
    // The endpoints' rows are updated first (locked in id order, as every writer of several locks
    // them), and only when every one is healthy are the attempts and deliveries written. An
    // endpoint's row updated while another was not is written again by the caller's usual way, to
    // the same health. Autocommit: the statement is the transaction.
    const rows = await this.c.preparedRows<{ recorded: boolean }>(
      'deliveries.successes',
      `WITH ${OUTCOME_ROWS([])}, healthy AS (
        UPDATE webhook_endpoints AS e SET failure_streak_started_at = NULL, paused_until = NULL, last_success_at = s.at
        FROM (SELECT * FROM unnest($10::bigint[], $11::text[]) AS s(id, at) ORDER BY id) AS s
        WHERE e.id = s.id AND e.status = 'active' AND e.consecutive_failures = 0
        RETURNING e.id
      ), verdict AS (
        SELECT count(*) = cardinality($10::bigint[]) AS recorded FROM healthy
      ), attempt AS (${ATTEMPT_INSERT} WHERE (SELECT recorded FROM verdict) ORDER BY ordinal
      ), delivery AS (
        UPDATE webhook_deliveries AS d SET attempts = o.attempts, leased_until = NULL, status = 'succeeded', next_attempt_at = NULL
          FROM outcome AS o WHERE d.id = o.delivery_id AND d.id = ANY($1::bigint[]) AND (SELECT recorded FROM verdict)
      )
      SELECT recorded FROM verdict`,
      [...attemptColumns(outcomes), sorted.map((e) => e.id), sorted.map((e) => e.lastSuccessAt)],
    );
    return rows[0]?.recorded === true;
  }

  async replaceDelivery(originalId: number, replacementId: number): Promise<void> {
    await this.c.run(
      `UPDATE webhook_deliveries SET replaced_by = $2,
        status = CASE WHEN status IN ('pending', 'failed') THEN 'dropped' ELSE status END,
        next_attempt_at = CASE WHEN status IN ('pending', 'failed') THEN NULL ELSE next_attempt_at END
      WHERE id = $1`,
      [originalId, replacementId],
    );
  }

  async listDeliveries(
    endpointId: number,
    filter: { status?: DeliveryStatus; limit: number; beforeId?: number; webhookId?: string },
  ): Promise<DeliveryRecord[]> {
    // Newest first by keyset: from (endpoint, id), or (endpoint, status, id) for one status (migration 19);
    // one webhook-id: its unique index (migration 58).
    const values: unknown[] = [endpointId, filter.beforeId ?? Number.MAX_SAFE_INTEGER, filter.limit];
    const conditions = ['endpoint_id = $1', 'id < $2'];
    if (filter.status !== undefined) conditions.push(`status = $${values.push(filter.status)}`);
    if (filter.webhookId !== undefined) conditions.push(`webhook_id = $${values.push(filter.webhookId)}`);
    return (
      await this.c.rows(
        `SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries WHERE ${conditions.join(' AND ')} ORDER BY id DESC LIMIT $3`,
        values,
      )
    ).map(toDelivery);
  }

  async listAttempts(deliveryId: number): Promise<AttemptRecord[]> {
    return (await this.c.rows(`SELECT ${ATTEMPT_COLUMNS} FROM webhook_attempts WHERE delivery_id = $1 ORDER BY id`, [deliveryId])).map(
      toAttempt,
    );
  }

  async attemptsPerHour(endpointId: number, from: string, to: string): Promise<AttemptHourRecord[]> {
    // One range of the counts the attempt log's trigger keeps, by their primary key (migration 36).
    return this.c.rows<AttemptHourRecord & Row>(
      `SELECT hour, outcome, attempts, latency_sum_ms AS "latencySumMs", latency_max_ms AS "latencyMaxMs"
      FROM webhook_attempt_hours WHERE endpoint_id = $1 AND hour >= $2 AND hour < $3 ORDER BY hour, outcome`,
      [endpointId, hourOf(from), hourOf(to)],
    );
  }

  async unsuccessfulDeliveriesSince(endpointId: number, since: string): Promise<DeliveryRecord[]> {
    return (
      await this.c.rows(
        `SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries WHERE endpoint_id = $1 AND created_at >= $2
      AND status IN ('failed', 'given_up', 'dropped') AND replaced_by IS NULL ORDER BY id`,
        [endpointId, since],
      )
    ).map(toDelivery);
  }

  async oldestWaitingChangeAt(merchantId: number): Promise<string | null> {
    // Per active endpoint of the merchant, one probe each (migration 19): its oldest outbox row, and
    // its deliveries waiting for a first attempt (from the oldest change each carries), never the
    // endpoint's delivered history nor its whole backlog.
    const row = await this.c.one<{ at: string | null }>(
      `SELECT min(at) AS at FROM (
      SELECT (SELECT min(o.created_at) FROM webhook_outbox AS o WHERE o.endpoint_id = e.id) AS at
        FROM webhook_endpoints AS e WHERE e.merchant_id = $1 AND e.status = 'active'
      UNION ALL
      SELECT (SELECT min(coalesce(d.oldest_change_at, d.created_at)) FROM webhook_deliveries AS d
          WHERE d.endpoint_id = e.id AND d.status = 'pending' AND d.attempts = 0)
        FROM webhook_endpoints AS e WHERE e.merchant_id = $1 AND e.status = 'active') AS waiting`,
      [merchantId],
    );
    return row?.at ?? null;
  }
}
