// The merchant's audit log: every change to a merchant, made in the panel, through
// the admin API or with the CLI, recorded once by the domain operation that makes it, in its
// transaction where it has one. One naming style, `noun.verb` (admin AuditEntry.action lists them).
import type { StorageOperations } from '../storage/port.js';
import { scopeToMerchant } from '../storage/merchant-scope.js';

/** The actor of the admin API and the CLI (the deployment's admin token), and of the operator in the panel. */
export const OPERATOR = 'operator';

/** A merchant API key that made a change: the audit log names it by id, name and prefix. */
export interface KeyActor {
  kind: 'key';
  id: number;
  name: string;
  prefix: string;
}

/** Who made a change: `operator`, the panel user's email, or a merchant API key. */
export type Actor = string | KeyActor;

/** An actor in words, as the audit log's `actor` shows it: `operator`, the user's email, or `key "name" (prefix…)`. */
export const actorName = (actor: Actor): string => (typeof actor === 'string' ? actor : `key "${actor.name}" (${actor.prefix}…)`);

type Verbs<Noun extends string, Verb extends string> = `${Noun}.${Verb}`;

/** Every action the audit log records (AuditEntry.action in openapi/admin describes them). */
export type AuditAction =
  | Verbs<'merchant', 'create' | 'update'>
  | Verbs<'api_key', 'create' | 'update' | 'revoke' | 'roll'>
  | Verbs<
      'store' | 'customer_group' | 'exchange_rate' | 'pricing_rule' | 'supplier' | 'attribute' | 'product',
      'create' | 'update' | 'delete'
    >
  | Verbs<'import', 'start'>
  | Verbs<'image', 'retry_dead'>
  | Verbs<
      'endpoint',
      'create' | 'update' | 'pause' | 'enable' | 'delete' | 'rotate_secret' | 'confirm_secret' | 'send_test' | 'resend' | 'recover'
    >
  | Verbs<'user', 'invite' | 'remove' | 'set_password' | 'change_password' | 'send_reset' | 'reset_password'>
  | Verbs<'invitation', 'revoke'>;

/** Records one change in the merchant's audit log: on `tx` to commit with the change itself, through the merchant's scope on it. */
export function audit(
  tx: StorageOperations,
  merchantId: number,
  actor: Actor,
  action: AuditAction,
  detail: string,
  at: Date,
): Promise<void> {
  const apiKeyId = typeof actor === 'string' ? null : actor.id;
  return scopeToMerchant(tx, merchantId).insertAuditEntry({
    at: at.toISOString(),
    actor: actorName(actor),
    api_key_id: apiKeyId,
    action,
    detail,
  });
}
