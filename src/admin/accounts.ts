// The administration panel's accounts: the operator signs in with the admin token;
// merchant users, invited by the operator or an owner, sign in with an email and a password.
// Invitations are single-use links valid for a configured time; passwords are hashed with scrypt
// (memory-hard, off the event loop, a bounded share of the thread pool: password-hashing.ts); sessions live in the database so every process shares them,
// with an idle and an absolute expiry; sign-in is throttled per account and address together
// (sign-in-throttle.ts); every change made in the panel goes to the merchant's audit log.
//
// An invitation never resets an existing account (a reset link goes to the account's own
// e-mail, or to the operator), a new link for an e-mail revokes the earlier ones, removing a user
// revokes theirs, the last owner cannot be removed, and setting a password ends the account's other
// sessions and tells the account by e-mail.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Config } from '../config.js';
import { ProblemError, invalidInput } from '../shared/problem.js';
import type { CatalogStorage, StorageTx } from '../storage/port.js';
import { forMerchant, scopeToMerchant } from '../storage/merchant-scope.js';
import type { ListedAuditEntryRecord, PanelInvitationRecord, PanelLinkPurpose, PanelRole, PanelUserRecord } from './model.js';
import { ShownOnceMessages } from './shown-once.js';
import { DUMMY_HASH, PasswordHasher, type PasswordHashObserver } from './password-hashing.js';
import { SignInThrottle, type SignInAttempt } from './sign-in-throttle.js';
import { OPERATOR } from './audit.js';

export type { PanelLinkPurpose, PanelRole } from './model.js';
export type PanelUser = PanelUserRecord;
export type Principal = { kind: 'operator' } | { kind: 'user'; user: PanelUser };

export interface PanelSession {
  principal: Principal;
  /** Every state-changing panel request carries it (CSRF). */
  csrfToken: string;
  expiresAt: string;
}

export interface SignedIn {
  /** The cookie's value: shown to the browser once, kept only as a hash. */
  sessionToken: string;
  session: PanelSession;
}

export interface Invitation {
  id: number;
  /** The link's secret part: `/panel/invitations/{token}`. */
  token: string;
  email: string;
  role: PanelRole;
  expires_at: string;
}

/** A link neither used, revoked nor expired (its secret is never shown again). */
export type PendingLink = Pick<PanelInvitationRecord, 'id' | 'email' | 'role' | 'purpose' | 'created_at' | 'expires_at'>;

/** A password reset: the link for the operator; for an owner, only the address it was e-mailed to. */
export type PasswordReset = { id: number; email: string; role: PanelRole; expires_at: string; token?: string | undefined };

/** An entry of the audit log as the admin API and the panel show it (admin.yaml: AuditEntry). */
export type AuditEntry = Omit<ListedAuditEntryRecord, 'merchant_id'> & { credential: 'operator' | 'user' | 'key' };

/** Sends a message to an account's e-mail when SMTP is configured (errors are the mailer's to log). */
export type AccountMailer = (mail: { to: string; subject: string; text: string }) => Promise<void>;

const MIN_PASSWORD = 12;
const MAX_PASSWORD = 1024;
const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;
/** last_seen_at is written at most this often, not on every request. */
const TOUCH_EVERY_MS = 60_000;

const sha256 = (text: string) => createHash('sha256').update(text).digest();
const token = () => randomBytes(32).toString('base64url');
const notFound = (what: string) => new ProblemError('not_found', `${what} does not exist.`);
const linkGone = () => new ProblemError('not_found', 'This link is unknown, already used, revoked or expired: ask for a new one.');

/** Who did it, as the pages and the audit log name them. */
export const principalName = (actor: Principal) => (actor.kind === 'operator' ? OPERATOR : actor.user.email);

export class PanelAccounts {
  private readonly throttle: SignInThrottle;
  private readonly hasher: PasswordHasher;
  private readonly shownOnce: ShownOnceMessages;

  constructor(
    private readonly storage: CatalogStorage,
    private readonly config: Pick<Config, 'adminToken' | 'panel' | 'publicBaseUrl'>,
    private readonly now: () => Date,
    private readonly mailer?: AccountMailer,
    hashes?: PasswordHashObserver,
  ) {
    this.throttle = new SignInThrottle(storage, () => config.panel, now);
    this.hasher = new PasswordHasher(() => config.panel.passwordHashes, hashes);
    this.shownOnce = new ShownOnceMessages(storage, () => config.panel.shownOnceMinutes, now);
  }

  /** True when the deployment e-mails (SMTP): an owner's password reset needs it. */
  get sendsEmail(): boolean {
    return this.mailer !== undefined;
  }

  /** The full address of an invitation or reset link. */
  linkUrl(secret: string): string {
    return `${this.config.publicBaseUrl}/panel/invitations/${secret}`;
  }

  // Signing in and out

  /** The operator signs in with the admin token. */
  async signInOperator(adminToken: string, address: string): Promise<SignedIn> {
    // Reserved before the check, as a failure until it succeeds: concurrent guesses each count.
    const attempt = await this.throttle.reserve('operator', address);
    const given = sha256(adminToken);
    if (!timingSafeEqual(given, sha256(this.config.adminToken))) throw new ProblemError('unauthorized', 'The admin token is not right.');
    await this.throttle.succeeded(attempt);
    return this.startSession(null, { kind: 'operator' });
  }

  /** A merchant user signs in with their email and password. */
  async signIn(email: string, password: string, address: string): Promise<SignedIn> {
    const normalized = email.trim().toLowerCase();
    const attempt = await this.throttle.reserve(`user:${normalized}`, address);
    const user = await this.storage.panelUserByEmail(normalized);
    // The same work and the same answer whether the account exists or not.
    const ok = await this.verify(attempt, password, user?.password_hash ?? DUMMY_HASH);
    if (!user || !ok) throw new ProblemError('unauthorized', 'The email or the password is not right.');
    await this.throttle.succeeded(attempt);
    const { password_hash: _hash, ...record } = user;
    return this.startSession(user.id, { kind: 'user', user: record });
  }

  /** Checks a password for a reserved attempt; one the hasher refused (503) was never checked and is forgiven. */
  private async verify(attempt: SignInAttempt, password: string, stored: string): Promise<boolean> {
    try {
      return await this.hasher.verify(password.slice(0, MAX_PASSWORD), stored);
    } catch (error) {
      await this.throttle.forgive(attempt);
      throw error;
    }
  }

  private async startSession(userId: number | null, principal: Principal): Promise<SignedIn> {
    const sessionToken = token();
    const now = this.now();
    const expiresAt = new Date(now.getTime() + this.config.panel.sessionAbsoluteHours * 3600_000).toISOString();
    const csrfToken = token();
    await this.storage.insertPanelSession(sha256(sessionToken), {
      user_id: userId,
      csrf_token: csrfToken,
      created_at: now.toISOString(),
      last_seen_at: now.toISOString(),
      expires_at: expiresAt,
    });
    return { sessionToken, session: { principal, csrfToken, expiresAt } };
  }

  /** The session a cookie names; undefined when unknown, signed out, idle too long or past its absolute expiry. */
  async session(sessionToken: string): Promise<PanelSession | undefined> {
    if (!sessionToken) return undefined;
    const hash = sha256(sessionToken);
    const stored = await this.storage.panelSession(hash);
    if (!stored) return undefined;
    const now = this.now().getTime();
    const idleMs = this.config.panel.sessionIdleMinutes * 60_000;
    if (now >= Date.parse(stored.expires_at) || now - Date.parse(stored.last_seen_at) >= idleMs) {
      await this.storage.deletePanelSession(hash);
      return undefined;
    }
    let principal: Principal = { kind: 'operator' };
    if (stored.user_id !== null) {
      const user = await this.storage.panelUser(stored.user_id);
      if (!user) return undefined;
      principal = { kind: 'user', user };
    }
    if (now - Date.parse(stored.last_seen_at) >= TOUCH_EVERY_MS) await this.storage.touchPanelSession(hash, new Date(now).toISOString());
    return { principal, csrfToken: stored.csrf_token, expiresAt: stored.expires_at };
  }

  async signOut(sessionToken: string): Promise<void> {
    if (sessionToken) await this.storage.deletePanelSession(sha256(sessionToken));
  }

  // Secrets shown once (shown-once.ts): kept by the POST that made them, taken by the one GET that shows them

  keepShownOnce(sessionToken: string, message: unknown): Promise<number> {
    return this.shownOnce.keep(sessionToken, message);
  }

  takeShownOnce(sessionToken: string, id: number): Promise<unknown> {
    return this.shownOnce.take(sessionToken, id);
  }

  // Passwords

  /**
   * A signed-in user sets a new password with their current one; every other session of the account
   * ends (this one stays) and the account is told by e-mail. Wrong current passwords count as failed
   * sign-ins. The number of sessions ended.
   */
  async changePassword(actor: Principal, sessionToken: string, current: string, next: string, address: string): Promise<number> {
    if (actor.kind !== 'user') throw new ProblemError('forbidden', 'The operator signs in with the admin token and has no password.');
    checkPassword(next, '/new_password');
    const attempt = await this.throttle.reserve(`user:${actor.user.email}`, address);
    const stored = await this.storage.panelUserByEmail(actor.user.email);
    if (!stored || !(await this.verify(attempt, current, stored.password_hash))) {
      throw invalidInput('body', [{ name: '/current_password', in: 'body', reason: 'is not your current password' }]);
    }
    await this.throttle.succeeded(attempt);
    const passwordHash = await this.hasher.hash(next);
    const ended = await this.storage.transaction(async (tx) => {
      await tx.setPanelUserPassword(stored.id, passwordHash);
      const others = await tx.deletePanelSessionsOfUser(stored.id, sha256(sessionToken));
      await scopeToMerchant(tx, stored.merchant_id).insertAuditEntry({
        at: this.now().toISOString(),
        actor: stored.email,
        action: 'user.change_password',
        detail: `${stored.email}: ${others} other session(s) ended`,
      });
      return others;
    });
    this.tellPasswordChanged(stored.email, 'in the panel');
    return ended;
  }

  /**
   * A single-use link that sets a new password for the user's existing account. Requested by the
   * operator, the link is returned (and e-mailed to the account when SMTP is configured); requested
   * by an owner, it only goes to the account's own e-mail, so that no owner can take another's
   * account over. A new link revokes the account's earlier ones.
   */
  async requestPasswordReset(actor: Principal, merchantId: number, userId: number): Promise<PasswordReset> {
    this.assertManager(actor, merchantId);
    if (actor.kind !== 'operator' && !this.mailer) {
      throw new ProblemError(
        'conflict',
        'This deployment sends no e-mail, so a reset link cannot reach the account itself: ask the operator for one.',
      );
    }
    const reset = await this.storage.transaction(async (tx) => {
      const merchant = scopeToMerchant(tx, merchantId);
      const user = await tx.panelUser(userId);
      if (!user || user.merchant_id !== merchantId) throw notFound(`User ${userId}`);
      const now = this.now();
      const replaced = await merchant.revokePanelInvitations({ email: user.email }, now.toISOString());
      const link = await this.newLink(tx, { merchant_id: merchantId, email: user.email, role: user.role, purpose: 'reset' }, now);
      const sent = [actor.kind === 'operator' ? 'shown to the operator' : '', this.mailer ? 'e-mailed to the account' : '']
        .filter(Boolean)
        .join(' and ');
      await merchant.insertAuditEntry({
        at: now.toISOString(),
        actor: principalName(actor),
        action: 'user.send_reset',
        detail: `${user.email}: link ${sent}${replaced ? `; ${replaced} earlier link(s) revoked` : ''}`,
      });
      return link;
    });
    this.mail(
      reset.email,
      'Reset your catalog panel password',
      [
        `${principalName(actor)} asked for a new password for your account ${reset.email} of the catalog publishing panel.`,
        `Set it here: ${this.linkUrl(reset.token)}`,
        `The link works once, until ${reset.expires_at}. Setting a password signs the account out everywhere.`,
        'If you did not expect this, tell the operator; your current password keeps working until the link is used.',
      ].join('\n\n'),
    );
    return {
      id: reset.id,
      email: reset.email,
      role: reset.role,
      expires_at: reset.expires_at,
      token: actor.kind === 'operator' ? reset.token : undefined,
    };
  }

  private tellPasswordChanged(email: string, how: string): void {
    this.mail(
      email,
      'Your catalog panel password was changed',
      [
        `The password of your account ${email} of the catalog publishing panel was changed ${how} at ${this.now().toISOString()}.`,
        'Every other session of the account was signed out. If this was not you, ask the operator to reset it.',
      ].join('\n\n'),
    );
  }

  private mail(to: string, subject: string, text: string): void {
    this.mailer?.({ to, subject, text }).catch(() => {});
  }

  // Invitations and users

  /** 404 unless the actor may act within the merchant: the operator in any, a user in their own. */
  assertMerchant(actor: Principal, merchantId: number): void {
    if (actor.kind === 'user' && actor.user.merchant_id !== merchantId) throw notFound(`Merchant ${merchantId}`);
  }

  /** Inviting, listing and removing users, and reading the audit log: the operator and the merchant's owners. */
  private assertManager(actor: Principal, merchantId: number): void {
    this.assertMerchant(actor, merchantId);
    if (actor.kind === 'user' && actor.user.role !== 'owner') {
      throw new ProblemError('forbidden', "Only the merchant's owners and the operator manage users and read the audit log.");
    }
  }

  private async newLink(
    tx: StorageTx,
    link: Pick<PanelInvitationRecord, 'merchant_id' | 'email' | 'role' | 'purpose'>,
    now: Date,
  ): Promise<Invitation> {
    const secret = token();
    const expiresAt = new Date(now.getTime() + this.config.panel.invitationHours * 3600_000).toISOString();
    const stored = await tx.insertPanelInvitation(sha256(secret), { ...link, created_at: now.toISOString(), expires_at: expiresAt });
    return { id: stored.id, token: secret, email: link.email, role: link.role, expires_at: expiresAt };
  }

  /**
   * A single-use invitation link that creates the e-mail's account. An e-mail that already has an
   * account is refused (409): an invitation never resets a password (requestPasswordReset does, to the
   * account's own e-mail). A new invitation revokes the e-mail's earlier links.
   */
  async invite(actor: Principal, merchantId: number, input: { email: string; role: PanelRole }): Promise<Invitation> {
    this.assertManager(actor, merchantId);
    const email = input.email.trim().toLowerCase();
    if (!EMAIL.test(email) || email.length > 254)
      throw invalidInput('body', [{ name: '/email', in: 'body', reason: 'is not an email address' }]);
    if (input.role !== 'owner' && input.role !== 'member')
      throw invalidInput('body', [{ name: '/role', in: 'body', reason: 'must be owner or member' }]);
    const invitation = await this.storage.transaction(async (tx) => {
      const merchant = scopeToMerchant(tx, merchantId);
      if (!(await merchant.getMerchant())) throw notFound(`Merchant ${merchantId}`);
      const existing = await tx.panelUserByEmail(email);
      if (existing && existing.merchant_id !== merchantId) {
        throw new ProblemError('conflict', `${email} already signs in for another merchant.`);
      }
      if (existing) {
        throw new ProblemError(
          'conflict',
          `${email} already has an account, and an invitation does not reset it: send it a password reset instead ` +
            `(the link goes to ${email} itself${actor.kind === 'operator' ? ', and to you' : ''}).`,
        );
      }
      const now = this.now();
      const replaced = await merchant.revokePanelInvitations({ email }, now.toISOString());
      const link = await this.newLink(tx, { merchant_id: merchantId, email, role: input.role, purpose: 'invitation' }, now);
      await merchant.insertAuditEntry({
        at: now.toISOString(),
        actor: principalName(actor),
        action: 'user.invite',
        detail: `${email} (${input.role})${replaced ? `; ${replaced} earlier link(s) revoked` : ''}`,
      });
      return link;
    });
    this.mail(
      email,
      'Your invitation to the catalog publishing panel',
      `Set your password and sign in: ${this.linkUrl(invitation.token)}\n\nThe link works once, until ${invitation.expires_at}.`,
    );
    return invitation;
  }

  /** The invitation or reset a link names, while it is unused, unrevoked and unexpired. */
  async invitation(
    secret: string,
  ): Promise<(Omit<Invitation, 'token' | 'id'> & { merchant_id: number; purpose: PanelLinkPurpose }) | undefined> {
    const stored = await this.storage.panelInvitation(sha256(secret));
    if (!stored || !pending(stored, this.now())) return undefined;
    return {
      merchant_id: stored.merchant_id,
      email: stored.email,
      role: stored.role,
      purpose: stored.purpose,
      expires_at: stored.expires_at,
    };
  }

  /**
   * Sets the password a link is for; the link works once. An invitation creates the account; a reset
   * sets the existing account's password, ends every session of it, and tells the account.
   */
  async acceptInvitation(secret: string, password: string): Promise<PanelUser> {
    checkPassword(password, '/password');
    const passwordHash = await this.hasher.hash(password);
    const accepted = await this.storage.transaction(async (tx) => {
      const hash = sha256(secret);
      const stored = await tx.panelInvitation(hash);
      const now = this.now();
      if (!stored || !pending(stored, now)) throw linkGone();
      // Marked used first: a revocation (the user's removal) that committed meanwhile leaves nothing to mark.
      if (!(await tx.markPanelInvitationUsed(hash, now.toISOString()))) throw linkGone();
      const existing = await tx.panelUserByEmail(stored.email);
      if (stored.purpose === 'reset') {
        if (!existing || existing.merchant_id !== stored.merchant_id) throw linkGone();
        await tx.setPanelUserPassword(existing.id, passwordHash);
        const ended = await tx.deletePanelSessionsOfUser(existing.id);
        await scopeToMerchant(tx, stored.merchant_id).insertAuditEntry({
          at: now.toISOString(),
          actor: stored.email,
          action: 'user.reset_password',
          detail: `${stored.email}: ${ended} session(s) ended`,
        });
        const { password_hash: _hash, ...user } = existing;
        return { user, reset: true };
      }
      if (existing && existing.merchant_id !== stored.merchant_id) {
        throw new ProblemError('conflict', `${stored.email} already signs in for another merchant.`);
      }
      if (existing) throw new ProblemError('conflict', `${stored.email} already has an account: sign in, or ask for a password reset.`);
      const user = await tx.upsertPanelUser(
        { merchant_id: stored.merchant_id, email: stored.email, role: stored.role, created_at: now.toISOString() },
        passwordHash,
      );
      await scopeToMerchant(tx, stored.merchant_id).insertAuditEntry({
        at: now.toISOString(),
        actor: stored.email,
        action: 'user.set_password',
        detail: `${stored.email} (${stored.role})`,
      });
      return { user, reset: false };
    });
    if (accepted.reset) this.tellPasswordChanged(accepted.user.email, 'with a reset link');
    return accepted.user;
  }

  /** The merchant's invitation and reset links that still work (never their secrets). */
  async listPendingLinks(actor: Principal, merchantId: number): Promise<PendingLink[]> {
    this.assertManager(actor, merchantId);
    const merchant = forMerchant(this.storage, merchantId);
    if (!(await merchant.getMerchant())) throw notFound(`Merchant ${merchantId}`);
    return (await merchant.listPendingPanelInvitations(this.now().toISOString())).map(pendingLink);
  }

  /** Revokes one pending link: it no longer works. 404 for a link that is not pending. */
  async revokeLink(actor: Principal, merchantId: number, linkId: number): Promise<PendingLink> {
    this.assertManager(actor, merchantId);
    return this.storage.transaction(async (tx) => {
      const merchant = scopeToMerchant(tx, merchantId);
      const now = this.now().toISOString();
      const link = (await merchant.listPendingPanelInvitations(now)).find((l) => l.id === linkId);
      if (!link || (await merchant.revokePanelInvitations({ id: linkId }, now)) === 0) throw notFound(`Invitation ${linkId}`);
      await merchant.insertAuditEntry({
        at: now,
        actor: principalName(actor),
        action: 'invitation.revoke',
        detail: `${link.email} (${link.purpose} ${link.id})`,
      });
      return pendingLink(link);
    });
  }

  async listUsers(actor: Principal, merchantId: number): Promise<PanelUser[]> {
    this.assertManager(actor, merchantId);
    const merchant = forMerchant(this.storage, merchantId);
    if (!(await merchant.getMerchant())) throw notFound(`Merchant ${merchantId}`);
    return merchant.listPanelUsers();
  }

  /**
   * Removes the user, ends their sessions and revokes their pending links. The merchant's last owner
   * cannot be removed (409): someone must be left to manage its users.
   */
  async removeUser(actor: Principal, merchantId: number, userId: number): Promise<PanelUser> {
    this.assertManager(actor, merchantId);
    return this.storage.transaction(async (tx) => {
      const merchant = scopeToMerchant(tx, merchantId);
      const user = await tx.panelUser(userId);
      if (!user || user.merchant_id !== merchantId) throw notFound(`User ${userId}`);
      // Locks the owners (PostgreSQL): two owners removing each other at once cannot both succeed.
      if (user.role === 'owner' && (await merchant.panelOwnerIds()).filter((id) => id !== userId).length === 0) {
        throw new ProblemError('conflict', `${user.email} is the merchant's only owner and cannot be removed: invite another owner first.`);
      }
      const now = this.now().toISOString();
      const revoked = await merchant.revokePanelInvitations({ email: user.email }, now);
      if (!(await merchant.deletePanelUser(userId))) throw notFound(`User ${userId}`);
      await merchant.insertAuditEntry({
        at: now,
        actor: principalName(actor),
        action: 'user.remove',
        detail: `${user.email}${revoked ? `; ${revoked} pending link(s) revoked` : ''}`,
      });
      return user;
    });
  }

  // The audit log

  /** Records a change the actor made in the panel that no domain operation records itself (they all do today: admin/audit.ts). */
  async record(actor: Principal, merchantId: number, action: string, detail: string): Promise<void> {
    await forMerchant(this.storage, merchantId).insertAuditEntry({
      at: this.now().toISOString(),
      actor: principalName(actor),
      action,
      detail,
    });
  }

  /** The newest entries, each with the kind of credential that made it; with `apiKeyId`, only that key's. */
  async auditLog(actor: Principal, merchantId: number, limit: number, apiKeyId?: number): Promise<AuditEntry[]> {
    this.assertManager(actor, merchantId);
    const merchant = forMerchant(this.storage, merchantId);
    if (!(await merchant.getMerchant())) throw notFound(`Merchant ${merchantId}`);
    return (await merchant.listAuditEntries(limit, apiKeyId)).map(({ merchant_id: _, ...entry }) => ({
      ...entry,
      credential: entry.api_key ? 'key' : entry.actor === OPERATOR ? 'operator' : 'user',
    }));
  }
}

/** A link that still works at `now`. */
const pending = (link: PanelInvitationRecord, now: Date) =>
  link.used_at === null && link.revoked_at === null && now.getTime() < Date.parse(link.expires_at);

const pendingLink = ({ id, email, role, purpose, created_at, expires_at }: PanelInvitationRecord): PendingLink => ({
  id,
  email,
  role,
  purpose,
  created_at,
  expires_at,
});

function checkPassword(password: string, name: string): void {
  if (password.length < MIN_PASSWORD || password.length > MAX_PASSWORD) {
    throw invalidInput('body', [{ name, in: 'body', reason: `must have ${MIN_PASSWORD} to ${MAX_PASSWORD} characters` }]);
  }
}
