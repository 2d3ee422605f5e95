// A client that closes its connection before its request is answered (typically an abandoned
// upload: half a body, then the socket closed) is a client abort, not a server error. Whatever the
// handler threw on the truncated body (a read error, "malformed JSON"), the request is counted with
// status 499 (nginx's "client closed request") in the access log and /metrics and logged at info;
// nobody is there to read the answer. See renderError (errors.ts).
import type { IncomingMessage } from 'node:http';
import type { Context } from 'hono';
import { isClientAbort } from '../shared/client-abort.js';

/** The status a request its client abandoned is counted with (never sent: the connection is gone). */
export const CLIENT_CLOSED_REQUEST = 499;

/** True when the request's client has gone: its connection closed before the request was answered. */
export function clientClosedRequest(c: Context, error?: unknown): boolean {
  if (isClientAbort(error)) return true;
  const incoming = (c.env as { incoming?: IncomingMessage } | undefined)?.incoming;
  // An unfinished request destroyed by its socket closing (node:http's abortIncoming).
  return incoming !== undefined && incoming.destroyed && !incoming.complete;
}
