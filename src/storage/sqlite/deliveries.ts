// Webhook deliveries and their attempts on SQLite.
import type { AttemptOutcome, DeliveryStore } from '../port.js';
import type { AttemptHourRecord, AttemptRecord, DeliveryClaim, DeliveryRecord, DeliveryStatus } from '../records.js';
import { DELIVERY_COLUMNS, DELIVERY_FIELDS, hourOf, toDelivery } from '../rows.js';
import { wholeSecondIso } from '../../shared/time.js';
import { takeTurns, type DueDelivery } from '../delivery-turns.js';
import type { Row, SqliteConnection } from './connection.js';

export class SqliteDeliveries implements DeliveryStore {
  static readonly writes = ['insertDelivery', 'claimDueDeliveries', 'updateDelivery', 'dropPendingDeliveries', 'recordAttempt', 'recordAttemptOutcomes'] as const;

  constructor(private readonly c: SqliteConnection) {}

  private delivery(id: number): DeliveryRecord | undefined {
    const row = this.c.stmt('SELECT * FROM webhook_deliveries WHERE id = ?').get(id) as Row | undefined;
    return row && toDelivery(row);
  }

  async insertDelivery(input: Omit<DeliveryRecord, 'id'>, oldestChangeAt = input.created_at): Promise<DeliveryRecord> {
    const info = this.c.stmt(`INSERT INTO webhook_deliveries (endpoint_id, event, store_id, product_ids, occurred_at, status, attempts, next_attempt_at, created_at, oldest_change_at)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`).run(input.endpoint_id, input.event, input.store_id, JSON.stringify(input.product_ids),
      input.occurred_at, input.status, input.attempts, input.next_attempt_at, input.created_at, oldestChangeAt);
    if (input.status === 'pending') this.c.addedWork.add('deliveries');
    return this.delivery(Number(info.lastInsertRowid))!;
  }

  async getDelivery(id: number): Promise<DeliveryRecord | undefined> {
    return this.delivery(id);
  }

  async claimDueDeliveries(claim: DeliveryClaim): Promise<DeliveryRecord[]> {
    const at = claim.now();
    const now = at.toISOString();
    // Each active endpoint's first due deliveries (an index range per endpoint, however long its
    // backlog); CROSS JOIN keeps that order: endpoints first, then each one's few deliveries by id.
    const candidates = this.c.stmt(`SELECT d.id, d.endpoint_id AS endpointId, e.merchant_id AS merchantId, d.next_attempt_at AS nextAttemptAt
      FROM webhook_endpoints AS e CROSS JOIN webhook_deliveries AS d ON d.id IN (
        SELECT x.id FROM webhook_deliveries AS x
        WHERE x.endpoint_id = e.id AND x.status IN ('pending', 'failed') AND x.next_attempt_at <= @now
        ORDER BY x.next_attempt_at, x.id LIMIT @perEndpoint)
      WHERE e.status = 'active'`).all({ now, perEndpoint: claim.perEndpoint }) as DueDelivery[];
    if (candidates.length === 0) return [];
    const chosen = takeTurns(candidates, claim, this.leasesHeld(candidates.map((c) => c.endpointId), now),
      this.merchantsOf([...claim.inFlightByEndpoint.keys()]));
    if (chosen.length === 0) return [];
    // The lease: claims run in a write transaction (BEGIN IMMEDIATE), so no other process leases
    // between the reads above and this statement, and the statement re-checks that each delivery
    // is still due all the same. next_attempt_at keeps it from being due again; leased_until
    // counts it in flight for its endpoint, in every process, until its attempt is recorded.
    const leaseUntil = new Date(at.getTime() + claim.leaseMs).toISOString();
    const rows = this.c.stmt(`UPDATE webhook_deliveries SET next_attempt_at = @leaseUntil, leased_until = @leaseUntil,
        occurred_at = coalesce(occurred_at, @occurredAt)
      WHERE id IN (SELECT value FROM json_each(@ids)) AND status IN ('pending', 'failed') AND next_attempt_at <= @now
      RETURNING ${DELIVERY_COLUMNS}`).all({ leaseUntil, occurredAt: wholeSecondIso(at), now, ids: JSON.stringify(chosen) }) as Row[];
    return rows.map(toDelivery).sort((a, b) => a.id - b.id);
  }

  /** Per endpoint, its deliveries leased by any process and not recorded yet (lease not expired). */
  private leasesHeld(endpointIds: number[], now: string): Map<number, number> {
    const rows = this.c.stmt(`SELECT endpoint_id AS endpointId, count(*) AS n FROM webhook_deliveries
      WHERE endpoint_id IN (SELECT value FROM json_each(?)) AND leased_until > ? GROUP BY endpoint_id`)
      .all(JSON.stringify([...new Set(endpointIds)]), now) as { endpointId: number; n: number }[];
    return new Map(rows.map((r) => [r.endpointId, r.n]));
  }

  /** The merchant of each endpoint (a deleted one has none). */
  private merchantsOf(endpointIds: number[]): Map<number, number> {
    if (endpointIds.length === 0) return new Map();
    const rows = this.c.stmt(`SELECT id AS endpointId, merchant_id AS merchantId FROM webhook_endpoints
      WHERE id IN (SELECT value FROM json_each(?))`).all(JSON.stringify(endpointIds)) as { endpointId: number; merchantId: number }[];
    return new Map(rows.map((r) => [r.endpointId, r.merchantId]));
  }

  async updateDelivery(id: number, patch: Partial<Omit<DeliveryRecord, 'id' | 'endpoint_id'>>): Promise<void> {
    const fields = DELIVERY_FIELDS.filter((f) => f in patch);
    if (fields.length === 0) return;
    const values = fields.map((f) => (f === 'product_ids' ? JSON.stringify(patch.product_ids) : (patch[f] as unknown)));
    // An update records the outcome of the attempt the lease was for: the delivery is in flight no more.
    this.c.stmt(`UPDATE webhook_deliveries SET ${fields.map((f) => `${f} = ?`).join(', ')}, leased_until = NULL WHERE id = ?`).run(...values, id);
    if (patch.status === 'pending') this.c.addedWork.add('deliveries');
  }

  async dropPendingDeliveries(endpointId: number): Promise<number> {
    return this.c.stmt(`UPDATE webhook_deliveries SET status = 'dropped', next_attempt_at = NULL
      WHERE endpoint_id = ? AND status IN ('pending', 'failed')`).run(endpointId).changes;
  }

  async recordAttempt(deliveryId: number, attempt: AttemptRecord): Promise<void> {
    this.c.stmt(`INSERT INTO webhook_attempts (delivery_id, at, status_code, error, latency_ms, response_snippet)
      VALUES (?, ?, ?, ?, ?, ?)`).run(deliveryId, attempt.at, attempt.status_code, attempt.error, attempt.latency_ms, attempt.response_snippet);
  }

  async recordAttemptOutcomes(outcomes: AttemptOutcome[]): Promise<void> {
    for (const { deliveryId, attempt, status, attempts, next_attempt_at } of outcomes) {
      await this.recordAttempt(deliveryId, attempt);
      await this.updateDelivery(deliveryId, { status, attempts, next_attempt_at });
    }
  }

  async listDeliveries(endpointId: number, filter: { status?: DeliveryStatus; limit: number; beforeId?: number }): Promise<DeliveryRecord[]> {
    // Newest first by keyset: from (endpoint, id), or (endpoint, status, id) for one status (migration 19).
    const page = { endpointId, beforeId: filter.beforeId ?? Number.MAX_SAFE_INTEGER, limit: filter.limit };
    const rows = filter.status === undefined
      ? this.c.stmt('SELECT * FROM webhook_deliveries WHERE endpoint_id = @endpointId AND id < @beforeId ORDER BY id DESC LIMIT @limit').all(page)
      : this.c.stmt(`SELECT * FROM webhook_deliveries WHERE endpoint_id = @endpointId AND status = @status AND id < @beforeId
        ORDER BY id DESC LIMIT @limit`).all({ ...page, status: filter.status });
    return (rows as Row[]).map(toDelivery);
  }

  async listAttempts(deliveryId: number): Promise<AttemptRecord[]> {
    return this.c.stmt('SELECT at, status_code, error, latency_ms, response_snippet FROM webhook_attempts WHERE delivery_id = ? ORDER BY id')
      .all(deliveryId) as AttemptRecord[];
  }

  async attemptsPerHour(endpointId: number, from: string, to: string): Promise<AttemptHourRecord[]> {
    // One range of the counts the attempt log's trigger keeps, by their primary key (migration 36).
    return this.c.stmt(`SELECT hour, outcome, attempts, latency_sum_ms AS latencySumMs, latency_max_ms AS latencyMaxMs
      FROM webhook_attempt_hours WHERE endpoint_id = ? AND hour >= ? AND hour < ? ORDER BY hour, outcome`)
      .all(endpointId, hourOf(from), hourOf(to)) as AttemptHourRecord[];
  }

  async unsuccessfulDeliveriesSince(endpointId: number, since: string): Promise<DeliveryRecord[]> {
    return (this.c.stmt(`SELECT * FROM webhook_deliveries WHERE endpoint_id = ? AND created_at >= ?
      AND status IN ('failed', 'given_up', 'dropped') ORDER BY id`).all(endpointId, since) as Row[]).map(toDelivery);
  }

  async oldestWaitingChangeAt(merchantId: number): Promise<string | null> {
    // Per active endpoint of the merchant, one probe each (migration 19): its oldest outbox row, and
    // its deliveries waiting for a first attempt (from the oldest change each carries), never the
    // endpoint's delivered history nor its whole backlog.
    return this.c.stmt(`SELECT min(at) FROM (
      SELECT (SELECT min(o.created_at) FROM webhook_outbox AS o WHERE o.endpoint_id = e.id) AS at
        FROM webhook_endpoints AS e WHERE e.merchant_id = @merchantId AND e.status = 'active'
      UNION ALL
      SELECT (SELECT min(coalesce(d.oldest_change_at, d.created_at)) FROM webhook_deliveries AS d
          WHERE d.endpoint_id = e.id AND d.status = 'pending' AND d.attempts = 0)
        FROM webhook_endpoints AS e WHERE e.merchant_id = @merchantId AND e.status = 'active')`)
      .pluck().get({ merchantId }) as string | null;
  }
}
