// A request that reaches a server already closing (shutdown, after CPS_SHUTDOWN_DELAY_MS): the
// listener no longer accepts connections, but a keep-alive connection that was busy when it
// stopped can still carry one. It is answered 503 `service_unavailable` with Retry-After and
// `Connection: close`, so the client retries on a new connection (another server, or this one
// restarted) instead of being served by a process that is going away. The probes and the metrics
// are answered as usual: the platform watches the shutdown through them.
//
// app.use('*', refuseWhenClosing(lifecycle));
import type { MiddlewareHandler } from 'hono';
import type { Lifecycle } from '../operations/health.js';
import { ProblemError } from '../shared/problem.js';

/** What a client refused by a closing server waits before it retries elsewhere. */
export const CLOSING_RETRY_AFTER_SECONDS = 1;

const OPERATIONS_PATHS = new Set(['/healthz', '/readyz', '/metrics']);

export function refuseWhenClosing(lifecycle: Lifecycle): MiddlewareHandler {
  return async (c, next) => {
    if (lifecycle.closing && !OPERATIONS_PATHS.has(c.req.path)) {
      throw new ProblemError('service_unavailable', 'This server is shutting down; retry on a new connection.', undefined, {
        'Retry-After': String(CLOSING_RETRY_AFTER_SECONDS),
        Connection: 'close',
      });
    }
    await next();
  };
}
