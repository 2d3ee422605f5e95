// A form's bytes are UTF-8 (the panel's pages declare it, and browsers send it): a field whose
// name or text, percent-decoded, is not (`%FF`, an encoded surrogate `%ED%A0%80`, a cut-off
// sequence) is refused as the admin API refuses such a JSON body (shared/json-text.ts), where a
// form parser would silently store U+FFFD in its place. Checked on the raw body, before parsing.
import { InvalidUtf8Error, decodeUtf8 } from '../shared/json-text.js';
import type { InvalidParam } from '../shared/problem.js';

const lossy = new TextDecoder('utf-8');

/** The first field of the body whose name or text is not UTF-8, or undefined when all are. */
export function fieldNotUtf8(body: Uint8Array, contentType: string): InvalidParam | undefined {
  const mediaType = contentType.split(';')[0]!.trim().toLowerCase();
  if (mediaType === 'application/x-www-form-urlencoded') return urlEncodedFieldNotUtf8(body);
  if (mediaType === 'multipart/form-data') return multipartFieldNotUtf8(body, contentType);
  return undefined;
}

/** Why the bytes are not UTF-8, or undefined when they are. */
function notUtf8(bytes: Uint8Array): string | undefined {
  try {
    decodeUtf8(bytes, { ignoreBOM: true });
    return undefined;
  } catch (error) {
    if (error instanceof InvalidUtf8Error) return error.reason;
    throw error;
  }
}

/** An urlencoded name or value as bytes (WHATWG URL "percent-decode": a `%` without two hex digits stays). */
function percentDecoded(part: Uint8Array): Uint8Array {
  const out = new Uint8Array(part.length);
  let n = 0;
  for (let i = 0; i < part.length; i++) {
    const hex = part[i] === 0x25 && i + 2 < part.length ? String.fromCharCode(part[i + 1]!, part[i + 2]!) : '';
    if (/^[0-9A-Fa-f]{2}$/.test(hex)) {
      out[n++] = parseInt(hex, 16);
      i += 2;
    } else out[n++] = part[i]!;
  }
  return out.subarray(0, n);
}

function urlEncodedFieldNotUtf8(body: Uint8Array): InvalidParam | undefined {
  let start = 0;
  while (start <= body.length) {
    let end = body.indexOf(0x26, start); // '&'
    if (end < 0) end = body.length;
    const pair = body.subarray(start, end);
    const equals = pair.indexOf(0x3d); // '='
    const name = percentDecoded(equals < 0 ? pair : pair.subarray(0, equals));
    const value = percentDecoded(equals < 0 ? new Uint8Array() : pair.subarray(equals + 1));
    const refused = refusedField(name, value);
    if (refused) return refused;
    start = end + 1;
  }
  return undefined;
}

/** Each part's headers, and the text of every part that is not a file, must be UTF-8. */
function multipartFieldNotUtf8(body: Uint8Array, contentType: string): InvalidParam | undefined {
  const boundary = /;\s*boundary="?([^";]+)"?/i.exec(contentType)?.[1];
  if (!boundary) return undefined;
  const buffer = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  const delimiter = Buffer.from(`--${boundary}`);
  let at = buffer.indexOf(delimiter);
  while (at >= 0) {
    const headStart = at + delimiter.length + 2; // the CRLF after the delimiter
    const next = buffer.indexOf(delimiter, headStart);
    if (next < 0) break;
    const headEnd = buffer.indexOf('\r\n\r\n', headStart);
    if (headEnd < 0 || headEnd > next) break;
    const head = buffer.subarray(headStart, headEnd);
    const headRefused = notUtf8(head);
    const name = /name="([^"]*)"/i.exec(lossy.decode(head))?.[1] ?? '';
    if (headRefused) return { name, in: 'body', reason: `(its name or file name) ${headRefused}` };
    const isFile = /;\s*filename\*?=/i.test(head.toString('latin1'));
    const contentRefused = isFile ? undefined : notUtf8(buffer.subarray(headEnd + 4, Math.max(headEnd + 4, next - 2)));
    if (contentRefused) return { name, in: 'body', reason: contentRefused };
    at = next;
  }
  return undefined;
}

function refusedField(name: Uint8Array, value: Uint8Array): InvalidParam | undefined {
  const shownName = lossy.decode(name);
  const nameRefused = notUtf8(name);
  if (nameRefused) return { name: shownName, in: 'body', reason: `(a field name) ${nameRefused}` };
  const valueRefused = notUtf8(value);
  return valueRefused ? { name: shownName, in: 'body', reason: valueRefused } : undefined;
}
