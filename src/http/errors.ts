// The one problem+json renderer (RFC 9457) and the app-wide error handler: a ProblemError
// (src/shared/problem.ts) is rendered as it is; anything else is logged and answered with a
// generic 500 problem that reveals nothing internal; a request its client abandoned is a client abort
// (499, client-abort.ts), never a server error. Every error response of the APIs goes through here.
import type { Context } from 'hono';
import { HTTPException } from 'hono/http-exception';
import { createLogger, type Logger } from '../operations/log.js';
import { ProblemError, invalidInput, type Problem, type ProblemCode } from '../shared/problem.js';
import { requestLog } from './access-log.js';
import { CLIENT_CLOSED_REQUEST, clientClosedRequest } from './client-abort.js';

const TITLES: Record<ProblemCode, string> = {
  unauthorized: 'Unauthorized',
  forbidden: 'Forbidden',
  insufficient_scope: 'Insufficient scope',
  not_found: 'Not found',
  store_not_found: 'Store not found',
  invalid_parameter: 'Invalid parameter',
  invalid_body: 'Invalid request body',
  conflict: 'Conflict',
  idempotency_key_in_use: 'Idempotency key in use',
  idempotency_key_reused: 'Idempotency key reused',
  cursor_expired: 'Cursor expired',
  payload_too_large: 'Payload too large',
  unsupported_media_type: 'Unsupported media type',
  rate_limited: 'Too many requests',
  service_unavailable: 'Service unavailable',
  internal_error: 'Internal server error',
};

/** The problem+json body of an error; `instance` is the request path. */
export function toProblem(error: ProblemError, instance?: string): Problem {
  return {
    type: `urn:problem:catalog:${error.code}`,
    title: TITLES[error.code],
    status: error.status,
    detail: error.detail,
    code: error.code,
    ...(error.invalidParams?.length ? { invalid_params: error.invalidParams } : {}),
    ...(instance ? { instance } : {}),
  };
}

export function problemResponse(error: ProblemError, instance?: string): Response {
  return new Response(JSON.stringify(toProblem(error, instance)), {
    status: error.status,
    headers: { 'Content-Type': 'application/problem+json', ...error.headers },
  });
}

/** For an app assembled without the access log (which gives each request its own logger). */
const fallbackLogger = createLogger({ logLevel: 'error' });

export function renderError(error: Error, c: Context): Response {
  const instance = new URL(c.req.url).pathname;
  if (clientClosedRequest(c, error)) {
    requestLog(c)?.info(
      { method: c.req.method, path: instance, reason: error.message },
      'client closed the request before it was answered',
    );
    return new Response(null, { status: CLIENT_CLOSED_REQUEST });
  }
  if (error instanceof ProblemError) return problemResponse(error, instance);
  if (error instanceof HTTPException && error.status === 413) {
    return problemResponse(new ProblemError('payload_too_large', 'The request body is too large.'), instance);
  }
  if (error instanceof HTTPException && error.status < 500) {
    // Thrown by the body validators (unparsable JSON, a media type other than JSON): the whole body is named.
    const reason =
      error.status === 415
        ? 'must be sent as Content-Type: application/json'
        : /malformed json/i.test(error.message)
          ? 'is not valid JSON'
          : error.message || 'is malformed';
    return problemResponse(invalidInput('body', [{ name: '/', in: 'body', reason }]), instance);
  }
  // The request's logger carries its id, which is in the response too: a caller's report leads here.
  const log: Logger = requestLog(c) ?? fallbackLogger;
  log.error({ err: error, method: c.req.method, path: instance }, 'unhandled error');
  return problemResponse(new ProblemError('internal_error', 'An unexpected error occurred.'), instance);
}

export function notFound(c: Context): Response {
  return problemResponse(
    new ProblemError('not_found', `No route for ${c.req.method} ${new URL(c.req.url).pathname}.`),
    new URL(c.req.url).pathname,
  );
}
