// Owners' notifications on SQLite.
import type { NotificationStore } from '../port.js';
import type { NotificationKind, NotificationRecord } from '../records.js';
import type { SqliteConnection } from './connection.js';

export class SqliteNotifications implements NotificationStore {
  static readonly writes = ['insertNotification', 'endNotifications', 'markNotificationEmailed'] as const;

  constructor(private readonly c: SqliteConnection) {}

  async insertNotification(input: Omit<NotificationRecord, 'id' | 'emailed_at' | 'ended_at'>): Promise<NotificationRecord> {
    const info = this.c.stmt(`INSERT INTO notifications (merchant_id, endpoint_id, kind, subject, body, created_at)
      VALUES (?, ?, ?, ?, ?, ?)`).run(input.merchant_id, input.endpoint_id, input.kind, input.subject, input.body, input.created_at);
    return this.c.stmt('SELECT * FROM notifications WHERE id = ?').get(info.lastInsertRowid) as NotificationRecord;
  }

  async endNotifications(endpointId: number, kinds: readonly NotificationKind[], at: string): Promise<number> {
    // The endpoint's open notifications (migration 36's partial index), of the kinds that ended.
    return this.c.stmt(`UPDATE notifications SET ended_at = ?
      WHERE endpoint_id = ? AND ended_at IS NULL AND kind IN (SELECT value FROM json_each(?))`).run(at, endpointId, JSON.stringify(kinds)).changes;
  }

  async listNotifications(merchantId: number, limit: number): Promise<NotificationRecord[]> {
    return this.c.stmt('SELECT * FROM notifications WHERE merchant_id = ? ORDER BY id DESC LIMIT ?').all(merchantId, limit) as NotificationRecord[];
  }

  async markNotificationEmailed(id: number, at: string): Promise<void> {
    this.c.stmt('UPDATE notifications SET emailed_at = ? WHERE id = ?').run(at, id);
  }
}
