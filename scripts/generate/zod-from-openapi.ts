// Turns a bundled OpenAPI 3.1 document into the zod schemas and `createRoute` definitions that
// @hono/zod-openapi needs, as TypeScript source. It covers the JSON Schema subset our documents
// use (see docs/architecture.md#schema-first); anything else fails generation loudly rather than silently.

import { fullFormats } from 'ajv-formats/dist/formats.js';
import { componentName, deref, operations, refsIn, type Json } from './openapi-refs.js';

// The formats as JSON Schema validators read them (ajv-formats, what the contract tests and
// integrators use), so the server's zod schemas accept exactly the same strings.
const EMAIL = fullFormats.email as RegExp;

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

/**
 * Keywords that only annotate: they never change what a value is valid against (`default` is not
 * among them: zod and the fast parsers fill it in; Ajv, as the webhook validators do, ignores it).
 */
export const ANNOTATION_KEYWORDS: readonly string[] = [
  'description',
  'examples',
  'example',
  'title',
  'deprecated',
  'readOnly',
  'writeOnly',
  '$comment',
];

/** The validation keywords that every generator here checks as JSON Schema does (each may add its own). */
export const VALIDATION_KEYWORDS: readonly string[] = [
  '$ref',
  'allOf',
  'type',
  'const',
  'enum',
  'format',
  'pattern',
  'minLength',
  'maxLength',
  'minimum',
  'maximum',
  'minItems',
  'maxItems',
  'items',
  'required',
  'properties',
  'additionalProperties',
];

export interface EmitOptions {
  /** Written in the header, e.g. "openapi/openapi.yaml". */
  source: string;
}

const literal = (v: unknown) => JSON.stringify(v);
const propertyKey = (k: string) => (IDENTIFIER.test(k) ? k : literal(k));
const schemaConst = (name: string) => `${name}Schema`;

function regex(pattern: string): string {
  return `new RegExp(${literal(pattern)})`;
}

/** Merges allOf members (after resolving $refs) into one object schema. */
export function mergeAllOf(doc: Json, schema: Json): Json {
  const merged: Json = { type: 'object', properties: {}, required: [] };
  for (const member of schema.allOf as Json[]) {
    const part = deref(doc, member);
    const flat = part.allOf ? mergeAllOf(doc, part) : part;
    Object.assign(merged.properties, flat.properties ?? {});
    merged.required = [...new Set([...merged.required, ...(flat.required ?? [])])];
    if (flat.additionalProperties !== undefined) merged.additionalProperties = flat.additionalProperties;
  }
  const { allOf: _allOf, ...rest } = schema;
  return { ...rest, ...merged };
}

/** A schema's non-null types, and whether it allows null. */
export function types(schema: Json): { types: string[]; nullable: boolean } {
  const list: string[] = Array.isArray(schema.type) ? schema.type : schema.type ? [schema.type] : [];
  const nullable = list.includes('null') || (Array.isArray(schema.enum) && schema.enum.includes(null));
  return { types: list.filter((t) => t !== 'null'), nullable };
}

/** zod source for a JSON Schema describing a JSON value (bodies and responses). */
export function zodForSchema(doc: Json, schema: Json): string {
  if (schema.$ref) return schemaConst(componentName(doc, schema.$ref, 'schemas'));
  if (schema.allOf) return zodForSchema(doc, mergeAllOf(doc, schema));
  if (schema.oneOf) return zodForOneOf(doc, schema);
  for (const unsupported of ['anyOf', 'if', 'discriminator', 'nullable']) {
    if (unsupported in schema) throw new Error(`unsupported keyword ${unsupported}`);
  }
  if ('not' in schema && !(schema.type === 'string' && excludedStrings(schema))) {
    throw new Error('unsupported keyword not (only `not: {const}` or `not: {enum}` of strings on a string)');
  }
  const { types: kinds, nullable } = types(schema);
  let out: string;
  if (schema.const !== undefined) {
    out = `z.literal(${literal(schema.const)})`;
  } else if (schema.enum) {
    const values = (schema.enum as unknown[]).filter((v) => v !== null);
    out = values.every((v) => typeof v === 'string')
      ? `z.enum(${literal(values)})`
      : `z.union([${values.map((v) => `z.literal(${literal(v)})`).join(', ')}])`;
  } else if (kinds.length !== 1) {
    throw new Error(`a schema needs exactly one non-null type, got ${literal(schema.type)}`);
  } else {
    out = zodForType(doc, kinds[0]!, schema);
  }
  if (nullable) out += '.nullable()';
  return out;
}

/**
 * `oneOf` of named schemas only (an export line: a Product or the trailer), as a union of their
 * consts. The members must exclude each other (closed objects whose required members differ), as
 * `oneOf` means; a union accepts the first that matches.
 */
function zodForOneOf(doc: Json, schema: Json): string {
  const members = schema.oneOf as Json[];
  const { oneOf: _oneOf, description: _description, ...rest } = schema;
  if (
    Object.keys(rest).length > 0 ||
    members.length < 2 ||
    !members.every((member) => typeof member.$ref === 'string' && Object.keys(member).length === 1)
  ) {
    throw new Error('unsupported oneOf: only a list of $refs to component schemas, with nothing beside it but a description');
  }
  return `z.union([${members.map((member) => schemaConst(componentName(doc, member.$ref, 'schemas'))).join(', ')}])`;
}

function zodForType(doc: Json, kind: string, schema: Json): string {
  switch (kind) {
    case 'string': {
      let out = 'z.string()';
      if (schema.format === 'date-time') out = 'z.iso.datetime({ offset: true })';
      else if (schema.format === 'email') out = `z.email({ pattern: new RegExp(${literal(EMAIL.source)}, ${literal(EMAIL.flags)}) })`;
      else if (schema.format === 'uri') out = 'z.url()';
      // JSON Schema counts a string's length in characters (code points), not UTF-16 units. A string
      // has at least half as many code points as UTF-16 units and at most as many: the code points
      // are counted (an array of them built) only when the units alone do not decide.
      if (schema.minLength !== undefined)
        out += `.refine((s) => s.length >= ${2 * schema.minLength} || [...s].length >= ${schema.minLength}, { error: 'must be at least ${schema.minLength} characters' })`;
      if (schema.maxLength !== undefined)
        out += `.refine((s) => s.length <= ${schema.maxLength} || [...s].length <= ${schema.maxLength}, { error: 'must be at most ${schema.maxLength} characters' })`;
      if (schema.pattern) out += `.regex(${regex(schema.pattern)})`;
      const excluded = excludedStrings(schema);
      if (excluded)
        out += `.refine((v) => !${literal(excluded)}.includes(v), { error: ${literal(`must not be ${excluded.join(' or ')}`)} })`;
      return out;
    }
    case 'integer':
    case 'number': {
      let out = kind === 'integer' ? 'z.number().int()' : 'z.number()';
      if (schema.minimum !== undefined) out += `.min(${schema.minimum})`;
      if (schema.maximum !== undefined) out += `.max(${schema.maximum})`;
      if (schema.exclusiveMinimum !== undefined) out += `.gt(${schema.exclusiveMinimum})`;
      return out;
    }
    case 'boolean':
      return 'z.boolean()';
    case 'array': {
      let out = `z.array(${zodForSchema(doc, schema.items ?? {})})`;
      if (schema.minItems !== undefined) out += `.min(${schema.minItems})`;
      if (schema.maxItems !== undefined) out += `.max(${schema.maxItems})`;
      // JSON Schema's uniqueItems, for items compared as JSON (the schemas that ask it list strings).
      if (schema.uniqueItems === true)
        out += `.refine((items) => !Array.isArray(items) || new Set(items.map((item) => JSON.stringify(item))).size === items.length, { error: 'must NOT have duplicate items' })`;
      return out;
    }
    case 'object':
      return zodForObject(doc, schema);
    default:
      throw new Error(`unsupported type ${kind}`);
  }
}

/** The strings a `not: {const}` or `not: {enum}` excludes, or undefined without such a `not`. */
export function excludedStrings(schema: Json): string[] | undefined {
  const not = schema.not as Json | undefined;
  if (!not) return undefined;
  const values = 'const' in not ? [not.const] : Array.isArray(not.enum) ? not.enum : undefined;
  if (!values || Object.keys(not).length !== 1 || !values.every((v: unknown) => typeof v === 'string')) return undefined;
  return values;
}

/** Whether a free key (`propertyNames`) may be `__proto__`: its pattern matches and no `not` excludes it. */
function allowsProtoKey(propertyNames: Json | undefined): boolean {
  if (!propertyNames) return true;
  if (propertyNames.pattern && !new RegExp(propertyNames.pattern).test('__proto__')) return false;
  if (excludedStrings(propertyNames)?.includes('__proto__')) return false;
  return propertyNames.maxLength === undefined || propertyNames.maxLength >= '__proto__'.length;
}

function zodForObject(doc: Json, schema: Json): string {
  const properties: Json = schema.properties ?? {};
  const required = new Set<string>(schema.required ?? []);
  const additional = schema.additionalProperties;
  if (Object.keys(properties).length === 0 && additional && typeof additional === 'object') {
    // zod's record skips a member named __proto__ unchecked (assigning it would replace the
    // prototype): accepted there it would vanish silently, so the documents must refuse it, and
    // freeKeys() checks it against the key schema as if it were any other key.
    if (allowsProtoKey(schema.propertyNames)) {
      throw new Error(
        'a map whose propertyNames allow "__proto__" would drop that key: refuse it (`not: {const: __proto__}` or a pattern)',
      );
    }
    const keySchema = zodForSchema(doc, { type: 'string', ...schema.propertyNames });
    let out = `freeKeys(${keySchema}, ${zodForSchema(doc, additional)})`;
    if (schema.maxProperties !== undefined)
      out += `.refine((o) => Object.keys(o).length <= ${schema.maxProperties}, { error: 'too many properties (at most ${schema.maxProperties})' })`;
    return out;
  }
  const fields = Object.entries(properties).map(([key, value]) => {
    let field = zodForSchema(doc, value as Json);
    if (!required.has(key))
      field += (value as Json).default !== undefined ? `.default(${literal((value as Json).default)})` : '.optional()';
    return `${propertyKey(key)}: ${field}`;
  });
  const body = `{ ${fields.join(', ')} }`;
  if (additional === false) return `z.strictObject(${body})`;
  if (additional && typeof additional === 'object') return `z.object(${body}).catchall(${zodForSchema(doc, additional)})`;
  return `z.looseObject(${body})`;
}

/** The arguments of numberParameter and listParameter for a number schema: shape, kind, bounds and the too-large message. */
function numberArguments(kind: string, schema: Json): string {
  const shape = kind === 'integer' ? 'INTEGER_TEXT' : 'NUMBER_TEXT';
  const maximum = schema.maximum !== undefined ? String(schema.maximum) : 'Number.MAX_SAFE_INTEGER';
  const tooLarge = schema.maximum !== undefined ? `must be at most ${schema.maximum}` : 'is too large';
  return `${shape}, '${kind === 'integer' ? 'an integer' : 'a number'}', ${schema.minimum ?? 'undefined'}, ${maximum}, '${tooLarge}'`;
}

/** zod source for a parameter, which arrives as text and is converted to its schema's type. */
export function zodForParameter(doc: Json, parameter: Json): string {
  const schema = deref(doc, parameter.schema ?? {});
  const { types: kinds } = types(schema);
  const kind = kinds[0] ?? 'string';
  let out: string;
  const itemKind = kind === 'array' ? types(schema.items ?? {}).types[0] : undefined;
  if (kind === 'integer' || kind === 'number') {
    // One transform per value (numberParameter), not a regex check, a transform and a number
    // schema piped: cheaper per value, which counts for lists.
    out = `numberParameter(${numberArguments(kind, schema)})`;
  } else if (itemKind === 'integer' || itemKind === 'number') {
    // A list of numbers in one transform (listParameter): an `ids` list of 200 is parsed in a few
    // µs instead of ~45 µs through zod's array of piped items, with the same issues.
    out = `listParameter(${numberArguments(itemKind, schema.items)}, ${schema.minItems ?? 0}, ${schema.maxItems ?? 'Infinity'})`;
  } else if (kind === 'boolean') {
    out = `z.enum(['true', 'false']).transform((v) => v === 'true')`;
  } else if (kind === 'array') {
    const item = zodForParameter(doc, { schema: schema.items ?? {}, required: true });
    let list = `z.array(${item})`;
    if (schema.minItems !== undefined) list += `.min(${schema.minItems}, { error: 'must list at least ${schema.minItems}' })`;
    if (schema.maxItems !== undefined) list += `.max(${schema.maxItems}, { error: 'must list at most ${schema.maxItems}' })`;
    out = `z.string().transform((v) => v.split(',')).pipe(${list})`;
  } else if (kind === 'string' && Array.isArray(schema.enum) && schema.enum.every((v: unknown) => typeof v === 'string')) {
    // The 400 names the value refused (`fields` lists names a client chose), not only the options.
    const expected = `is not one of ${schema.enum.join(', ')}`;
    out = `z.enum(${literal(schema.enum)}, { error: (issue) => \`"\${String(issue.input)}" ${expected}\` })`;
  } else if (kind === 'string') {
    out = zodForSchema(doc, { ...schema, type: 'string' });
    if (schema.pattern)
      out = out.replace(
        `.regex(${regex(schema.pattern)})`,
        `.regex(${regex(schema.pattern)}, { error: ${literal(`must match ${schema.pattern}`)} })`,
      );
  } else {
    throw new Error(`unsupported parameter type ${kind} for ${parameter.name}`);
  }
  if (schema.default !== undefined) out += `.default(${literal(schema.default)})`;
  else if (!parameter.required) out += '.optional()';
  return out;
}

function componentOrder(doc: Json): string[] {
  const schemas: Json = doc.components?.schemas ?? {};
  const order: string[] = [];
  const state = new Map<string, 'visiting' | 'done'>();
  const visit = (name: string) => {
    if (state.get(name) === 'done') return;
    if (state.get(name) === 'visiting') throw new Error(`schema cycle through ${name} is not supported`);
    state.set(name, 'visiting');
    for (const ref of refsIn(schemas[name])) visit(componentName(doc, ref, 'schemas'));
    state.set(name, 'done');
    order.push(name);
  };
  Object.keys(schemas).sort().forEach(visit);
  return order;
}

function emitRoute(doc: Json, path: string, method: string, operation: Json, pathItem: Json): string {
  const parameters = [...(pathItem.parameters ?? []), ...(operation.parameters ?? [])].map((p: Json) => deref(doc, p));
  const request: string[] = [];
  for (const location of ['path', 'query', 'header']) {
    const own = parameters.filter((p) => p.in === location);
    if (own.length === 0) continue;
    const fields = own.map((p) => `${propertyKey(location === 'header' ? p.name.toLowerCase() : p.name)}: ${zodForParameter(doc, p)}`);
    request.push(`${location === 'path' ? 'params' : location === 'query' ? 'query' : 'headers'}: z.object({ ${fields.join(', ')} })`);
  }
  if (operation.requestBody) {
    const body = deref(doc, operation.requestBody);
    const content = Object.entries(body.content as Json).map(
      ([type, media]) =>
        `${literal(type)}: { schema: ${type.includes('json') ? zodForSchema(doc, (media as Json).schema) : 'z.string()'} }`,
    );
    request.push(`body: { required: ${Boolean(body.required)}, content: { ${content.join(', ')} } }`);
  }
  const responses = Object.entries(operation.responses as Json).map(([status, value]) => {
    const response = deref(doc, value as Json);
    const content = response.content
      ? `, content: { ${Object.entries(response.content as Json)
          .map(([type, media]) => `${literal(type)}: { schema: ${zodForSchema(doc, (media as Json).schema ?? {})} }`)
          .join(', ')} }`
      : '';
    return `${/^[0-9]+$/.test(status) ? status : literal(status)}: { description: ${literal(response.description ?? '')}${content} }`;
  });
  return [
    `export const ${operation.operationId}Route = createRoute({`,
    `  operationId: ${literal(operation.operationId)},`,
    `  method: ${literal(method)},`,
    `  path: ${literal(path)},`,
    request.length ? `  request: { ${request.join(', ')} },` : '',
    `  responses: { ${responses.join(', ')} },`,
    '});',
  ]
    .filter(Boolean)
    .join('\n');
}

/**
 * An object with free keys (`propertyNames` + `additionalProperties`), emitted into every module.
 * A JSON member named `__proto__` is an own property of the parsed body, but zod's record skips
 * it without checking (assigning it to a plain object would set the prototype), so it would be
 * dropped silently; here it is run through the key schema, which the documents make refuse it.
 */
const FREE_KEYS_HELPER = [
  '/** A map with free keys: a member named `__proto__` is checked by the key schema (which refuses it), never dropped. */',
  'function freeKeys<K extends z.ZodType<string>, V extends z.ZodType>(keys: K, values: V) {',
  '  return z.preprocess((input, ctx) => {',
  "    if (input !== null && typeof input === 'object' && Object.hasOwn(input, '__proto__')) {",
  "      const key = keys.safeParse('__proto__');",
  "      const message = key.success ? 'is not allowed as a key' : key.error.issues.map((issue) => issue.message).join('; ');",
  "      ctx.addIssue({ code: 'custom', path: ['__proto__'], input, message });",
  '    }',
  '    return input;',
  '  }, z.record(keys, values));',
  '}',
];

/**
 * A number parameter, emitted into modules that have one: the text of a whole number (or a
 * decimal), then its bounds, each failure one issue with the same message zod's own checks give.
 */
const NUMBER_PARAMETER_HELPER = [
  'const INTEGER_TEXT = /^-?[0-9]{1,16}$/;',
  'const NUMBER_TEXT = /^-?[0-9]{1,16}(\\.[0-9]+)?$/;',
  "/** Why a number parameter's text is not acceptable: its shape, then minimum and maximum; undefined when it is. */",
  'function numberProblem(text: string, shape: RegExp, kind: string, minimum: number | undefined, maximum: number, tooLarge: string): string | undefined {',
  '  if (!shape.test(text)) return `must be ${kind}`;',
  '  const value = Number(text);',
  '  if (minimum !== undefined && value < minimum) return `must be at least ${minimum}`;',
  '  return value > maximum ? tooLarge : undefined;',
  '}',
  "/** A parameter's text as a number. */",
  'function numberParameter(shape: RegExp, kind: string, minimum: number | undefined, maximum: number, tooLarge: string) {',
  '  return z.string().transform((text, ctx) => {',
  '    const message = numberProblem(text, shape, kind, minimum, maximum, tooLarge);',
  '    if (message === undefined) return Number(text);',
  "    ctx.issues.push({ code: 'custom', message, input: text });",
  '    return z.NEVER;',
  '  });',
  '}',
  '/**',
  " * A comma-separated list of numbers, with the issues zod's array of piped items gives: too many",
  ' * items alone, else each bad item (its index in the path), then too few items.',
  ' */',
  'function listParameter(shape: RegExp, kind: string, minimum: number | undefined, maximum: number, tooLarge: string, minItems: number, maxItems: number) {',
  '  return z.string().transform((text, ctx) => {',
  "    const items = text.split(',');",
  '    if (items.length > maxItems) {',
  "      ctx.issues.push({ code: 'custom', message: `must list at most ${maxItems}`, input: text });",
  '      return z.NEVER;',
  '    }',
  '    const values: number[] = [];',
  '    for (let index = 0; index < items.length; index++) {',
  '      const message = numberProblem(items[index]!, shape, kind, minimum, maximum, tooLarge);',
  '      if (message === undefined) values.push(Number(items[index]));',
  "      else ctx.issues.push({ code: 'custom', message, input: items[index], path: [index] });",
  '    }',
  "    if (items.length < minItems) ctx.issues.push({ code: 'custom', message: `must list at least ${minItems}`, input: text });",
  '    return ctx.issues.length > 0 ? z.NEVER : values;',
  '  });',
  '}',
];

/** The whole generated module for one bundled document. */
export function emitZodModule(doc: Json, options: EmitOptions): string {
  const lines = [
    `// Generated by scripts/generate/generate.ts from ${options.source}: do not edit. Run \`npm run generate\`.`,
    "import { createRoute, z } from '@hono/zod-openapi';",
    '',
  ];
  for (const name of componentOrder(doc)) {
    lines.push(`export const ${schemaConst(name)} = ${zodForSchema(doc, doc.components.schemas[name])};`);
  }
  lines.push('');
  const operationIds: string[] = [];
  for (const { path, method, operation, pathItem } of operations(doc)) {
    lines.push(emitRoute(doc, path, method, operation, pathItem), '');
    operationIds.push(operation.operationId);
  }
  lines.push(`/** Every operation of ${options.source}, by operationId. */`);
  lines.push(`export const routes = { ${operationIds.map((id) => `${id}: ${id}Route`).join(', ')} } as const;`, '');
  if (lines.some((line) => line.includes('freeKeys('))) lines.splice(3, 0, ...FREE_KEYS_HELPER, '');
  if (lines.some((line) => /numberParameter\(|listParameter\(/.test(line))) lines.splice(3, 0, ...NUMBER_PARAMETER_HELPER, '');
  return lines.join('\n');
}
