// Receiver endpoints with their health record on SQLite: sql/webhook-endpoints.ts, with SQLite's
// coalescing claim.
import type { WebhookEndpointHealthRecord } from '../port.js';
import type { WebhookEndpointRecord } from '../../webhooks/model.js';
import { SqlWebhookEndpoints } from '../sql/webhook-endpoints.js';
import type { SqliteConnection } from './connection.js';

export class SqliteWebhookEndpoints extends SqlWebhookEndpoints<SqliteConnection> {
  async coalescingEndpoint(id: number): Promise<WebhookEndpointRecord | undefined> {
    // One writer at a time: the endpoint is never busy.
    return this.getWebhookEndpoint(id);
  }

  /** Active again (re-enabled, or resumed by a change after its cooldown): its pending deliveries are work for the dispatchers. */
  override async updateWebhookEndpoint(
    id: number,
    patch: Partial<Omit<WebhookEndpointRecord, 'id' | 'merchant_id' | 'created_at'>>,
  ): Promise<void> {
    await super.updateWebhookEndpoint(id, patch);
    if (patch.status === 'active') this.c.addedWork.add('deliveries');
  }

  /** Attempts' outcomes: an endpoint they leave active was active already (no wake-up for them). */
  override async updateWebhookEndpointsHealth(updates: { id: number; health: WebhookEndpointHealthRecord }[]): Promise<void> {
    for (const { id, health } of updates) await super.updateWebhookEndpoint(id, health);
  }
}
