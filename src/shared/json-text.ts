// JSON text is well-formed Unicode (RFC 8259 section 8.1, RFC 3629): a body or an
// import line whose bytes are not UTF-8 (FF FE, an encoded surrogate ED A0 80, a truncated
// sequence), or whose strings hold a lone surrogate escape ("\ud800"), is refused with the problem
// named, instead of being stored with U+FFFD or as a string no UTF-8 column can hold. Nor does
// text hold U+0000 (docs/decisions.md#text): PostgreSQL's text cannot
// store it, so it is refused wherever input is parsed, on either engine alike.

/** The reason given for a string that holds a lone surrogate. */
export const LONE_SURROGATE_REASON =
  'holds a lone UTF-16 surrogate (an unpaired \\ud800-\\udfff escape): strings must be well-formed Unicode';

/** The reason given for a string or member name that holds U+0000. */
export const NUL_REASON = 'holds U+0000 (NUL), which no text may hold';

/**
 * Why a JSON body starting with a byte order mark is refused: RFC 8259 section 8.1 says senders
 * MUST NOT add one and parsers MAY ignore it; the service takes one behaviour for every body.
 */
export const BOM_REASON = 'must not start with a byte order mark (EF BB BF, U+FEFF): send the JSON text without one (RFC 8259 section 8.1)';

/** True when bytes start with the UTF-8 byte order mark. */
export const startsWithBom = (bytes: Uint8Array): boolean => bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf;

/** True when a text holds U+0000. */
export const holdsNul = (text: string): boolean => text.includes('\u0000');

/** Thrown by decodeUtf8 for bytes that are not UTF-8; `reason` names the first bad sequence. */
export class InvalidUtf8Error extends Error {
  constructor(readonly reason: string) {
    super(reason);
  }
}

/**
 * The text of UTF-8 bytes, decoded strictly (a leading byte order mark is dropped, as the
 * WHATWG decoder does); throws InvalidUtf8Error naming the first invalid sequence and its offset.
 */
export function decodeUtf8(bytes: Uint8Array, { ignoreBOM = false } = {}): string {
  try {
    return new TextDecoder('utf-8', { fatal: true, ignoreBOM }).decode(bytes);
  } catch {
    throw new InvalidUtf8Error(invalidUtf8Reason(bytes));
  }
}

const hex = (bytes: Uint8Array) => [...bytes].map((b) => b.toString(16).toUpperCase().padStart(2, '0')).join(' ');

/** Why bytes are not UTF-8: the first ill-formed sequence (WHATWG UTF-8 decoder), with its offset. */
export function invalidUtf8Reason(bytes: Uint8Array): string {
  const bad = firstIllFormedSequence(bytes);
  if (!bad) return 'is not valid UTF-8';
  const sequence = bytes.subarray(bad.offset, bad.offset + bad.length);
  const what =
    bytes[bad.offset] === 0xed && (bytes[bad.offset + 1] ?? 0) >= 0xa0 && (bytes[bad.offset + 1] ?? 0) <= 0xbf
      ? 'an encoded UTF-16 surrogate'
      : bad.offset + bad.length >= bytes.length && bad.truncated
        ? 'a sequence cut off at the end'
        : 'an invalid byte sequence';
  return `is not valid UTF-8: ${what} (${hex(sequence)}) at byte ${bad.offset}`;
}

/** Where the first ill-formed sequence starts and how many bytes it spans (at most 4). */
function firstIllFormedSequence(bytes: Uint8Array): { offset: number; length: number; truncated: boolean } | null {
  for (let i = 0; i < bytes.length; ) {
    const lead = bytes[i]!;
    if (lead < 0x80) {
      i++;
      continue;
    }
    // Continuation bytes needed, and the range of the first one (no overlongs, no surrogates, <= U+10FFFF).
    let needed: number;
    let lower = 0x80;
    let upper = 0xbf;
    if (lead >= 0xc2 && lead <= 0xdf) needed = 1;
    else if (lead >= 0xe0 && lead <= 0xef) {
      needed = 2;
      if (lead === 0xe0) lower = 0xa0;
      if (lead === 0xed) upper = 0xbf; // surrogates are reported as such below: the whole sequence is shown
    } else if (lead >= 0xf0 && lead <= 0xf4) {
      needed = 3;
      if (lead === 0xf0) lower = 0x90;
      if (lead === 0xf4) upper = 0x8f;
    } else {
      return { offset: i, length: 1, truncated: false };
    }
    for (let k = 1; k <= needed; k++) {
      const b = bytes[i + k];
      if (b === undefined) return { offset: i, length: k, truncated: true };
      const [low, high] = k === 1 ? [lower, upper] : [0x80, 0xbf];
      if (b < low || b > high) return { offset: i, length: k + 1, truncated: false };
    }
    if (lead === 0xed && bytes[i + 1]! >= 0xa0) return { offset: i, length: 3, truncated: false };
    i += needed + 1;
  }
  return null;
}

/** A high surrogate without its low half, or a low one without its high half (UTF-16 code units). */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** True when a string is well-formed Unicode: every surrogate is half of a pair. */
export const isWellFormed = (text: string): boolean => !LONE_SURROGATE.test(text);

/** A JSON text that may hold a surrogate escape (`\ud8..`-`\udf..`): only these need the walk. */
const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/;

/** A JSON text that may hold a NUL escape (`\u0000`; a raw NUL is not JSON and fails to parse). */
const NUL_ESCAPE = /\\u0000/;

/**
 * False when no string parsed from a JSON text can be refused (no surrogate or NUL escape, no
 * lone surrogate): only the others need the walk of refusedString.
 */
export function mayHoldRefusedString(text: string): boolean {
  return SURROGATE_ESCAPE.test(text) || NUL_ESCAPE.test(text) || !isWellFormed(text);
}

/** Why a string is refused (a lone surrogate, a NUL), or null when it is acceptable text. */
export function refusedTextReason(text: string): string | null {
  if (!isWellFormed(text)) return LONE_SURROGATE_REASON;
  return holdsNul(text) ? NUL_REASON : null;
}

/**
 * The first member name or string value of a parsed JSON value that is refused (not well-formed
 * Unicode, or holding U+0000): its path and the reason, or null when every string is acceptable.
 */
export function refusedString(value: unknown, path: (string | number)[] = []): { path: (string | number)[]; reason: string } | null {
  if (typeof value === 'string') {
    const reason = refusedTextReason(value);
    return reason ? { path, reason } : null;
  }
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = refusedString(value[i], [...path, i]);
      if (found) return found;
    }
    return null;
  }
  if (value !== null && typeof value === 'object') {
    for (const [key, member] of Object.entries(value)) {
      const reason = refusedTextReason(key);
      if (reason) return { path: [...path, key], reason };
      const found = refusedString(member, [...path, key]);
      if (found) return found;
    }
  }
  return null;
}
