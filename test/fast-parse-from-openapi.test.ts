// The generated fast parsers (scripts/generate/fast-parse-from-openapi.ts, src/generated/admin-fast-parse.ts):
// for any value, either undefined or exactly what the zod schema gives (the same JSON text, its
// members in the same order), and the product sources an import sends are taken without zod.
import { describe, expect, it } from 'vitest';
import { emitFastParseModule } from '../scripts/generate/fast-parse-from-openapi.js';
import { fastParseProductSourceInput } from '../src/generated/admin-fast-parse.js';
import { ProductSourceInputSchema } from '../src/generated/admin-routes.js';

/** Sources as an import sends them: every member, members out of the schema's order, the fewest. */
const VALID: string[] = [
  '{"ref":"BENCH-COST-000001","manufacturer":"Nordkamm","content":{"de":{"title":"Nordkamm Zelt 1","description":"Zelt aus Nylon."},"en":{"title":"Tent","description":"Tent made of nylon."}},"images":[{"url":"http://127.0.0.1:4100/cost/1-0.jpg"},{"url":"https://images.example/a/b.jpg?x=1#y"}],"offers":[{"supplier_ref":"alpine-wholesale","quantity":2,"cost":"10.19","currency":"EUR"}],"supplier_attributes":[{"supplier_ref":"alpine-wholesale","key":"weight","value":"1.10"}]}',
  '{"ref":"BP-40-GRN","eans":["4006381333931"],"manufacturer":"Bergfex","content":{"de":{"title":"Trekkingrucksack 40 l"}},"offers":[{"supplier_ref":"nordwind","quantity":14,"cost":"41.90","currency":"EUR"}]}',
  '{"ref":"TENT-2P","content":{"de":{"title":"Zelt für 2 Personen"}},"own_stock":{"quantity":5,"cost":"120.00","currency":"EUR"}}',
  '{"ref":"X"}',
  '{}',
  '{"offers":[{"currency":"EUR","cost":"1.00","quantity":3,"supplier_ref":"a"}],"ref":"X","overrides":{"b":"1","a":"2","10":"x","2":"y"}}',
  '{"id":7,"ref":"A:b.c_d-9","eans":[],"manufacturer":null,"content":{},"images":[],"offers":[],"own_stock":null,"supplier_attributes":[],"overrides":{},"excluded_stores":["outlet","b2b-2"]}',
  '{"ref":"U","manufacturer":"🏔","content":{"pt-BR":{"title":null,"description":"Ação 😀"},"fil":{}},"own_stock":{"quantity":0},"images":[{"url":"https://a.example/x.jpg","state":"mirrored","mirrored_url":"https://media.example/m.jpg"}]}',
];

/** Values a member is swapped for: of other types, at and beyond the bounds, URLs zod would change. */
const SWAPS: unknown[] = [
  null,
  0,
  -1,
  1.5,
  2 ** 31,
  2 ** 53,
  true,
  '',
  'x',
  ' x',
  'EUR',
  '12.50',
  '4006381333931',
  '__proto__',
  'a'.repeat(65),
  '😀'.repeat(200),
  '😀'.repeat(201),
  'é'.repeat(1001),
  'https://a.example/x.jpg',
  ' https://a.example/x.jpg',
  'https://a.example/x.jpg ',
  'https://a.ex\tample/x.jpg',
  'https://a.example/\nx.jpg',
  'ftp://a.example/x',
  'http:a.example',
  'https://',
  `https://a.example/${'p'.repeat(2030)}`,
  [],
  ['x'],
  {},
  { url: 'https://a.example/y.jpg' },
];

/** A small deterministic random source (the same mutants every run). */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Every container path of a value (objects and arrays), the root first. */
function containers(
  value: unknown,
  path: (string | number)[] = [],
): { at: (string | number)[]; node: Record<string, unknown> | unknown[] }[] {
  if (typeof value !== 'object' || value === null) return [];
  const node = value as Record<string, unknown>;
  return [{ at: path, node }, ...Object.entries(node).flatMap(([key, child]) => containers(child, [...path, key]))];
}

/** A copy of the source changed once: a member swapped, dropped or added, an item added or dropped. */
function mutant(text: string, next: () => number): unknown {
  const value = JSON.parse(text) as unknown;
  const all = containers(value);
  const { node } = all[Math.floor(next() * all.length)]!;
  const swap = SWAPS[Math.floor(next() * SWAPS.length)];
  const keys = Object.keys(node);
  const key = keys[Math.floor(next() * keys.length)];
  const how = next();
  if (Array.isArray(node)) {
    if (how < 0.3 || key === undefined) node.push(structuredClone(swap));
    else if (how < 0.5) node.splice(Number(key), 1);
    else node[Number(key)] = structuredClone(swap);
  } else if (how < 0.2 || key === undefined) {
    node[['extra', 'title', 'url', 'quantity', '10', 'de', 'x_y'][Math.floor(next() * 7)]!] = structuredClone(swap);
  } else if (how < 0.4) {
    delete node[key];
  } else {
    node[key] = structuredClone(swap);
  }
  return value;
}

describe('the fast parser of a product source', () => {
  it.each(VALID)('takes a valid source without zod, giving what zod gives: %s', (text) => {
    const fast = fastParseProductSourceInput(JSON.parse(text));
    const zod = ProductSourceInputSchema.parse(JSON.parse(text));
    expect(fast).toEqual(zod);
    expect(JSON.stringify(fast)).toBe(JSON.stringify(zod));
  });

  it('gives, for 10,000 changed sources, either nothing or exactly what zod gives (the same JSON text)', () => {
    const next = random(20261129);
    let taken = 0;
    let refused = 0;
    for (let n = 0; n < 10_000; n++) {
      const value = mutant(VALID[n % VALID.length]!, next);
      const fast = fastParseProductSourceInput(structuredClone(value));
      const zod = ProductSourceInputSchema.safeParse(structuredClone(value));
      if (!zod.success) refused++;
      if (fast === undefined) continue;
      taken++;
      expect(zod.success, JSON.stringify(value)).toBe(true);
      expect(JSON.stringify(fast), JSON.stringify(value)).toBe(JSON.stringify(zod.data));
    }
    // Both kinds were met: the mutants are not all refused, nor all taken.
    expect(taken).toBeGreaterThan(1_000);
    expect(refused).toBeGreaterThan(1_000);
  });

  it.each([
    { what: 'a member named __proto__ in a map', json: '{"overrides":{"__proto__":"x"}}' },
    { what: 'a member named __proto__ in an object', json: '{"__proto__":{"ref":"X"},"ref":"X"}' },
    { what: 'a URL zod trims', json: '{"images":[{"url":" https://a.example/x.jpg"}]}' },
    { what: 'a URL zod drops a tab from', json: '{"images":[{"url":"https://a.example/\\tx.jpg"}]}' },
  ])('leaves $what to zod', ({ json }) => {
    expect(fastParseProductSourceInput(JSON.parse(json))).toBeUndefined();
  });
});

describe('the fast parse generator', () => {
  const documentWith = (schema: Record<string, unknown>) => ({
    openapi: '3.1.0',
    info: { title: 't', version: '1' },
    paths: {},
    components: { schemas: { Thing: schema } },
  });

  it.each([
    { what: 'anyOf', schema: { anyOf: [{ type: 'string' }, { type: 'integer' }] } },
    { what: 'an email format', schema: { type: 'string', format: 'email' } },
    { what: 'an open object', schema: { type: 'object', properties: { a: { type: 'string' } } } },
    { what: 'patternProperties', schema: { type: 'object', patternProperties: { '^a': { type: 'string' } } } },
  ])('fails loudly on a schema it does not cover: $what', ({ schema }) => {
    expect(() => emitFastParseModule(documentWith(schema), ['Thing'], { source: 'test', routes: 'routes' })).toThrow(/fast parse/);
  });

  it('fails on a schema name the document does not have', () => {
    expect(() => emitFastParseModule(documentWith({ type: 'string' }), ['Other'], { source: 'test', routes: 'routes' })).toThrow(
      /no component schema Other/,
    );
  });
});
