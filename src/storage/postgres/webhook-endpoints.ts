// Receiver endpoints with their health record on PostgreSQL: sql/webhook-endpoints.ts, with the
// dispatchers' claim that skips a busy endpoint and the health of several endpoints in one statement.
import type { WebhookEndpointHealthRecord } from '../port.js';
import { HEALTH_UPDATE, healthParams } from './endpoint-health.js';
import type { WebhookEndpointRecord } from '../../webhooks/model.js';
import { toEndpoint } from '../rows.js';
import { SqlWebhookEndpoints } from '../sql/webhook-endpoints.js';
import type { PgConnection } from './connection.js';
import { notifyWork } from './wakeups.js';

/**
 * The class (first key) of the advisory lock a coalescing pass holds shared per endpoint, and a drop
 * of the endpoint's pending deliveries exclusively (any fixed int4: "cpsp").
 */
export const ENDPOINT_PASS_LOCK = 0x63707370;

export class PgWebhookEndpoints extends SqlWebhookEndpoints<PgConnection> {
  async coalescingEndpoint(id: number): Promise<WebhookEndpointRecord | 'busy' | undefined> {
    // A pass holds the endpoint's pass lock (shared: passes of several dispatchers go on together,
    // each with the outbox rows it holds) to its COMMIT, never its row: an attempt's health update
    // locks the row, and waited ~2 ms for a pass there. Pending deliveries are dropped
    // (dropPendingDeliveries) under the pass lock taken exclusively: the drop waits for the passes
    // under way, and sees the deliveries they made; a pass after it finds the endpoint busy until
    // the drop commits, then reads it paused. The lock is taken before the read, in a statement of
    // its own: the read's snapshot (READ COMMITTED: one per statement) then sees a drop's commit.
    const free = await this.c.preparedRows<{ free: boolean }>(
      'endpoints.coalescing.passLock',
      `SELECT pg_try_advisory_xact_lock_shared(${ENDPOINT_PASS_LOCK}, ($1::bigint % 2147483648)::integer) AS free`,
      [id],
    );
    if (!free[0]?.free) return 'busy';
    const rows = await this.c.preparedRows('endpoints.coalescing.read', 'SELECT * FROM webhook_endpoints WHERE id = $1', [id]);
    if (rows.length === 0) return undefined;
    const endpoint = toEndpoint(rows[0]!);
    if (endpoint.status === 'active') return endpoint;
    // Paused or disabled: the pass may resume it (a change after its cooldown), a write of its row
    // from what it read: read again under the row lock, as getWebhookEndpoint locks it, but never
    // waited for (a pass that waits for another's, or for an attempt's health update, would
    // serialize every dispatcher on the endpoint); a busy endpoint's rows stay for the next pass.
    const row = await this.c.one(
      `SELECT e.*, locked.id IS NULL AS busy FROM webhook_endpoints AS e
      LEFT JOIN (SELECT id FROM webhook_endpoints WHERE id = $1 FOR NO KEY UPDATE SKIP LOCKED) AS locked ON locked.id = e.id
      WHERE e.id = $1`,
      [id],
    );
    if (!row) return undefined;
    const { busy, ...locked } = row;
    return busy ? 'busy' : toEndpoint(locked);
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
