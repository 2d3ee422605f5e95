// One log line and one latency observation per request (operations.yaml): request id, method,
// route template, status, duration; the merchant when the request was authenticated. Never the
// query string's values or any header: keys and tokens travel in Authorization only, and that is
// not logged.
import type { Context, MiddlewareHandler } from 'hono';
import { matchedRoutes } from 'hono/route';
import type { Logger } from '../operations/log.js';
import { answeredWith } from './direct-answer.js';
import type { RequestIdEnv } from './request-id.js';

/** `log` is the service's logger; a line about the request carries `request_id` (see requestLog). */
export type LogEnv = { Variables: { requestId: string; log: Logger; merchantId?: number } };

/** A logger for lines about this request: the service's, bound to the request id (made on demand). */
export function requestLog(c: Context): Logger | undefined {
  const log = c.get('log') as Logger | undefined;
  return log?.child({ request_id: c.get('requestId') as string });
}

/** The route template that answered (`/v1/products/:id`), or "unmatched": bounded label values. */
export function routeOf(c: Context): string {
  const handler = matchedRoutes(c).findLast((route) => route.method !== 'ALL');
  return handler?.path ?? 'unmatched';
}

/** Probes and scrapes come every few seconds: their lines are debug, not info. */
const OPERATIONS_ROUTES = new Set(['/healthz', '/readyz', '/metrics']);

export interface RequestObserver {
  observeRequest(method: string, route: string, status: number, seconds: number): void;
}

export function accessLog(logger: Logger, observer: RequestObserver, logRequests: boolean): MiddlewareHandler<LogEnv & RequestIdEnv> {
  return async (c, next) => {
    const started = performance.now();
    c.set('log', logger);
    await next();
    const seconds = (performance.now() - started) / 1000;
    const route = routeOf(c);
    // A long-poll's window is written on its connection directly (direct-answer.ts): its Response is a marker.
    const status = answeredWith(c) ?? c.res.status;
    observer.observeRequest(c.req.method, route, status, seconds);
    if (!logRequests) return;
    const merchantId = c.get('merchantId');
    // No child logger per request: binding one costs more than the line itself.
    const level = status >= 500 ? 'error' : OPERATIONS_ROUTES.has(route) ? 'debug' : 'info';
    logger[level](
      {
        request_id: c.get('requestId'),
        method: c.req.method,
        route,
        path: c.req.path,
        status,
        duration_ms: Math.round(seconds * 10_000) / 10,
        ...(merchantId === undefined ? {} : { merchant_id: merchantId }),
      },
      'request',
    );
  };
}
