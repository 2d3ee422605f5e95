// gzip/brotli of JSON responses by Accept-Encoding: one-shot coding of the assembled body in
// libuv's threadpool (zlib's async gzip/brotliCompress), off the event loop, and the coded bytes of
// responses with a strong ETag kept in a CodedBodyCache, so the same page is coded once for every
// integrator that reads it. Clients that do not ask get the stored bytes untouched;
// small bodies and 304s are never coded; media never passes through here (its routes are not
// under this middleware).
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import type { MiddlewareHandler } from 'hono';
import type { CodedBodyCache } from './coded-body-cache.js';
import { answerHeader, answeredWith } from './direct-answer.js';

export type ContentCoding = 'br' | 'gzip';
export type CompressionEnv = { Variables: { contentCoding: ContentCoding | undefined } };

const gzip = promisify(zlib.gzip);
const brotli = promisify(zlib.brotliCompress);

// The levels with the least CPU per saved byte among those within 1.25x of the sizes of gzip 6 and
// brotli 4 (`npm run bench:coding`, docs/benchmarks/log.md): on a page of 200 products (155 KB)
// gzip 3 takes ~0.33 ms for 13.3 KB (gzip 6: ~0.69 ms, 11.2 KB) and brotli 3 ~0.42 ms for 12.2 KB
// (brotli 4: ~0.59 ms, 11.0 KB); gzip 2 and brotli 1-2 are cheaper but larger than the bound.
const GZIP_OPTIONS: zlib.ZlibOptions = { level: 3 };
const brotliOptions = (size: number): zlib.BrotliOptions => ({
  params: {
    [zlib.constants.BROTLI_PARAM_QUALITY]: 3,
    [zlib.constants.BROTLI_PARAM_MODE]: zlib.constants.BROTLI_MODE_TEXT,
    [zlib.constants.BROTLI_PARAM_SIZE_HINT]: size,
    // A window (2^16..2^22 bytes) no larger than needed for the body: less memory per response.
    [zlib.constants.BROTLI_PARAM_LGWIN]: Math.min(22, Math.max(16, Math.ceil(Math.log2(size)))),
  },
});

/** The body in `coding`, one shot, in the threadpool. */
export function codeBody(bytes: Uint8Array, coding: ContentCoding): Promise<Uint8Array<ArrayBuffer>> {
  return coding === 'br' ? brotli(bytes, brotliOptions(bytes.length)) : gzip(bytes, GZIP_OPTIONS);
}

const JSON_TYPE = /^application\/([a-z0-9.+-]+\+)?json\s*(;|$)/i;

/**
 * The coding to answer in (RFC 9110 12.5.3): the acceptable one with the higher q-value, br on a
 * tie; `*` stands for codings not listed; q=0 refuses. Undefined: send the body as it is.
 */
export function negotiateCoding(acceptEncoding: string | undefined): ContentCoding | undefined {
  if (!acceptEncoding) return undefined;
  const weights = new Map<string, number>();
  for (const part of acceptEncoding.split(',')) {
    const [name, ...params] = part.trim().toLowerCase().split(';');
    if (!name) continue;
    // A malformed weight (not 0..1 with up to three decimals) makes the entry unacceptable.
    const q = params
      .map((p) => p.trim())
      .find((p) => /^q\s*=/.test(p))
      ?.replace(/^q\s*=\s*/, '');
    const weight = q === undefined ? 1 : /^(0(\.[0-9]{0,3})?|1(\.0{0,3})?)$/.test(q) ? Number(q) : 0;
    weights.set(name.trim(), weight);
  }
  const weightOf = (coding: ContentCoding) => weights.get(coding) ?? weights.get('*') ?? 0;
  const [br, gz] = [weightOf('br'), weightOf('gzip')];
  if (br <= 0 && gz <= 0) return undefined;
  return br >= gz ? 'br' : 'gzip';
}

/**
 * Codes JSON bodies of at least minBytes in the negotiated coding; always adds Vary: Accept-Encoding.
 * With a cache, a 200 with a strong ETag is coded once per ETag and coding (the ETag already names
 * the coding: conditional.ts) and then answered from the cache.
 */
export function compression(minBytes: number, cache?: CodedBodyCache): MiddlewareHandler<CompressionEnv> {
  return async (c, next) => {
    const coding = negotiateCoding(c.req.header('Accept-Encoding'));
    // Read by the ETag of conditional reads: one validator per content coding (RFC 9110 8.8.3).
    c.set('contentCoding', coding);
    answerHeader(c, 'Vary', 'Accept-Encoding');
    await next();
    if (answeredWith(c) !== undefined) return;
    const res = c.res;
    if (!coding || !res.body || res.status === 304 || res.status === 204 || res.headers.has('Content-Encoding')) return;
    if (!JSON_TYPE.test(res.headers.get('Content-Type') ?? '')) return;
    const etag = res.status === 200 ? res.headers.get('ETag') : null;
    const cacheable = cache && etag && !etag.startsWith('W/') ? cache : undefined;
    let body = cacheable?.get(etag!, coding);
    let coded = true;
    if (body) {
      await res.body.cancel();
    } else {
      const bytes = new Uint8Array(await res.arrayBuffer());
      coded = bytes.length >= minBytes;
      body = coded ? await codeBody(bytes, coding) : bytes;
      if (coded) cacheable?.set(etag!, coding, body);
    }
    const headers = new Headers(res.headers);
    headers.delete('Content-Length');
    if (coded) headers.set('Content-Encoding', coding);
    // Unset first: Hono's res setter would otherwise copy the old headers over the new ones.
    c.res = undefined;
    c.res = new Response(body, { status: res.status, headers });
  };
}
