// An answer written straight to the connection, for the live feed's long-polls: one wake-up
// answers every client waiting on a store at once (changes/live.ts), a thousand on a busy
// process, and through the Response path each answer costs more than its bytes (a Response and
// its Headers, every middleware setting a header on it after the handler, the conversion back to
// Node's headers). Here the window is written to Node's ServerResponse with the same headers: the
// ones the middlewares know before the handler runs (request id, rate limit, Vary) are gathered as
// they go in (answerHeader), the Date is the answer's, and the body is coded once per window and
// coding, not once per client. The middlewares then see the request answered (answeredWith) and
// only observe it: the access log and the request metrics. test/changes/live.test.ts holds such an
// answer to a poll's headers, name for name.
import type { ServerResponse } from 'node:http';
import { RESPONSE_ALREADY_SENT } from '@hono/node-server/utils/response';
import type { Context, MiddlewareHandler } from 'hono';
import type { ContentCoding } from './compression.js';
import { closeNonReader, unsentRoom } from './unsent-bytes.js';

export type DirectAnswerEnv = { Variables: { answerHeaders?: Record<string, string>; answeredWith?: number } };

/**
 * A header every answer to this request carries, named once by a middleware before its handler
 * runs: a direct answer writes it (answerDirectly), and answerHeaders sets it on the Response of
 * any other answer, an error's included. `Vary` is appended to what the Response says, not replaced.
 */
export function answerHeader(c: Context, name: string, value: string): void {
  let headers = c.get('answerHeaders') as Record<string, string> | undefined;
  if (!headers) c.set('answerHeaders', (headers = {}));
  // Two middlewares may each vary the answer on a header of theirs (Accept-Encoding, Origin).
  headers[name] = name === 'Vary' && headers.Vary ? `${headers.Vary}, ${value}` : value;
}

/**
 * The one place the headers named by answerHeader reach an answer given as a Response (a direct
 * answer wrote them itself): mounted before the middlewares that name them, so it runs after them.
 */
export function answerHeaders(): MiddlewareHandler<DirectAnswerEnv> {
  return async (c, next) => {
    await next();
    const headers = c.get('answerHeaders');
    if (!headers || answeredWith(c) !== undefined) return;
    // Once: an app mounted inside another (operations-api.ts) has its own.
    c.set('answerHeaders', undefined);
    for (const [name, value] of Object.entries(headers)) {
      if (name === 'Vary') c.res.headers.append(name, value);
      else c.res.headers.set(name, value);
    }
  };
}

/** The status a direct answer sent, or undefined when the request is answered by its Response. */
export const answeredWith = (c: Context): number | undefined => c.get('answeredWith') as number | undefined;

export interface DirectBody {
  /** The JSON as it is. */
  json: string;
  /** The same JSON coded, made once for every client given the same body. */
  coded(coding: ContentCoding): Promise<Uint8Array>;
}

/**
 * Writes a 200 JSON answer on the request's own connection, or returns undefined when there is no
 * Node connection to write on (app.request() in tests): answer through the Response then.
 * The body is coded as the compression middleware negotiated, when it is at least `minBytes` long.
 */
export async function answerDirectly(
  c: Context,
  body: DirectBody,
  settings: { date: () => string; minBytes: number; unsentBytesMax?: number },
): Promise<Response | undefined> {
  const outgoing = (c.env as { outgoing?: ServerResponse } | undefined)?.outgoing;
  if (!outgoing || typeof outgoing.writeHead !== 'function') return undefined;
  const negotiated = c.get('contentCoding') as ContentCoding | undefined;
  const coding = negotiated && Buffer.byteLength(body.json) >= settings.minBytes ? negotiated : undefined;
  const bytes = coding ? await body.coded(coding) : body.json;
  const headers: Record<string, string | number> = {
    ...(c.get('answerHeaders') as Record<string, string> | undefined),
    'Content-Type': 'application/json',
    'Content-Length': typeof bytes === 'string' ? Buffer.byteLength(bytes) : bytes.byteLength,
    Date: settings.date(),
  };
  if (coding) headers['Content-Encoding'] = coding;
  c.set('answeredWith', 200);
  if (!outgoing.headersSent && !outgoing.destroyed) {
    // A client that has not taken what came before on this connection (pipelined answers) gets no more: it is closed.
    if (settings.unsentBytesMax !== undefined && !unsentRoom(outgoing, Number(headers['Content-Length']), settings.unsentBytesMax)) {
      closeNonReader(outgoing);
      return RESPONSE_ALREADY_SENT;
    }
    outgoing.writeHead(200, headers);
    outgoing.end(bytes);
  }
  return RESPONSE_ALREADY_SENT;
}
