// X-Request-Id on every response, and in the error log: a caller's own id is kept when it is sane,
// so one id follows a request through the caller's logs and ours; otherwise a random one.
import { randomUUID } from 'node:crypto';
import type { MiddlewareHandler } from 'hono';
import { answerHeader } from './direct-answer.js';

export type RequestIdEnv = { Variables: { requestId: string } };

/** Up to 128 characters that are safe in a log line and a header (no spaces, quotes or controls). */
export const SANE_REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/;

export function requestId(): MiddlewareHandler<RequestIdEnv> {
  return async (c, next) => {
    const incoming = c.req.header('X-Request-Id');
    const id = incoming !== undefined && SANE_REQUEST_ID.test(incoming) ? incoming : randomUUID();
    c.set('requestId', id);
    answerHeader(c, 'X-Request-Id', id);
    await next();
  };
}
