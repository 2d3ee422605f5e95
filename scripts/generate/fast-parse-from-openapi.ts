// Turns named component schemas of a bundled OpenAPI document into plain parsers that give what
// the generated zod schema (zod-from-openapi.ts) gives for a value it surely accepts (the same
// members, defaults filled in, objects' members in the schema's order) and `undefined` for any
// other value: the caller then asks zod, whose issues are the errors the API documents. They
// cover the keywords zod-from-openapi emits for these schemas, each checked as that schema
// checks it; anything else fails generation loudly, and whatever they cannot be sure of (a URL
// that zod would trim, a `__proto__` member) they leave to zod. test/fast-parse.test.ts holds
// them to zod's answers.
import { componentName, type Json } from './openapi-refs.js';
import { ANNOTATION_KEYWORDS, excludedStrings, mergeAllOf, types, VALIDATION_KEYWORDS } from './zod-from-openapi.js';

const literal = (v: unknown) => JSON.stringify(v);

/** Keywords that never change what a value is valid against, or that zod-from-openapi ignores as zod does. */
const ANNOTATIONS = new Set(ANNOTATION_KEYWORDS);
const HANDLED = new Set([...VALIDATION_KEYWORDS, 'not', 'exclusiveMinimum', 'uniqueItems', 'propertyNames', 'maxProperties', 'default']);

class FastParseEmitter {
  private counter = 0;
  /** Module-level constants: patterns, known member names, allowed values. */
  readonly constants: string[] = [];
  /** The component schemas a parser is emitted for, in the order they are needed. */
  private readonly pending: string[] = [];
  private readonly emitted = new Set<string>();
  readonly functions: string[] = [];

  constructor(private readonly doc: Json) {}

  private readonly named = new Map<string, string>();

  /** A module-level constant of this source (one for each source). */
  private constant(prefix: string, source: string): string {
    let name = this.named.get(source);
    if (name === undefined) {
      name = `${prefix}_${this.constants.length}`;
      this.constants.push(`const ${name} = ${source};`);
      this.named.set(source, name);
    }
    return name;
  }

  private fresh(prefix: string): string {
    return `${prefix}${this.counter++}`;
  }

  /** The parser function of a component schema (emitted once). */
  parserOf(name: string): string {
    if (!this.emitted.has(name)) {
      this.emitted.add(name);
      this.pending.push(name);
    }
    return `parse${name}`;
  }

  /** Emits every parser asked for, and those they call. */
  flush(): void {
    while (this.pending.length > 0) {
      const name = this.pending.shift()!;
      const body = this.value(this.doc.components.schemas[name], 'value', 'out', '  ');
      this.functions.push(`function parse${name}(value: unknown): unknown {`, '  let out: unknown;', ...body, '  return out;', '}', '');
    }
  }

  /**
   * Statements that check the value in `v` and assign what zod gives for it to `out`, or return
   * undefined from the enclosing parser.
   */
  value(schema: Json, expression: string, out: string, indent: string): string[] {
    // An item or a member is read once, into a variable its checks narrow.
    if (!/^\w+$/.test(expression)) {
      const x = this.fresh('x');
      return [`${indent}const ${x} = ${expression};`, ...this.value(schema, x, out, indent)];
    }
    const v = expression;
    if (schema.$ref) {
      const name = componentName(this.doc, schema.$ref, 'schemas');
      const r = this.fresh('r');
      return [
        `${indent}const ${r} = ${this.parserOf(name)}(${v});`,
        `${indent}if (${r} === undefined) return undefined;`,
        `${indent}${out} = ${r};`,
      ];
    }
    if (schema.allOf) return this.value(mergeAllOf(this.doc, schema), v, out, indent);
    for (const key of Object.keys(schema)) {
      if (!ANNOTATIONS.has(key) && !HANDLED.has(key)) throw new Error(`fast parse: unsupported keyword ${key}`);
    }
    const { types: kinds, nullable } = types(schema);
    const lines: string[] = [];
    const inner = nullable ? `${indent}  ` : indent;
    if (schema.const !== undefined) {
      if (typeof schema.const === 'object' && schema.const !== null)
        throw new Error('fast parse: unsupported const (only primitive values)');
      lines.push(`${inner}if (${v} !== ${literal(schema.const)}) return undefined;`, `${inner}${out} = ${v};`);
    } else if (schema.enum) {
      const values = (schema.enum as unknown[]).filter((e) => e !== null);
      if (!values.every((e) => typeof e === 'string' || typeof e === 'number' || typeof e === 'boolean'))
        throw new Error('fast parse: unsupported enum (only primitive values)');
      const allowed = this.constant('ALLOWED', `new Set<unknown>(${literal(values)})`);
      lines.push(`${inner}if (!${allowed}.has(${v})) return undefined;`, `${inner}${out} = ${v};`);
    } else if (kinds.length !== 1) {
      throw new Error(`fast parse: a schema needs exactly one non-null type, got ${literal(schema.type)}`);
    } else {
      lines.push(...this.typed(kinds[0]!, schema, v, out, inner));
    }
    if (!nullable) return lines;
    return [`${indent}if (${v} === null) ${out} = null;`, `${indent}else {`, ...lines, `${indent}}`];
  }

  private typed(kind: string, schema: Json, v: string, out: string, indent: string): string[] {
    switch (kind) {
      case 'string':
        return this.string(schema, v, out, indent);
      case 'integer':
      case 'number': {
        // zod's number is finite; an integer beyond the safe range is left to zod.
        const conditions = [kind === 'integer' ? `Number.isSafeInteger(${v})` : `typeof ${v} === 'number' && Number.isFinite(${v})`];
        if (schema.minimum !== undefined) conditions.push(`(${v} as number) >= ${schema.minimum}`);
        if (schema.maximum !== undefined) conditions.push(`(${v} as number) <= ${schema.maximum}`);
        if (schema.exclusiveMinimum !== undefined) conditions.push(`(${v} as number) > ${schema.exclusiveMinimum}`);
        return [`${indent}if (!(${conditions.join(' && ')})) return undefined;`, `${indent}${out} = ${v};`];
      }
      case 'boolean':
        return [`${indent}if (typeof ${v} !== 'boolean') return undefined;`, `${indent}${out} = ${v};`];
      case 'array':
        return this.array(schema, v, out, indent);
      case 'object':
        return this.object(schema, v, out, indent);
      default:
        throw new Error(`fast parse: unsupported type ${kind}`);
    }
  }

  /** As value() for a string; only the checks when `out` is undefined (a map's key). */
  private string(schema: Json, v: string, out: string | undefined, indent: string): string[] {
    const s = this.fresh('s');
    const lines = [`${indent}if (typeof ${v} !== 'string') return undefined;`, `${indent}const ${s}: string = ${v};`];
    if (schema.format === 'uri') {
      // zod's url() gives the text trimmed, without tabs and line breaks, once URL.canParse takes
      // it: a text without white space (what trim() and those drop) is given as it is.
      const space = this.constant('WHITE_SPACE', '/\\s/');
      lines.push(`${indent}if (${space}.test(${s}) || !URL.canParse(${s})) return undefined;`);
    } else if (schema.format !== undefined) {
      throw new Error(`fast parse: unsupported format ${schema.format}`);
    }
    if (schema.minLength !== undefined)
      lines.push(`${indent}if (!(${s}.length >= ${2 * schema.minLength} || [...${s}].length >= ${schema.minLength})) return undefined;`);
    if (schema.maxLength !== undefined)
      lines.push(`${indent}if (!(${s}.length <= ${schema.maxLength} || [...${s}].length <= ${schema.maxLength})) return undefined;`);
    if (schema.pattern !== undefined) {
      const pattern = this.constant('PATTERN', `new RegExp(${literal(schema.pattern)})`);
      lines.push(`${indent}if (!${pattern}.test(${s})) return undefined;`);
    }
    if ('not' in schema) {
      const excluded = excludedStrings(schema);
      if (!excluded) throw new Error('fast parse: unsupported not (only `not: {const}` or `not: {enum}` of strings)');
      lines.push(`${indent}if (${literal(excluded)}.includes(${s})) return undefined;`);
    }
    if (out !== undefined) lines.push(`${indent}${out} = ${s};`);
    return lines;
  }

  private array(schema: Json, v: string, out: string, indent: string): string[] {
    const a = this.fresh('a');
    const items = this.fresh('items');
    const i = this.fresh('i');
    const item = this.fresh('item');
    const lines = [`${indent}if (!Array.isArray(${v})) return undefined;`, `${indent}const ${a}: unknown[] = ${v};`];
    if (schema.minItems !== undefined) lines.push(`${indent}if (${a}.length < ${schema.minItems}) return undefined;`);
    if (schema.maxItems !== undefined) lines.push(`${indent}if (${a}.length > ${schema.maxItems}) return undefined;`);
    if (schema.uniqueItems === true)
      lines.push(`${indent}if (new Set(${a}.map((x) => JSON.stringify(x))).size !== ${a}.length) return undefined;`);
    lines.push(
      `${indent}const ${items}: unknown[] = [];`,
      `${indent}for (let ${i} = 0; ${i} < ${a}.length; ${i}++) {`,
      `${indent}  let ${item}: unknown;`,
      ...this.value(schema.items ?? {}, `${a}[${i}]`, item, `${indent}  `),
      `${indent}  ${items}.push(${item});`,
      `${indent}}`,
      `${indent}${out} = ${items};`,
    );
    return lines;
  }

  private object(schema: Json, v: string, out: string, indent: string): string[] {
    const properties: Json = schema.properties ?? {};
    const required = new Set<string>(schema.required ?? []);
    const additional = schema.additionalProperties;
    const o = this.fresh('o');
    const result = this.fresh('result');
    const key = this.fresh('key');
    const lines = [
      `${indent}if (typeof ${v} !== 'object' || ${v} === null || Array.isArray(${v})) return undefined;`,
      `${indent}const ${o} = ${v} as Record<string, unknown>;`,
      `${indent}const ${result}: Record<string, unknown> = {};`,
    ];
    if (Object.keys(properties).length === 0 && additional && typeof additional === 'object') {
      // A map with free keys (zod-from-openapi's freeKeys): a member named __proto__ is left to zod.
      const k = this.fresh('k');
      const member = this.fresh('member');
      lines.push(`${indent}if (Object.hasOwn(${o}, '__proto__')) return undefined;`);
      if (schema.maxProperties !== undefined)
        lines.push(`${indent}if (Object.keys(${o}).length > ${schema.maxProperties}) return undefined;`);
      lines.push(
        `${indent}for (const ${k} of Object.keys(${o})) {`,
        ...this.string({ type: 'string', ...schema.propertyNames }, k, undefined, `${indent}  `),
        `${indent}  let ${member}: unknown;`,
        ...this.value(additional, `${o}[${k}]`, member, `${indent}  `),
        `${indent}  ${result}[${k}] = ${member};`,
        `${indent}}`,
        `${indent}${out} = ${result};`,
      );
      return lines;
    }
    if (additional !== false) throw new Error('fast parse: unsupported object (only closed objects and maps with free keys)');
    const known = this.constant('MEMBERS', `new Set(${literal(Object.keys(properties))})`);
    lines.push(`${indent}for (const ${key} in ${o}) if (!${known}.has(${key})) return undefined;`);
    for (const [name, property] of Object.entries(properties) as [string, Json][]) {
      const p = this.fresh('p');
      const member = this.fresh('member');
      const access = `${o}[${literal(name)}]`;
      // Absent: refused when required, else its default, else left out (as zod's optional()).
      const absent = required.has(name)
        ? [`${indent}if (${p} === undefined) return undefined;`, `${indent}{`]
        : property.default !== undefined
          ? [`${indent}if (${p} === undefined) ${result}[${literal(name)}] = ${literal(property.default)};`, `${indent}else {`]
          : [`${indent}if (${p} !== undefined) {`];
      lines.push(
        `${indent}const ${p} = ${access};`,
        ...absent,
        `${indent}  let ${member}: unknown;`,
        ...this.value(property, p, member, `${indent}  `),
        `${indent}  ${result}[${literal(name)}] = ${member};`,
        `${indent}}`,
      );
    }
    lines.push(`${indent}${out} = ${result};`);
    return lines;
  }
}

/**
 * The module of fast parsers for the component schemas `names` of a bundled document: for each,
 * `fastParse<Name>(value)`, typed as the zod schema's output (zod-from-openapi's module `routes`).
 */
export function emitFastParseModule(doc: Json, names: string[], options: { source: string; routes: string }): string {
  const emitter = new FastParseEmitter(doc);
  for (const name of names) {
    if (!doc.components?.schemas?.[name]) throw new Error(`fast parse: no component schema ${name}`);
    emitter.parserOf(name);
  }
  emitter.flush();
  const exported = names.flatMap((name) => [
    `/** What ${name}Schema gives for a value it surely accepts; undefined for any other (ask ${name}Schema then). */`,
    `export function fastParse${name}(value: unknown): z.output<typeof ${name}Schema> | undefined {`,
    `  return parse${name}(value) as z.output<typeof ${name}Schema> | undefined;`,
    '}',
    '',
  ]);
  return [
    `// Generated by scripts/generate/generate.ts from ${options.source}: do not edit. Run \`npm run generate\`.`,
    '// Fast parsers (scripts/generate/fast-parse-from-openapi.ts): what the zod schema gives for a value it surely',
    '// accepts, or undefined (the zod schema then says why).',
    "import type { z } from '@hono/zod-openapi';",
    `import type { ${names.map((name) => `${name}Schema`).join(', ')} } from './${options.routes}.js';`,
    '',
    ...emitter.constants,
    '',
    ...emitter.functions,
    ...exported,
  ].join('\n');
}
