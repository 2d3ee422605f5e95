// The app-wide error handler: a ProblemError is rendered as it is; anything else is logged and
// answered with a generic 500 problem that reveals nothing internal.
import type { Context } from 'hono';
import { HTTPException } from 'hono/http-exception';
import { createLogger, type Logger } from '../operations/log.js';
import { requestLog } from './access-log.js';
import { ProblemError, invalidInput, problemResponse } from './problem.js';

/** For an app assembled without the access log (which gives each request its own logger). */
const fallbackLogger = createLogger({ logLevel: 'error' });

export function renderError(error: Error, c: Context): Response {
  const instance = new URL(c.req.url).pathname;
  if (error instanceof ProblemError) return problemResponse(error, instance);
  if (error instanceof HTTPException && error.status === 413) {
    return problemResponse(new ProblemError('payload_too_large', 'The request body is too large.'), instance);
  }
  if (error instanceof HTTPException && error.status < 500) {
    // Thrown by the body validators (unparsable JSON, a media type other than JSON): the whole body is named.
    const reason = error.status === 415 ? 'must be sent as Content-Type: application/json'
      : /malformed json/i.test(error.message) ? 'is not valid JSON' : error.message || 'is malformed';
    return problemResponse(invalidInput('body', [{ name: '/', in: 'body', reason }]), instance);
  }
  // The request's logger carries its id, which is in the response too: a caller's report leads here.
  const log: Logger = requestLog(c) ?? fallbackLogger;
  log.error({ err: error, method: c.req.method, path: instance }, 'unhandled error');
  return problemResponse(new ProblemError('internal_error', 'An unexpected error occurred.'), instance);
}

export function notFound(c: Context): Response {
  return problemResponse(new ProblemError('not_found', `No route for ${c.req.method} ${new URL(c.req.url).pathname}.`), new URL(c.req.url).pathname);
}
