// Security headers on every panel response (docs/panel.md#accounts-sessions-and-safety): a CSP that allows
// no inline script or style and no framing (with X-Frame-Options: DENY for browsers that ignore
// frame-ancestors), nosniff, and no referrer leaving the site.
//
//   panel.use('*', securityHeaders());
import type { MiddlewareHandler } from 'hono';

/** Scripts and styles come from /panel/assets only; forms post only to this origin. */
export const PANEL_CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'";

export function securityHeaders(): MiddlewareHandler {
  return async (c, next) => {
    await next();
    c.res.headers.set('Content-Security-Policy', PANEL_CSP);
    c.res.headers.set('X-Frame-Options', 'DENY');
    c.res.headers.set('X-Content-Type-Options', 'nosniff');
    c.res.headers.set('Referrer-Policy', 'same-origin');
    // Pages show tenants' data and secrets shown once: no cache may keep them.
    if (!c.res.headers.has('Cache-Control')) c.res.headers.set('Cache-Control', 'no-store');
  };
}
