// Text from outside that is stored as it came (a receiver's answer in the attempt log): valid text
// on both engines, whatever it holds. PostgreSQL's text refuses U+0000 ("invalid byte
// sequence for encoding UTF8: 0x00") and UTF-8 has no lone surrogates: both become U+FFFD, as bytes
// that are not UTF-8 already do when decoded.

/** U+0000, or a UTF-16 surrogate that is not half of a pair. */
// eslint-disable-next-line no-control-regex -- U+0000 is what PostgreSQL's text refuses: matching it is the point
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/** The text with U+0000 and lone surrogates replaced by U+FFFD (same length in UTF-16 code units). */
export function validText(text: string): string {
  return text.replace(UNSTORABLE, '\uFFFD');
}

/** UTF-8 bytes as valid text: invalid sequences (WHATWG decoder) and U+0000 become U+FFFD. */
export function validTextOfBytes(bytes: Uint8Array): string {
  return validText(new TextDecoder('utf-8', { ignoreBOM: true }).decode(bytes));
}
