// The app-wide error handler: a ProblemError is rendered as it is; anything else is logged and
// answered with a generic 500 problem that reveals nothing internal.
import type { Context } from 'hono';
import { HTTPException } from 'hono/http-exception';
import { ProblemError, invalidInput, problemResponse } from './problem.js';

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
  // The request id is in the response too, so a caller's report leads to this line.
  console.error(`unhandled error on ${c.req.method} ${instance} (request id ${c.get('requestId') ?? 'none'}):`, error);
  return problemResponse(new ProblemError('internal_error', 'An unexpected error occurred.'), instance);
}

export function notFound(c: Context): Response {
  return problemResponse(new ProblemError('not_found', `No route for ${c.req.method} ${new URL(c.req.url).pathname}.`), new URL(c.req.url).pathname);
}
