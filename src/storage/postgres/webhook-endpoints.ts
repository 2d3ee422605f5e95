// Receiver endpoints with their health record on PostgreSQL: sql/webhook-endpoints.ts, with the
// dispatchers' claim that skips a busy endpoint and the health of several endpoints in one statement.
import type { WebhookEndpointHealthRecord } from '../port.js';
import type { WebhookEndpointRecord } from '../../webhooks/model.js';
import { toEndpoint } from '../rows.js';
import { SqlWebhookEndpoints } from '../sql/webhook-endpoints.js';
import type { PgConnection } from './connection.js';

export class PgWebhookEndpoints extends SqlWebhookEndpoints<PgConnection> {
  async coalescingEndpoint(id: number): Promise<WebhookEndpointRecord | 'busy' | undefined> {
    // Locked as getWebhookEndpoint locks it, but never waited for: a pass holds its endpoints to its
    // COMMIT, and one pass waiting for another's (or for an attempt's health update) would serialize
    // every dispatcher on every endpoint. The rows of a busy endpoint stay for the next pass.
    const row = await this.c.one(
      `SELECT e.*, locked.id IS NULL AS busy FROM webhook_endpoints AS e
      LEFT JOIN (SELECT id FROM webhook_endpoints WHERE id = $1 FOR NO KEY UPDATE SKIP LOCKED) AS locked ON locked.id = e.id
      WHERE e.id = $1`,
      [id],
    );
    if (!row) return undefined;
    const { busy, ...endpoint } = row;
    return busy ? 'busy' : toEndpoint(endpoint);
  }

  override async updateWebhookEndpointsHealth(updates: { id: number; health: WebhookEndpointHealthRecord }[]): Promise<void> {
    if (updates.length === 0) return;
    if (new Set(updates.map((u) => u.id)).size !== updates.length)
      throw new TypeError('updateWebhookEndpointsHealth: ids must be distinct');
    const column = <K extends keyof WebhookEndpointHealthRecord>(key: K) => updates.map((u) => u.health[key]);
    // One statement, the rows in id order (as every other writer locks several endpoints).
    await this.c.run(
      `UPDATE webhook_endpoints AS e SET status = h.status, consecutive_failures = h.consecutive_failures,
        failure_streak_started_at = h.failure_streak_started_at, paused_until = h.paused_until, owners_notified_at = h.owners_notified_at,
        disabled_reason = h.disabled_reason, last_success_at = h.last_success_at, last_failure_at = h.last_failure_at
      FROM (SELECT * FROM unnest($1::bigint[], $2::text[], $3::integer[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[])
        AS h(id, status, consecutive_failures, failure_streak_started_at, paused_until, owners_notified_at, disabled_reason, last_success_at, last_failure_at)
        ORDER BY id) AS h
      WHERE e.id = h.id`,
      [
        updates.map((u) => u.id),
        column('status'),
        column('consecutive_failures'),
        column('failure_streak_started_at'),
        column('paused_until'),
        column('owners_notified_at'),
        column('disabled_reason'),
        column('last_success_at'),
        column('last_failure_at'),
      ],
    );
  }
}
