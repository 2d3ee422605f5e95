// Bearer authentication (spec 5): the public API by merchant API key, the admin API by the
// configured admin token or a merchant API key, /metrics by the metrics token when one is
// configured. Missing, malformed or unknown credentials: 401 with WWW-Authenticate. Who the
// request acts as goes into `c.var.credential` (tenancy/credential.ts).
import { timingSafeEqual, createHash } from 'node:crypto';
import type { Context, MiddlewareHandler } from 'hono';
import type { AuthFailureThrottle } from './auth-failures.js';
import { keyAllowsOrigin } from './browser-cors.js';
import type { ApiKeyUses } from '../tenancy/api-key-uses.js';
import type { ActiveApiKeys } from '../tenancy/api-keys.js';
import { ProblemError } from '../shared/problem.js';
import { grants, type Credential, type KeyCredential, type Scope } from '../tenancy/credential.js';
import type { ActiveApiKeyRecord } from '../tenancy/model.js';

/**
 * The merchant whose catalog the request reads, the API key it came with (rate limits are per
 * key), and the key as a credential (its scopes and stores).
 */
export type PublicEnv = {
  Variables: { merchantId: number; apiKeyId: number; credential: KeyCredential; allowedOrigins?: readonly string[] };
};

/** The credential an admin request acts as: the operator (admin token) or a merchant API key. */
export type AdminEnv = { Variables: { credential: Credential } };

/** 403 for a key without the scope an operation needs (RFC 6750 section 3.1). */
export function insufficientScope(scope: Scope): ProblemError {
  return new ProblemError('insufficient_scope', `This API key lacks the scope ${scope}, which this operation needs.`, undefined, {
    'WWW-Authenticate': `Bearer error="insufficient_scope", scope="${scope}"`,
  });
}

const keyCredential = (key: ActiveApiKeyRecord): KeyCredential => ({
  kind: 'key',
  id: key.id,
  name: key.name,
  prefix: key.prefix,
  merchantId: key.merchant_id,
  scopes: key.scopes,
  stores: key.stores,
});

function bearer(header: string | undefined): string | undefined {
  const match = /^Bearer +([^ ]+) *$/i.exec(header ?? '');
  return match?.[1];
}

function unauthorized(challenge: string, detail: string): ProblemError {
  return new ProblemError('unauthorized', detail, undefined, { 'WWW-Authenticate': challenge });
}

const CATALOG_CHALLENGE = 'Bearer realm="catalog"';
// RFC 6750: a presented but unusable key also gets error="invalid_token".
const CATALOG_INVALID_TOKEN = 'Bearer realm="catalog", error="invalid_token"';

/** 401 for a key that is unknown, revoked or expired (a long-poll whose key was revoked or expired while it waited answers it too). */
export const invalidApiKey = () => unauthorized(CATALOG_INVALID_TOKEN, 'The API key is invalid, has been revoked or has expired.');

/**
 * Resolves the request's API key into `c.var.credential`, `c.var.apiKeyId` and its merchant into
 * `c.var.merchantId` (as this process remembers active keys: tenancy/api-keys.ts,
 * CPS_API_KEY_CACHE_MS), tells `uses` the key was used (tenancy/api-key-uses.ts: written at most
 * once per interval, in the background), and refuses a key without `catalog:read` (403).
 */
export function apiKeyAuth(apiKeys: Pick<ActiveApiKeys, 'find'>, uses?: Pick<ApiKeyUses, 'used'>): MiddlewareHandler<PublicEnv> {
  return async (c, next) => {
    const key = bearer(c.req.header('Authorization'));
    if (!key) throw unauthorized(CATALOG_CHALLENGE, 'Send your API key as `Authorization: Bearer <API_KEY>`.');
    const found = await apiKeys.find(key);
    if (!found) throw invalidApiKey();
    uses?.used(found.id);
    keyAllowsOrigin(c, found.allowed_origins);
    if (!grants(found.scopes, 'catalog:read')) throw insufficientScope('catalog:read');
    c.set('merchantId', found.merchant_id);
    c.set('apiKeyId', found.id);
    c.set('credential', keyCredential(found));
    await next();
  };
}

const digest = (text: string) => createHash('sha256').update(text).digest();

/** One token from configuration, compared in constant time; the challenge names its realm. */
function configuredTokenAuth(configured: string, realm: string, name: string, placeholder: string): MiddlewareHandler {
  const expected = digest(configured);
  const challenge = `Bearer realm="${realm}"`;
  return async (c, next) => {
    const token = bearer(c.req.header('Authorization'));
    if (!token) throw unauthorized(challenge, `Send the ${name} as \`Authorization: Bearer <${placeholder}>\`.`);
    if (!timingSafeEqual(digest(token), expected)) throw unauthorized(challenge, `The ${name} is invalid.`);
    await next();
  };
}

const ADMIN_CHALLENGE = 'Bearer realm="admin"';
// RFC 6750: a presented but unusable token or key (wrong, unknown, revoked, expired).
const ADMIN_INVALID_TOKEN = 'Bearer realm="admin", error="invalid_token"';

/** Where wrong tokens are counted: the throttle and how a request's client address is read. */
export interface AdminAuthFailures {
  throttle: Pick<AuthFailureThrottle, 'check' | 'failed'>;
  addressOf: (c: Context) => string;
}

/**
 * Admin API: the deployment's admin token (the operator) or an active merchant API key, into
 * `c.var.credential`; what the credential may do is authorize.ts's (admin.yaml: the challenge is
 * `Bearer realm="admin"`, with `error="invalid_token"` when a token was sent). A wrong token or
 * key counts against the client's address (`failures`), which past its limit answers 429 before
 * any token is compared.
 */
export function adminAuth(
  adminToken: string,
  apiKeys: Pick<ActiveApiKeys, 'find'>,
  uses?: Pick<ApiKeyUses, 'used'>,
  failures?: AdminAuthFailures,
): MiddlewareHandler<AdminEnv> {
  const expected = digest(adminToken);
  return async (c, next) => {
    const token = bearer(c.req.header('Authorization'));
    if (!token) throw unauthorized(ADMIN_CHALLENGE, 'Send the admin token or an API key as `Authorization: Bearer <TOKEN>`.');
    const address = failures?.addressOf(c);
    if (address !== undefined) failures!.throttle.check(address);
    if (timingSafeEqual(digest(token), expected)) {
      c.set('credential', { kind: 'operator' });
      return next();
    }
    const found = await apiKeys.find(token);
    if (!found) {
      if (address !== undefined) failures!.throttle.failed(address);
      throw unauthorized(ADMIN_INVALID_TOKEN, 'The admin token or API key is invalid (or the key has been revoked or has expired).');
    }
    uses?.used(found.id);
    c.set('credential', keyCredential(found));
    return next();
  };
}

/** /metrics, when CPS_METRICS_TOKEN is set (operations.yaml). */
export const metricsTokenAuth = (metricsToken: string) =>
  configuredTokenAuth(metricsToken, 'metrics', 'metrics token', 'CPS_METRICS_TOKEN');
