// Receiver endpoints with their health record, written once for both engines (dialect.ts). A
// dispatcher's claim of an endpoint (coalescingEndpoint) is each engine's own: SqliteWebhookEndpoints,
// PgWebhookEndpoints.
import type { WebhookEndpointHealthRecord, WebhookEndpointStore } from '../port.js';
import type { WebhookEndpointInputRecord, WebhookEndpointRecord } from '../../webhooks/model.js';
import { ENDPOINT_FIELDS, toEndpoint } from '../rows.js';
import type { SqlConnection } from './dialect.js';

export abstract class SqlWebhookEndpoints<C extends SqlConnection = SqlConnection> implements WebhookEndpointStore {
  static readonly writes = [
    'createWebhookEndpoint',
    'updateWebhookEndpoint',
    'updateWebhookEndpointsHealth',
    'deleteWebhookEndpoint',
  ] as const;

  constructor(protected readonly c: C) {}

  abstract coalescingEndpoint(id: number): Promise<WebhookEndpointRecord | 'busy' | undefined>;

  /**
   * In a write transaction the endpoint is read to update its health from it: the row lock
   * (PostgreSQL) holds a concurrent attempt's read until this one commits, so no failure count is
   * lost. NO KEY UPDATE: inserts of outbox rows and deliveries that reference the endpoint do not wait for it.
   */
  protected get endpointLock(): string {
    return this.c.locksRows ? 'FOR NO KEY UPDATE' : '';
  }

  async createWebhookEndpoint(input: WebhookEndpointInputRecord): Promise<WebhookEndpointRecord> {
    const row = await this.c.one(
      `INSERT INTO webhook_endpoints (merchant_id, url, store_id, events, standard_webhooks, max_per_second, secret, created_at, payload)
      VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING *`,
      [
        input.merchant_id,
        input.url,
        input.store_id,
        JSON.stringify(input.events),
        this.c.dialect.bool(input.standard_webhooks ?? false),
        input.max_per_second ?? null,
        input.secret,
        input.created_at,
        input.payload ?? 'thin',
      ],
    );
    return toEndpoint(row!);
  }

  async listWebhookEndpoints(merchantId: number): Promise<WebhookEndpointRecord[]> {
    return (await this.c.rows('SELECT * FROM webhook_endpoints WHERE merchant_id = $1 ORDER BY id', [merchantId])).map(toEndpoint);
  }

  async findWebhookEndpoint(merchantId: number, id: number): Promise<WebhookEndpointRecord | undefined> {
    const row = await this.c.one(`SELECT * FROM webhook_endpoints WHERE id = $1 AND merchant_id = $2 ${this.endpointLock}`, [
      id,
      merchantId,
    ]);
    return row && toEndpoint(row);
  }

  async getWebhookEndpoint(id: number): Promise<WebhookEndpointRecord | undefined> {
    const row = await this.c.one(`SELECT * FROM webhook_endpoints WHERE id = $1 ${this.endpointLock}`, [id]);
    return row && toEndpoint(row);
  }

  async getWebhookEndpoints(ids: number[]): Promise<WebhookEndpointRecord[]> {
    if (ids.length === 0) return [];
    // In a write transaction locked as getWebhookEndpoint locks one, in id order (as claims lock them).
    return (
      await this.c.rows(
        `SELECT * FROM webhook_endpoints WHERE ${this.c.dialect.inList('id', '$1', 'bigint')} ORDER BY id
      ${this.endpointLock}`,
        [this.c.dialect.list([...new Set(ids)])],
      )
    ).map(toEndpoint);
  }

  async updateWebhookEndpoint(id: number, patch: Partial<Omit<WebhookEndpointRecord, 'id' | 'merchant_id' | 'created_at'>>): Promise<void> {
    const fields = ENDPOINT_FIELDS.filter((f) => f in patch);
    if (fields.length === 0) return;
    const values = fields.map((f) =>
      f === 'events'
        ? JSON.stringify(patch.events)
        : f === 'standard_webhooks'
          ? this.c.dialect.bool(patch.standard_webhooks as boolean)
          : (patch[f] as unknown),
    );
    await this.c.run(
      `UPDATE webhook_endpoints SET ${fields.map((f, i) => `${f} = $${i + 1}`).join(', ')} WHERE id = $${fields.length + 1}`,
      [...values, id],
    );
  }

  /** Each endpoint's health, one after another (PgWebhookEndpoints: in one statement). */
  async updateWebhookEndpointsHealth(updates: { id: number; health: WebhookEndpointHealthRecord }[]): Promise<void> {
    for (const { id, health } of updates) await this.updateWebhookEndpoint(id, health);
  }

  async deleteWebhookEndpoint(id: number): Promise<void> {
    // Its deliveries and attempts go with it (ON DELETE CASCADE); the owners' notifications about it stay.
    await this.c.run('UPDATE notifications SET endpoint_id = NULL WHERE endpoint_id = $1', [id]);
    await this.c.run('DELETE FROM webhook_endpoints WHERE id = $1', [id]);
  }
}
