// Sparse fieldsets (`fields=`, openapi FieldsParam): stored Product payloads cut down to some of
// their top-level members, byte for byte as stored (no parse into objects, no re-serialisation):
// one pass over the JSON text that copies the wanted members' spans. A page's payloads are joined
// by commas, an export's are NDJSON lines; either way each is one whitespace-free JSON object, as
// resolveProduct wrote it.
import type { components } from '../generated/public-api.js';

export type ProductField = keyof components['schemas']['Product'];

/** Product's members in the schema's (and the stored payloads') order. */
export const PRODUCT_FIELDS: readonly ProductField[] = [
  'id',
  'sku',
  'ean',
  'title',
  'description',
  'manufacturer',
  'images',
  'store',
  'excluded',
  'exclusion_reason',
  'attributes',
  'prices',
  'stock',
];

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const COMMA = 0x2c;

/** A set of Product members to keep (`id` always), and its one spelling for cache keys and ETags. */
export class SparseFields {
  private readonly wanted: ReadonlySet<string>;
  /** The members kept, in schema order, comma-separated: equal for equal sets, however they were asked. */
  readonly key: string;

  private constructor(fields: ReadonlySet<string>) {
    this.wanted = fields;
    this.key = PRODUCT_FIELDS.filter((field) => fields.has(field)).join(',');
  }

  /** The fields asked for, or undefined when every member is kept (none asked, or all of them): the stored bytes as they are. */
  static of(requested: readonly ProductField[] | undefined): SparseFields | undefined {
    if (!requested) return undefined;
    const fields = new Set<string>(['id', ...requested]);
    return fields.size === PRODUCT_FIELDS.length ? undefined : new SparseFields(fields);
  }

  /**
   * The payloads in `bytes` (JSON objects, each followed by a separator or the end: commas or
   * newlines, as stored) with only the wanted members, in their stored order. In an export's lines,
   * the trailer (the one object with a `next_id`, which no product has) is kept whole.
   */
  project(bytes: Uint8Array): Uint8Array {
    const input = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const output = Buffer.allocUnsafe(input.length);
    let written = 0;
    for (let at = 0; at < input.length; ) {
      if (input[at] !== OPEN_BRACE) {
        // A separator between payloads (',' or '\n'), kept.
        output[written++] = input[at++]!;
        continue;
      }
      const objectStart = written;
      output[written++] = OPEN_BRACE;
      let first = true;
      let whole = false;
      let i = at + 1;
      while (input[i] !== CLOSE_BRACE) {
        const nameEnd = stringEnd(input, i);
        const valueStart = nameEnd + 1;
        const end = valueEnd(input, valueStart);
        const name = input.toString('latin1', i + 1, nameEnd - 1);
        if (name === 'next_id') whole = true;
        if (this.wanted.has(name)) {
          if (!first) output[written++] = COMMA;
          written += input.copy(output, written, i, end);
          first = false;
        }
        i = input[end] === COMMA ? end + 1 : end;
      }
      if (whole) written = objectStart + input.copy(output, objectStart, at, i + 1);
      else output[written++] = CLOSE_BRACE;
      at = i + 1;
    }
    return output.subarray(0, written);
  }
}

/** Just past the JSON string whose opening quote is at `at`. */
function stringEnd(input: Buffer, at: number): number {
  for (let from = at + 1; ; ) {
    const quote = input.indexOf(QUOTE, from);
    if (quote < 0) throw new Error('sparse fields: a stored payload ends inside a string');
    let backslashes = 0;
    while (input[quote - 1 - backslashes] === BACKSLASH) backslashes++;
    if (backslashes % 2 === 0) return quote + 1;
    from = quote + 1;
  }
}

/** Just past the JSON value that starts at `at` (no whitespace: payloads are stored compact). */
function valueEnd(input: Buffer, at: number): number {
  const first = input[at];
  if (first === QUOTE) return stringEnd(input, at);
  if (first === OPEN_BRACE || first === OPEN_BRACKET) {
    let depth = 0;
    for (let i = at; i < input.length; ) {
      const byte = input[i]!;
      if (byte === QUOTE) {
        i = stringEnd(input, i);
        continue;
      }
      if (byte === OPEN_BRACE || byte === OPEN_BRACKET) depth++;
      else if ((byte === CLOSE_BRACE || byte === CLOSE_BRACKET) && --depth === 0) return i + 1;
      i++;
    }
    throw new Error('sparse fields: a stored payload ends inside a value');
  }
  // A number, true, false or null: up to the member's end.
  let i = at;
  while (i < input.length && input[i] !== COMMA && input[i] !== CLOSE_BRACE) i++;
  return i;
}

/** Projections of bytes the read cache holds, kept as long as those bytes live (per set of fields). */
const projected = new WeakMap<Uint8Array, Map<string, Uint8Array>>();

/**
 * `fields.project(bytes)`, remembered with the bytes when `kept` (the read cache holds them: the same
 * object comes back while they are current), so a cached page is cut down once per set of fields.
 */
export function projectedPayloads(bytes: Uint8Array, fields: SparseFields, kept: boolean): Uint8Array {
  if (!kept) return fields.project(bytes);
  let byFields = projected.get(bytes);
  if (!byFields) projected.set(bytes, (byFields = new Map<string, Uint8Array>()));
  let result = byFields.get(fields.key);
  if (!result) byFields.set(fields.key, (result = fields.project(bytes)));
  return result;
}
