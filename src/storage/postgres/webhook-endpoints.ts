// Receiver endpoints with their health record on PostgreSQL.
import type { WebhookEndpointHealthRecord, WebhookEndpointStore } from '../port.js';
import type { WebhookEndpointInputRecord, WebhookEndpointRecord } from '../records.js';
import { ENDPOINT_FIELDS, toEndpoint } from '../rows.js';
import type { PgConnection, Row } from './connection.js';

export class PgWebhookEndpoints implements WebhookEndpointStore {
  static readonly writes = ['createWebhookEndpoint', 'updateWebhookEndpoint', 'updateWebhookEndpointsHealth', 'deleteWebhookEndpoint'] as const;

  constructor(private readonly c: PgConnection) {}

  async createWebhookEndpoint(input: WebhookEndpointInputRecord): Promise<WebhookEndpointRecord> {
    const row = await this.c.one(`INSERT INTO webhook_endpoints (merchant_id, url, store_id, events, standard_webhooks, max_per_second, secret, created_at)
      VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING *`,
    [input.merchant_id, input.url, input.store_id, JSON.stringify(input.events), input.standard_webhooks ?? false, input.max_per_second ?? null,
      input.secret, input.created_at]);
    return toEndpoint(row!);
  }

  async listWebhookEndpoints(merchantId: number): Promise<WebhookEndpointRecord[]> {
    return (await this.c.rows('SELECT * FROM webhook_endpoints WHERE merchant_id = $1 ORDER BY id', [merchantId])).map(toEndpoint);
  }

  async getWebhookEndpoint(id: number, merchantId?: number): Promise<WebhookEndpointRecord | undefined> {
    // In a write transaction the endpoint is read to update its health from it: the row lock holds
    // a concurrent attempt's read until this one commits, so no failure count is lost. NO KEY
    // UPDATE: inserts of outbox rows and deliveries that reference the endpoint do not wait for it.
    const row = await this.c.one(`SELECT * FROM webhook_endpoints WHERE id = $1 AND merchant_id = coalesce($2, merchant_id)
      ${this.c.inWriteTransaction ? 'FOR NO KEY UPDATE' : ''}`, [id, merchantId ?? null]);
    return row && toEndpoint(row);
  }

  async getWebhookEndpoints(ids: number[]): Promise<WebhookEndpointRecord[]> {
    if (ids.length === 0) return [];
    // In a write transaction locked as getWebhookEndpoint locks one, in id order (as claims lock them).
    return (await this.c.rows(`SELECT * FROM webhook_endpoints WHERE id = ANY($1::bigint[]) ORDER BY id
      ${this.c.inWriteTransaction ? 'FOR NO KEY UPDATE' : ''}`, [[...new Set(ids)]])).map(toEndpoint);
  }

  async coalescingEndpoint(id: number): Promise<WebhookEndpointRecord | 'busy' | undefined> {
    // Locked as getWebhookEndpoint locks it, but never waited for: a pass holds its endpoints to its
    // COMMIT, and one pass waiting for another's (or for an attempt's health update) would serialize
    // every dispatcher on every endpoint. The rows of a busy endpoint stay for the next pass.
    const row = await this.c.one(`SELECT e.*, locked.id IS NULL AS busy FROM webhook_endpoints AS e
      LEFT JOIN (SELECT id FROM webhook_endpoints WHERE id = $1 FOR NO KEY UPDATE SKIP LOCKED) AS locked ON locked.id = e.id
      WHERE e.id = $1`, [id]);
    if (!row) return undefined;
    const { busy, ...endpoint } = row;
    return busy ? 'busy' : toEndpoint(endpoint);
  }

  async updateWebhookEndpoint(id: number, patch: Partial<Omit<WebhookEndpointRecord, 'id' | 'merchant_id' | 'created_at'>>): Promise<void> {
    const fields = ENDPOINT_FIELDS.filter((f) => f in patch);
    if (fields.length === 0) return;
    const values = fields.map((f) => (f === 'events' ? JSON.stringify(patch.events) : (patch[f] as unknown)));
    await this.c.run(`UPDATE webhook_endpoints SET ${fields.map((f, i) => `${f} = $${i + 1}`).join(', ')} WHERE id = $${fields.length + 1}`,
      [...values, id]);
  }

  async updateWebhookEndpointsHealth(updates: { id: number; health: WebhookEndpointHealthRecord }[]): Promise<void> {
    if (updates.length === 0) return;
    if (new Set(updates.map((u) => u.id)).size !== updates.length) throw new TypeError('updateWebhookEndpointsHealth: ids must be distinct');
    const column = <K extends keyof WebhookEndpointHealthRecord>(key: K) => updates.map((u) => u.health[key]);
    // One statement, the rows in id order (as every other writer locks several endpoints).
    await this.c.run(`UPDATE webhook_endpoints AS e SET status = h.status, consecutive_failures = h.consecutive_failures,
        failure_streak_started_at = h.failure_streak_started_at, paused_until = h.paused_until, owners_notified_at = h.owners_notified_at,
        disabled_reason = h.disabled_reason, last_success_at = h.last_success_at, last_failure_at = h.last_failure_at
      FROM (SELECT * FROM unnest($1::bigint[], $2::text[], $3::integer[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[])
        AS h(id, status, consecutive_failures, failure_streak_started_at, paused_until, owners_notified_at, disabled_reason, last_success_at, last_failure_at)
        ORDER BY id) AS h
      WHERE e.id = h.id`, [
      updates.map((u) => u.id), column('status'), column('consecutive_failures'), column('failure_streak_started_at'), column('paused_until'),
      column('owners_notified_at'), column('disabled_reason'), column('last_success_at'), column('last_failure_at'),
    ]);
  }

  async deleteWebhookEndpoint(id: number): Promise<void> {
    // Its deliveries and attempts go with it (ON DELETE CASCADE); the owners' notifications about it stay.
    await this.c.run('UPDATE notifications SET endpoint_id = NULL WHERE endpoint_id = $1', [id]);
    await this.c.run('DELETE FROM webhook_endpoints WHERE id = $1', [id]);
  }
}
