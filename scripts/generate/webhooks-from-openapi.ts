// Turns the `webhooks:` section of the bundled public document into a registry (event names,
// header names and patterns, the payload schema and a validator per event) as standalone
// TypeScript: no imports at run time, so the client package ships it without Ajv. The validator
// covers the JSON Schema subset the payloads use, with Ajv's semantics (ajv-formats' full
// `date-time`); any other keyword fails generation loudly rather than being skipped silently.
// test/webhooks/registry.test.ts shows it accepts and rejects what Ajv over the document does.
// Also emits the documents' limits (maxItems, maximum) that code clamps and batches by.
import { componentName, deref, inline, pointer, type Json } from './openapi-refs.js';
import { ANNOTATION_KEYWORDS, VALIDATION_KEYWORDS } from './zod-from-openapi.js';

const literal = (v: unknown) => JSON.stringify(v);

/** Keywords that only annotate: they never change what a value is valid against (Ajv ignores `default`). */
const ANNOTATIONS = new Set([...ANNOTATION_KEYWORDS, 'default']);
const VALIDATORS = new Set(VALIDATION_KEYWORDS);

const TYPE_TESTS: Record<string, (v: string) => string> = {
  object: (v) => `(typeof ${v} === 'object' && ${v} !== null && !Array.isArray(${v}))`,
  array: (v) => `Array.isArray(${v})`,
  string: (v) => `typeof ${v} === 'string'`,
  integer: (v) => `Number.isInteger(${v})`,
  number: (v) => `(typeof ${v} === 'number' && Number.isFinite(${v}))`,
  boolean: (v) => `typeof ${v} === 'boolean'`,
  null: (v) => `${v} === null`,
};

/** Ajv's formats as ajv-formats' full mode checks them, for the formats the payloads use. */
const FORMATS: Record<string, { type: 'string' | 'number'; test: (v: string) => string }> = {
  'date-time': { type: 'string', test: (v) => `isDateTime(${v})` },
  // ajv-formats: any integer a JSON number can hold is an int64.
  int64: { type: 'number', test: (v) => `Number.isInteger(${v})` },
};

class ValidatorEmitter {
  private counter = 0;
  /** Module-level constants the validators test with: patterns, enums, known property names. */
  readonly constants: string[] = [];

  private constant(prefix: string, source: string): string {
    const name = `${prefix}_${this.constants.length}`;
    this.constants.push(`const ${name} = ${source};`);
    return name;
  }

  constructor(private readonly doc: Json) {}

  /**
   * Statements that validate the value in variable `v`, pushing `{ instancePath, message }` to
   * `errors` (Ajv's wording). `path` is a TypeScript expression, evaluated only on an error.
   */
  emit(schema: Json, v: string, path: string, indent: string): string[] {
    const node = deref(this.doc, schema);
    for (const key of Object.keys(node)) {
      if (!ANNOTATIONS.has(key) && !VALIDATORS.has(key)) throw new Error(`unsupported keyword ${key} in a webhook payload schema`);
    }
    const out: string[] = [];
    const fail = (message: string, at = path) => `errors.push({ instancePath: ${at}, message: ${literal(message)} });`;
    for (const member of (node.allOf ?? []) as Json[]) out.push(...this.emit(member, v, path, indent));
    if (node.type !== undefined) {
      const types: string[] = Array.isArray(node.type) ? node.type : [node.type];
      for (const t of types) if (!TYPE_TESTS[t]) throw new Error(`unsupported type ${t}`);
      out.push(`${indent}if (!(${types.map((t) => TYPE_TESTS[t]!(v)).join(' || ')})) ${fail(`must be ${types.join(',')}`)}`);
    }
    if (node.const !== undefined) {
      if (typeof node.const === 'object' && node.const !== null) throw new Error('unsupported const: only primitive values');
      out.push(`${indent}if (${v} !== ${literal(node.const)}) ${fail('must be equal to constant')}`);
    }
    if (node.enum !== undefined) {
      if ((node.enum as unknown[]).some((e) => typeof e === 'object' && e !== null))
        throw new Error('unsupported enum: only primitive values');
      out.push(
        `${indent}if (!${this.constant('ENUM', `new Set<unknown>(${literal(node.enum)})`)}.has(${v})) ${fail('must be equal to one of the allowed values')}`,
      );
    }
    const strings: string[] = [];
    if (node.format !== undefined) {
      const format = FORMATS[node.format];
      if (!format) throw new Error(`unsupported format ${node.format}`);
      if (format.type === 'number') {
        out.push(`${indent}if (typeof ${v} === 'number' && !${format.test(v)}) ${fail(`must match format "${node.format}"`)}`);
      } else {
        strings.push(`if (!${format.test(v)}) ${fail(`must match format "${node.format}"`)}`);
      }
    }
    if (node.pattern !== undefined) {
      // Ajv's patterns are Unicode-aware.
      const name = this.constant('PATTERN', `new RegExp(${literal(node.pattern)}, 'u')`);
      strings.push(`if (!${name}.test(${v})) ${fail(`must match pattern "${node.pattern}"`)}`);
    }
    // Ajv counts characters as code points.
    if (node.minLength !== undefined)
      strings.push(`if ([...${v}].length < ${node.minLength}) ${fail(`must NOT have fewer than ${node.minLength} characters`)}`);
    if (node.maxLength !== undefined)
      strings.push(`if ([...${v}].length > ${node.maxLength}) ${fail(`must NOT have more than ${node.maxLength} characters`)}`);
    if (strings.length) out.push(`${indent}if (typeof ${v} === 'string') {`, ...strings.map((s) => `${indent}  ${s}`), `${indent}}`);
    const numbers: string[] = [];
    if (node.minimum !== undefined) numbers.push(`if (${v} < ${node.minimum}) ${fail(`must be >= ${node.minimum}`)}`);
    if (node.maximum !== undefined) numbers.push(`if (${v} > ${node.maximum}) ${fail(`must be <= ${node.maximum}`)}`);
    if (numbers.length) out.push(`${indent}if (typeof ${v} === 'number') {`, ...numbers.map((s) => `${indent}  ${s}`), `${indent}}`);
    const arrays: string[] = [];
    if (node.minItems !== undefined)
      arrays.push(`${indent}  if (${v}.length < ${node.minItems}) ${fail(`must NOT have fewer than ${node.minItems} items`)}`);
    if (node.maxItems !== undefined)
      arrays.push(`${indent}  if (${v}.length > ${node.maxItems}) ${fail(`must NOT have more than ${node.maxItems} items`)}`);
    if (node.items !== undefined) {
      if (Array.isArray(node.items) || typeof node.items !== 'object') throw new Error('unsupported items: only one schema');
      const i = `i${this.counter++}`;
      const item = `item${this.counter++}`;
      arrays.push(
        `${indent}  for (let ${i} = 0; ${i} < ${v}.length; ${i}++) {`,
        `${indent}    const ${item}: unknown = ${v}[${i}];`,
        ...this.emit(node.items, item, `${path} + '/' + ${i}`, `${indent}    `),
        `${indent}  }`,
      );
    }
    if (arrays.length) out.push(`${indent}if (Array.isArray(${v})) {`, ...arrays, `${indent}}`);
    const objects: string[] = [];
    const o = `o${this.counter++}`;
    for (const name of (node.required ?? []) as string[]) {
      objects.push(`${indent}  if (${o}[${literal(name)}] === undefined) ${fail(`must have required property '${name}'`)}`);
    }
    if (node.additionalProperties !== undefined) {
      if (node.additionalProperties !== false) throw new Error('unsupported additionalProperties: only false');
      const known = this.constant('PROPERTIES', `new Set(${literal(Object.keys(node.properties ?? {}))})`);
      const key = `key${this.counter++}`;
      objects.push(`${indent}  for (const ${key} in ${o}) if (!${known}.has(${key})) ${fail('must NOT have additional properties')}`);
    }
    for (const [name, property] of Object.entries((node.properties ?? {}) as Record<string, Json>)) {
      const value = `p${this.counter++}`;
      const segment = `/${name.replace(/~/g, '~0').replace(/\//g, '~1')}`;
      const pathOf = path === "''" ? literal(segment) : `${path} + ${literal(segment)}`;
      const checks = this.emit(property, value, pathOf, `${indent}    `);
      if (checks.length) {
        objects.push(
          `${indent}  const ${value} = ${o}[${literal(name)}];`,
          `${indent}  if (${value} !== undefined) {`,
          ...checks,
          `${indent}  }`,
        );
      }
    }
    if (objects.length) {
      out.push(
        `${indent}if (${TYPE_TESTS.object!(v)}) {`,
        `${indent}  const ${o} = ${v} as Record<string, unknown>;`,
        ...objects,
        `${indent}}`,
      );
    }
    return out;
  }
}

const IS_DATE_TIME = `
// RFC 3339 date-time, as ajv-formats' full mode checks it (leap years, a time zone, leap seconds).
const DATE_TIME_SEPARATOR = /t|\\s/i;
const DATE = /^(\\d\\d\\d\\d)-(\\d\\d)-(\\d\\d)$/;
const TIME = /^(\\d\\d):(\\d\\d):(\\d\\d(?:\\.\\d+)?)(z|([+-])(\\d\\d)(?::?(\\d\\d))?)?$/i;
const DAYS = [0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

function isDateTime(value: string): boolean {
  const parts = value.split(DATE_TIME_SEPARATOR);
  if (parts.length !== 2) return false;
  const date = DATE.exec(parts[0]!);
  if (!date) return false;
  const year = +date[1]!;
  const month = +date[2]!;
  const day = +date[3]!;
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  if (month < 1 || month > 12 || day < 1 || day > (month === 2 && leap ? 29 : DAYS[month]!)) return false;
  const time = TIME.exec(parts[1]!);
  if (!time || !time[4]) return false;
  const hour = +time[1]!;
  const minute = +time[2]!;
  const second = +time[3]!;
  const sign = time[5] === '-' ? -1 : 1;
  const zoneHours = +(time[6] ?? 0);
  const zoneMinutes = +(time[7] ?? 0);
  if (zoneHours > 23 || zoneMinutes > 59) return false;
  if (hour <= 23 && minute <= 59 && second < 60) return true;
  const utcMinute = minute - zoneMinutes * sign;
  const utcHour = hour - zoneHours * sign - (utcMinute < 0 ? 1 : 0);
  return (utcHour === 23 || utcHour === -1) && (utcMinute === 59 || utcMinute === -1) && second < 61;
}
`;

interface WebhookOperation {
  event: string;
  operationId: string;
  contentType: string;
  schemaName: string;
  schema: Json;
  headers: { name: string; required: boolean; pattern: string }[];
}

function webhookOperations(doc: Json): WebhookOperation[] {
  const events = Object.entries((doc.webhooks ?? {}) as Record<string, Json>);
  if (!events.length) throw new Error('the document has no webhooks: section');
  return events.map(([event, pathItem]) => {
    const methods = Object.keys(pathItem).filter((m) => m !== 'parameters' && m !== 'summary' && m !== 'description');
    if (methods.length !== 1 || methods[0] !== 'post') throw new Error(`webhook ${event}: expected exactly one post operation`);
    const operation = pathItem.post as Json;
    const content = Object.entries((deref(doc, operation.requestBody ?? {}).content ?? {}) as Record<string, Json>);
    if (content.length !== 1) throw new Error(`webhook ${event}: expected exactly one request body media type`);
    const [contentType, media] = content[0]!;
    const ref: string | undefined = media.schema?.$ref;
    if (!ref?.startsWith('#/components/schemas/')) throw new Error(`webhook ${event}: the body schema must be a named component`);
    const headers = ((operation.parameters ?? []) as Json[])
      .map((p) => deref(doc, p))
      .map((p) => {
        if (p.in !== 'header') throw new Error(`webhook ${event}: parameter ${p.name} is not a header`);
        const schema = deref(doc, p.schema ?? {});
        if (schema.type !== 'string' || typeof schema.pattern !== 'string')
          throw new Error(`webhook ${event}: header ${p.name} needs a string pattern`);
        return { name: p.name as string, required: p.required === true, pattern: schema.pattern };
      });
    return {
      event,
      operationId: operation.operationId,
      contentType,
      schemaName: componentName(doc, ref, 'schemas'),
      schema: inline(doc, media.schema) as Json,
      headers,
    };
  });
}

/** `src/generated/public-webhooks.ts`: the registry the dispatcher and the receiver kit use. */
export function emitWebhookRegistry(doc: Json, options: { source: string }): string {
  const operations = webhookOperations(doc);
  const headerSets = new Set(operations.map((o) => JSON.stringify(o.headers)));
  if (headerSets.size !== 1) throw new Error('every webhook must declare the same headers: the receiver kit verifies them alike');
  const headers = operations[0]!.headers;
  const emitter = new ValidatorEmitter(doc);
  const events = operations.map((o) => o.event);
  const lines = [
    `// Generated by scripts/generate/generate.ts from the webhooks: section of ${options.source}: do not edit. Run \`npm run generate\`.`,
    '// Standalone (no imports at run time): the client package ships it as it is.',
    "import type { webhooks } from './public-api.js';",
    '',
    '/** A payload that breaks the document, as Ajv would report it: where (a JSON pointer) and what. */',
    'export interface WebhookSchemaError {',
    '  instancePath: string;',
    '  message: string;',
    '}',
    '',
    `/** The events of the webhooks: section, in the document's order. */`,
    `export const WEBHOOK_EVENTS = ${literal(events)} as const;`,
    '',
    'export type WebhookEvent = (typeof WEBHOOK_EVENTS)[number];',
    '',
    "/** The body of one event's delivery, as openapi-typescript types it. */",
    "export type WebhookPayloadOf<Event extends WebhookEvent> = webhooks[Event]['post']['requestBody']['content']['application/json'];",
    '',
    '/** The body of any delivery, discriminated on `event`. */',
    'export type WebhookPayload = { [Event in WebhookEvent]: WebhookPayloadOf<Event> }[WebhookEvent];',
    '',
    "/** The headers every delivery carries (the webhooks' parameters), in the document's order. */",
    'export const WEBHOOK_HEADERS = [',
    ...headers.map((h) => `  { name: ${literal(h.name)}, required: ${h.required}, pattern: new RegExp(${literal(h.pattern)}, 'u') },`),
    '] as const;',
    '',
    "export type WebhookHeaderName = (typeof WEBHOOK_HEADERS)[number]['name'];",
    '',
    '/** The headers every delivery carries (`required: true`). */',
    "export type WebhookRequiredHeaderName = Extract<(typeof WEBHOOK_HEADERS)[number], { required: true }>['name'];",
    '',
    '/** The headers only some deliveries carry (`required: false`: a resend, the Standard Webhooks headers). */',
    'export type WebhookOptionalHeaderName = Exclude<WebhookHeaderName, WebhookRequiredHeaderName>;',
    IS_DATE_TIME,
  ];
  const validators: string[] = [];
  for (const operation of operations) {
    validators.push(
      `/** components.schemas.${operation.schemaName}, the body of a \`${operation.event}\` delivery. */`,
      `function validate${operation.schemaName}(value: unknown): WebhookSchemaError[] {`,
      '  const errors: WebhookSchemaError[] = [];',
      ...emitter.emit(operation.schema, 'value', "''", '  '),
      '  return errors;',
      '}',
      '',
    );
  }
  lines.push(...emitter.constants, ...(emitter.constants.length ? [''] : []), ...validators);
  lines.push(
    '/** One webhook of the document: its event, operation, headers, body schema and the validator of that schema. */',
    'export interface WebhookDefinition<Event extends WebhookEvent = WebhookEvent> {',
    '  event: Event;',
    '  operationId: string;',
    '  contentType: string;',
    '  headers: typeof WEBHOOK_HEADERS;',
    '  /** The body schema, every $ref inlined. */',
    '  schema: Record<string, unknown>;',
    '  /** The schema errors of a parsed body: none when it is a valid payload of this event. */',
    '  validate(value: unknown): WebhookSchemaError[];',
    '}',
    '',
    '/** The webhooks: section, by event. */',
    'export const WEBHOOKS: { readonly [Event in WebhookEvent]: WebhookDefinition<Event> } = {',
  );
  for (const operation of operations) {
    lines.push(
      `  ${literal(operation.event)}: {`,
      `    event: ${literal(operation.event)},`,
      `    operationId: ${literal(operation.operationId)},`,
      `    contentType: ${literal(operation.contentType)},`,
      '    headers: WEBHOOK_HEADERS,',
      `    schema: ${JSON.stringify(operation.schema, null, 2).split('\n').join('\n    ')},`,
      `    validate: validate${operation.schemaName},`,
      '  },',
    );
  }
  lines.push(
    '};',
    '',
    'const isEvent = (value: unknown): value is WebhookEvent => (WEBHOOK_EVENTS as readonly unknown[]).includes(value);',
    '',
    "/** The schema errors of a parsed delivery body, checked against its `event`'s schema (none: it is valid). */",
    'export function webhookPayloadErrors(value: unknown): WebhookSchemaError[] {',
    "  const event = typeof value === 'object' && value !== null ? (value as Record<string, unknown>).event : undefined;",
    '  if (isEvent(event)) return WEBHOOKS[event].validate(value);',
    "  if (typeof value !== 'object' || value === null || Array.isArray(value)) return [{ instancePath: '', message: 'must be object' }];",
    `  return [{ instancePath: '/event', message: ${literal(`must be one of ${events.join(', ')}`)} }];`,
    '}',
    '',
    '/** Whether a parsed body is a valid delivery payload of the document. */',
    'export function isWebhookPayload(value: unknown): value is WebhookPayload {',
    '  return webhookPayloadErrors(value).length === 0;',
    '}',
    '',
  );
  return lines.join('\n');
}

/** The limits code clamps and batches by, each read from the document that states it. */
const LIMITS = [
  {
    name: 'IDS_MAX_ITEMS',
    pointer: '#/components/parameters/IdsParam/schema/maxItems',
    doc: 'Product ids one `GET /v1/products?ids=` request takes at most.',
  },
  {
    name: 'PRICE_IDS_MAX_ITEMS',
    pointer: '#/components/parameters/PriceIdsParam/schema/maxItems',
    doc: 'Product ids one `GET /v1/prices?ids=` request takes at most.',
  },
  {
    name: 'SKU_MAX_ITEMS',
    pointer: '#/components/parameters/SkuParam/schema/maxItems',
    doc: 'SKUs one `GET /v1/products?sku=` request takes at most (as EANs for `?ean=`).',
  },
  {
    name: 'PER_PAGE_MAXIMUM',
    pointer: '#/components/schemas/PaginationMeta/properties/per_page/maximum',
    doc: '`per_page` is clamped to 1..this.',
  },
  {
    name: 'CHANGES_MAX_ITEMS',
    pointer: '#/components/schemas/ChangePage/properties/changes/maxItems',
    doc: 'Changes one `GET /v1/changes` response carries at most.',
  },
  {
    name: 'WEBHOOK_PRODUCT_IDS_MAX_ITEMS',
    pointer: '#/components/schemas/WebhookPayload/properties/product_ids/maxItems',
    doc: 'Product ids one webhook delivery carries at most.',
  },
] as const;

/** `src/generated/public-limits.ts`: the documents' maxItems and maximum as constants. */
export function emitLimits(doc: Json, options: { source: string }): string {
  const lines = [`// Generated by scripts/generate/generate.ts from ${options.source}: do not edit. Run \`npm run generate\`.`, ''];
  for (const limit of LIMITS) {
    const value = pointer(doc, limit.pointer);
    if (typeof value !== 'number') throw new Error(`${limit.pointer} is not a number`);
    lines.push(`/** ${limit.doc} (${limit.pointer.slice(2)}) */`, `export const ${limit.name} = ${value};`, '');
  }
  return lines.join('\n');
}
