// Webhook deliveries and their attempts on SQLite.
import type { AttemptOutcome, DeliveryStore } from '../port.js';
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
import { ATTEMPT_COLUMNS, DELIVERY_COLUMNS, DELIVERY_FIELDS, fillIds, hourOf, toAttempt, toDelivery } from '../rows.js';
import { wholeSecondIso } from '../../shared/time.js';
import { assignSlots, rateSlots, RATE_HORIZON_MS, takeTurns, type DueDelivery, type EndpointRate } from '../delivery-turns.js';
import { newWebhookId } from '../delivery-ids.js';
import type { Row, SqliteConnection } from './connection.js';

export class SqliteDeliveries implements DeliveryStore {
  static readonly writes = [
    'insertDelivery',
    'insertCoalescedDeliveries',
    'claimDueDeliveries',
    'updateDelivery',
    'dropPendingDeliveries',
    'recordAttempt',
    'recordAttemptOutcomes',
    'replaceDelivery',
    'fillWaitingDelivery',
  ] as const;

  constructor(private readonly c: SqliteConnection) {}

  private delivery(id: number): DeliveryRecord | undefined {
    const row = this.c.stmt('SELECT * FROM webhook_deliveries WHERE id = ?').get(id) as Row | undefined;
    return row && toDelivery(row);
  }

  async insertDelivery(input: NewDelivery, oldestChangeAt = input.created_at): Promise<DeliveryRecord> {
    const info = this.c
      .stmt(`INSERT INTO webhook_deliveries (endpoint_id, event, store_id, product_ids, occurred_at, status, attempts, next_attempt_at,
        created_at, oldest_change_at, test, replaces, webhook_id, replaces_webhook_id)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, (SELECT r.webhook_id FROM webhook_deliveries AS r WHERE r.id = ?))`)
      .run(
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
        input.test ? 1 : 0,
        input.replaces ?? null,
        newWebhookId(),
        input.replaces ?? null,
      );
    if (input.status === 'pending') this.c.addedWork.add('deliveries');
    return this.delivery(Number(info.lastInsertRowid))!;
  }

  async insertCoalescedDeliveries(deliveries: { delivery: NewDelivery; oldestChangeAt: string }[]): Promise<void> {
    const insert = this.c.stmt(`INSERT INTO webhook_deliveries (endpoint_id, event, store_id, product_ids, occurred_at, status, attempts,
      next_attempt_at, created_at, oldest_change_at, webhook_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`);
    for (const { delivery: d, oldestChangeAt } of deliveries) {
      insert.run(
        d.endpoint_id,
        d.event,
        d.store_id,
        JSON.stringify(d.product_ids),
        d.occurred_at,
        d.status,
        d.attempts,
        d.next_attempt_at,
        d.created_at,
        oldestChangeAt,
        newWebhookId(),
      );
      if (d.status === 'pending') this.c.addedWork.add('deliveries');
    }
  }

  async getDelivery(id: number): Promise<DeliveryRecord | undefined> {
    return this.delivery(id);
  }

  async claimDueDeliveries(claim: DeliveryClaim): Promise<ClaimedDelivery[]> {
    const at = claim.now();
    const now = at.toISOString();
    // Each active endpoint's first due deliveries (an index range per endpoint, however long its
    // backlog); CROSS JOIN keeps that order: endpoints first, then each one's few deliveries by id.
    const found = this.c
      .stmt(`SELECT d.id, d.endpoint_id AS endpointId, e.merchant_id AS merchantId, d.next_attempt_at AS nextAttemptAt,
        e.max_per_second AS maxPerSecond, (SELECT r.next_at FROM webhook_endpoint_rates AS r WHERE r.endpoint_id = e.id) AS rateNextAt
      FROM webhook_endpoints AS e CROSS JOIN webhook_deliveries AS d ON d.id IN (
        SELECT x.id FROM webhook_deliveries AS x
        WHERE x.endpoint_id = e.id AND x.status IN ('pending', 'failed') AND x.next_attempt_at <= @now
        ORDER BY x.next_attempt_at, x.id LIMIT @perEndpoint)
      WHERE e.status = 'active'`)
      .all({ now, perEndpoint: claim.perEndpoint + (claim.ahead ?? 0) }) as (DueDelivery & {
      maxPerSecond: number | null;
      rateNextAt: string | null;
    })[];
    if (found.length === 0) return [];
    const rates = new Map<number, EndpointRate>();
    for (const f of found) if (f.maxPerSecond !== null) rates.set(f.endpointId, { maxPerSecond: f.maxPerSecond, nextAt: f.rateNextAt });
    const candidates: DueDelivery[] = found.map(({ id, endpointId, merchantId, nextAttemptAt }) => ({
      id,
      endpointId,
      merchantId,
      nextAttemptAt,
    }));
    const chosen = takeTurns(
      candidates,
      claim,
      this.leasesHeld(
        candidates.map((c) => c.endpointId),
        now,
      ),
      this.merchantsOf([...claim.inFlightByEndpoint.keys()]),
      rateSlots(rates, at),
    );
    if (chosen.length === 0) return [];
    const chosenIds = new Set(chosen);
    const slots = assignSlots(
      candidates.filter((c) => chosenIds.has(c.id)),
      rates,
      at,
    );
    // The lease: claims run in a write transaction (BEGIN IMMEDIATE), so no other process leases
    // between the reads above and this statement, and the statement re-checks that each delivery
    // is still due all the same. next_attempt_at keeps it from being due again; leased_until
    // counts it in flight for its endpoint, in every process, until its attempt is recorded. A
    // delivery waiting for its rate's slot holds its lease that much longer.
    const leaseUntil = new Date(at.getTime() + claim.leaseMs + (slots.sendAt.size > 0 ? RATE_HORIZON_MS : 0)).toISOString();
    const rows = this.c
      .stmt(`UPDATE webhook_deliveries SET next_attempt_at = @leaseUntil, leased_until = @leaseUntil,
        occurred_at = coalesce(occurred_at, @occurredAt)
      WHERE id IN (SELECT value FROM json_each(@ids)) AND status IN ('pending', 'failed') AND next_attempt_at <= @now
      RETURNING ${DELIVERY_COLUMNS}`)
      .all({ leaseUntil, occurredAt: wholeSecondIso(at), now, ids: JSON.stringify(chosen) }) as Row[];
    const upsertRate = this.c.stmt(`INSERT INTO webhook_endpoint_rates (endpoint_id, next_at) VALUES (?, ?)
      ON CONFLICT (endpoint_id) DO UPDATE SET next_at = excluded.next_at`);
    for (const [endpointId, nextAt] of slots.nextAt) upsertRate.run(endpointId, nextAt);
    return rows
      .map((row): ClaimedDelivery => ({ ...toDelivery(row), send_at: slots.sendAt.get(row.id as number) ?? null }))
      .sort((a, b) => a.id - b.id);
  }

  async fillWaitingDelivery(
    group: Pick<OutboxGroup, 'endpointId' | 'event' | 'storeId'>,
    productIds: number[],
    batchSize: number,
  ): Promise<number[]> {
    // The endpoint's pending deliveries newest first (webhook_deliveries_endpoint_status): the first
    // of the group's event and store that was never attempted nor leased.
    const row = this.c
      .stmt(`SELECT id, product_ids FROM webhook_deliveries
      WHERE endpoint_id = ? AND status = 'pending' AND event = ? AND store_id IS ? AND attempts = 0 AND leased_until IS NULL
        AND test = 0 AND replaces IS NULL
      ORDER BY id DESC LIMIT 1`)
      .get(group.endpointId, group.event, group.storeId) as { id: number; product_ids: string } | undefined;
    if (!row) return [];
    const merged = fillIds(JSON.parse(row.product_ids) as number[], productIds, batchSize);
    if (merged.added) this.c.stmt('UPDATE webhook_deliveries SET product_ids = ? WHERE id = ?').run(JSON.stringify(merged.ids), row.id);
    return merged.carried;
  }

  /** Per endpoint, its deliveries leased by any process and not recorded yet (lease not expired). */
  private leasesHeld(endpointIds: number[], now: string): Map<number, number> {
    const rows = this.c
      .stmt(`SELECT endpoint_id AS endpointId, count(*) AS n FROM webhook_deliveries
      WHERE endpoint_id IN (SELECT value FROM json_each(?)) AND leased_until > ? GROUP BY endpoint_id`)
      .all(JSON.stringify([...new Set(endpointIds)]), now) as { endpointId: number; n: number }[];
    return new Map(rows.map((r) => [r.endpointId, r.n]));
  }

  /** The merchant of each endpoint (a deleted one has none). */
  private merchantsOf(endpointIds: number[]): Map<number, number> {
    if (endpointIds.length === 0) return new Map();
    const rows = this.c
      .stmt(`SELECT id AS endpointId, merchant_id AS merchantId FROM webhook_endpoints
      WHERE id IN (SELECT value FROM json_each(?))`)
      .all(JSON.stringify(endpointIds)) as { endpointId: number; merchantId: number }[];
    return new Map(rows.map((r) => [r.endpointId, r.merchantId]));
  }

  async updateDelivery(id: number, patch: Partial<Omit<DeliveryRecord, 'id' | 'endpoint_id'>>): Promise<void> {
    const fields = DELIVERY_FIELDS.filter((f) => f in patch);
    if (fields.length === 0) return;
    const values = fields.map((f) => (f === 'product_ids' ? JSON.stringify(patch.product_ids) : (patch[f] as unknown)));
    // An update records the outcome of the attempt the lease was for: the delivery is in flight no more.
    this.c
      .stmt(`UPDATE webhook_deliveries SET ${fields.map((f) => `${f} = ?`).join(', ')}, leased_until = NULL WHERE id = ?`)
      .run(...values, id);
    // Pending again, or due again (deliveries claimed ahead handed back at a stop): work for the dispatchers.
    if (patch.status === 'pending' || (patch.status === undefined && patch.next_attempt_at)) this.c.addedWork.add('deliveries');
  }

  async dropPendingDeliveries(endpointId: number): Promise<number> {
    return this.c
      .stmt(`UPDATE webhook_deliveries SET status = 'dropped', next_attempt_at = NULL
      WHERE endpoint_id = ? AND status IN ('pending', 'failed')`)
      .run(endpointId).changes;
  }

  async recordAttempt(deliveryId: number, attempt: NewAttempt): Promise<void> {
    this.c
      .stmt(`INSERT INTO webhook_attempts (delivery_id, at, status_code, error, latency_ms, response_snippet, request_url, request_headers)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?)`)
      .run(
        deliveryId,
        attempt.at,
        attempt.status_code,
        attempt.error,
        attempt.latency_ms,
        attempt.response_snippet,
        attempt.request_url ?? null,
        attempt.request_headers ? JSON.stringify(attempt.request_headers) : null,
      );
  }

  async recordAttemptOutcomes(outcomes: AttemptOutcome[]): Promise<void> {
    for (const { deliveryId, attempt, status, attempts, next_attempt_at } of outcomes) {
      await this.recordAttempt(deliveryId, attempt);
      // Dropped meanwhile (a pause, a resend): only a success changes it; a failure never makes it due again.
      this.c
        .stmt(`UPDATE webhook_deliveries SET attempts = @attempts, leased_until = NULL,
          status = CASE WHEN status = 'dropped' AND @status <> 'succeeded' THEN 'dropped' ELSE @status END,
          next_attempt_at = CASE WHEN status = 'dropped' AND @status <> 'succeeded' THEN NULL ELSE @next END
        WHERE id = @id`)
        .run({ id: deliveryId, status, attempts, next: next_attempt_at });
    }
  }

  async replaceDelivery(originalId: number, replacementId: number): Promise<void> {
    this.c
      .stmt(`UPDATE webhook_deliveries SET replaced_by = @replacementId,
        status = CASE WHEN status IN ('pending', 'failed') THEN 'dropped' ELSE status END,
        next_attempt_at = CASE WHEN status IN ('pending', 'failed') THEN NULL ELSE next_attempt_at END
      WHERE id = @originalId`)
      .run({ originalId, replacementId });
  }

  async listDeliveries(
    endpointId: number,
    filter: { status?: DeliveryStatus; limit: number; beforeId?: number; webhookId?: string },
  ): Promise<DeliveryRecord[]> {
    // Newest first by keyset: from (endpoint, id), or (endpoint, status, id) for one status (migration 19).
    const page = { endpointId, beforeId: filter.beforeId ?? Number.MAX_SAFE_INTEGER, limit: filter.limit };
    const rows =
      filter.webhookId !== undefined
        ? this.c
            .stmt(`SELECT * FROM webhook_deliveries WHERE webhook_id = @webhookId AND endpoint_id = @endpointId
        AND (@status IS NULL OR status = @status) AND id < @beforeId LIMIT @limit`)
            .all({ ...page, webhookId: filter.webhookId, status: filter.status ?? null })
        : filter.status === undefined
          ? this.c
              .stmt('SELECT * FROM webhook_deliveries WHERE endpoint_id = @endpointId AND id < @beforeId ORDER BY id DESC LIMIT @limit')
              .all(page)
          : this.c
              .stmt(`SELECT * FROM webhook_deliveries WHERE endpoint_id = @endpointId AND status = @status AND id < @beforeId
        ORDER BY id DESC LIMIT @limit`)
              .all({ ...page, status: filter.status });
    return (rows as Row[]).map(toDelivery);
  }

  async listAttempts(deliveryId: number): Promise<AttemptRecord[]> {
    return (this.c.stmt(`SELECT ${ATTEMPT_COLUMNS} FROM webhook_attempts WHERE delivery_id = ? ORDER BY id`).all(deliveryId) as Row[]).map(
      toAttempt,
    );
  }

  async attemptsPerHour(endpointId: number, from: string, to: string): Promise<AttemptHourRecord[]> {
    // One range of the counts the attempt log's trigger keeps, by their primary key (migration 36).
    return this.c
      .stmt(`SELECT hour, outcome, attempts, latency_sum_ms AS latencySumMs, latency_max_ms AS latencyMaxMs
      FROM webhook_attempt_hours WHERE endpoint_id = ? AND hour >= ? AND hour < ? ORDER BY hour, outcome`)
      .all(endpointId, hourOf(from), hourOf(to)) as AttemptHourRecord[];
  }

  async unsuccessfulDeliveriesSince(endpointId: number, since: string): Promise<DeliveryRecord[]> {
    return (
      this.c
        .stmt(`SELECT * FROM webhook_deliveries WHERE endpoint_id = ? AND created_at >= ?
      AND status IN ('failed', 'given_up', 'dropped') AND replaced_by IS NULL ORDER BY id`)
        .all(endpointId, since) as Row[]
    ).map(toDelivery);
  }

  async oldestWaitingChangeAt(merchantId: number): Promise<string | null> {
    // Per active endpoint of the merchant, one probe each (migration 19): its oldest outbox row, and
    // its deliveries waiting for a first attempt (from the oldest change each carries), never the
    // endpoint's delivered history nor its whole backlog.
    return this.c
      .stmt(`SELECT min(at) FROM (
      SELECT (SELECT min(o.created_at) FROM webhook_outbox AS o WHERE o.endpoint_id = e.id) AS at
        FROM webhook_endpoints AS e WHERE e.merchant_id = @merchantId AND e.status = 'active'
      UNION ALL
      SELECT (SELECT min(coalesce(d.oldest_change_at, d.created_at)) FROM webhook_deliveries AS d
          WHERE d.endpoint_id = e.id AND d.status = 'pending' AND d.attempts = 0)
        FROM webhook_endpoints AS e WHERE e.merchant_id = @merchantId AND e.status = 'active')`)
      .pluck()
      .get({ merchantId }) as string | null;
  }
}
