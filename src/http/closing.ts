// A request to the public API that reaches a server already closing (shutdown, after
// CPS_SHUTDOWN_DELAY_MS): the listener no longer accepts connections, but a keep-alive connection
// that was busy when it stopped can still carry one. It is answered 503 `service_unavailable` with
// Retry-After and `Connection: close`, so the client retries on a new connection (another server,
// or this one restarted) instead of being served by a process that is going away. The public
// document declares this 503 on every operation (openapi/components/responses/ServerUnavailable.yaml).
//
// app.use('/v1/*', refuseWhenClosing(lifecycle));
import type { MiddlewareHandler } from 'hono';
import type { Lifecycle } from '../operations/health.js';
import { ProblemError } from '../shared/problem.js';

/** What a client refused by a closing server waits before it retries elsewhere. */
export const CLOSING_RETRY_AFTER_SECONDS = 1;

export function refuseWhenClosing(lifecycle: Lifecycle): MiddlewareHandler {
  return async (c, next) => {
    if (lifecycle.closing) {
      throw new ProblemError('service_unavailable', 'This server is shutting down; retry on a new connection.', undefined, {
        'Retry-After': String(CLOSING_RETRY_AFTER_SECONDS),
        Connection: 'close',
      });
    }
    await next();
  };
}
