// CORS on the public API (openapi.yaml, "Browsers"): a browser page may read /v1 with a key that
// lists its origin (the key's `allowed_origins`, none by default). A preflight carries no key, so
// it is answered for any origin some active key of the deployment lists, and the answer that
// counts, the actual response's Access-Control-Allow-Origin, is given only for an origin the
// calling key lists: a page of an origin allowed by another merchant's key gets past the preflight
// and then reads nothing. Every /v1 answer says `Vary: Origin`.
import type { Context, MiddlewareHandler } from 'hono';
import type { ActiveApiKeys } from '../tenancy/api-keys.js';
import { answerHeader, answeredWith } from './direct-answer.js';
import type { PublicEnv } from './auth.js';

/** What a page of an allowed origin may send: the key, a validator, and the feed's resume point. */
const ALLOWED_HEADERS = 'Authorization, If-None-Match, Last-Event-ID';
/**
 * What it may read beyond the safelisted headers: the Date (the feed's first cursor), validators,
 * rate limits, the request id, the export's cursor and the challenge of a 401.
 */
const EXPOSED_HEADERS = 'Date, ETag, RateLimit, RateLimit-Policy, Retry-After, X-Request-Id, X-Next-Since, X-Next-Id, WWW-Authenticate';
/** How long a browser may reuse a preflight's answer (Chromium caps it at 2 hours). */
export const PREFLIGHT_MAX_AGE_SECONDS = 600;

function allowOrigin(c: Context, origin: string): void {
  answerHeader(c, 'Access-Control-Allow-Origin', origin);
  answerHeader(c, 'Access-Control-Expose-Headers', EXPOSED_HEADERS);
}

/**
 * Answers preflights (OPTIONS with Access-Control-Request-Method) before any key is asked for,
 * names `Vary: Origin` on every answer, and allows the origin on an answer given before a key was
 * known (a 401) when some key allows it, so the page can read why it was refused.
 *
 * @example
 * app.use('/v1/*', browserPreflight(service.apiKeys));
 */
export function browserPreflight(apiKeys: Pick<ActiveApiKeys, 'allowsBrowserOrigin'>): MiddlewareHandler<PublicEnv> {
  return async (c, next) => {
    const origin = c.req.header('Origin');
    if (c.req.method === 'OPTIONS' && c.req.header('Access-Control-Request-Method') !== undefined) {
      const headers: Record<string, string> = { Vary: 'Origin' };
      if (origin !== undefined && (await apiKeys.allowsBrowserOrigin(origin))) {
        Object.assign(headers, {
          'Access-Control-Allow-Origin': origin,
          'Access-Control-Allow-Methods': 'GET, HEAD',
          'Access-Control-Allow-Headers': ALLOWED_HEADERS,
          'Access-Control-Max-Age': String(PREFLIGHT_MAX_AGE_SECONDS),
        });
      }
      return c.body(null, 204, headers);
    }
    answerHeader(c, 'Vary', 'Origin');
    await next();
    // An answer the key decided (keyAllowsOrigin), or one written to the connection already (its headers went with it).
    if (origin === undefined || c.get('allowedOrigins') !== undefined || answeredWith(c) !== undefined) return;
    if (await apiKeys.allowsBrowserOrigin(origin)) {
      c.res.headers.set('Access-Control-Allow-Origin', origin);
      c.res.headers.set('Access-Control-Expose-Headers', EXPOSED_HEADERS);
    }
  };
}

/**
 * Once the request's key is known (apiKeyAuth): every answer to it, whatever it is (a 403, a 429, a
 * stream, a long-poll written to the connection), lets the page read it when the key lists the page's origin.
 */
export function keyAllowsOrigin(c: Context, allowedOrigins: readonly string[]): void {
  c.set('allowedOrigins', allowedOrigins);
  const origin = c.req.header('Origin');
  if (origin !== undefined && allowedOrigins.includes(origin)) allowOrigin(c, origin);
}
