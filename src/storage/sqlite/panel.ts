// The administration panel's accounts on SQLite: users, invitations, sessions, sign-in failures,
// the audit log.
import type { PanelStore } from '../port.js';
import type { AuditEntryRecord, PanelInvitationRecord, PanelSessionRecord, PanelUserRecord } from '../records.js';
import type { SqliteConnection } from './connection.js';

const USER_COLUMNS = 'id, merchant_id, email, role, created_at';
const INVITATION_COLUMNS = 'id, merchant_id, email, role, purpose, created_at, expires_at, used_at, revoked_at';

export class SqlitePanel implements PanelStore {
  static readonly writes = [
    'insertPanelInvitation', 'markPanelInvitationUsed', 'revokePanelInvitations', 'upsertPanelUser', 'setPanelUserPassword',
    'deletePanelUser', 'insertPanelSession', 'touchPanelSession', 'deletePanelSession', 'deletePanelSessionsOfUser', 'insertPanelFlash',
    'takePanelFlash', 'deleteExpiredPanelFlashes', 'recordSignInFailure', 'clearSignInFailures', 'insertAuditEntry',
  ] as const;

  constructor(private readonly c: SqliteConnection) {}

  async insertPanelInvitation(tokenHash: Buffer, invitation: Omit<PanelInvitationRecord, 'id' | 'used_at' | 'revoked_at'>): Promise<PanelInvitationRecord> {
    return this.c.stmt(`INSERT INTO panel_invitations (token_hash, merchant_id, email, role, purpose, created_at, expires_at)
      VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING ${INVITATION_COLUMNS}`)
      .get(tokenHash, invitation.merchant_id, invitation.email, invitation.role, invitation.purpose, invitation.created_at, invitation.expires_at) as PanelInvitationRecord;
  }

  async panelInvitation(tokenHash: Buffer): Promise<PanelInvitationRecord | undefined> {
    return this.c.stmt(`SELECT ${INVITATION_COLUMNS} FROM panel_invitations WHERE token_hash = ?`).get(tokenHash) as PanelInvitationRecord | undefined;
  }

  async markPanelInvitationUsed(tokenHash: Buffer, at: string): Promise<boolean> {
    return this.c.stmt('UPDATE panel_invitations SET used_at = ? WHERE token_hash = ? AND used_at IS NULL AND revoked_at IS NULL')
      .run(at, tokenHash).changes > 0;
  }

  async listPendingPanelInvitations(merchantId: number, now: string): Promise<PanelInvitationRecord[]> {
    return this.c.stmt(`SELECT ${INVITATION_COLUMNS} FROM panel_invitations
      WHERE merchant_id = ? AND used_at IS NULL AND revoked_at IS NULL AND expires_at > ? ORDER BY id`).all(merchantId, now) as PanelInvitationRecord[];
  }

  async revokePanelInvitations(merchantId: number, which: { id: number } | { email: string }, at: string): Promise<number> {
    const [column, value] = 'id' in which ? ['id', which.id] : ['email', which.email];
    return this.c.stmt(`UPDATE panel_invitations SET revoked_at = ?
      WHERE merchant_id = ? AND ${column} = ? AND used_at IS NULL AND revoked_at IS NULL`).run(at, merchantId, value).changes;
  }

  async panelOwnerIds(merchantId: number): Promise<number[]> {
    // A write transaction holds SQLite's one write lock: nobody else changes the owners meanwhile.
    return (this.c.stmt("SELECT id FROM panel_users WHERE merchant_id = ? AND role = 'owner' ORDER BY id").all(merchantId) as { id: number }[])
      .map((r) => r.id);
  }

  async upsertPanelUser(user: Omit<PanelUserRecord, 'id'>, passwordHash: string): Promise<PanelUserRecord> {
    this.c.stmt(`INSERT INTO panel_users (merchant_id, email, role, password_hash, created_at) VALUES (?, ?, ?, ?, ?)
      ON CONFLICT (email) DO UPDATE SET role = excluded.role, password_hash = excluded.password_hash
        WHERE panel_users.merchant_id = excluded.merchant_id`)
      .run(user.merchant_id, user.email, user.role, passwordHash, user.created_at);
    return this.c.stmt(`SELECT ${USER_COLUMNS} FROM panel_users WHERE email = ?`).get(user.email) as PanelUserRecord;
  }

  async panelUserByEmail(email: string): Promise<(PanelUserRecord & { password_hash: string }) | undefined> {
    return this.c.stmt(`SELECT ${USER_COLUMNS}, password_hash FROM panel_users WHERE email = ?`)
      .get(email) as (PanelUserRecord & { password_hash: string }) | undefined;
  }

  async panelUser(id: number): Promise<PanelUserRecord | undefined> {
    return this.c.stmt(`SELECT ${USER_COLUMNS} FROM panel_users WHERE id = ?`).get(id) as PanelUserRecord | undefined;
  }

  async setPanelUserPassword(id: number, passwordHash: string): Promise<void> {
    this.c.stmt('UPDATE panel_users SET password_hash = ? WHERE id = ?').run(passwordHash, id);
  }

  async listPanelUsers(merchantId: number): Promise<PanelUserRecord[]> {
    return this.c.stmt(`SELECT ${USER_COLUMNS} FROM panel_users WHERE merchant_id = ? ORDER BY id`).all(merchantId) as PanelUserRecord[];
  }

  async deletePanelUser(merchantId: number, id: number): Promise<boolean> {
    return this.c.stmt('DELETE FROM panel_users WHERE merchant_id = ? AND id = ?').run(merchantId, id).changes > 0;
  }

  async insertPanelSession(tokenHash: Buffer, session: PanelSessionRecord): Promise<void> {
    this.c.stmt(`INSERT INTO panel_sessions (token_hash, user_id, operator, csrf_token, created_at, last_seen_at, expires_at)
      VALUES (?, ?, ?, ?, ?, ?, ?)`).run(tokenHash, session.user_id, session.user_id === null ? 1 : 0, session.csrf_token,
      session.created_at, session.last_seen_at, session.expires_at);
  }

  async panelSession(tokenHash: Buffer): Promise<PanelSessionRecord | undefined> {
    return this.c.stmt('SELECT user_id, csrf_token, created_at, last_seen_at, expires_at FROM panel_sessions WHERE token_hash = ?')
      .get(tokenHash) as PanelSessionRecord | undefined;
  }

  async touchPanelSession(tokenHash: Buffer, at: string): Promise<void> {
    this.c.stmt('UPDATE panel_sessions SET last_seen_at = ? WHERE token_hash = ?').run(at, tokenHash);
  }

  async deletePanelSession(tokenHash: Buffer): Promise<void> {
    this.c.stmt('DELETE FROM panel_sessions WHERE token_hash = ?').run(tokenHash);
  }

  async deletePanelSessionsOfUser(userId: number, keep?: Buffer): Promise<number> {
    return this.c.stmt('DELETE FROM panel_sessions WHERE user_id = ? AND token_hash IS NOT ?').run(userId, keep ?? null).changes;
  }

  async insertPanelFlash(sessionHash: Buffer, sealed: Buffer, expiresAt: string): Promise<number> {
    return Number(this.c.stmt('INSERT INTO panel_flashes (session_hash, sealed, expires_at) VALUES (?, ?, ?)').run(sessionHash, sealed, expiresAt).lastInsertRowid);
  }

  async takePanelFlash(sessionHash: Buffer, id: number): Promise<{ sealed: Buffer; expires_at: string } | undefined> {
    return this.c.stmt('DELETE FROM panel_flashes WHERE id = ? AND session_hash = ? RETURNING sealed, expires_at')
      .get(id, sessionHash) as { sealed: Buffer; expires_at: string } | undefined;
  }

  async deleteExpiredPanelFlashes(now: string): Promise<number> {
    return this.c.stmt('DELETE FROM panel_flashes WHERE expires_at <= ?').run(now).changes;
  }

  async recordSignInFailure(subjects: string[], at: string): Promise<void> {
    const insert = this.c.stmt('INSERT INTO panel_sign_in_failures (subject, at) VALUES (?, ?)');
    for (const subject of subjects) insert.run(subject, at);
  }

  async countSignInFailures(subjects: string[], since: string): Promise<Map<string, { count: number; oldest: string; newest: string }>> {
    const rows = this.c.stmt(`SELECT subject, count(*) AS count, min(at) AS oldest, max(at) AS newest FROM panel_sign_in_failures
      WHERE subject IN (SELECT value FROM json_each(?)) AND at > ? GROUP BY subject`)
      .all(JSON.stringify(subjects), since) as { subject: string; count: number; oldest: string; newest: string }[];
    return new Map(rows.map((r) => [r.subject, { count: r.count, oldest: r.oldest, newest: r.newest }]));
  }

  async clearSignInFailures(subject: string): Promise<void> {
    this.c.stmt('DELETE FROM panel_sign_in_failures WHERE subject = ?').run(subject);
  }

  async insertAuditEntry(entry: Omit<AuditEntryRecord, 'id'>): Promise<void> {
    this.c.stmt('INSERT INTO audit_log (merchant_id, at, actor, action, detail) VALUES (?, ?, ?, ?, ?)')
      .run(entry.merchant_id, entry.at, entry.actor, entry.action, entry.detail);
  }

  async listAuditEntries(merchantId: number, limit: number): Promise<AuditEntryRecord[]> {
    return this.c.stmt('SELECT id, merchant_id, at, actor, action, detail FROM audit_log WHERE merchant_id = ? ORDER BY id DESC LIMIT ?')
      .all(merchantId, limit) as AuditEntryRecord[];
  }
}
