// JSON assembled from bytes that are already JSON (the stored product payloads, spec 4.1-4.3),
// typed by what they encode: the compiler checks that each spliced part is the schema type of the
// field it goes into, so a page built here is a page of the document's shape.

declare const encodes: unique symbol;

/** UTF-8 JSON text of one T. */
export type JsonBytes<T> = Uint8Array<ArrayBuffer> & { readonly [encodes]: T };

/** UTF-8 JSON texts of some T joined by commas: the inside of a JSON array of T (empty for none). */
export class JsonItems<T> {
  declare protected readonly item: T;
  constructor(readonly bytes: Uint8Array) {}
}

/** A field of an assembled object: its value, bytes encoding its value, or (an array) bytes of its items. */
export type JsonPart<V> = V | JsonBytes<V> | (V extends readonly (infer E)[] ? JsonItems<E> : never);

/** The fields of a T, in the order they are written. */
export type JsonParts<T> = { [K in keyof T]: JsonPart<T[K]> };

const encoder = new TextEncoder();
const text = (s: string) => encoder.encode(s);

/** Bytes known to be JSON of a T: what the caller read was written as a T. */
export function jsonBytesOf<T>(bytes: Uint8Array): JsonBytes<T> {
  return bytes as Uint8Array<ArrayBuffer> as JsonBytes<T>;
}

/**
 * JSON of a T from its fields in order: values are stringified, byte parts are copied as they
 * are (JsonItems wrapped in brackets), fields left undefined are omitted as JSON.stringify does.
 * One copy of the stored bytes, however many parts.
 */
export function jsonObject<T extends object>(parts: JsonParts<T>): JsonBytes<T> {
  const chunks: Uint8Array[] = [];
  let open = '{';
  for (const [key, value] of Object.entries<unknown>(parts)) {
    if (value === undefined) continue;
    const head = `${open}${JSON.stringify(key)}:`;
    open = ',';
    if (value instanceof JsonItems) chunks.push(text(`${head}[`), value.bytes, text(']'));
    else if (value instanceof Uint8Array) chunks.push(text(head), value);
    else chunks.push(text(head + JSON.stringify(value)));
  }
  chunks.push(text(open === '{' ? '{}' : '}'));
  return Buffer.concat(chunks) as Uint8Array<ArrayBuffer> as JsonBytes<T>;
}
