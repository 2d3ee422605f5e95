// JSON Merge Patch (RFC 7396): the document a patch makes of a target. Objects merge member by
// member, `null` removes a member, and anything else (arrays included) replaces what was there.

/** A JSON value as JSON.parse gives it. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [member: string]: JsonValue };

const isObject = (value: unknown): value is Record<string, JsonValue> =>
  value !== null && typeof value === 'object' && !Array.isArray(value);

/**
 * RFC 7396 section 2, MergePatch(Target, Patch). Neither argument is changed.
 *
 * @example
 * applyMergePatch({ a: 1, b: { c: 2, d: 3 } }, { b: { c: null }, e: [1] }); // { a: 1, b: { d: 3 }, e: [1] }
 */
export function applyMergePatch(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return patch;
  // Members are set with defineProperty: a member named `__proto__` stays a member (for the schema to refuse).
  const result: Record<string, unknown> = {};
  const define = (key: string, value: unknown) =>
    Object.defineProperty(result, key, { value, enumerable: true, writable: true, configurable: true });
  if (isObject(target)) for (const [key, value] of Object.entries(target)) define(key, value);
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete result[key];
    else define(key, applyMergePatch(Object.hasOwn(result, key) ? result[key] : undefined, value));
  }
  return result;
}
