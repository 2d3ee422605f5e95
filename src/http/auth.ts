// Bearer authentication (spec 5): the public API by merchant API key, the admin API by the
// configured admin token, /metrics by the metrics token when one is configured. Missing,
// malformed or unknown credentials: 401 with WWW-Authenticate.
import { timingSafeEqual, createHash } from 'node:crypto';
import type { MiddlewareHandler } from 'hono';
import type { ApiKeyUses } from '../tenancy/api-key-uses.js';
import type { ActiveApiKeys } from '../tenancy/api-keys.js';
import { ProblemError } from '../shared/problem.js';

/** The merchant whose catalog the request reads, and the API key it came with (rate limits are per key). */
export type PublicEnv = { Variables: { merchantId: number; apiKeyId: number } };

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

/** 401 for a key that is unknown or revoked (a long-poll whose key was revoked while it waited answers it too). */
export const invalidApiKey = () => unauthorized(CATALOG_INVALID_TOKEN, 'The API key is invalid or has been revoked.');

/**
 * Resolves the request's API key into `c.var.apiKeyId` and its merchant into `c.var.merchantId`
 * (as this process remembers active keys: tenancy/api-keys.ts, CPS_API_KEY_CACHE_MS), and tells
 * `uses` the key was used (tenancy/api-key-uses.ts: written at most once per interval, in the background).
 */
export function apiKeyAuth(apiKeys: Pick<ActiveApiKeys, 'find'>, uses?: Pick<ApiKeyUses, 'used'>): MiddlewareHandler<PublicEnv> {
  return async (c, next) => {
    const key = bearer(c.req.header('Authorization'));
    if (!key) throw unauthorized(CATALOG_CHALLENGE, 'Send your API key as `Authorization: Bearer <API_KEY>`.');
    const found = await apiKeys.find(key);
    if (!found) throw invalidApiKey();
    uses?.used(found.id);
    c.set('merchantId', found.merchant_id);
    c.set('apiKeyId', found.id);
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

/** Admin API: the deployment's admin token (admin.yaml: the challenge is always `Bearer realm="admin"`). */
export const adminTokenAuth = (adminToken: string) => configuredTokenAuth(adminToken, 'admin', 'admin token', 'ADMIN_TOKEN');

/** /metrics, when CPS_METRICS_TOKEN is set (operations.yaml). */
export const metricsTokenAuth = (metricsToken: string) =>
  configuredTokenAuth(metricsToken, 'metrics', 'metrics token', 'CPS_METRICS_TOKEN');
