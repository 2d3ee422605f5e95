// Administration's types: the panel's accounts (users, invitations, sessions), the merchant's audit
// log, and NDJSON import jobs. Types only: storage imports these, never the other way round.
import type { components } from '../generated/admin-api.js';

type AdminSchemas = components['schemas'];

// Panel accounts: users, invitations, sessions, the audit log

export type PanelRole = 'owner' | 'member';

export interface PanelUserRecord {
  id: number;
  merchant_id: number;
  email: string;
  role: PanelRole;
  created_at: string;
}

/** `invitation`: the link creates the e-mail's account; `reset`: it sets a new password for the e-mail's existing account. */
export type PanelLinkPurpose = 'invitation' | 'reset';

export interface PanelInvitationRecord {
  id: number;
  merchant_id: number;
  email: string;
  role: PanelRole;
  purpose: PanelLinkPurpose;
  created_at: string;
  expires_at: string;
  used_at: string | null;
  /** Revoked by hand, by a newer link for the same e-mail, or by the removal of the user. */
  revoked_at: string | null;
}

export interface PanelSessionRecord {
  /** null: the operator's session. */
  user_id: number | null;
  csrf_token: string;
  created_at: string;
  last_seen_at: string;
  /** The absolute expiry; the idle expiry is counted from last_seen_at. */
  expires_at: string;
}

export interface AuditEntryRecord {
  id: number;
  merchant_id: number;
  at: string;
  /** `operator`, the panel user's email, or `key "name" (prefix…)`. */
  actor: string;
  /** The key that made the change, or null (the operator or a panel user). */
  api_key_id: number | null;
  action: string;
  detail: string;
}

/** An audit entry as listed: the key that made it named by id, name and prefix. */
export interface ListedAuditEntryRecord extends Omit<AuditEntryRecord, 'api_key_id'> {
  api_key: { id: number; name: string; prefix: string } | null;
}

// Import jobs: an NDJSON import's progress and outcome, kept where every process can read it

export type ImportJobState = AdminSchemas['ImportJob']['state'];
/** Why an import failed (admin ImportJob `error_code`). */
export type ImportErrorCode = NonNullable<AdminSchemas['ImportJob']['error_code']>;

/** A bad line of a rejected import: its name (`line N`) and reason, as the admin API lists them. */
export type ImportProblemRecord = AdminSchemas['ImportJob']['problems'][number];

/** An import job (admin ImportJob: the document states its shape), and its merchant. */
export type ImportJobRecord = AdminSchemas['ImportJob'] & { merchant_id: number };

export type ImportJobProgress = Partial<Omit<ImportJobRecord, 'id' | 'merchant_id' | 'started_by' | 'file_name' | 'started_at'>>;

// Idempotency keys (admin/idempotency-keys.ts)

/** The answer kept for an idempotency key: replayed as it was first sent. */
export interface IdempotentAnswer {
  status: number;
  /** The answer's headers worth replaying (Content-Type, Location, …), as [name, value] pairs. */
  headers: [string, string][];
  /** The body's text ('' for none). */
  body: string;
}

/** A credential's idempotency key: the first request's hash, and its answer once it was given. */
export interface IdempotencyKeyRecord {
  credential: string;
  key: string;
  /** SHA-256 of the method, path and body (hex); null while a streamed body (an import) is still being read. */
  request_hash: string | null;
  created_at: string;
  /** When the key is forgotten: created_at + CPS_IDEMPOTENCY_HOURS. */
  expires_at: string;
  /** The run holding the key while the first request runs (null once answered). */
  owner: string | null;
  /** Until when that run holds it; it renews the lease while it runs, so a lapsed lease means its process is gone. */
  leased_until: string | null;
  /** A write of the first request committed (marked in that write's own transaction). */
  write_committed: boolean;
  /** The kept answer; null while the first request runs. */
  answer: IdempotentAnswer | null;
}
