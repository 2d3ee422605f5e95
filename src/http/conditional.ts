// Conditional reads (RFC 9110 13.1.2): a strong ETag over the exact bytes of a JSON read, and 304
// Not Modified when the client's If-None-Match already names them.
import { createHash } from 'node:crypto';
import type { Context } from 'hono';
import type { ContentCoding } from './compression.js';

/** RFC 9110 If-None-Match: `*` or a list of entity tags, compared weakly. */
export function etagMatches(header: string | undefined, etag: string): boolean {
  if (!header) return false;
  if (header.trim() === '*') return true;
  const opaque = etag.replace(/^W\//, '');
  return header
    .split(',')
    .map((t) => t.trim().replace(/^W\//, ''))
    .includes(opaque);
}

/**
 * Strong validator of a JSON body: the SHA-256 (base64url) of what identifies its uncompressed
 * bytes (etagDigest), suffixed with the content coding it is sent in, since each coding is another
 * representation (RFC 9110 8.8.3). What identifies the bytes is the bytes themselves, or for a
 * product page the rows' stored hashes and the envelope, which change whenever the bytes do.
 */
export function jsonEtag(identity: Uint8Array, coding: ContentCoding | undefined): string {
  return etagOf(etagDigest(identity), coding);
}

/** The digest part of a JSON body's ETag: SHA-256 of what identifies its bytes, base64url. */
export function etagDigest(identity: Uint8Array): string {
  return createHash('sha256').update(identity).digest('base64url');
}

/** The ETag of a body whose etagDigest is known, in a content coding. */
export function etagOf(digest: string, coding: ContentCoding | undefined): string {
  return coding ? `"${digest}-${coding}"` : `"${digest}"`;
}

/**
 * A 200 JSON read with its ETag, or a bodiless 304 when If-None-Match matches it. `identity`
 * (by default the bytes) must change whenever the bytes do; or the etagDigest of it, when known.
 */
export function conditionalJson(c: Context, bytes: Uint8Array<ArrayBuffer>, identity: Uint8Array | { digest: string } = bytes): Response {
  const etag = etagOf('digest' in identity ? identity.digest : etagDigest(identity), c.get('contentCoding') as ContentCoding | undefined);
  if (etagMatches(c.req.header('If-None-Match'), etag)) return c.body(null, 304, { ETag: etag });
  return c.body(bytes, 200, { 'Content-Type': 'application/json', ETag: etag });
}
