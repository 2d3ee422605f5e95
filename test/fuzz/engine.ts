// The contract fuzzer: fast-check draws requests for every operation of the bundled public and
// admin documents, valid and malformed, sends them to a real service one at a time, and checks
// every response: no 5xx, conformance to the document (the contract harness), nothing of another
// merchant visible, and the documented answers to bad credentials, oversize and too-deep bodies.
// A run is reproducible from its seed: the same seed sends the same requests in the same order.
import { loadConfig } from '../../src/config.js';
import fc from 'fast-check';
import adminDocument from '../../src/generated/admin-openapi.json' with { type: 'json' };
import publicDocument from '../../src/generated/public-openapi.json' with { type: 'json' };
import { ADMIN_TOKEN, startTestService, type TestService } from '../support/service.js';
import { ContractViolation, contractFor } from '../support/contract.js';
import { HOSTILE_STRINGS, RawJson, SchemaArbitraries, toJsonText, type Json } from './schema-arbitrary.js';
import { idsInResponse, refreshPools, restore, seedWorld, snapshotOf, type PoolName, type SeededMerchant, type World } from './world.js';

// ---------------------------------------------------------------------------------------------
// Operations, read from the documents

export interface FuzzOperation {
  api: 'public' | 'admin';
  operationId: string;
  method: string;
  template: string;
  parameters: Json[];
  /** The first documented request body content, when there is one. */
  body?: { contentType: string; schema: Json; required: boolean };
  auth: 'apiKey' | 'admin' | 'none';
  responses: Json;
}

const METHODS = ['get', 'put', 'post', 'patch', 'delete'];

function operationsOf(api: 'public' | 'admin', doc: Json, schemas: SchemaArbitraries): FuzzOperation[] {
  const operations: FuzzOperation[] = [];
  for (const [template, item] of Object.entries(doc.paths as Json)) {
    for (const method of METHODS) {
      const operation = item[method];
      if (!operation) continue;
      const parameters = [...(item.parameters ?? []), ...(operation.parameters ?? [])].map((p: Json) => schemas.resolve(p));
      const requestBody = operation.requestBody ? schemas.resolve(operation.requestBody) : undefined;
      const [contentType, media] = Object.entries((requestBody?.content ?? {}) as Json)[0] ?? [];
      const security = (operation.security ?? doc.security ?? []) as Json[];
      const scheme = Object.keys(security[0] ?? {})[0];
      operations.push({
        api,
        operationId: operation.operationId,
        method: method.toUpperCase(),
        template,
        parameters,
        body: contentType ? { contentType, schema: media.schema ?? {}, required: Boolean(requestBody?.required) } : undefined,
        auth: !scheme ? 'none' : api === 'admin' ? 'admin' : 'apiKey',
        responses: operation.responses,
      });
    }
  }
  return operations;
}

// ---------------------------------------------------------------------------------------------
// Values that only the world can supply, resolved when the request is sent

/** An id or ref of merchant A ('own') or merchant B ('foreign'), picked from the current pools. */
class WorldRef {
  constructor(
    readonly pool: PoolName | 'merchant' | 'media',
    readonly who: 'own' | 'foreign',
    readonly pick: number,
  ) {}
}

/** Text placed in the URL exactly as written: broken percent-encodings, encoded slashes and dots. */
class Verbatim {
  constructor(readonly text: string) {}
}

const VERBATIM = [
  '%',
  '%zz',
  '%c0%af',
  '%ff%fe',
  '%00',
  '%2F',
  '%5C',
  '%E2%80%AE',
  '..%2F..%2Fetc',
  '%25',
  '%F0%9F%A6%93',
  '%ED%A0%80',
  '%0d%0aX-Injected:%201',
];

const ADMIN_MEMBERS: Record<string, WorldRef['pool']> = {
  merchant_id: 'merchant',
  key_id: 'apiKeyIds',
  slug: 'storeSlugs',
  group_id: 'groupIds',
  rule_id: 'ruleIds',
  supplier_ref: 'supplierRefs',
  key: 'attributeKeys',
  product_ref: 'productRefs',
  endpoint_id: 'endpointIds',
  delivery_id: 'deliveryIds',
  before_id: 'deliveryIds',
  base: 'currencies',
  quote: 'currencies',
  customer_group_id: 'groupIds',
  store_id: 'storeIds',
  store: 'storeSlugs',
  excluded_stores: 'storeSlugs',
  ref: 'productRefs',
};
const PUBLIC_MEMBERS: Record<string, WorldRef['pool']> = {
  id: 'productIds',
  ids: 'productIds',
  after_id: 'productIds',
  store: 'storeSlugs',
  key: 'media',
};

/** How often a member names A's things, B's things, or whatever its schema allows. */
interface RefWeights {
  own: number;
  foreign: number;
  random: number;
}
/** Path and query parameters probe: often B's ids, often ids of nobody. */
const PARAMETER_WEIGHTS: RefWeights = { own: 5, foreign: 2, random: 2 };
/** Body members mostly name A's things, so that valid bodies pass the referential rules. */
const BODY_WEIGHTS: RefWeights = { own: 16, foreign: 1, random: 1 };

function worldHook(members: Record<string, WorldRef['pool']>, schemas: () => SchemaArbitraries, weights: RefWeights) {
  return (name: string, schema: Json, fromSchema: fc.Arbitrary<unknown>): fc.Arbitrary<unknown> => {
    const pool = members[name];
    if (!pool) return fromSchema;
    const resolved = schemas().resolve(schema);
    const one = (random: fc.Arbitrary<unknown>) =>
      fc.oneof(
        { arbitrary: fc.nat().map((pick) => new WorldRef(pool, 'own', pick)), weight: weights.own },
        { arbitrary: fc.nat().map((pick) => new WorldRef(pool, 'foreign', pick)), weight: weights.foreign },
        { arbitrary: random, weight: weights.random },
      );
    const types = SchemaArbitraries.types(resolved);
    let arbitrary: fc.Arbitrary<unknown> = types.includes('array')
      ? fc.array(one(schemas().valid(resolved.items ?? {})), {
          minLength: resolved.minItems ?? 0,
          maxLength: Math.min(resolved.maxItems ?? 5, 5),
        })
      : one(fromSchema);
    if (types.includes('null')) arbitrary = fc.oneof({ arbitrary, weight: 4 }, { arbitrary: fc.constant(null), weight: 1 });
    return arbitrary;
  };
}

// ---------------------------------------------------------------------------------------------
// Request plans: what fast-check draws

type AuthChoice =
  | 'good'
  | 'other-merchant'
  | 'none'
  | 'empty'
  | 'basic'
  | 'garbage'
  | 'revoked'
  | 'wrong-api'
  | 'lowercase'
  | 'spaces'
  | 'trailing-junk'
  | 'huge';

/** A request body; `label` names the kind of damage in the report. */
type BodyPlan = { label?: string; contentType?: string | null } & (
  | { kind: 'json'; value: unknown }
  | { kind: 'text'; text: string }
  | { kind: 'bytes'; bytes: Uint8Array }
  | { kind: 'deep'; depth: number; shape: 'array' | 'object' | 'member' }
  | { kind: 'oversized'; extra: number; chunked: boolean }
  /** Each line a JSON value, or a RawLine sent as it is. */
  | { kind: 'ndjson'; lines: unknown[] }
  | { kind: 'none' }
);

/** An NDJSON line written as is (malformed JSON, deep nesting). */
class RawLine {
  constructor(readonly text: string) {}
}

interface RequestPlan {
  operation: FuzzOperation;
  variant: string;
  path: Record<string, unknown>;
  query: Array<[string, unknown]>;
  headers: Array<[string, unknown]>;
  auth: AuthChoice;
  body?: BodyPlan;
}

const JSON_CONTENT_TYPES = ['application/json', 'application/json; charset=utf-8', 'Application/JSON'];
/** The spellings of an operation's declared JSON media type a valid request may use. */
const declaredJsonTypes = (declared: string) =>
  declared === 'application/json' ? JSON_CONTENT_TYPES : [declared, `${declared}; charset=utf-8`, declared.toUpperCase()];
const WRONG_CONTENT_TYPES = [
  'text/plain',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=xyz',
  'application/xml',
  'application/json-patch+json',
  'application/jsonx',
  'application/json, text/plain',
  ';;;',
  'application/x-ndjson',
  'image/png',
];

// A merchant's API key is an admin credential too (scopes: test/http/api-key-scopes.test.ts walks
// every operation with a key of each scope), so on the admin API it is no wrong credential.
const BAD_ADMIN_AUTH: AuthChoice[] = ['none', 'empty', 'basic', 'garbage', 'trailing-junk', 'huge'];
const BAD_KEY_AUTH: AuthChoice[] = ['none', 'empty', 'basic', 'garbage', 'revoked', 'wrong-api', 'trailing-junk', 'huge'];

export interface FuzzLimits {
  adminBodyBytes: number;
  importBodyBytes: number;
  maxJsonDepth: number;
}

class PlanArbitraries {
  readonly publicSchemas: SchemaArbitraries;
  readonly adminSchemas: SchemaArbitraries;

  constructor(private readonly limits: FuzzLimits) {
    this.publicSchemas = new SchemaArbitraries(
      publicDocument,
      worldHook(PUBLIC_MEMBERS, () => this.publicSchemas, BODY_WEIGHTS),
    );
    this.adminSchemas = new SchemaArbitraries(
      adminDocument,
      worldHook(ADMIN_MEMBERS, () => this.adminSchemas, BODY_WEIGHTS),
    );
  }

  operations(): FuzzOperation[] {
    return [...operationsOf('public', publicDocument, this.publicSchemas), ...operationsOf('admin', adminDocument, this.adminSchemas)];
  }

  private schemas(operation: FuzzOperation): SchemaArbitraries {
    return operation.api === 'admin' ? this.adminSchemas : this.publicSchemas;
  }

  private validParam(operation: FuzzOperation, parameter: Json): fc.Arbitrary<unknown> {
    const schemas = this.schemas(operation);
    if (/^if-none-match$/i.test(parameter.name)) {
      return fc.oneof(fc.constant('etag'), fc.constantFrom('*', 'W/"x"', '"a", "b"', '""'), schemas.valid(parameter.schema));
    }
    const members = operation.api === 'admin' ? ADMIN_MEMBERS : PUBLIC_MEMBERS;
    return worldHook(members, () => schemas, PARAMETER_WEIGHTS)(parameter.name, parameter.schema, schemas.valid(parameter.schema));
  }

  private invalidParam(operation: FuzzOperation, parameter: Json): fc.Arbitrary<unknown> {
    return fc.oneof(
      { arbitrary: this.schemas(operation).invalid(parameter.schema), weight: 3 },
      { arbitrary: fc.constantFrom(...HOSTILE_STRINGS), weight: 1 },
      { arbitrary: fc.constantFrom(...VERBATIM).map((text) => new Verbatim(text)), weight: 1 },
      {
        arbitrary: fc.constantFrom(
          '99999999999999999999',
          '1e3',
          '0x10',
          '+1',
          ' 1',
          '1 ',
          '１',
          '-0',
          'NaN',
          'Infinity',
          '1,2',
          '0',
          '-1',
        ),
        weight: 2,
      },
    );
  }

  /** All parameters valid (optional ones sometimes left out). */
  private validParams(operation: FuzzOperation) {
    const entries = operation.parameters.map((parameter) => {
      const value = this.validParam(operation, parameter);
      return parameter.required ? value : fc.option(value, { nil: undefined, freq: 2 });
    });
    return fc.tuple(...entries).map((values) => {
      const path: Record<string, unknown> = {};
      const query: Array<[string, unknown]> = [];
      const headers: Array<[string, unknown]> = [];
      operation.parameters.forEach((parameter, index) => {
        const value = values[index];
        if (value === undefined) return;
        if (parameter.in === 'path') path[parameter.name] = value;
        else if (parameter.in === 'query') query.push([parameter.name, value]);
        else if (parameter.in === 'header') headers.push([parameter.name, value]);
      });
      return { path, query, headers };
    });
  }

  private auth(operation: FuzzOperation): fc.Arbitrary<AuthChoice> {
    if (operation.auth === 'none') return fc.constantFrom<AuthChoice>('none', 'none', 'garbage', 'good');
    const good: AuthChoice[] =
      operation.auth === 'apiKey' ? ['good', 'good', 'good', 'good', 'other-merchant', 'lowercase', 'spaces'] : ['good'];
    return fc.constantFrom(...good);
  }

  private validBody(operation: FuzzOperation): fc.Arbitrary<BodyPlan | undefined> {
    const body = operation.body;
    if (!body) return fc.constant(undefined);
    if (body.contentType === 'application/x-ndjson') return this.ndjson(false);
    return fc
      .tuple(this.adminSchemas.valid(body.schema), fc.constantFrom(...declaredJsonTypes(body.contentType)))
      .map(([value, contentType]): BodyPlan => ({ kind: 'json', value, contentType }));
  }

  /** Import lines: product upserts and deletes (the document's line format), some of them broken. */
  private ndjson(malformed: boolean): fc.Arbitrary<BodyPlan> {
    const schemas = this.adminSchemas;
    const product = (schemas.doc.components.schemas as Json).ProductSourceInput as Json;
    const ref = worldHook(ADMIN_MEMBERS, () => schemas, BODY_WEIGHTS)(
      'ref',
      { type: 'string', pattern: '^[A-Za-z0-9._:-]{1,128}$' },
      schemas.valid({ type: 'string', pattern: '^[A-Za-z0-9._:-]{1,128}$' }),
    );
    const upsert = fc
      .tuple(schemas.valid(product), ref)
      .map(([source, r]) => ({ op: 'upsert_product', product: { ...(source as Json), ref: r } }));
    const remove = ref.map((r) => ({ op: 'delete_product', ref: r }));
    const good = fc.oneof({ arbitrary: upsert, weight: 3 }, { arbitrary: remove, weight: 1 });
    const bad = fc.oneof(
      fc.tuple(schemas.invalid(product), ref).map(([source, r]) => ({
        op: 'upsert_product',
        product: typeof source === 'object' && source && !Array.isArray(source) ? { ...(source as Json), ref: r } : source,
      })),
      fc.constantFrom(
        { op: 'rename_product', ref: 'x' },
        { op: 'delete_product' },
        { op: 'delete_product', ref: '' },
        [],
        'line',
        42,
        null,
      ),
      fc
        .constantFrom('{"op": "upsert_product", ', '\u0000', '\r', '   ', '{"op":"delete_product","ref":"AA-1"}\r', 'NaN', '\ufeff{}')
        .map((text) => new RawLine(text)),
      fc
        .constantFrom(this.limits.maxJsonDepth + 1, 1000, 50_000)
        .map(
          (depth) => new RawLine(`{"op":"upsert_product","product":{"ref":"DEEP","overrides":${'['.repeat(depth)}${']'.repeat(depth)}}}`),
        ),
    );
    const line = malformed ? fc.oneof({ arbitrary: good, weight: 2 }, { arbitrary: bad, weight: 2 }) : good;
    return fc
      .tuple(
        fc.array(line, { minLength: malformed ? 1 : 0, maxLength: 6 }),
        fc.constantFrom('application/x-ndjson', 'application/x-ndjson; charset=utf-8'),
      )
      .map(
        ([lines, contentType]): BodyPlan => ({
          kind: 'ndjson',
          lines,
          contentType,
          label: malformed ? 'import with bad lines' : undefined,
        }),
      );
  }

  /** A valid body with one member (or the whole body) replaced by a value its schema rejects. */
  private mutatedBody(operation: FuzzOperation): fc.Arbitrary<BodyPlan> {
    const schemas = this.adminSchemas;
    const schema = operation.body!.schema;
    return schemas.valid(schema).chain((value) => {
      const nodes = nodesOf(schemas, schema, value);
      return fc.nat({ max: nodes.length - 1 }).chain((index) => {
        const node = nodes[index]!;
        return schemas
          .invalid(node.schema)
          .map((bad): BodyPlan => ({ kind: 'json', value: replaceAt(value, node.path, bad), label: 'invalid member' }));
      });
    });
  }

  private malformedBody(operation: FuzzOperation): fc.Arbitrary<BodyPlan> {
    const body = operation.body!;
    if (body.contentType === 'application/x-ndjson') {
      return fc.oneof(
        { arbitrary: this.ndjson(true), weight: 4 },
        {
          arbitrary: fc
            .integer({ min: 1, max: 4096 })
            .map((extra): BodyPlan => ({ kind: 'oversized', extra, chunked: false, contentType: 'application/x-ndjson' })),
          weight: 1,
        },
        {
          arbitrary: fc.constantFrom<BodyPlan>(
            { kind: 'none', contentType: null },
            { kind: 'none', contentType: 'application/x-ndjson' },
            { kind: 'bytes', bytes: Uint8Array.from([0xff, 0xfe, 0x00, 0x7b, 0x0a]), contentType: 'application/x-ndjson' },
          ),
          weight: 1,
        },
      );
    }
    // The malformed bodies are sent as the operation's own JSON media type (a merge patch's, for a PATCH that takes one).
    const jsonType = body.contentType;
    const deep = fc
      .record({
        depth: fc.constantFrom(
          this.limits.maxJsonDepth - 1,
          this.limits.maxJsonDepth,
          this.limits.maxJsonDepth + 1,
          this.limits.maxJsonDepth * 2,
          1000,
          100_000,
        ),
        shape: fc.constantFrom<'array' | 'object' | 'member'>('array', 'object', 'member'),
      })
      .map(
        ({ depth, shape }): BodyPlan => ({
          kind: 'deep',
          depth,
          shape,
          contentType: jsonType,
          label: depth > this.limits.maxJsonDepth ? 'nested too deep' : 'nested up to the limit',
        }),
      );
    const text = fc
      .tuple(
        this.adminSchemas.valid(body.schema),
        fc.nat(),
        fc.constantFrom('truncate', 'garbage', 'quotes', 'bom', 'comma', 'literal', 'unicode'),
      )
      .map(([value, cut, how]): BodyPlan => {
        const json = toJsonText(value);
        const broken = {
          truncate: json.slice(0, cut % Math.max(1, json.length)),
          garbage: `${json},}`,
          quotes: json.replace(/"/g, "'"),
          bom: `\ufeff${json}`,
          comma: json.replace(/}$/, ',}'),
          literal: ['NaN', 'undefined', '{"a":Infinity}', '{"a":01}', '{"a":"\\x41"}', '{"a":"\t"}', '// comment\n{}', '{} {}'][cut % 8]!,
          unicode: ['\u0000', '🦓', '{"\ud800":1}', '{"name":"\u202e"}', 'ｎｕｌｌ'][cut % 5]!,
        }[how];
        return { kind: 'text', text: broken, contentType: jsonType, label: 'malformed JSON' };
      });
    const bytes = fc
      .constantFrom(
        Uint8Array.from([0x7b, 0x22, 0x6e, 0x61, 0x6d, 0x65, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0xc0, 0xaf, 0x22, 0x7d]),
        Uint8Array.from([0xfe, 0xff, 0x00, 0x7b, 0x00, 0x7d]),
        Uint8Array.from([0x00, 0x00, 0x00]),
      )
      .map((b): BodyPlan => ({ kind: 'bytes', bytes: b, contentType: jsonType, label: 'invalid UTF-8' }));
    const wrongType = fc
      .tuple(this.adminSchemas.valid(body.schema), fc.constantFrom(...WRONG_CONTENT_TYPES, null))
      .map(([value, contentType]): BodyPlan => ({ kind: 'json', value, contentType, label: 'wrong content type' }));
    const topLevel = fc
      .constantFrom<unknown>([], 'text', 42, null, true, [{}], new RawJson('1e400'))
      .map((value): BodyPlan => ({ kind: 'json', value, label: 'wrong top-level type' }));
    const none = fc.constantFrom<BodyPlan>(
      { kind: 'none', contentType: null, label: 'missing' },
      { kind: 'none', contentType: jsonType, label: 'missing' },
      { kind: 'text', text: '', contentType: jsonType, label: 'missing' },
    );
    const oversized = fc.record({ extra: fc.integer({ min: 1, max: 4096 }), chunked: fc.boolean() }).map(
      ({ extra, chunked }): BodyPlan => ({
        kind: 'oversized',
        extra,
        chunked,
        contentType: jsonType,
        label: chunked ? 'oversized, chunked' : 'oversized',
      }),
    );
    return fc.oneof(
      { arbitrary: this.mutatedBody(operation), weight: 6 },
      { arbitrary: deep, weight: 2 },
      { arbitrary: text, weight: 2 },
      { arbitrary: bytes, weight: 1 },
      { arbitrary: wrongType, weight: 1 },
      { arbitrary: topLevel, weight: 1 },
      { arbitrary: none, weight: 1 },
      { arbitrary: oversized, weight: 1 },
    );
  }

  /** Every kind of request for one operation. */
  plan(operation: FuzzOperation): fc.Arbitrary<RequestPlan> {
    const params = this.validParams(operation);
    const base = fc.record({ params, auth: this.auth(operation), body: this.validBody(operation) });
    const make =
      (variant: string) =>
      (b: {
        params: { path: Record<string, unknown>; query: Array<[string, unknown]>; headers: Array<[string, unknown]> };
        auth: AuthChoice;
        body: BodyPlan | undefined;
      }): RequestPlan => ({ operation, variant, ...b.params, auth: b.auth, body: b.body });
    const variants: Array<fc.WeightedArbitrary<RequestPlan>> = [{ arbitrary: base.map((b) => make('valid')(b)), weight: 8 }];

    if (operation.parameters.length) {
      const badParam = fc.tuple(base, fc.nat({ max: operation.parameters.length - 1 })).chain(([b, index]) => {
        const parameter = operation.parameters[index]!;
        return this.invalidParam(operation, parameter).map((bad) => {
          const plan = make(`bad ${parameter.in} parameter`)(b);
          if (parameter.in === 'path') plan.path = { ...plan.path, [parameter.name]: bad };
          else if (parameter.in === 'query') plan.query = [...plan.query.filter(([n]) => n !== parameter.name), [parameter.name, bad]];
          else plan.headers = [...plan.headers.filter(([n]) => n !== parameter.name), [parameter.name, bad]];
          return plan;
        });
      });
      variants.push({ arbitrary: badParam, weight: 4 });
    }
    const queryParameters = operation.parameters.filter((p) => p.in === 'query');
    const queryTricks = fc
      .tuple(base, fc.constantFrom('duplicate', 'unknown', 'missing', 'empty', 'case', 'array-syntax'), fc.nat())
      .chain(([b, trick, pick]) => {
        const plan = make(`query ${trick}`)(b);
        const chosen = queryParameters[pick % Math.max(1, queryParameters.length)];
        if (trick === 'unknown' || !chosen) {
          return fc
            .constantFrom<Array<[string, unknown]>>(
              [['foo', 'bar']],
              [
                ['__proto__', 'x'],
                ['constructor', 'y'],
              ],
              [['store', '']],
              [['', 'x']],
              [['a'.repeat(3000), 'b']],
              [['page%00', '1']],
            )
            .map((extra) => ({ ...plan, query: [...plan.query, ...extra] }));
        }
        if (trick === 'missing') return fc.constant({ ...plan, query: plan.query.filter(([n]) => n !== chosen.name) });
        if (trick === 'empty')
          return fc.constant({
            ...plan,
            query: [...plan.query.filter(([n]) => n !== chosen.name), [chosen.name, '']] as Array<[string, unknown]>,
          });
        if (trick === 'case')
          return fc.constant({ ...plan, query: [...plan.query, [chosen.name.toUpperCase(), '1']] as Array<[string, unknown]> });
        if (trick === 'array-syntax')
          return fc.constant({
            ...plan,
            query: [...plan.query, [`${chosen.name}[]`, '1'], [`${chosen.name}[0]`, '2']] as Array<[string, unknown]>,
          });
        return fc.tuple(this.validParam(operation, chosen), this.validParam(operation, chosen)).map(([first, second]) => ({
          ...plan,
          query: [...plan.query.filter(([n]) => n !== chosen.name), [chosen.name, first], [chosen.name, second]] as Array<
            [string, unknown]
          >,
        }));
      });
    variants.push({ arbitrary: queryTricks, weight: 2 });

    if (operation.auth !== 'none') {
      const bad = operation.auth === 'admin' ? BAD_ADMIN_AUTH : BAD_KEY_AUTH;
      variants.push({
        arbitrary: fc.tuple(base, fc.constantFrom(...bad)).map(([b, auth]) => ({ ...make(`auth ${auth}`)(b), auth })),
        weight: 2,
      });
    }
    if (operation.body) {
      variants.push({
        arbitrary: fc
          .tuple(base, this.malformedBody(operation))
          .map(([b, body]) => ({ ...make(`body ${body.label ?? body.kind}`)(b), body })),
        weight: 6,
      });
    } else if (operation.method !== 'GET') {
      const unexpected = fc.oneof(
        this.adminSchemas
          .valid({ type: 'object', properties: { since: { type: 'string' } } })
          .map((value): BodyPlan => ({ kind: 'json', value, contentType: 'application/json' })),
        fc.constant<BodyPlan>({ kind: 'text', text: '{"unterminated": ', contentType: 'application/json' }),
        fc.constant<BodyPlan>({ kind: 'oversized', extra: 10, chunked: true, contentType: 'application/json' }),
      );
      variants.push({
        arbitrary: fc.tuple(base, unexpected).map(([b, body]) => ({ ...make(`unexpected body ${body.kind}`)(b), body })),
        weight: 1,
      });
    }
    const odd = fc.constantFrom<Array<[string, unknown]>>(
      [['Accept', 'application/xml']],
      [['Accept', 'text/html;q=0.9, */*;q=0.1']],
      [['Accept-Encoding', 'br']],
      [['Accept-Encoding', 'gzip;q=0, identity;q=0']],
      [['Accept-Encoding', 'x-unknown, *;q=0']],
      [['If-None-Match', '*']],
      [['If-None-Match', 'W/"0"']],
      [['X-Request-Id', 'x'.repeat(2000)]],
      [['X-Request-Id', '\u00ff\u00fe ; DROP']],
      [['X-Forwarded-For', '127.0.0.1, ::1']],
      [['Cookie', `a=${'b'.repeat(6000)}`]],
      [['Range', 'bytes=0-1']],
      [['Content-Type', 'application/json']],
      [['Origin', 'https://evil.example']],
      [['X-HTTP-Method-Override', 'DELETE']],
    );
    variants.push({
      arbitrary: fc.tuple(base, odd).map(([b, headers]) => ({ ...make('odd headers')(b), headers: [...b.params.headers, ...headers] })),
      weight: 1,
    });
    return fc.oneof(...variants);
  }
}

/** Every node of a value with its schema (for replacing one of them by a value the schema rejects). */
function nodesOf(
  schemas: SchemaArbitraries,
  schema: Json,
  value: unknown,
  path: Array<string | number> = [],
): Array<{ path: Array<string | number>; schema: Json }> {
  const nodes = [{ path, schema }];
  const resolved = schemas.resolve(schema);
  if (Array.isArray(value) && resolved.items) {
    value.forEach((item, index) => nodes.push(...nodesOf(schemas, resolved.items, item, [...path, index])));
  } else if (value && typeof value === 'object' && !(value instanceof RawJson) && !(value instanceof WorldRef)) {
    for (const [key, member] of Object.entries(value)) {
      const memberSchema =
        resolved.properties?.[key] ?? (typeof resolved.additionalProperties === 'object' ? resolved.additionalProperties : undefined);
      if (memberSchema) nodes.push(...nodesOf(schemas, memberSchema, member, [...path, key]));
    }
  }
  return nodes;
}

function replaceAt(value: unknown, path: Array<string | number>, replacement: unknown): unknown {
  if (!path.length) return replacement;
  const [head, ...rest] = path;
  if (Array.isArray(value)) return value.map((item, index) => (index === head ? replaceAt(item, rest, replacement) : item));
  return { ...(value as Json), [head!]: replaceAt((value as Json)[head!], rest, replacement) };
}

// ---------------------------------------------------------------------------------------------
// Turning a plan into a request against the current world

interface Expectation {
  status: number;
  code?: string;
  /** The problem must name this input, for this reason. */
  name?: RegExp;
  reason?: RegExp;
  why: string;
}

interface BuiltRequest {
  plan: RequestPlan;
  method: string;
  pathAndQuery: string;
  headers: Record<string, string>;
  body?: string | Uint8Array | (() => ReadableStream<Uint8Array>);
  bodySize: number;
  /** What of the request the response may legitimately echo (path, query, body text). */
  echo: string;
  /** Whose data the response may hold: a seeded merchant, 'all' (admin listings), or nobody's. */
  scope: SeededMerchant | 'all' | 'nobody';
  expect?: Expectation;
}

function pickFrom<T>(pool: readonly T[], pick: number, fallback: T): T {
  return pool.length ? pool[pick % pool.length]! : fallback;
}

function resolveRefs(value: unknown, world: World): unknown {
  if (value instanceof WorldRef) {
    const merchant = value.who === 'own' ? world.a : world.b;
    // A fifth of A's picks go to a merchant the fuzzer created instead.
    if (value.pool === 'merchant')
      return value.who === 'own' && value.pick % 5 === 4 ? pickFrom(world.others, value.pick, merchant.id) : merchant.id;
    if (value.pool === 'media') return pickFrom(world.mediaKeys, value.pick, 'none.jpg');
    const pool = merchant.pools[value.pool] as Array<string | number>;
    const numeric = /Ids$/.test(value.pool);
    return pickFrom<string | number>(pool, value.pick, numeric ? 987654 : 'absent');
  }
  if (value instanceof RawJson || value instanceof Verbatim || value instanceof RawLine) return value;
  if (Array.isArray(value)) return value.map((item) => resolveRefs(item, world));
  if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, resolveRefs(v, world)]));
  return value;
}

const uniqueBy = <T>(items: T[], key: (item: T) => string) =>
  items.filter((item, index) => items.findIndex((other) => key(other) === key(item)) === index);

/**
 * The rules between members that the documents state in prose rather than in schemas (no
 * duplicates, cost and currency together, min_cost <= max_cost, https receivers), applied to a
 * valid body so that it stays valid once its world references are filled in.
 */
function keepValid(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(keepValid);
  if (!value || typeof value !== 'object' || value instanceof RawJson) return value;
  const body: Json = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, keepValid(v)]));
  for (const member of ['events', 'eans', 'excluded_stores']) {
    if (Array.isArray(body[member])) body[member] = uniqueBy(body[member] as unknown[], String);
  }
  if (Array.isArray(body.offers)) body.offers = uniqueBy(body.offers as Json[], (o) => String(o.supplier_ref));
  if (Array.isArray(body.supplier_attributes))
    body.supplier_attributes = uniqueBy(body.supplier_attributes as Json[], (a) => `${a.supplier_ref}\u0000${a.key}`);
  if (body.own_stock && typeof body.own_stock === 'object' && (body.own_stock.cost == null) !== (body.own_stock.currency == null)) {
    body.own_stock = { quantity: body.own_stock.quantity };
  }
  if (typeof body.min_cost === 'string' && typeof body.max_cost === 'string' && Number(body.min_cost) > Number(body.max_cost)) {
    [body.min_cost, body.max_cost] = [body.max_cost, body.min_cost];
  }
  if (typeof body.url === 'string' && 'events' in body) body.url = body.url.replace(/^http:/, 'https:');
  return body;
}

/** The query rules the documents state in prose: ids excludes paging, after_id excludes page, since_id needs since. */
function keepValidQuery(query: Array<[string, unknown]>): void {
  const has = (name: string) => query.some(([n]) => n === name);
  const drop = (...names: string[]) => {
    for (let i = query.length - 1; i >= 0; i--) if (names.includes(query[i]![0])) query.splice(i, 1);
  };
  if (has('ids')) drop('page', 'per_page', 'after_id');
  if (has('after_id')) drop('page');
  if (has('since_id') && !has('since')) drop('since_id');
}

function asText(value: unknown): string {
  if (value instanceof RawJson || value instanceof Verbatim) return value.text;
  if (typeof value === 'string') return value;
  if (Array.isArray(value)) return value.map(asText).join(',');
  if (value === null || typeof value !== 'object') return String(value);
  return JSON.stringify(value);
}

/** Percent-encodes text as UTF-8; a lone surrogate has no UTF-8 form and goes as U+FFFD (Verbatim sends broken ones). */
function percentEncoded(text: string): string {
  return encodeURIComponent(text.replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, '\ufffd'));
}

function encoded(value: unknown): string {
  if (value instanceof Verbatim) return value.text;
  if (Array.isArray(value)) return value.map((item) => encoded(item)).join(',');
  return percentEncoded(asText(value));
}

/** Header values must be Latin-1 without controls to be sendable at all. */
function headerText(value: unknown): string {
  return asText(value)
    .replace(/[^\x20-\x7e\x80-\xff]/g, '?')
    .slice(0, 8000);
}

function authorization(choice: AuthChoice, operation: FuzzOperation, world: World): string | undefined {
  const own = operation.auth === 'admin' ? ADMIN_TOKEN : world.a.key;
  switch (choice) {
    case 'good':
      return operation.auth === 'none' ? undefined : `Bearer ${own}`;
    case 'other-merchant':
      return `Bearer ${world.b.key}`;
    case 'none':
      return undefined;
    case 'empty':
      return 'Bearer ';
    case 'basic':
      return `Basic ${Buffer.from(`admin:${own}`).toString('base64')}`;
    case 'garbage':
      return `Bearer cps_${'A'.repeat(43)}`;
    case 'revoked':
      return `Bearer ${world.a.revokedKey}`;
    // An API key on the admin API, the admin token on the public API.
    case 'wrong-api':
      return `Bearer ${operation.auth === 'admin' ? world.a.key : ADMIN_TOKEN}`;
    case 'lowercase':
      return `bearer ${own}`;
    case 'spaces':
      return `Bearer    ${own}  `;
    case 'trailing-junk':
      return `Bearer ${own} extra`;
    case 'huge':
      return `Bearer ${own}${'x'.repeat(7000)}`;
    default:
      return undefined;
  }
}

const GOOD_AUTH = new Set<AuthChoice>(['good', 'other-merchant', 'lowercase', 'spaces']);

function deepText(depth: number, shape: 'array' | 'object' | 'member'): string {
  if (shape === 'array') return `${'['.repeat(depth)}${']'.repeat(depth)}`;
  if (shape === 'object') return `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
  // A member nested below the top-level object: depth counts the object too.
  return `{"name":${'['.repeat(depth - 1)}"x"${']'.repeat(depth - 1)}}`;
}

function build(plan: RequestPlan, world: World, limits: FuzzLimits): BuiltRequest {
  const { operation } = plan;
  const path = resolveRefs(plan.path, world) as Record<string, unknown>;
  // Merchant B is only ever read: a write aimed at B goes to A (its ids in A's paths stay).
  if (operation.api === 'admin' && operation.method !== 'GET' && lenientNumber(path.merchant_id) === world.b.id)
    path.merchant_id = world.a.id;
  // A's reading key is never revoked, or the rest of the run would read nothing.
  if (
    operation.operationId === 'revokeApiKey' &&
    lenientNumber(path.merchant_id) === world.a.id &&
    lenientNumber(path.key_id) === world.a.keyId
  ) {
    path.key_id = pickFrom(world.a.pools.apiKeyIds, 0, 987654);
  }
  // An own delivery is addressed under its own endpoint (other pairings are 404 probes already).
  const endpointOfDelivery = world.a.deliveryEndpoints.get(path.delivery_id as number);
  if (endpointOfDelivery !== undefined && plan.path.endpoint_id instanceof WorldRef && plan.path.endpoint_id.who === 'own') {
    path.endpoint_id = endpointOfDelivery;
  }
  const pathname = operation.template.replace(/\{([^}]+)\}/g, (_m, name: string) => {
    const segment = encoded(path[name]);
    // Empty and dot segments would leave the route (URL normalization), so they are padded.
    return /^(\.|%2e){0,2}$/i.test(segment) ? `${segment}_` : segment;
  });
  const query = resolveRefs(plan.query, world) as Array<[string, unknown]>;
  if (plan.variant === 'valid') keepValidQuery(query);
  const search = query.map(([name, value]) => `${percentEncoded(name)}=${encoded(value)}`);
  const pathAndQuery = `${pathname}${search.length ? `?${search.join('&')}` : ''}`;

  const headers: Record<string, string> = {};
  for (const [name, raw] of resolveRefs(plan.headers, world) as Array<[string, unknown]>) {
    headers[name] = raw === 'etag' && /^if-none-match$/i.test(name) ? (world.etags.get(pathname) ?? '"none"') : headerText(raw);
  }
  const auth = authorization(plan.auth, operation, world);
  if (auth !== undefined) headers.Authorization = auth;

  let body: BuiltRequest['body'];
  let bodyText = '';
  let bodySize = 0;
  let expect: Expectation | undefined;
  const limit = operation.body?.contentType === 'application/x-ndjson' ? limits.importBodyBytes : limits.adminBodyBytes;
  const plannedBody = plan.body ? (resolveRefs(plan.body, world) as BodyPlan) : undefined;
  if (plannedBody && plan.variant === 'valid') {
    if (plannedBody.kind === 'json') plannedBody.value = keepValid(plannedBody.value);
    if (plannedBody.kind === 'ndjson') plannedBody.lines = plannedBody.lines.map(keepValid);
  }
  if (plannedBody) {
    if (plannedBody.contentType) headers['Content-Type'] = plannedBody.contentType;
    switch (plannedBody.kind) {
      case 'json':
        bodyText = toJsonText(plannedBody.value);
        body = bodyText;
        break;
      case 'text':
        bodyText = plannedBody.text;
        body = bodyText;
        break;
      case 'bytes':
        body = plannedBody.bytes;
        bodySize = plannedBody.bytes.length;
        break;
      case 'ndjson':
        bodyText = plannedBody.lines.map((line) => (line instanceof RawLine ? line.text : toJsonText(line))).join('\n');
        body = bodyText;
        break;
      case 'deep': {
        bodyText = deepText(plannedBody.depth, plannedBody.shape);
        body = bodyText;
        if (plannedBody.depth > limits.maxJsonDepth && Buffer.byteLength(bodyText) <= limit) {
          expect = {
            status: 400,
            code: 'invalid_body',
            name: /^\/$/,
            reason: /nested deeper than/,
            why: `a body nested ${plannedBody.depth} deep (limit ${limits.maxJsonDepth})`,
          };
        }
        break;
      }
      case 'oversized': {
        const size = limit + plannedBody.extra;
        const filler =
          operation.body?.contentType === 'application/x-ndjson' ? `${JSON.stringify({ op: 'delete_product', ref: 'OVERSIZE' })}\n` : '';
        const text = filler ? filler.repeat(Math.ceil(size / filler.length)) : `{"name":"${'x'.repeat(size)}"}`;
        bodySize = Buffer.byteLength(text);
        body = plannedBody.chunked ? () => chunkedStream(text) : text;
        bodyText = '';
        // Only an operation that takes a body limits it; the others never read one.
        if (operation.body)
          expect = {
            status: 413,
            code: 'payload_too_large',
            why: `a body of ${bodySize} bytes (limit ${limit})${plannedBody.chunked ? ' sent chunked' : ''}`,
          };
        break;
      }
      case 'none':
        break;
      default:
    }
    if (typeof body === 'string') bodySize = Buffer.byteLength(body);
  }
  // Bad credentials answer 401 before anything else is looked at.
  if (operation.auth !== 'none' && !GOOD_AUTH.has(plan.auth))
    expect = { status: 401, code: 'unauthorized', why: `credentials "${plan.auth}"` };

  let scope: BuiltRequest['scope'] = 'nobody';
  if (operation.api === 'public' && GOOD_AUTH.has(plan.auth)) scope = plan.auth === 'other-merchant' ? world.b : world.a;
  if (operation.api === 'admin') {
    const merchantId = lenientNumber(path.merchant_id);
    if (!('merchant_id' in path) || operation.template === '/admin/v1/merchants') scope = 'all';
    else if (merchantId === world.a.id) scope = world.a;
    else if (merchantId === world.b.id) scope = world.b;
  }
  return {
    plan,
    method: operation.method,
    pathAndQuery,
    headers,
    body,
    bodySize,
    scope,
    expect,
    echo: `${safeDecode(pathAndQuery)}\n${bodyText.length > 200_000 ? '' : bodyText}`,
  };
}

/** A parameter read as leniently as any parser might: '1', ' 1', '+1', '1e0' and '0x1' all name 1. */
function lenientNumber(value: unknown): number {
  return Number(safeDecode(encoded(value)).trim());
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

function chunkedStream(text: string): ReadableStream<Uint8Array> {
  const bytes = Buffer.from(text);
  let offset = 0;
  return new ReadableStream({
    pull(controller) {
      if (offset >= bytes.length) return controller.close();
      controller.enqueue(bytes.subarray(offset, offset + 16_384));
      offset += 16_384;
      return undefined;
    },
  });
}

// ---------------------------------------------------------------------------------------------
// Sending and checking

export interface FuzzFailure {
  seed: number;
  /** 1-based position of the request in the run: replaying the seed up to it reproduces it. */
  index: number;
  operationId: string;
  variant: string;
  request: string;
  status: number | 'no response';
  problem: string;
}

export interface FuzzReport {
  seed: number;
  requests: number;
  milliseconds: number;
  byOperation: Record<string, Record<string, number>>;
  byVariant: Record<string, number>;
  operations: string[];
  failures: FuzzFailure[];
}

interface Sent {
  status: number;
  headers: Headers;
  text: string;
}

async function send(baseUrl: string, request: BuiltRequest): Promise<Sent> {
  // Timers first: after seconds of drawing requests without a pause (a loaded machine), fetch would
  // reuse a kept-alive connection whose time-out the server has yet to run, and meet its reset.
  await new Promise((resolve) => setTimeout(resolve, 0));
  const body = typeof request.body === 'function' ? request.body() : request.body;
  const response = await fetch(`${baseUrl}${request.pathAndQuery}`, {
    method: request.method,
    headers: request.headers,
    body: body as BodyInit | undefined,
    redirect: 'manual',
    signal: AbortSignal.timeout(20_000),
    ...(body instanceof ReadableStream ? { duplex: 'half' } : {}),
  });
  return { status: response.status, headers: response.headers, text: await response.text() };
}

function describe(request: BuiltRequest): string {
  const headers = Object.entries(request.headers).map(
    ([k, v]) => `${k}: ${v.length > 120 ? `${v.slice(0, 120)}... (${v.length} chars)` : v}`,
  );
  const body =
    typeof request.body === 'string'
      ? request.body.length > 600
        ? `${JSON.stringify(request.body.slice(0, 600))}... (${request.bodySize} bytes)`
        : JSON.stringify(request.body)
      : request.body
        ? `<${request.bodySize} bytes${typeof request.body === 'function' ? ', chunked' : ''}>`
        : '';
  return [
    `${request.method} ${request.pathAndQuery.length > 400 ? `${request.pathAndQuery.slice(0, 400)}...` : request.pathAndQuery}`,
    ...headers,
    body,
  ]
    .filter(Boolean)
    .join('\n    ');
}

/** Every way the response breaks the rules; empty when it is fine. */
function check(request: BuiltRequest, response: Sent, world: World, plans: PlanArbitraries): string[] {
  const problems: string[] = [];
  if (response.status >= 500) problems.push(`server error ${response.status}: ${response.text.slice(0, 300)}`);
  try {
    contractFor(request.pathAndQuery).validateResponse(
      request.method,
      `http://x${request.pathAndQuery}`,
      response.status,
      response.headers,
      response.text,
    );
  } catch (error) {
    if (!(error instanceof ContractViolation)) throw error;
    problems.push(`contract: ${error.message.slice(0, 600)}`);
  }
  if (request.expect) {
    const { status, code, name, reason, why } = request.expect;
    let body: Json | undefined;
    try {
      body = JSON.parse(response.text);
    } catch {
      /* judged by the status */
    }
    if (
      response.status !== status ||
      (code && body?.code !== code) ||
      (name && !(body?.invalid_params as Json[] | undefined)?.some((p) => name.test(p.name) && (!reason || reason.test(p.reason))))
    ) {
      problems.push(`expected ${status}${code ? ` ${code}` : ''} for ${why}, got ${response.status}: ${response.text.slice(0, 300)}`);
    }
  }
  problems.push(...tenancyProblems(request, response, world, plans));
  return problems;
}

function tenancyProblems(request: BuiltRequest, response: Sent, world: World, plans: PlanArbitraries): string[] {
  const problems: string[] = [];
  for (const merchant of [world.a, world.b]) {
    for (const secret of merchant.secrets) {
      if (response.text.includes(secret)) problems.push(`tenancy: a credential of merchant ${merchant.label} shown again`);
    }
  }
  if (request.scope === 'all') return problems;
  const others = [world.a, world.b].filter((m) => m !== request.scope);
  for (const other of others) {
    for (const marker of other.markers) {
      if (response.text.includes(marker) && !request.echo.includes(marker)) {
        problems.push(
          `tenancy: "${marker.trim()}" of merchant ${other.label} in a response for ${request.scope === 'nobody' ? 'no merchant' : `merchant ${request.scope.label}`}`,
        );
      }
    }
  }
  const { operation } = request.plan;
  const schemas = operation.api === 'admin' ? plans.adminSchemas : plans.publicSchemas;
  const declared = operation.responses[String(response.status)] as Json | undefined;
  const schema = declared ? (schemas.resolve(declared).content?.['application/json']?.schema as Json | undefined) : undefined;
  if (response.status < 300 && schema) {
    let value: unknown;
    try {
      value = JSON.parse(response.text);
    } catch {
      return problems;
    }
    const ids = idsInResponse(schemas, schema, value);
    for (const other of others) {
      for (const [kind, id] of ids) {
        if (other.ids[kind].has(id))
          problems.push(
            `tenancy: ${kind} ${id} of merchant ${other.label} in a response for ${request.scope === 'nobody' ? 'no merchant' : `merchant ${request.scope.label}`}`,
          );
      }
    }
    if (request.scope === world.a && !problems.length) harvest(world.a, ids);
  }
  return problems;
}

const HARVESTED: Partial<Record<string, PoolName>> = {
  product: 'productIds',
  store: 'storeIds',
  group: 'groupIds',
  rule: 'ruleIds',
  endpoint: 'endpointIds',
  delivery: 'deliveryIds',
  apiKey: 'apiKeyIds',
};

/** New ids of A's seen in its responses join A's pools, so later requests address them. */
function harvest(merchant: SeededMerchant, ids: Array<[string, number]>): void {
  for (const [kind, id] of ids) {
    const pool = HARVESTED[kind];
    if (!pool || (pool === 'apiKeyIds' && id === merchant.keyId)) continue;
    const values = merchant.pools[pool] as number[];
    if (values.includes(id)) continue;
    values.push(id);
    if (values.length > 16) values.splice(8, 1);
  }
}

// ---------------------------------------------------------------------------------------------
// A run

export interface FuzzOptions {
  seed: number;
  /** Generated requests to send (the world's upkeep comes on top). */
  requests: number;
  limits: FuzzLimits;
  /** Restore merchant A's seeded catalog every this many requests (and re-read its pools twice as often). */
  restoreEvery?: number;
  onProgress?: (sent: number) => void;
}

/** One request of any operation. The public API is the integrators' surface: its operations get three times the share. */
function requestArbitrary(plans: PlanArbitraries, operations: FuzzOperation[]): fc.Arbitrary<RequestPlan> {
  return fc.oneof(...operations.map((operation) => ({ arbitrary: plans.plan(operation), weight: operation.api === 'public' ? 3 : 1 })));
}

/** The first `count` request plans of a seed, as a run draws them (for debugging the generators). */
export function samplePlans(seed: number, count: number, limits: FuzzLimits = FUZZ_LIMITS) {
  const plans = new PlanArbitraries(limits);
  return fc.sample(requestArbitrary(plans, plans.operations()), { seed, numRuns: count });
}

export async function runContractFuzz(service: TestService, options: FuzzOptions): Promise<FuzzReport> {
  const started = Date.now();
  const plans = new PlanArbitraries(options.limits);
  const operations = plans.operations();
  const world = await seedWorld(service);
  const before = await snapshotOf(service, world.b);
  const report: FuzzReport = {
    seed: options.seed,
    requests: 0,
    milliseconds: 0,
    byOperation: {},
    byVariant: {},
    operations: operations.map((o) => o.operationId),
    failures: [],
  };
  const restoreEvery = options.restoreEvery ?? 200;
  const request = requestArbitrary(plans, operations);

  const details = await fc.check(
    fc.asyncProperty(request, async (plan) => {
      const index = ++report.requests;
      if (index % restoreEvery === 0) await restore(service, world.a);
      if (index % Math.ceil(restoreEvery / 2) === 0) await refreshPools(service, world.a);
      const built = build(plan, world, options.limits);
      let problems: string[];
      let status: number | 'no response';
      let responseText = '';
      try {
        const response = await send(service.url, built);
        status = response.status;
        responseText = response.text;
        problems = check(built, response, world, plans);
        const etag = response.headers.get('etag');
        if (etag && response.status === 200) world.etags.set(built.pathAndQuery.split('?')[0]!, etag);
      } catch (error) {
        status = 'no response';
        problems = [
          `no response: ${(error as Error).message}${(error as { cause?: Error }).cause ? ` (${(error as { cause: Error }).cause.message})` : ''}`,
        ];
      }
      if (plan.operation.operationId === 'createMerchant' && status === 201 && world.others.length < 10) {
        world.others.push(Number(/"id":(\d+)/.exec(responseText)?.[1]));
      }
      const counts = (report.byOperation[plan.operation.operationId] ??= {});
      counts[String(status)] = (counts[String(status)] ?? 0) + 1;
      report.byVariant[plan.variant] = (report.byVariant[plan.variant] ?? 0) + 1;
      for (const problem of problems) {
        report.failures.push({
          seed: options.seed,
          index,
          operationId: plan.operation.operationId,
          variant: plan.variant,
          request: describe(built),
          status,
          problem,
        });
      }
      if (index % 1000 === 0) options.onProgress?.(index);
      // Failing requests are collected, not thrown: the run goes on, and nothing is shrunk (the
      // service's state moves on with every request, so a replay needs the whole sequence).
      return true;
    }),
    { seed: options.seed, numRuns: options.requests, endOnFailure: true },
  );
  // A failure of the fuzzer itself (an exception rather than a failing request) ends the run early.
  if (details.failed && details.errorInstance)
    throw details.errorInstance instanceof Error ? details.errorInstance : new Error('the fuzzer failed', { cause: details.errorInstance });

  const after = await snapshotOf(service, world.b);
  if (JSON.stringify(after) !== JSON.stringify(before)) {
    report.failures.push({
      seed: options.seed,
      index: report.requests,
      operationId: '(end of run)',
      variant: 'snapshot',
      request: 'merchant B read back over its own paths and key',
      status: 'no response',
      problem: `tenancy: merchant B changed although only merchant A was written to:\n${firstDifference(before, after)}`,
    });
  }
  report.milliseconds = Date.now() - started;
  return report;
}

function firstDifference(before: unknown, after: unknown): string {
  const a = before as Record<string, unknown>;
  const b = after as Record<string, unknown>;
  const key = Object.keys(a).find((k) => JSON.stringify(a[k]) !== JSON.stringify(b[k]));
  return key ? `${key}:\n  before ${JSON.stringify(a[key]).slice(0, 800)}\n  after  ${JSON.stringify(b[key]).slice(0, 800)}` : '(unknown)';
}

/** The run as text: requests per operation and status, variants, and each failure with its seed. */
export function formatReport(report: FuzzReport): string {
  const lines = [
    `contract fuzz: seed ${report.seed}, ${report.requests} requests in ${(report.milliseconds / 1000).toFixed(1)} s, ${report.failures.length} failure(s)`,
  ];
  lines.push('', 'requests by operation and status:');
  for (const operationId of report.operations) {
    const counts = report.byOperation[operationId] ?? {};
    const total = Object.values(counts).reduce((sum, n) => sum + n, 0);
    const statuses = Object.entries(counts)
      .sort(([x], [y]) => x.localeCompare(y))
      .map(([status, n]) => `${status}: ${n}`)
      .join(', ');
    lines.push(`  ${operationId.padEnd(28)} ${String(total).padStart(5)}  ${statuses || 'never sent'}`);
  }
  lines.push('', 'requests by kind:');
  for (const [variant, n] of Object.entries(report.byVariant).sort(([, x], [, y]) => y - x))
    lines.push(`  ${variant.padEnd(28)} ${String(n).padStart(5)}`);
  for (const failure of report.failures.slice(0, 50)) {
    lines.push(
      '',
      `FAILURE at request ${failure.index} (${failure.operationId}, ${failure.variant}) -> ${failure.status}`,
      `  ${failure.problem}`,
      `  request: ${failure.request}`,
      `  reproduce: npm run fuzz -- --seed ${failure.seed} --requests ${failure.index}`,
    );
  }
  if (report.failures.length > 50) lines.push('', `... and ${report.failures.length - 50} more failure(s)`);
  return lines.join('\n');
}

/** The limits a fuzz service runs with: the defaults, except a 1 MiB import limit so oversize imports stay cheap. */
export const FUZZ_LIMITS: FuzzLimits = { adminBodyBytes: 1024 * 1024, importBodyBytes: 1024 * 1024, maxJsonDepth: 32 };

/**
 * A fresh service (real SQLite file, real server on 127.0.0.1) configured with FUZZ_LIMITS, whose
 * change feed never waits: a drawn `wait` would otherwise hold a request up to 30 s on an empty window.
 */
export function startFuzzService(): Promise<TestService> {
  // The fuzz sends wrong tokens on purpose, thousands of them, all from 127.0.0.1: the address's
  // throttle of failed authentications (http/auth-failures.ts, tested on its own) would lock the
  // right token out too, so here it allows every one.
  return startTestService({
    config: {
      limits: { ...loadConfig({}).limits, ...FUZZ_LIMITS },
      changes: { maxWaitSeconds: 0 },
      adminAuthFailures: { max: 1_000_000, windowMinutes: 1 },
    },
  });
}
