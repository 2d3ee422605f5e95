// Owners' notifications, written once for both engines (dialect.ts).
import type { NotificationStore } from '../port.js';
import type { NotificationKind, NotificationRecord } from '../../webhooks/model.js';
import type { Row, SqlConnection } from './dialect.js';

export class SqlNotifications implements NotificationStore {
  static readonly writes = ['insertNotification', 'endNotifications', 'markNotificationEmailed'] as const;

  constructor(private readonly c: SqlConnection) {}

  async insertNotification(input: Omit<NotificationRecord, 'id' | 'emailed_at' | 'ended_at'>): Promise<NotificationRecord> {
    return (await this.c.one<NotificationRecord & Row>(
      `INSERT INTO notifications (merchant_id, endpoint_id, kind, subject, body, created_at)
      VALUES ($1, $2, $3, $4, $5, $6) RETURNING *`,
      [input.merchant_id, input.endpoint_id, input.kind, input.subject, input.body, input.created_at],
    ))!;
  }

  async endNotifications(endpointId: number, kinds: readonly NotificationKind[], at: string): Promise<number> {
    // The endpoint's open notifications (migration 36's partial index), of the kinds that ended.
    return this.c.run(
      `UPDATE notifications SET ended_at = $1
      WHERE endpoint_id = $2 AND ended_at IS NULL AND ${this.c.dialect.inList('kind', '$3', 'text')}`,
      [at, endpointId, this.c.dialect.list(kinds)],
    );
  }

  async listNotifications(merchantId: number, limit: number): Promise<NotificationRecord[]> {
    return this.c.rows<NotificationRecord & Row>('SELECT * FROM notifications WHERE merchant_id = $1 ORDER BY id DESC LIMIT $2', [
      merchantId,
      limit,
    ]);
  }

  async markNotificationEmailed(id: number, at: string): Promise<void> {
    await this.c.run('UPDATE notifications SET emailed_at = $1 WHERE id = $2', [at, id]);
  }
}
