// The one way every generator follows `$ref`s in a bundled document (redocly bundles every file
// into `#/components/...`): a JSON pointer (RFC 6901), a `$ref` followed to what it names, and a
// schema with every `$ref` inlined. A `$ref` that leaves the document, points nowhere or comes back
// to itself fails generation loudly, naming it, rather than emitting a module that cannot compile.

export type Json = Record<string, any>;

/** The HTTP methods of a path item, in the order the generated modules list their operations. */
export const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'] as const;

/** The value a local JSON pointer (`#/a/b~1c`) names; `~1` is `/` and `~0` is `~` (RFC 6901). */
export function pointer(doc: Json, ref: string): unknown {
  if (!ref.startsWith('#/')) throw new Error(`unsupported $ref ${ref} (only local ones)`);
  const target = ref
    .slice(2)
    .split('/')
    .reduce<unknown>((node, segment) => {
      const key = decodeURIComponent(segment.replace(/~1/g, '/').replace(/~0/g, '~'));
      return typeof node === 'object' && node !== null && Object.hasOwn(node, key) ? (node as Json)[key] : undefined;
    }, doc);
  if (target === undefined) throw new Error(`$ref ${ref} points nowhere`);
  return target;
}

/** The object a value stands for: itself, or what its `$ref` (and the `$ref`s that one holds) name. */
export function deref(doc: Json, value: Json): Json {
  const seen: string[] = [];
  let node = value;
  while (typeof node.$ref === 'string') {
    if (seen.includes(node.$ref)) throw new Error(`$ref cycle: ${[...seen, node.$ref].join(' -> ')}`);
    seen.push(node.$ref);
    const target = pointer(doc, node.$ref);
    if (typeof target !== 'object' || target === null) throw new Error(`$ref ${node.$ref} names no object`);
    node = target;
  }
  return node;
}

/**
 * The name of the component a `$ref` names (`#/components/schemas/Product` -> `Product`): it must
 * be one of `kind` and exist.
 */
export function componentName(doc: Json, ref: string, kind: string): string {
  const prefix = `#/components/${kind}/`;
  if (!ref.startsWith(prefix) || ref.slice(prefix.length).includes('/')) throw new Error(`unsupported $ref ${ref} (expected ${prefix}...)`);
  pointer(doc, ref);
  return ref.slice(prefix.length);
}

/** Keywords whose values are instances (data), not schemas: a `$ref` inside one is not followed. */
const INSTANCE_KEYWORDS = new Set(['examples', 'example', 'const', 'enum', 'default']);
/** Keywords whose values map names to schemas: a member named `default` there is a property, not a keyword. */
const SCHEMA_MAPS = new Set(['properties', 'patternProperties', '$defs', 'dependentSchemas']);

/** Every `$ref` a schema holds (instance keywords excepted), in document order, each once. */
export function refsIn(schema: unknown): string[] {
  const refs = new Set<string>();
  const visit = (node: unknown, isMap: boolean): void => {
    if (Array.isArray(node)) return node.forEach((item) => visit(item, false));
    if (typeof node !== 'object' || node === null) return;
    for (const [key, value] of Object.entries(node)) {
      if (isMap) visit(value, false);
      else if (key === '$ref' && typeof value === 'string') refs.add(value);
      else if (!INSTANCE_KEYWORDS.has(key)) visit(value, SCHEMA_MAPS.has(key));
    }
  };
  visit(schema, false);
  return [...refs];
}

/**
 * The schema with every `$ref` replaced by a copy of its target. A schema that refers to itself,
 * directly or through others, cannot be inlined: that is an error naming the cycle.
 */
export function inline(doc: Json, schema: unknown): unknown {
  const visit = (node: unknown, within: readonly string[], isMap: boolean): unknown => {
    if (Array.isArray(node)) return node.map((item) => visit(item, within, false));
    if (typeof node !== 'object' || node === null) return node;
    const object = node as Json;
    if (!isMap && typeof object.$ref === 'string') {
      if (within.includes(object.$ref)) throw new Error(`$ref cycle: ${[...within, object.$ref].join(' -> ')} cannot be inlined`);
      return visit(pointer(doc, object.$ref), [...within, object.$ref], false);
    }
    return Object.fromEntries(
      Object.entries(object).map(([key, value]) => [
        key,
        isMap ? visit(value, within, false) : INSTANCE_KEYWORDS.has(key) ? value : visit(value, within, SCHEMA_MAPS.has(key)),
      ]),
    );
  };
  return visit(schema, [], false);
}

/** One operation of `paths:`, with its path item (whose `parameters` apply to it too). */
export interface Operation {
  path: string;
  method: (typeof HTTP_METHODS)[number];
  operation: Json;
  pathItem: Json;
}

/** Every operation of the document's `paths:`, path by path (methods in HTTP_METHODS order), each path item dereferenced. */
export function operations(doc: Json): Operation[] {
  return Object.entries((doc.paths ?? {}) as Record<string, Json>).flatMap(([path, value]) => {
    const pathItem = deref(doc, value);
    return HTTP_METHODS.filter((method) => pathItem[method]).map((method) => ({
      path,
      method,
      operation: pathItem[method] as Json,
      pathItem,
    }));
  });
}
