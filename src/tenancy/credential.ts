// Who a request acts as (docs/admin.md#scopes, SECURITY.md "Authorization"): the operator (the
// admin token), a panel user, or a merchant API key with its scopes and stores. The HTTP layer puts
// it in `c.var.credential`; what it may do is decided from it, and its writes are audited as it.
import type { Actor } from '../admin/audit.js';
import type { components } from '../generated/admin-api.js';

/** What a key may do (admin.yaml: ApiKeyScope). */
export type Scope = components['schemas']['ApiKeyScope'];

export const SCOPES: readonly Scope[] = ['catalog:read', 'catalog:write', 'webhooks:read', 'webhooks:write'];

/** A write scope implies its read scope; nothing else is implied (Shopify, commercetools, Stripe). */
const IMPLIED: Record<Scope, readonly Scope[]> = {
  'catalog:read': ['catalog:read'],
  'catalog:write': ['catalog:write', 'catalog:read'],
  'webhooks:read': ['webhooks:read'],
  'webhooks:write': ['webhooks:write', 'webhooks:read'],
};

/** Whether scopes held grant `needed` (directly, or by the write scope that implies it). */
export function grants(held: readonly Scope[], needed: Scope): boolean {
  return held.some((scope) => IMPLIED[scope].includes(needed));
}

/** A merchant API key as a request presents it: its identity, merchant, scopes and stores. */
export interface KeyCredential {
  kind: 'key';
  id: number;
  name: string;
  prefix: string;
  merchantId: number;
  scopes: readonly Scope[];
  /** The store slugs it is restricted to; null: every store of its merchant. */
  stores: readonly string[] | null;
}

/** The credential a request was made with: `c.var.credential` on the admin and public APIs and the panel. */
export type Credential = { kind: 'operator' } | { kind: 'user'; userId: number; email: string; merchantId: number } | KeyCredential;

export const OPERATOR_CREDENTIAL: Credential = { kind: 'operator' };

/** Who the audit log records for a credential. */
export function actorOf(credential: Credential): Actor {
  switch (credential.kind) {
    case 'operator':
      return 'operator';
    case 'user':
      return credential.email;
    case 'key':
      return { kind: 'key', id: credential.id, name: credential.name, prefix: credential.prefix };
  }
}

/** Whether a key restricted to stores may see the store with this slug (null: an endpoint for every store, which it may not). */
export function seesStore(credential: Credential, slug: string | null): boolean {
  if (credential.kind !== 'key' || credential.stores === null) return true;
  return slug !== null && credential.stores.includes(slug);
}
