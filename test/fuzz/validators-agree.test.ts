// The two validators cannot drift. For every request body and every parameter of
// the three documents, the generated zod schemas (src/generated/*-routes.ts, what the server
// validates with) and Ajv over the bundled documents (src/generated/*-openapi.json, what the
// contract harness and integrators validate with) accept and reject the same generated inputs:
// valid values, wrong types, unknown and missing members, boundary lengths and values, patterns.
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { ZodType } from 'zod';
import adminDocument from '../../src/generated/admin-openapi.json' with { type: 'json' };
import { routes as adminRoutes } from '../../src/generated/admin-routes.js';
import operationsDocument from '../../src/generated/operations-openapi.json' with { type: 'json' };
import { routes as operationsRoutes } from '../../src/generated/operations-routes.js';
import publicDocument from '../../src/generated/public-openapi.json' with { type: 'json' };
import { routes as publicRoutes } from '../../src/generated/public-routes.js';
import { RawJson, SchemaArbitraries, toJsonText, type Json } from './schema-arbitrary.js';

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;
const RUNS = Number(process.env.CPS_VALIDATORS_RUNS ?? 150);

const DOCUMENTS = [
  { api: 'public', doc: publicDocument as Json, routes: publicRoutes as Record<string, any> },
  { api: 'admin', doc: adminDocument as Json, routes: adminRoutes as Record<string, any> },
  { api: 'operations', doc: operationsDocument as Json, routes: operationsRoutes as Record<string, any> },
];

const escape = (key: string) => key.replace(/~/g, '~0').replace(/\//g, '~1');

/** Strings one past, at and one short of a length bound, in characters that are one or two UTF-16 units. */
function lengthNearMisses(schema: Json): string[] {
  const out: string[] = [];
  for (const bound of [schema.minLength, schema.maxLength].filter((n): n is number => typeof n === 'number')) {
    for (const length of [bound - 1, bound, bound + 1].filter((n) => n >= 0 && n <= 2000)) {
      for (const unit of ['x', 'é', '🦓', 'e\u0301']) out.push(unit.repeat(length));
    }
  }
  return out;
}

/** Near-misses of a JSON Schema node and of every node under it, in place inside a valid value. */
function nearMisses(arbitraries: SchemaArbitraries, schema: Json, depth = 0): fc.Arbitrary<unknown> {
  const resolved = arbitraries.resolve(schema);
  const options: fc.Arbitrary<unknown>[] = [arbitraries.invalid(schema)];
  const strings = lengthNearMisses(resolved);
  if (strings.length) options.push(fc.constantFrom(...strings));
  if (typeof resolved.minimum === 'number') options.push(fc.constantFrom(resolved.minimum - 1, resolved.minimum, resolved.minimum + 0.5));
  if (typeof resolved.maximum === 'number') options.push(fc.constantFrom(resolved.maximum, resolved.maximum + 1, resolved.maximum - 0.5));
  if (depth < 3 && resolved.properties) {
    for (const [name, member] of Object.entries(resolved.properties as Record<string, Json>)) {
      options.push(
        fc
          .tuple(arbitraries.valid(schema) as fc.Arbitrary<Json>, nearMisses(arbitraries, member, depth + 1))
          .map(([value, bad]) => ({ ...value, [name]: bad })),
      );
    }
  }
  if (depth < 3 && resolved.items) {
    options.push(
      fc
        .tuple(arbitraries.valid(schema) as fc.Arbitrary<unknown[]>, nearMisses(arbitraries, resolved.items, depth + 1))
        // A nullable array's valid values include null: the bad item goes into an empty one then.
        .map(([items, bad]) => [...(Array.isArray(items) ? items : []), bad]),
    );
  }
  return fc.oneof(...options);
}

/** A body as the server reads it: the JSON text a client sends, parsed. */
const asSent = (value: unknown) => JSON.parse(toJsonText(value));

/** A parameter value as a client writes it (style form/simple, explode false: arrays comma-joined). */
function serialize(value: unknown): string | undefined {
  if (value instanceof RawJson) return value.text;
  if (Array.isArray(value))
    return value.every((v) => typeof v !== 'object' || v instanceof RawJson) ? value.map(serialize).join(',') : undefined;
  if (value === null || typeof value === 'object') return undefined;
  const scalar = value as string | number | boolean | undefined; // not an object: the line above
  return String(scalar);
}

/** The document's reading of a parameter's text: the value of the schema's type it spells, else the text. */
function decode(text: string, schema: Json): unknown {
  const type = Array.isArray(schema.type) ? schema.type.find((t: string) => t !== 'null') : schema.type;
  if (type === 'integer' && /^-?[0-9]+$/.test(text)) return Number(text);
  if (type === 'number' && /^-?[0-9]+(\.[0-9]+)?$/.test(text)) return Number(text);
  if (type === 'boolean' && (text === 'true' || text === 'false')) return text === 'true';
  if (type === 'array') return text.split(',').map((item) => decode(item, schema.items ?? {}));
  return text;
}

interface Case {
  name: string;
  zod: ZodType;
  ajv: ValidateFunction;
  arbitrary: fc.Arbitrary<unknown>;
  /** The input each validator sees, from a generated value (undefined: not sendable, skipped). */
  inputs: (value: unknown) => { zod: unknown; ajv: unknown; exempt?: boolean } | undefined;
}

function cases(api: string, doc: Json, routes: Record<string, any>): Case[] {
  const ajv = new Ajv2020({ strict: false, allErrors: false, validateFormats: true });
  addFormats(ajv);
  ajv.addSchema(doc, api);
  const arbitraries = new SchemaArbitraries(doc);
  const compile = (pointer: string) => ajv.compile({ $ref: `${api}#${pointer}` });
  const out: Case[] = [];
  for (const [template, item] of Object.entries(doc.paths as Json)) {
    for (const method of ['get', 'put', 'post', 'patch', 'delete']) {
      const operation = item[method];
      if (!operation) continue;
      const route = routes[operation.operationId];
      const at = `/paths/${escape(template)}/${method}`;
      if (operation.requestBody) {
        const bodyPointer = operation.requestBody.$ref ? (operation.requestBody.$ref as string).slice(1) : `${at}/requestBody`;
        const body = arbitraries.resolve({ $ref: `#${bodyPointer}` });
        if (body.content?.['application/json']) {
          const schema = body.content['application/json'].schema;
          out.push({
            name: `${operation.operationId} body`,
            zod: route.request.body.content['application/json'].schema,
            ajv: compile(`${bodyPointer}/content/application~1json/schema`),
            arbitrary: fc.oneof(arbitraries.valid(schema), nearMisses(arbitraries, schema)),
            inputs: (value) => {
              const sent = asSent(value);
              return { zod: sent, ajv: sent };
            },
          });
        }
      }
      const parameters = [...(item.parameters ?? []), ...(operation.parameters ?? [])];
      parameters.forEach((reference: Json) => {
        const parameter = reference.$ref ? arbitraries.resolve(reference) : reference;
        const pointer = reference.$ref
          ? `${(reference.$ref as string).slice(1)}/schema`
          : `${at}/parameters/${(operation.parameters as Json[]).indexOf(reference)}/schema`;
        const schema = arbitraries.resolve(parameter.schema);
        const part = { path: 'params', query: 'query', header: 'headers' }[parameter.in as string]!;
        const key = parameter.in === 'header' ? parameter.name.toLowerCase() : parameter.name;
        const zod = route.request[part].shape[key] as ZodType;
        const validate = compile(pointer);
        out.push({
          name: `${operation.operationId} ${parameter.in} ${parameter.name}`,
          zod,
          ajv: validate,
          arbitrary: fc.oneof(arbitraries.valid(parameter.schema), nearMisses(arbitraries, parameter.schema), fc.constant(undefined)),
          inputs: (value) => {
            if (value === undefined)
              return parameter.required
                ? { zod: undefined, ajv: Symbol('missing') }
                : { zod: undefined, ajv: schema.default ?? 'absent', exempt: !('default' in schema) && false };
            const text = serialize(value);
            if (text === undefined) return undefined;
            const decoded = decode(text, schema);
            return { zod: text, ajv: decoded };
          },
        });
      });
    }
  }
  return out;
}

describe('the generated zod schemas and Ajv over the bundled documents', () => {
  for (const { api, doc, routes } of DOCUMENTS) {
    for (const c of cases(api, doc, routes)) {
      it(`agree on ${api} ${c.name}`, () => {
        fc.assert(
          fc.property(c.arbitrary, (value) => {
            const input = c.inputs(value);
            if (!input || input.exempt) return;
            const byZod = c.zod.safeParse(input.zod).success;
            const byAjv = typeof input.ajv === 'symbol' ? false : input.ajv === 'absent' ? true : c.ajv(input.ajv);
            expect({ input: input.zod, zod: byZod }).toEqual({ input: input.zod, zod: byAjv });
          }),
          { numRuns: RUNS },
        );
      });
    }
  }
});
