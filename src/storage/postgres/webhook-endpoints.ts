// Receiver endpoints with their health record on PostgreSQL: sql/webhook-endpoints.ts, with the
// dispatchers' claim that skips a busy endpoint and the health of several endpoints in one statement.
import type { WebhookEndpointHealthRecord } from '../port.js';
import { HEALTH_UPDATE, healthParams } from './endpoint-health.js';
import type { WebhookEndpointRecord } from '../../webhooks/model.js';
import { toEndpoint } from '../rows.js';
import { SqlWebhookEndpoints } from '../sql/webhook-endpoints.js';
import type { PgConnection } from './connection.js';
import { notifyWork } from './wakeups.js';

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

  /** Active again (re-enabled, or resumed by a change after its cooldown): its pending deliveries are work for every dispatcher. */
  override async updateWebhookEndpoint(
    id: number,
    patch: Partial<Omit<WebhookEndpointRecord, 'id' | 'merchant_id' | 'created_at'>>,
  ): Promise<void> {
    await super.updateWebhookEndpoint(id, patch);
    if (patch.status === 'active') await notifyWork(this.c, 'deliveries');
  }

  override async updateWebhookEndpointsHealth(updates: { id: number; health: WebhookEndpointHealthRecord }[]): Promise<void> {
    if (updates.length === 0) return;
    await this.c.run(HEALTH_UPDATE(1), healthParams(updates));
  }
}
