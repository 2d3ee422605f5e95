// The zod generator (scripts/generate/zod-from-openapi.ts) and free keys: zod's record skips a
// member named `__proto__` unchecked, so a map whose documents allowed that key would drop it
// silently. Generation refuses such a map; the generated maps refuse the key, naming it.
import { describe, expect, it } from 'vitest';
import { emitZodModule } from '../scripts/generate/zod-from-openapi.js';
import { AttributeDefinitionInputSchema, ProductSourceInputSchema, SupplierAttributeSchema } from '../src/generated/admin-routes.js';

const documentWith = (map: Record<string, unknown>) => ({
  openapi: '3.1.0',
  info: { title: 't', version: '1' },
  paths: {},
  components: { schemas: { Map: { type: 'object', additionalProperties: { type: 'string' }, ...map } } },
});

describe('maps with free keys', () => {
  it.each([
    { what: 'without propertyNames', map: {} },
    { what: 'whose pattern matches __proto__', map: { propertyNames: { pattern: '^[a-z_]+$' } } },
  ])('are not generated $what: the key would vanish', ({ map }) => {
    expect(() => emitZodModule(documentWith(map), { source: 'test' })).toThrow(/would drop that key/);
  });

  it('are generated when the documents refuse __proto__, by pattern or by not/const', () => {
    expect(emitZodModule(documentWith({ propertyNames: { pattern: '^[a-z]{2}$' } }), { source: 'test' })).toContain('freeKeys(');
    const module = emitZodModule(documentWith({ propertyNames: { pattern: '^[a-z_]+$', not: { const: '__proto__' } } }), {
      source: 'test',
    });
    expect(module).toContain('.refine((v) => !["__proto__"].includes(v)');
  });

  it.each([
    {
      what: 'an override key',
      schema: ProductSourceInputSchema,
      json: '{"overrides": {"__proto__": "OVR"}}',
      path: ['overrides', '__proto__'],
    },
    {
      what: 'a content locale',
      schema: ProductSourceInputSchema,
      json: '{"content": {"__proto__": {"title": "x"}}}',
      path: ['content', '__proto__'],
    },
    {
      what: 'a label locale',
      schema: AttributeDefinitionInputSchema,
      json: '{"labels": {"__proto__": "x"}}',
      path: ['labels', '__proto__'],
    },
    {
      what: 'a supplier attribute key',
      schema: SupplierAttributeSchema,
      json: '{"supplier_ref": "a", "key": "__proto__", "value": "1"}',
      path: ['key'],
    },
  ])('refuse $what named __proto__, naming it', ({ schema, json, path }) => {
    const result = schema.safeParse(JSON.parse(json));
    expect(result.success).toBe(false);
    expect(result.error?.issues.map((issue) => issue.path)).toContainEqual(path);
  });

  it('keep keys named constructor and prototype, as own members', () => {
    const result = ProductSourceInputSchema.parse(JSON.parse('{"overrides": {"constructor": "C", "prototype": "P"}}'));
    expect(Object.entries(result.overrides)).toEqual([
      ['constructor', 'C'],
      ['prototype', 'P'],
    ]);
  });
});

describe('oneOf (an export line is a Product or the trailer)', () => {
  const documentWithOneOf = (line: Record<string, unknown>) => ({
    openapi: '3.1.0',
    info: { title: 't', version: '1' },
    paths: {},
    components: {
      schemas: { A: { type: 'object', additionalProperties: false, required: ['a'], properties: { a: { type: 'string' } } }, Line: line },
    },
  });

  it('of named schemas is generated as their union, and the generated export line accepts either member and nothing else', async () => {
    expect(
      emitZodModule(
        documentWithOneOf({ description: 'x', oneOf: [{ $ref: '#/components/schemas/A' }, { $ref: '#/components/schemas/A' }] }),
        { source: 'test' },
      ),
    ).toContain('export const LineSchema = z.union([ASchema, ASchema]);');
    const { ProductExportLineSchema } = await import('../src/generated/public-routes.js');
    expect(ProductExportLineSchema.safeParse({ store: 'de', count: 0, next_since: '2025-03-14T09:26:53Z', next_id: 0 }).success).toBe(true);
    expect(ProductExportLineSchema.safeParse({ store: 'de', count: 0 }).success).toBe(false);
  });

  it('of anything else is refused: inline members, or keywords beside it', () => {
    expect(() =>
      emitZodModule(documentWithOneOf({ oneOf: [{ type: 'string' }, { $ref: '#/components/schemas/A' }] }), { source: 'test' }),
    ).toThrow(/unsupported oneOf/);
    expect(() =>
      emitZodModule(
        documentWithOneOf({ type: 'object', oneOf: [{ $ref: '#/components/schemas/A' }, { $ref: '#/components/schemas/A' }] }),
        { source: 'test' },
      ),
    ).toThrow(/unsupported oneOf/);
  });
});
