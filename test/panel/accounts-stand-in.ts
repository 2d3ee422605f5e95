// A minimal in-memory stand-in for service.accounts (src/admin/accounts.ts, written in parallel):
// just enough for the operator's scenarios. Installed only when the service has no accounts of its
// own, so these tests run against the real domain as soon as it lands. Never used by src/.
import { randomBytes } from 'node:crypto';
import type { AuditEntry, PanelAccounts, PanelSession, Principal } from '../../src/panel/accounts.js';
import type { Service } from '../../src/service.js';
import { ProblemError } from '../../src/shared/problem.js';

class OperatorOnlyAccounts implements PanelAccounts {
  private readonly sessions = new Map<string, PanelSession>();
  private readonly audit: (AuditEntry & { merchantId: number })[] = [];

  constructor(private readonly adminToken: string) {}

  async signInOperator(adminToken: string) {
    if (adminToken !== this.adminToken) throw new ProblemError('unauthorized', 'The admin token is wrong.');
    const sessionToken = randomBytes(32).toString('base64url');
    const session: PanelSession = { principal: { kind: 'operator' }, csrfToken: randomBytes(32).toString('base64url'), expiresAt: '2999-01-01T00:00:00Z' };
    this.sessions.set(sessionToken, session);
    return { sessionToken, session };
  }
  async signIn(): Promise<never> { throw new ProblemError('unauthorized', 'The stand-in has no merchant users.'); }
  async session(token: string) { return this.sessions.get(token); }
  async signOut(token: string) { this.sessions.delete(token); }
  async invitation() { return undefined; }
  async acceptInvitation(): Promise<never> { throw new ProblemError('not_found', 'The stand-in has no invitations.'); }
  async invite(): Promise<never> { throw new ProblemError('conflict', 'The stand-in cannot invite.'); }
  async listUsers() { return []; }
  async removeUser(): Promise<never> { throw new ProblemError('not_found', 'The stand-in has no users.'); }
  assertMerchant(actor: Principal, merchantId: number) {
    if (actor.kind === 'user' && actor.user.merchant_id !== merchantId) throw new ProblemError('not_found', `Merchant ${merchantId} does not exist.`);
  }
  async record(actor: Principal, merchantId: number, action: string, detail: string) {
    this.audit.push({ id: this.audit.length + 1, merchantId, at: new Date().toISOString(), actor: actor.kind === 'operator' ? 'operator' : actor.user.email, action, detail });
  }
  async auditLog(_actor: Principal, merchantId: number, limit: number) {
    return this.audit.filter((a) => a.merchantId === merchantId).reverse().slice(0, limit);
  }
}

/** True when the real accounts domain is on the service (the skipped scenarios can then run). */
export const hasRealAccounts = (service: Service) => 'accounts' in service && (service as { accounts?: unknown }).accounts !== undefined;

export function useAccountsStandInIfMissing(service: Service): void {
  const target = service as Service & { accounts?: PanelAccounts };
  target.accounts ??= new OperatorOnlyAccounts(service.config.adminToken);
}
