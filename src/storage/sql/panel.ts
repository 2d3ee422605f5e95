// The administration panel's accounts, written once for both engines (dialect.ts): users,
// invitations, sessions, sign-in failures, the audit log.
import type { PanelStore } from '../port.js';
import type {
  AuditEntryRecord,
  ListedAuditEntryRecord,
  PanelInvitationRecord,
  PanelSessionRecord,
  PanelUserRecord,
} from '../../admin/model.js';
import type { Row, SqlConnection } from './dialect.js';

const USER_COLUMNS = 'id, merchant_id, email, role, created_at';
const INVITATION_COLUMNS = 'id, merchant_id, email, role, purpose, created_at, expires_at, used_at, revoked_at';

export class SqlPanel implements PanelStore {
  static readonly writes = [
    'insertPanelInvitation',
    'markPanelInvitationUsed',
    'revokePanelInvitations',
    'upsertPanelUser',
    'setPanelUserPassword',
    'deletePanelUser',
    'insertPanelSession',
    'touchPanelSession',
    'deletePanelSession',
    'deletePanelSessionsOfUser',
    'insertPanelFlash',
    'takePanelFlash',
    'deleteExpiredPanelFlashes',
    'recordSignInFailure',
    'clearSignInFailures',
    'insertAuditEntry',
  ] as const;

  constructor(protected readonly c: SqlConnection) {}

  async insertPanelInvitation(
    tokenHash: Buffer,
    invitation: Omit<PanelInvitationRecord, 'id' | 'used_at' | 'revoked_at'>,
  ): Promise<PanelInvitationRecord> {
    return (await this.c.one<PanelInvitationRecord & Row>(
      `INSERT INTO panel_invitations (token_hash, merchant_id, email, role, purpose, created_at, expires_at)
      VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING ${INVITATION_COLUMNS}`,
      [
        tokenHash,
        invitation.merchant_id,
        invitation.email,
        invitation.role,
        invitation.purpose,
        invitation.created_at,
        invitation.expires_at,
      ],
    ))!;
  }

  async panelInvitation(tokenHash: Buffer): Promise<PanelInvitationRecord | undefined> {
    return this.c.one<PanelInvitationRecord & Row>(`SELECT ${INVITATION_COLUMNS} FROM panel_invitations WHERE token_hash = $1`, [
      tokenHash,
    ]);
  }

  async markPanelInvitationUsed(tokenHash: Buffer, at: string): Promise<boolean> {
    // A row lock (PostgreSQL): a concurrent revocation (a removal of the user) waits, or has already won.
    return (
      (await this.c.run('UPDATE panel_invitations SET used_at = $1 WHERE token_hash = $2 AND used_at IS NULL AND revoked_at IS NULL', [
        at,
        tokenHash,
      ])) > 0
    );
  }

  async listPendingPanelInvitations(merchantId: number, now: string): Promise<PanelInvitationRecord[]> {
    return this.c.rows<PanelInvitationRecord & Row>(
      `SELECT ${INVITATION_COLUMNS} FROM panel_invitations
      WHERE merchant_id = $1 AND used_at IS NULL AND revoked_at IS NULL AND expires_at > $2 ORDER BY id`,
      [merchantId, now],
    );
  }

  async revokePanelInvitations(merchantId: number, which: { id: number } | { email: string }, at: string): Promise<number> {
    const [column, value] = 'id' in which ? ['id', which.id] : ['email', which.email];
    return this.c.run(
      `UPDATE panel_invitations SET revoked_at = $1
      WHERE merchant_id = $2 AND ${column} = $3 AND used_at IS NULL AND revoked_at IS NULL`,
      [at, merchantId, value],
    );
  }

  async panelOwnerIds(merchantId: number): Promise<number[]> {
    // Locked in a write transaction: two owners removing each other concurrently cannot both see the other.
    return (
      await this.c.rows<{ id: number }>(
        `SELECT id FROM panel_users WHERE merchant_id = $1 AND role = 'owner' ORDER BY id${this.c.locksRows ? ' FOR UPDATE' : ''}`,
        [merchantId],
      )
    ).map((r) => r.id);
  }

  async upsertPanelUser(user: Omit<PanelUserRecord, 'id'>, passwordHash: string): Promise<PanelUserRecord> {
    // Another merchant's user with this email is left alone (and returned).
    await this.c.run(
      `INSERT INTO panel_users (merchant_id, email, role, password_hash, created_at) VALUES ($1, $2, $3, $4, $5)
      ON CONFLICT (email) DO UPDATE SET role = excluded.role, password_hash = excluded.password_hash
        WHERE panel_users.merchant_id = excluded.merchant_id`,
      [user.merchant_id, user.email, user.role, passwordHash, user.created_at],
    );
    return (await this.c.one<PanelUserRecord & Row>(`SELECT ${USER_COLUMNS} FROM panel_users WHERE email = $1`, [user.email]))!;
  }

  async panelUserByEmail(email: string): Promise<(PanelUserRecord & { password_hash: string }) | undefined> {
    return this.c.one<PanelUserRecord & { password_hash: string } & Row>(
      `SELECT ${USER_COLUMNS}, password_hash FROM panel_users WHERE email = $1`,
      [email],
    );
  }

  async panelUser(id: number): Promise<PanelUserRecord | undefined> {
    return this.c.one<PanelUserRecord & Row>(`SELECT ${USER_COLUMNS} FROM panel_users WHERE id = $1`, [id]);
  }

  async setPanelUserPassword(id: number, passwordHash: string): Promise<void> {
    await this.c.run('UPDATE panel_users SET password_hash = $1 WHERE id = $2', [passwordHash, id]);
  }

  async listPanelUsers(merchantId: number): Promise<PanelUserRecord[]> {
    return this.c.rows<PanelUserRecord & Row>(`SELECT ${USER_COLUMNS} FROM panel_users WHERE merchant_id = $1 ORDER BY id`, [merchantId]);
  }

  async deletePanelUser(merchantId: number, id: number): Promise<boolean> {
    return (await this.c.run('DELETE FROM panel_users WHERE merchant_id = $1 AND id = $2', [merchantId, id])) > 0;
  }

  async insertPanelSession(tokenHash: Buffer, session: PanelSessionRecord): Promise<void> {
    await this.c.run(
      `INSERT INTO panel_sessions (token_hash, user_id, operator, csrf_token, created_at, last_seen_at, expires_at)
      VALUES ($1, $2, $3, $4, $5, $6, $7)`,
      [
        tokenHash,
        session.user_id,
        this.c.dialect.bool(session.user_id === null),
        session.csrf_token,
        session.created_at,
        session.last_seen_at,
        session.expires_at,
      ],
    );
  }

  async panelSession(tokenHash: Buffer): Promise<PanelSessionRecord | undefined> {
    return this.c.one<PanelSessionRecord & Row>(
      'SELECT user_id, csrf_token, created_at, last_seen_at, expires_at FROM panel_sessions WHERE token_hash = $1',
      [tokenHash],
    );
  }

  async touchPanelSession(tokenHash: Buffer, at: string): Promise<void> {
    await this.c.run('UPDATE panel_sessions SET last_seen_at = $1 WHERE token_hash = $2', [at, tokenHash]);
  }

  async deletePanelSession(tokenHash: Buffer): Promise<void> {
    await this.c.run('DELETE FROM panel_sessions WHERE token_hash = $1', [tokenHash]);
  }

  async deletePanelSessionsOfUser(userId: number, keep?: Buffer): Promise<number> {
    return this.c.run('DELETE FROM panel_sessions WHERE user_id = $1 AND token_hash IS DISTINCT FROM $2', [userId, keep ?? null]);
  }

  async insertPanelFlash(sessionHash: Buffer, sealed: Buffer, expiresAt: string): Promise<number> {
    return (await this.c.one<{ id: number }>(
      'INSERT INTO panel_flashes (session_hash, sealed, expires_at) VALUES ($1, $2, $3) RETURNING id',
      [sessionHash, sealed, expiresAt],
    ))!.id;
  }

  async takePanelFlash(sessionHash: Buffer, id: number): Promise<{ sealed: Buffer; expires_at: string } | undefined> {
    return this.c.one<{ sealed: Buffer; expires_at: string }>(
      'DELETE FROM panel_flashes WHERE id = $1 AND session_hash = $2 RETURNING sealed, expires_at',
      [id, sessionHash],
    );
  }

  async deleteExpiredPanelFlashes(now: string): Promise<number> {
    return this.c.run('DELETE FROM panel_flashes WHERE expires_at <= $1', [now]);
  }

  async recordSignInFailure(subjects: string[], at: string): Promise<number[]> {
    if (subjects.length === 0) return [];
    const d = this.c.dialect;
    const rows = await this.c.rows<{ id: number }>(
      `INSERT INTO panel_sign_in_failures (subject, at) SELECT s.value, $2 FROM ${d.listRows('$1', 'text', 's')} RETURNING id`,
      [d.list(subjects), at],
    );
    return rows.map((r) => Number(r.id));
  }

  async countSignInFailures(subjects: string[], since: string): Promise<Map<string, { count: number; oldest: string; newest: string }>> {
    if (subjects.length === 0) return new Map();
    const d = this.c.dialect;
    const rows = await this.c.rows<{ subject: string; count: number; oldest: string; newest: string }>(
      `SELECT subject, count(*) AS count,
      min(at) AS oldest, max(at) AS newest FROM panel_sign_in_failures WHERE ${d.inList('subject', '$1', 'text')} AND at > $2 GROUP BY subject`,
      [d.list(subjects), since],
    );
    return new Map(rows.map((r) => [r.subject, { count: Number(r.count), oldest: r.oldest, newest: r.newest }]));
  }

  async clearSignInFailures(subject: string | null, ids: readonly number[] = []): Promise<void> {
    const d = this.c.dialect;
    await this.c.run(`DELETE FROM panel_sign_in_failures WHERE subject = $1 OR ${d.inList('id', '$2', 'bigint')}`, [subject, d.list(ids)]);
  }

  async insertAuditEntry(entry: Omit<AuditEntryRecord, 'id' | 'api_key_id'> & { api_key_id?: number | null }): Promise<void> {
    await this.c.run('INSERT INTO audit_log (merchant_id, at, actor, api_key_id, action, detail) VALUES ($1, $2, $3, $4, $5, $6)', [
      entry.merchant_id,
      entry.at,
      entry.actor,
      entry.api_key_id ?? null,
      entry.action,
      entry.detail,
    ]);
  }

  async listAuditEntries(merchantId: number, limit: number, apiKeyId?: number): Promise<ListedAuditEntryRecord[]> {
    // The key's name and prefix from its row (a key is never deleted, and its name never changes).
    const rows = await this.c.rows(
      `SELECT a.id, a.merchant_id, a.at, a.actor, a.action, a.detail, k.id AS key_id, k.name AS key_name, k.prefix AS key_prefix
      FROM audit_log AS a LEFT JOIN api_keys AS k ON k.id = a.api_key_id
      WHERE a.merchant_id = $1${apiKeyId === undefined ? '' : ' AND a.api_key_id = $3'} ORDER BY a.id DESC LIMIT $2`,
      apiKeyId === undefined ? [merchantId, limit] : [merchantId, limit, apiKeyId],
    );
    return rows.map(({ key_id, key_name, key_prefix, ...entry }) => ({
      ...(entry as Omit<ListedAuditEntryRecord, 'api_key'>),
      api_key:
        key_id === null || key_id === undefined ? null : { id: Number(key_id), name: key_name as string, prefix: key_prefix as string },
    }));
  }
}
