// JSON Schema to fast-check, for the subset the bundled documents use: type (with 'null'), enum,
// const, pattern, format (date-time, email, uri), minimum/maximum, minLength/maxLength,
// minItems/maxItems/uniqueItems, properties/required/additionalProperties/propertyNames, allOf and $ref.
// `valid()` draws values the schema accepts; `invalid()` draws values it rejects at that node.
import fc from 'fast-check';

export type Json = Record<string, any>;

/** A JSON literal sent exactly as written (`1e400`, `9007199254740993`): JSON.stringify cannot spell them. */
export class RawJson {
  constructor(readonly text: string) {}
}

/**
 * Hook for members whose valid values live in the world rather than in the schema (ids, refs,
 * slugs): given the member's name and its schema-derived arbitrary, returns the arbitrary to use.
 */
export type MemberHook = (name: string, schema: Json, fromSchema: fc.Arbitrary<unknown>) => fc.Arbitrary<unknown>;

/** Arrays and maps are kept small; oversized ones are the malformed generator's business. */
const MAX_GENERATED_ITEMS = 4;
const MAX_GENERATED_STRING = 40;
const INT32 = 2 ** 31 - 1;

/** Strings that break patterns, encodings and parsers: controls, bidi, surrogates, emoji, injections. */
export const HOSTILE_STRINGS = [
  '',
  ' ',
  '\u0000',
  'a\u0000b',
  '\u0007\u0008\u001b[31m',
  '\t\r\n',
  '\u202egnp.exe',
  '\ud800',
  '\udfff\ud800',
  '\ufeff',
  '\uffff',
  '🦓',
  '👩‍👩‍👧‍👦',
  'e\u0301\u0301\u0301',
  'Ω≈ç√∫',
  'ｆｕｌｌｗｉｄｔｈ',
  '١٢٣',
  '％００',
  "'; DROP TABLE products; --",
  '" OR 1=1 --',
  '<script>alert(1)</script>',
  '{{7*7}}',
  '${jndi:x}',
  '../../etc/passwd',
  '%',
  '%00',
  '%zz',
  '%c0%af',
  'null',
  'undefined',
  'NaN',
  'true',
  '[]',
  '{}',
  '__proto__',
  'constructor',
];

/** Number spellings that overflow, lose precision or are not JSON numbers at all in most parsers. */
export const HOSTILE_NUMBERS = [
  '1e400',
  '-1e400',
  '9007199254740993',
  '123456789012345678901234567890',
  '-0',
  '1E2',
  '0.0000000000000000001',
  '2147483648',
  '-2147483649',
  '9223372036854775808',
  '1.5',
  '-1',
];

export class SchemaArbitraries {
  private readonly memo = new Map<Json, fc.Arbitrary<unknown>>();

  constructor(
    readonly doc: Json,
    private readonly hook: MemberHook = (_n, _s, a) => a,
  ) {}

  /** Follows `$ref` (JSON pointers into the document) until a schema with content. */
  resolve(schema: Json): Json {
    let current = schema;
    for (let hops = 0; current?.$ref; hops++) {
      if (hops > 20) throw new Error(`$ref loop at ${schema.$ref}`);
      current = (current.$ref as string)
        .replace(/^#\//, '')
        .split('/')
        .reduce((node: Json, key) => node[key.replace(/~1/g, '/').replace(/~0/g, '~')], this.doc);
    }
    return this.mergeAllOf(current);
  }

  /** The name of the component a schema refers to (`Product` for `#/components/schemas/Product`). */
  static refName(schema: Json): string | undefined {
    return typeof schema?.$ref === 'string' ? schema.$ref.split('/').pop() : undefined;
  }

  private mergeAllOf(schema: Json): Json {
    if (!schema?.allOf) return schema;
    const { allOf, ...rest } = schema;
    return (allOf as Json[])
      .map((part) => this.resolve(part))
      .reduce(
        (merged: Json, part) => ({
          ...merged,
          ...part,
          properties: { ...merged.properties, ...part.properties },
          required: [...new Set([...(merged.required ?? []), ...(part.required ?? [])])],
        }),
        rest,
      );
  }

  static types(schema: Json): string[] {
    if (Array.isArray(schema.type)) return schema.type;
    if (schema.type) return [schema.type];
    if (schema.properties || schema.additionalProperties) return ['object'];
    if (schema.items) return ['array'];
    return ['string', 'integer', 'boolean', 'null', 'object', 'array'];
  }

  /** Values the schema accepts. */
  valid(schema: Json): fc.Arbitrary<unknown> {
    const cached = this.memo.get(schema);
    if (cached) return cached;
    const resolved = this.resolve(schema);
    let arbitrary: fc.Arbitrary<unknown>;
    if ('const' in resolved) arbitrary = fc.constant(resolved.const);
    else if (resolved.enum) arbitrary = fc.constantFrom(...(resolved.enum as unknown[]));
    else {
      const types = SchemaArbitraries.types(resolved);
      const options = types.filter((t) => t !== 'null').map((t) => this.ofType(t, resolved));
      // Nullable members are null a fifth of the time.
      arbitrary = types.includes('null')
        ? options.length
          ? fc.oneof({ arbitrary: fc.oneof(...options), weight: 4 }, { arbitrary: fc.constant(null), weight: 1 })
          : fc.constant(null)
        : fc.oneof(...options);
    }
    this.memo.set(schema, arbitrary);
    return arbitrary;
  }

  private ofType(type: string, schema: Json): fc.Arbitrary<unknown> {
    switch (type) {
      case 'boolean':
        return fc.boolean();
      case 'integer':
        return integerArbitrary(schema);
      case 'number':
        return fc.double({
          min: schema.minimum ?? -1e9,
          max: schema.maximum ?? 1e9,
          noNaN: true,
          noDefaultInfinity: true,
        });
      case 'string':
        return stringArbitrary(schema);
      case 'array': {
        const min = schema.minItems ?? 0;
        const max = Math.min(schema.maxItems ?? MAX_GENERATED_ITEMS, Math.max(min, MAX_GENERATED_ITEMS));
        if (schema.uniqueItems === true)
          return fc.uniqueArray(this.valid(schema.items ?? {}), {
            minLength: min,
            maxLength: max,
            selector: (item) => JSON.stringify(item),
          });
        return fc.array(this.valid(schema.items ?? {}), { minLength: min, maxLength: max });
      }
      case 'object':
        return this.objectArbitrary(schema);
      default:
        return fc.constant(null);
    }
  }

  private objectArbitrary(schema: Json): fc.Arbitrary<unknown> {
    const required: string[] = schema.required ?? [];
    const properties = Object.entries((schema.properties ?? {}) as Record<string, Json>);
    const record = fc.record(Object.fromEntries(properties.map(([name, member]) => [name, this.hook(name, member, this.valid(member))])), {
      requiredKeys: required.filter((name) => properties.some(([n]) => n === name)),
    });
    const extra = schema.additionalProperties;
    if (!extra || typeof extra !== 'object') return record;
    const keys = (
      schema.propertyNames?.pattern ? fc.stringMatching(new RegExp(schema.propertyNames.pattern)) : fc.string({ maxLength: 20 })
    ).filter((key) => !excludedBy(schema.propertyNames).includes(key));
    const map = fc.dictionary(keys, this.valid(extra), { maxKeys: 3 });
    return fc.tuple(record, map).map(([known, more]) => ({ ...more, ...known }));
  }

  /** Values the schema rejects at this node: a wrong type, a broken constraint, an unknown or missing member. */
  invalid(schema: Json): fc.Arbitrary<unknown> {
    const resolved = this.resolve(schema);
    const types = SchemaArbitraries.types(resolved);
    const wrongTypes: unknown[] = [
      ...(types.includes('string') ? [] : ['1', 'x', '']),
      ...(types.includes('integer') || types.includes('number') ? [] : [0, 1.5, -1]),
      ...(types.includes('boolean') ? [] : [true, false]),
      ...(types.includes('null') ? [] : [null]),
      ...(types.includes('object') ? [] : [{}, { nested: { deeper: true } }]),
      ...(types.includes('array') ? [] : [[], [1, 'a', null]]),
    ];
    const broken: fc.Arbitrary<unknown>[] = [fc.constantFrom(...wrongTypes)];
    if (resolved.enum || 'const' in resolved) broken.push(fc.constantFrom('unknown', 'ACTIVE', '', 'price ', '🦓'));
    if (types.includes('integer') || types.includes('number')) {
      broken.push(fc.constantFrom(...HOSTILE_NUMBERS.map((n) => new RawJson(n))));
      if (resolved.minimum !== undefined) broken.push(fc.integer({ min: -INT32, max: resolved.minimum - 1 }));
      if (resolved.maximum !== undefined) {
        broken.push(
          resolved.maximum < Number.MAX_SAFE_INTEGER
            ? fc.integer({ min: resolved.maximum + 1, max: Number.MAX_SAFE_INTEGER })
            : // Past the largest exact JSON integer: written as its digits, not as a rounded double.
              fc.constantFrom(new RawJson('9007199254740992'), new RawJson('18446744073709551616'), new RawJson('1e400')),
        );
      }
      if (types.includes('integer')) broken.push(fc.double({ noInteger: true, noNaN: true, noDefaultInfinity: true }));
    }
    if (types.includes('string')) {
      const pattern = resolved.pattern ? new RegExp(resolved.pattern) : undefined;
      const rejected = (s: string) =>
        (pattern && !pattern.test(s)) ||
        excludedBy(resolved).includes(s) ||
        (resolved.minLength !== undefined && s.length < resolved.minLength) ||
        (resolved.maxLength !== undefined && s.length > resolved.maxLength) ||
        (resolved.format === 'date-time' && !/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/i.test(s)) ||
        (resolved.format === 'email' && !/^[^@\s]+@[^@\s]+\.[^@\s]+$/.test(s)) ||
        (resolved.format === 'uri' && !/^[a-z][a-z0-9+.-]*:[^\s]+$/i.test(s));
      const candidates = [
        ...HOSTILE_STRINGS,
        'not-an-email',
        'a@',
        '@b.c',
        'a b@c.d',
        'not a uri',
        'http://',
        '//host/x',
        'https://exa mple.com',
        'javascript:alert(1)',
        '2025-13-01T00:00:00Z',
        '2025-01-01 00:00:00',
        '2025-01-01T00:00:00',
        '1741944415',
        'yesterday',
      ].filter(rejected);
      if (candidates.length) broken.push(fc.constantFrom(...candidates));
      if (resolved.maxLength !== undefined) {
        broken.push(fc.constantFrom('x', 'é', '🦓').map((c) => c.repeat(resolved.maxLength + 1)));
      }
      if (pattern || resolved.format) {
        // An unmatched brace breaks permissive patterns (the SKU template's) that random text rarely does.
        broken.push(
          bounded(
            fc.string({ unit: 'grapheme', minLength: 1, maxLength: 12 }).map((s) => (rejected(s) ? s : `${s}{`)),
            rejected,
            `a string ${JSON.stringify(resolved)} rejects`,
          ),
        );
      }
    }
    if (types.includes('array')) {
      if (resolved.maxItems !== undefined && resolved.maxItems <= 2000) {
        broken.push(this.valid(resolved.items ?? {}).map((item) => Array.from({ length: resolved.maxItems + 1 }, () => item)));
      }
      if (resolved.minItems) broken.push(fc.constant([]));
      if (resolved.items)
        // A nullable array's valid values include null: the bad item goes into an empty one then.
        broken.push(
          fc.tuple(this.valid(resolved), this.invalid(resolved.items)).map(([items, bad]) => [...(Array.isArray(items) ? items : []), bad]),
        );
    }
    if (types.includes('object')) {
      // An object of the schema (one that is also nullable or another type yields those values too).
      const valid = bounded(
        this.valid(resolved),
        (value) => value !== null && typeof value === 'object' && !Array.isArray(value),
        `an object of ${JSON.stringify(resolved)}`,
      ) as fc.Arbitrary<Record<string, unknown>>;
      if (resolved.additionalProperties === false) {
        broken.push(
          fc
            .tuple(valid, fc.constantFrom('unknown', 'Name', 'name ', '__proto__', 'ïd', ''), fc.jsonValue({ maxDepth: 2 }))
            .map(([value, key, extra]) => ({ ...value, [key]: extra })),
        );
      }
      for (const name of (resolved.required ?? []) as string[]) {
        broken.push(valid.map((value) => Object.fromEntries(Object.entries(value).filter(([key]) => key !== name))));
      }
    }
    return fc.oneof(...broken);
  }
}

/** A filter that fails loudly instead of spinning forever when it rejects (nearly) everything. */
function bounded<T>(arbitrary: fc.Arbitrary<T>, accept: (value: T) => boolean, what: string): fc.Arbitrary<T> {
  let misses = 0;
  return arbitrary.filter((value) => {
    if (accept(value)) {
      misses = 0;
      return true;
    }
    if (++misses > 10_000) throw new Error(`the generator of ${what} finds no acceptable value`);
    return false;
  });
}

function integerArbitrary(schema: Json): fc.Arbitrary<number> {
  const min = schema.minimum ?? (schema.exclusiveMinimum !== undefined ? schema.exclusiveMinimum + 1 : -INT32);
  const max = schema.maximum ?? (schema.exclusiveMaximum !== undefined ? schema.exclusiveMaximum - 1 : undefined);
  const small = fc.integer({ min, max: Math.min(max ?? INT32, Math.max(min, INT32)) });
  if (schema.format !== 'int64' || (max !== undefined && max <= INT32)) return small;
  // int64 ids: mostly small, sometimes past 32 bits up to the largest exact JSON integer.
  return fc.oneof(
    { arbitrary: small, weight: 4 },
    { arbitrary: fc.integer({ min: Math.max(min, INT32), max: max ?? Number.MAX_SAFE_INTEGER }), weight: 1 },
  );
}

/** The values a `not: {const}` or `not: {enum}` excludes (the documents refuse `__proto__` keys so). */
function excludedBy(schema: Json | undefined): unknown[] {
  const not = schema?.not as Json | undefined;
  return not ? ('const' in not ? [not.const] : (not.enum ?? [])) : [];
}

function stringArbitrary(schema: Json): fc.Arbitrary<string> {
  const minLength = schema.minLength ?? 0;
  const maxLength = schema.maxLength;
  const fits = (s: string) =>
    s.length >= minLength && (maxLength === undefined || s.length <= maxLength) && !excludedBy(schema).includes(s);
  const pattern = schema.pattern ? new RegExp(schema.pattern) : undefined;
  const matches = (s: string) => fits(s) && (!pattern || pattern.test(s));
  switch (schema.format) {
    case 'date-time':
      return bounded(
        fc
          .tuple(
            fc.date({ min: new Date('1990-01-01T00:00:00Z'), max: new Date('2100-01-01T00:00:00Z'), noInvalidDate: true }),
            fc.constantFrom('Z', '+00:00', '+05:30', '-08:00'),
            fc.boolean(),
          )
          .map(([date, offset, millis]) => rfc3339(date, offset, millis)),
        matches,
        'date-time',
      );
    case 'email':
      return bounded(fc.emailAddress(), matches, 'email');
    case 'uri':
      return bounded(fc.webUrl({ validSchemes: ['https', 'http'], withQueryParameters: true }), matches, `uri ${schema.pattern ?? ''}`);
    default:
  }
  if (pattern)
    return bounded(fc.stringMatching(pattern, maxLength !== undefined ? { maxLength } : {}), matches, `pattern ${schema.pattern}`);
  const max = Math.min(maxLength ?? MAX_GENERATED_STRING, Math.max(minLength, MAX_GENERATED_STRING));
  // Mostly printable ASCII, often any Unicode grapheme (emoji, combining marks, other scripts).
  return bounded(
    fc.oneof(fc.string({ unit: 'grapheme-ascii', minLength, maxLength: max }), fc.string({ unit: 'grapheme', minLength, maxLength: max })),
    fits,
    `string of ${minLength}..${max}`,
  );
}

/** An RFC 3339 date-time of `date`, written in the given offset. */
function rfc3339(date: Date, offset: string, millis: boolean): string {
  const minutes = offset === 'Z' ? 0 : (offset[0] === '-' ? -1 : 1) * (Number(offset.slice(1, 3)) * 60 + Number(offset.slice(4, 6)));
  const local = new Date(date.getTime() + minutes * 60_000).toISOString();
  return `${millis ? local.slice(0, 23) : local.slice(0, 19)}${offset}`;
}

/** JSON text of a value that may hold RawJson literals. */
export function toJsonText(value: unknown): string {
  const raws: string[] = [];
  const text = JSON.stringify(value, (_key, member) => {
    if (member instanceof RawJson) {
      raws.push(member.text);
      return `\u0000raw${raws.length - 1}\u0000`;
    }
    return member;
  });
  if (text === undefined) return 'null';
  return raws.length ? text.replace(/"\\u0000raw(\d+)\\u0000"/g, (_m, index: string) => raws[Number(index)]!) : text;
}
