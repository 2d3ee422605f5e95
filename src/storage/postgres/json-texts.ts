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

// Array parameters written as PostgreSQL's array literal here: node-pg writes every element of an
// array parameter through two regular expressions and quotes it (a number too), ~0.2 µs an element,
// and an import's chunk sends tens of array elements per product. The statement reads the text as
// it reads node-pg's (`$n::bigint[]`): the same literal syntax, every element quoted but numbers.

/** An integer array parameter (bigint[], integer[]). */
export function integerArray(values: readonly number[]): string {
  return `{${values.join(',')}}`;
}

/** A boolean[] parameter. */
export function booleanArray(values: readonly boolean[]): string {
  let literal = '{';
  for (let i = 0; i < values.length; i++) literal += i === 0 ? (values[i] ? 't' : 'f') : values[i] ? ',t' : ',f';
  return `${literal}}`;
}

/** A text[] parameter: each element quoted (a backslash or double quote escaped), null as NULL. */
export function textArray(values: readonly (string | null)[]): string {
  let literal = '{';
  for (let i = 0; i < values.length; i++) {
    if (i > 0) literal += ',';
    const value = values[i];
    if (value === null || value === undefined) literal += 'NULL';
    else literal += `"${value.includes('\\') || value.includes('"') ? value.replace(/\\/g, '\\\\').replace(/"/g, '\\"') : value}"`;
  }
  return `${literal}}`;
}
