// The administration panel's accounts (issue 11): the operator signs in with the admin token;
// merchant users, invited by the operator or an owner, sign in with an email and a password.
// Invitations are single-use links valid for a configured time; passwords are hashed with scrypt
// (memory-hard, off the event loop); sessions live in the database so every process shares them,
// with an idle and an absolute expiry; sign-in is throttled per account and per address; every
// change made in the panel goes to the merchant's audit log.
import { createHash, randomBytes, scrypt as scryptCallback, timingSafeEqual, type ScryptOptions } from 'node:crypto';
import type { Config } from '../config.js';
import { ProblemError, invalidInput } from '../shared/problem.js';
import type { AuditEntryRecord, CatalogStorage, PanelRole, PanelUserRecord } from '../storage/port.js';
import { OPERATOR } from './audit.js';

export type { PanelRole } from '../storage/records.js';
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
  /** The link's secret part: `/panel/invitations/{token}`. */
  token: string;
  email: string;
  role: PanelRole;
  expires_at: string;
}

export type AuditEntry = Omit<AuditEntryRecord, 'merchant_id'>;

/** Sends an invitation by e-mail when SMTP is configured. */
export type InvitationMailer = (to: string, link: string, expiresAt: string) => Promise<void>;

const MIN_PASSWORD = 12;
const MAX_PASSWORD = 1024;
const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;
/** scrypt: N = 2^15 (32 MiB), r = 8, p = 1; the parameters are stored with each hash. */
const SCRYPT = { N: 32768, r: 8, p: 1, maxmem: 64 * 1024 * 1024 };
/** last_seen_at is written at most this often, not on every request. */
const TOUCH_EVERY_MS = 60_000;

const sha256 = (text: string) => createHash('sha256').update(text).digest();
const token = () => randomBytes(32).toString('base64url');
const notFound = (what: string) => new ProblemError('not_found', `${what} does not exist.`);

function scrypt(password: string, salt: Buffer, keylen: number, options: ScryptOptions): Promise<Buffer> {
  return new Promise((resolve, reject) => scryptCallback(password, salt, keylen, options, (error, key) => (error ? reject(error) : resolve(key))));
}

/** `scrypt$N$r$p$salt$hash`, base64url. */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await scrypt(password, salt, 32, SCRYPT);
  return ['scrypt', SCRYPT.N, SCRYPT.r, SCRYPT.p, salt.toString('base64url'), key.toString('base64url')].join('$');
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, N, r, p, salt, hash] = stored.split('$');
  if (scheme !== 'scrypt' || !salt || !hash) return false;
  const expected = Buffer.from(hash, 'base64url');
  const key = await scrypt(password, Buffer.from(salt, 'base64url'), expected.length, {
    N: Number(N), r: Number(r), p: Number(p), maxmem: SCRYPT.maxmem,
  });
  return timingSafeEqual(key, expected);
}

/** Who did it, as the pages and the audit log name them. */
export const principalName = (actor: Principal) => (actor.kind === 'operator' ? OPERATOR : actor.user.email);

export class PanelAccounts {
  constructor(
    private readonly storage: CatalogStorage,
    private readonly config: Pick<Config, 'adminToken' | 'panel'>,
    private readonly now: () => Date,
    private readonly mailer?: InvitationMailer,
  ) {}

  // Signing in and out

  /** The operator signs in with the admin token. */
  async signInOperator(adminToken: string, address: string): Promise<SignedIn> {
    const subjects = ['account:operator', `address:${address}`];
    await this.throttle(subjects);
    const given = sha256(adminToken);
    if (!timingSafeEqual(given, sha256(this.config.adminToken))) {
      await this.storage.recordSignInFailure(subjects, this.now().toISOString());
      throw new ProblemError('unauthorized', 'The admin token is not right.');
    }
    await this.storage.clearSignInFailures('account:operator');
    return this.startSession(null, { kind: 'operator' });
  }

  /** A merchant user signs in with their email and password. */
  async signIn(email: string, password: string, address: string): Promise<SignedIn> {
    const normalized = email.trim().toLowerCase();
    const subjects = [`account:${normalized}`, `address:${address}`];
    await this.throttle(subjects);
    const user = await this.storage.panelUserByEmail(normalized);
    // The same work and the same answer whether the account exists or not.
    const ok = await verifyPassword(password.slice(0, MAX_PASSWORD), user?.password_hash ?? DUMMY_HASH);
    if (!user || !ok) {
      await this.storage.recordSignInFailure(subjects, this.now().toISOString());
      throw new ProblemError('unauthorized', 'The email or the password is not right.');
    }
    await this.storage.clearSignInFailures(`account:${normalized}`);
    const { password_hash: _hash, ...record } = user;
    return this.startSession(user.id, { kind: 'user', user: record });
  }

  /** 429 while an account or an address has failed too often within the window. */
  private async throttle(subjects: string[]): Promise<void> {
    const { signInMaxFailures, signInWindowMinutes } = this.config.panel;
    const windowMs = signInWindowMinutes * 60_000;
    const now = this.now().getTime();
    const failures = await this.storage.countSignInFailures(subjects, new Date(now - windowMs).toISOString());
    const blocked = [...failures.values()].filter((f) => f.count >= signInMaxFailures);
    if (blocked.length === 0) return;
    const until = Math.max(...blocked.map((f) => Date.parse(f.oldest) + windowMs));
    const retryAfter = Math.max(1, Math.ceil((until - now) / 1000));
    throw new ProblemError('rate_limited', `Too many failed sign-ins: try again in ${retryAfter} s.`, undefined, { 'Retry-After': String(retryAfter) });
  }

  private async startSession(userId: number | null, principal: Principal): Promise<SignedIn> {
    const sessionToken = token();
    const now = this.now();
    const expiresAt = new Date(now.getTime() + this.config.panel.sessionAbsoluteHours * 3600_000).toISOString();
    const csrfToken = token();
    await this.storage.insertPanelSession(sha256(sessionToken), {
      user_id: userId, csrf_token: csrfToken, created_at: now.toISOString(), last_seen_at: now.toISOString(), expires_at: expiresAt,
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

  // Invitations and users

  /** 404 unless the actor may act within the merchant: the operator in any, a user in their own. */
  assertMerchant(actor: Principal, merchantId: number): void {
    if (actor.kind === 'user' && actor.user.merchant_id !== merchantId) throw notFound(`Merchant ${merchantId}`);
  }

  /** Inviting, listing and removing users, and reading the audit log: the operator and the merchant's owners. */
  private assertManager(actor: Principal, merchantId: number): void {
    this.assertMerchant(actor, merchantId);
    if (actor.kind === 'user' && actor.user.role !== 'owner') {
      throw new ProblemError('forbidden', 'Only the merchant\'s owners and the operator manage users and read the audit log.');
    }
  }

  /** A single-use invitation link for the email (a lost password is reset by a new one). */
  async invite(actor: Principal, merchantId: number, input: { email: string; role: PanelRole }): Promise<Invitation> {
    this.assertManager(actor, merchantId);
    const email = input.email.trim().toLowerCase();
    if (!EMAIL.test(email) || email.length > 254) throw invalidInput('body', [{ name: '/email', in: 'body', reason: 'is not an email address' }]);
    if (input.role !== 'owner' && input.role !== 'member') throw invalidInput('body', [{ name: '/role', in: 'body', reason: 'must be owner or member' }]);
    const invitation = await this.storage.transaction(async (tx) => {
      if (!await tx.getMerchant(merchantId)) throw notFound(`Merchant ${merchantId}`);
      const existing = await tx.panelUserByEmail(email);
      if (existing && existing.merchant_id !== merchantId) {
        throw new ProblemError('conflict', `${email} already signs in for another merchant.`);
      }
      const secret = token();
      const now = this.now();
      const expiresAt = new Date(now.getTime() + this.config.panel.invitationHours * 3600_000).toISOString();
      await tx.insertPanelInvitation(sha256(secret), { merchant_id: merchantId, email, role: input.role, created_at: now.toISOString(), expires_at: expiresAt });
      await tx.insertAuditEntry({ merchant_id: merchantId, at: now.toISOString(), actor: principalName(actor), action: 'user.invite', detail: `${email} (${input.role})` });
      return { token: secret, email, role: input.role, expires_at: expiresAt };
    });
    if (this.mailer) {
      this.mailer(email, `/panel/invitations/${invitation.token}`, invitation.expires_at).catch(() => {});
    }
    return invitation;
  }

  /** The invitation a link names, while it is unused and unexpired. */
  async invitation(secret: string): Promise<Omit<Invitation, 'token'> & { merchant_id: number } | undefined> {
    const stored = await this.storage.panelInvitation(sha256(secret));
    if (!stored || stored.used_at !== null || this.now().getTime() >= Date.parse(stored.expires_at)) return undefined;
    return { merchant_id: stored.merchant_id, email: stored.email, role: stored.role, expires_at: stored.expires_at };
  }

  /** Sets the password the invitation's user signs in with; the link works once. */
  async acceptInvitation(secret: string, password: string): Promise<PanelUser> {
    if (password.length < MIN_PASSWORD || password.length > MAX_PASSWORD) {
      throw invalidInput('body', [{ name: '/password', in: 'body', reason: `must have ${MIN_PASSWORD} to ${MAX_PASSWORD} characters` }]);
    }
    const passwordHash = await hashPassword(password);
    return this.storage.transaction(async (tx) => {
      const hash = sha256(secret);
      const stored = await tx.panelInvitation(hash);
      const now = this.now();
      if (!stored || stored.used_at !== null || now.getTime() >= Date.parse(stored.expires_at)) {
        throw new ProblemError('not_found', 'This invitation link is unknown, already used or expired: ask for a new one.');
      }
      const existing = await tx.panelUserByEmail(stored.email);
      if (existing && existing.merchant_id !== stored.merchant_id) {
        throw new ProblemError('conflict', `${stored.email} already signs in for another merchant.`);
      }
      const user = await tx.upsertPanelUser({ merchant_id: stored.merchant_id, email: stored.email, role: stored.role, created_at: now.toISOString() }, passwordHash);
      await tx.markPanelInvitationUsed(hash, now.toISOString());
      await tx.insertAuditEntry({ merchant_id: stored.merchant_id, at: now.toISOString(), actor: stored.email, action: 'user.set_password', detail: `${stored.email} (${stored.role})` });
      return user;
    });
  }

  async listUsers(actor: Principal, merchantId: number): Promise<PanelUser[]> {
    this.assertManager(actor, merchantId);
    if (!await this.storage.getMerchant(merchantId)) throw notFound(`Merchant ${merchantId}`);
    return this.storage.listPanelUsers(merchantId);
  }

  async removeUser(actor: Principal, merchantId: number, userId: number): Promise<void> {
    this.assertManager(actor, merchantId);
    await this.storage.transaction(async (tx) => {
      const user = await tx.panelUser(userId);
      if (!user || user.merchant_id !== merchantId || !await tx.deletePanelUser(merchantId, userId)) throw notFound(`User ${userId}`);
      await tx.insertAuditEntry({ merchant_id: merchantId, at: this.now().toISOString(), actor: principalName(actor), action: 'user.remove', detail: user.email });
    });
  }

  // The audit log

  /** Records a change the actor made in the panel that no domain operation records itself (they all do today: admin/audit.ts). */
  async record(actor: Principal, merchantId: number, action: string, detail: string): Promise<void> {
    await this.storage.insertAuditEntry({ merchant_id: merchantId, at: this.now().toISOString(), actor: principalName(actor), action, detail });
  }

  async auditLog(actor: Principal, merchantId: number, limit: number): Promise<AuditEntry[]> {
    this.assertManager(actor, merchantId);
    if (!await this.storage.getMerchant(merchantId)) throw notFound(`Merchant ${merchantId}`);
    return (await this.storage.listAuditEntries(merchantId, limit)).map(({ merchant_id: _, ...entry }) => entry);
  }
}

/** Verified against when the account does not exist, so that answers take the same time. */
const DUMMY_HASH = 'scrypt$32768$8$1$AAAAAAAAAAAAAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA';
