// JSON texts (payloads, sources) sent to PostgreSQL as one text parameter, the texts joined by the
// ASCII record separator, split by the statement (`string_to_array($n, chr(30))`): JSON text never
// holds a raw control character (JSON.stringify writes every one as an escape), so no text needs
// escaping on either side. A text[] parameter has node-pg escape every quote and backslash of
// every element (two regular expressions over each 1 KB text, ~4 µs a row on the serve) and
// PostgreSQL unescape them again.
const SEPARATOR = '\u001e';

/** The statement's side: `texts` split back into a text[] (the parameter being `$n`). */
export const splitJsonTexts = (parameter: string) => `string_to_array(${parameter}::text, chr(30))`;

/** The parameter's side: the JSON texts joined (each must be JSON text, as JSON.stringify writes it). */
export function joinJsonTexts(texts: readonly string[]): string {
  for (const text of texts) {
    if (text.includes(SEPARATOR)) throw new TypeError('joinJsonTexts: a text holds a raw control character (not JSON text)');
  }
  return texts.join(SEPARATOR);
}
