// Receiver endpoints with their health record on SQLite: sql/webhook-endpoints.ts, with SQLite's
// coalescing claim.
import type { WebhookEndpointRecord } from '../../webhooks/model.js';
import { SqlWebhookEndpoints } from '../sql/webhook-endpoints.js';
import type { SqliteConnection } from './connection.js';

export class SqliteWebhookEndpoints extends SqlWebhookEndpoints<SqliteConnection> {
  async coalescingEndpoint(id: number): Promise<WebhookEndpointRecord | undefined> {
    // One writer at a time: the endpoint is never busy.
    return this.getWebhookEndpoint(id);
  }
}
