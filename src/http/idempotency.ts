// `Idempotency-Key` on the admin API's writes (POST, PUT, PATCH, DELETE; admin.yaml's IdempotencyKey
// parameter says what a client sees; the rules are admin/idempotency-keys.ts's). Registered per write
// operation after its body checks (src/generated/admin-route-facts.ts), before its handler:
//   app.on('POST', '/admin/v1/merchants/:merchant_id/webhook-endpoints', idempotency(keys, 'json'));
//
// A request's hash is SHA-256 over its method, path and query, and body; an import's streamed body
// is hashed as the import reads it. The answer is kept in the transaction of the request's last
// write, held open until the answer is known (IdempotencyKeys.run), so a process killed between the
// write's commit and its answer has kept the answer too: the retry replays it.
import { createHash, type Hash } from 'node:crypto';
import type { Context, MiddlewareHandler } from 'hono';
import { MAX_IDEMPOTENCY_KEY_LENGTH, keyReused, type IdempotencyKeys } from '../admin/idempotency-keys.js';
import type { IdempotentAnswer } from '../admin/model.js';
import { invalidInput } from '../shared/problem.js';
import type { AdminEnv } from './auth.js';

/**
 * Whose key it is: keys are per credential (the same key from two credentials is two keys): the
 * operator, or a merchant API key by its id (http/auth.ts puts the credential in `c.var.credential`).
 */
export const credentialOf = (c: Context<AdminEnv>): string => {
  const credential = c.var.credential;
  return credential?.kind === 'key' ? `key:${credential.id}` : credential?.kind === 'user' ? `user:${credential.userId}` : 'operator';
};

/** Headers that belong to one sending of an answer, not to the answer: never kept nor replayed. */
const NOT_REPLAYED = new Set(['date', 'x-request-id', 'content-length', 'connection', 'transfer-encoding', 'keep-alive', 'set-cookie']);

const requestHasher = (c: Context): Hash => {
  const url = new URL(c.req.url);
  return createHash('sha256').update(`${c.req.method}\n${url.pathname}${url.search}\n`);
};

/** The answer as it is kept and replayed (its body read from a copy: the original is sent). */
async function answerOf(response: Response): Promise<IdempotentAnswer> {
  const headers: [string, string][] = [];
  response.headers.forEach((value, name) => {
    if (!NOT_REPLAYED.has(name)) headers.push([name, value]);
  });
  return { status: response.status, headers, body: await response.clone().text() };
}

function replay(answer: IdempotentAnswer): Response {
  const headers = new Headers(answer.headers);
  headers.set('Idempotent-Replayed', 'true');
  return new Response(answer.status === 204 || answer.body === '' ? null : answer.body, { status: answer.status, headers });
}

/** Reads a request body to its end, into the hash. */
async function drain(body: ReadableStream<Uint8Array> | null, hash: Hash): Promise<void> {
  if (!body) return;
  for await (const chunk of body) hash.update(chunk);
}

/** @param body how the operation's request body is read: whole (json), as a stream (ndjson), or not at all. */
export function idempotency(keys: IdempotencyKeys, body: 'json' | 'ndjson' | 'none'): MiddlewareHandler<AdminEnv> {
  return async (c, next) => {
    const key = c.req.header('Idempotency-Key');
    if (key === undefined) return next();
    if (key.length === 0 || key.length > MAX_IDEMPOTENCY_KEY_LENGTH) {
      throw invalidInput('header', [
        { name: 'Idempotency-Key', in: 'header', reason: `must be 1 to ${MAX_IDEMPOTENCY_KEY_LENGTH} characters` },
      ]);
    }
    const credential = credentialOf(c);
    const hash = requestHasher(c);
    let requestHash: string | null = null;
    if (body === 'json') requestHash = hash.update(new Uint8Array(await c.req.arrayBuffer())).digest('hex');
    else if (body === 'none') requestHash = hash.digest('hex');

    const start = await keys.start(credential, key, requestHash);
    if (start.kind === 'replay') return replay(start.answer);
    if (start.kind === 'compare') {
      await drain(c.req.raw.body, hash);
      if (hash.digest('hex') !== start.requestHash) throw keyReused();
      return replay(start.answer);
    }
    // An import's body is hashed as it is read; its hash is known once it was read to the end.
    let streamed: (() => string | null) | undefined;
    if (body === 'ndjson' && c.req.raw.body) {
      let digest: string | null = null;
      const hashed = c.req.raw.body.pipeThrough(
        new TransformStream<Uint8Array, Uint8Array>({
          transform(chunk, controller) {
            hash.update(chunk);
            controller.enqueue(chunk);
          },
          flush() {
            digest = hash.digest('hex');
          },
        }),
      );
      c.req.raw = new Request(c.req.raw, { body: hashed, duplex: 'half' } as RequestInit);
      streamed = () => digest;
    } else if (body === 'ndjson') {
      requestHash = hash.digest('hex');
    }

    await keys.run(
      credential,
      key,
      start.owner,
      () => next(),
      async () => {
        const finalHash = streamed ? streamed() : requestHash;
        // 5xx: not kept, a retry does the work again; nor an import whose body was not read to its end (its request is unknown).
        if (c.res.status >= 500 || finalHash === null) return null;
        return { answer: await answerOf(c.res), requestHash: finalHash };
      },
    );
  };
}
