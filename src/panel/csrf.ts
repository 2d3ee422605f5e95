// CSRF protection for every state-changing panel request: a POST must come from this
// service's own origin (its Origin header, or its Referer when a browser sends no Origin), and,
// once signed in, carry the session's token in the hidden `_csrf` field. Refused requests get a
// plain 403 page and change nothing. Sign-in and accepting an invitation have no session yet:
// the origin check and the SameSite=Strict cookie cover them.
// The own origin is CPS_PUBLIC_BASE_URL's when it is set: the Host header is the
// client's to choose (a DNS-rebinding page sends its own), so it is trusted only when no public
// base URL is configured.
//
//   panel.use('*', csrf(config.publicBaseUrl, config.publicBaseUrlConfigured));   // after panelSession()
import { timingSafeEqual } from 'node:crypto';
import type { MiddlewareHandler } from 'hono';
import { field, formOf } from './form.js';
import type { PanelEnv } from './session.js';

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

function originOf(url: string | undefined): string | undefined {
  if (!url) return undefined;
  try {
    return new URL(url).origin;
  } catch {
    return undefined;
  }
}

function sameToken(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

const refusal = (reason: string) =>
  new Response(
    `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Request refused</title></head>` +
      `<body><h1>Request refused</h1><p>${reason}</p><p><a href="/panel">Back to the panel</a></p></body></html>`,
    { status: 403, headers: { 'Content-Type': 'text/html; charset=utf-8' } },
  );

export function csrf(publicBaseUrl: string, publicBaseUrlConfigured: boolean): MiddlewareHandler<PanelEnv> {
  const configured = new URL(publicBaseUrl).origin;
  return async (c, next) => {
    if (SAFE_METHODS.has(c.req.method)) return next();
    // The service's own origin: the configured public one; without one, also the one this request
    // was sent to (its Host: the default base URL names the bind address, not what browsers use).
    const own = new Set(publicBaseUrlConfigured ? [configured] : [configured, new URL(c.req.url).origin]);
    const origin = originOf(c.req.header('Origin') ?? c.req.header('Referer'));
    if (!origin || !own.has(origin)) return refusal('This form was not sent from this site.');
    const session = c.get('session');
    if (session) {
      const token = field(await formOf(c), '_csrf');
      if (!sameToken(token, session.csrfToken)) return refusal('This form has expired. Reload the page and try again.');
    }
    await next();
  };
}
