// Receiver endpoints with their health record on SQLite.
import type { WebhookEndpointHealthRecord, WebhookEndpointStore } from '../port.js';
import type { WebhookEndpointInputRecord, WebhookEndpointRecord } from '../records.js';
import { ENDPOINT_FIELDS, toEndpoint } from '../rows.js';
import type { Row, SqliteConnection } from './connection.js';

export class SqliteWebhookEndpoints implements WebhookEndpointStore {
  static readonly writes = ['createWebhookEndpoint', 'updateWebhookEndpoint', 'updateWebhookEndpointsHealth', 'deleteWebhookEndpoint'] as const;

  constructor(private readonly c: SqliteConnection) {}

  private endpoint(id: number, merchantId?: number): WebhookEndpointRecord | undefined {
    const row = this.c.stmt('SELECT * FROM webhook_endpoints WHERE id = ? AND merchant_id = coalesce(?, merchant_id)')
      .get(id, merchantId ?? null) as Row | undefined;
    return row && toEndpoint(row);
  }

  async createWebhookEndpoint(input: WebhookEndpointInputRecord): Promise<WebhookEndpointRecord> {
    const info = this.c.stmt(`INSERT INTO webhook_endpoints (merchant_id, url, store_id, events, standard_webhooks, max_per_second, secret, created_at)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?)`).run(input.merchant_id, input.url, input.store_id, JSON.stringify(input.events),
      input.standard_webhooks ? 1 : 0, input.max_per_second ?? null, input.secret, input.created_at);
    return this.endpoint(Number(info.lastInsertRowid))!;
  }

  async listWebhookEndpoints(merchantId: number): Promise<WebhookEndpointRecord[]> {
    return (this.c.stmt('SELECT * FROM webhook_endpoints WHERE merchant_id = ? ORDER BY id').all(merchantId) as Row[]).map(toEndpoint);
  }

  async getWebhookEndpoint(id: number, merchantId?: number): Promise<WebhookEndpointRecord | undefined> {
    return this.endpoint(id, merchantId);
  }

  async coalescingEndpoint(id: number): Promise<WebhookEndpointRecord | undefined> {
    // One writer at a time: the endpoint is never busy.
    return this.endpoint(id, undefined);
  }

  async getWebhookEndpoints(ids: number[]): Promise<WebhookEndpointRecord[]> {
    const endpoints: WebhookEndpointRecord[] = [];
    for (const id of [...new Set(ids)].sort((a, b) => a - b)) {
      const endpoint = this.endpoint(id, undefined);
      if (endpoint) endpoints.push(endpoint);
    }
    return endpoints;
  }

  async updateWebhookEndpoint(id: number, patch: Partial<Omit<WebhookEndpointRecord, 'id' | 'merchant_id' | 'created_at'>>): Promise<void> {
    const fields = ENDPOINT_FIELDS.filter((f) => f in patch);
    if (fields.length === 0) return;
    const values = fields.map((f) => (f === 'events' ? JSON.stringify(patch.events) : f === 'standard_webhooks' ? (patch.standard_webhooks ? 1 : 0) : (patch[f] as unknown)));
    this.c.stmt(`UPDATE webhook_endpoints SET ${fields.map((f) => `${f} = ?`).join(', ')} WHERE id = ?`).run(...values, id);
  }

  async updateWebhookEndpointsHealth(updates: { id: number; health: WebhookEndpointHealthRecord }[]): Promise<void> {
    for (const { id, health } of updates) await this.updateWebhookEndpoint(id, health);
  }

  async deleteWebhookEndpoint(id: number): Promise<void> {
    // Its deliveries and attempts go with it (ON DELETE CASCADE); the owners' notifications about it stay.
    this.c.stmt('UPDATE notifications SET endpoint_id = NULL WHERE endpoint_id = ?').run(id);
    this.c.stmt('DELETE FROM webhook_endpoints WHERE id = ?').run(id);
  }
}
