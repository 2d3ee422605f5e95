// What the panel needs of the accounts domain (src/admin/accounts.ts, being written beside this
// slice): its types and the `service.accounts` it will be on. Types only: no behaviour lives here.
// When accounts.ts lands, these become `import type { … } from '../admin/accounts.js'` and
// accountsOf(service) becomes `service.accounts`.
import type { Service } from '../service.js';

export type PanelRole = 'owner' | 'member';
export interface PanelUser { id: number; merchant_id: number; email: string; role: PanelRole; created_at: string }
export type Principal = { kind: 'operator' } | { kind: 'user'; user: PanelUser };
export interface PanelSession { principal: Principal; csrfToken: string; expiresAt: string }
export interface SignedIn { sessionToken: string; session: PanelSession }
export interface AuditEntry { id: number; at: string; actor: string; action: string; detail: string }

export interface PanelAccounts {
  signInOperator(adminToken: string, address: string): Promise<SignedIn>;
  signIn(email: string, password: string, address: string): Promise<SignedIn>;
  session(sessionToken: string): Promise<PanelSession | undefined>;
  signOut(sessionToken: string): Promise<void>;
  invitation(token: string): Promise<{ email: string; merchant_id: number; role: PanelRole; expires_at: string } | undefined>;
  acceptInvitation(token: string, password: string): Promise<PanelUser>;
  invite(actor: Principal, merchantId: number, input: { email: string; role: PanelRole }): Promise<{ token: string; expires_at: string; email: string; role: PanelRole }>;
  listUsers(actor: Principal, merchantId: number): Promise<PanelUser[]>;
  removeUser(actor: Principal, merchantId: number, userId: number): Promise<void>;
  assertMerchant(actor: Principal, merchantId: number): void;
  record(actor: Principal, merchantId: number, action: string, detail: string): Promise<void>;
  auditLog(actor: Principal, merchantId: number, limit: number): Promise<AuditEntry[]>;
}

/** The service's accounts domain; read per request, so a service built before it is wired fails clearly. */
export function accountsOf(service: Service): PanelAccounts {
  const accounts = (service as Service & { accounts?: PanelAccounts }).accounts;
  if (!accounts) throw new Error('The panel needs service.accounts (src/admin/accounts.ts), which this build does not have.');
  return accounts;
}

/** Who did it, as the pages and the audit log name them. */
export function principalName(principal: Principal): string {
  return principal.kind === 'operator' ? 'operator' : principal.user.email;
}
