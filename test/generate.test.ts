// The generators' shared `$ref` walker (scripts/generate/openapi-refs.ts) and the admin route facts
// (scripts/generate/route-facts-from-openapi.ts): the facts the server wires its body checks by say what
// admin.yaml says, and a `$ref` that points nowhere or loops fails generation, naming it.
import { describe, expect, it } from 'vitest';
import { deref, inline, pointer, refsIn } from '../scripts/generate/openapi-refs.js';
import { emitRouteFacts, routeFacts } from '../scripts/generate/route-facts-from-openapi.js';
import { emitWebhookEventDocs } from '../scripts/generate/webhook-events-from-openapi.js';
import { emitWebhookRegistry } from '../scripts/generate/webhooks-from-openapi.js';
import { emitZodModule } from '../scripts/generate/zod-from-openapi.js';
import adminDocument from '../src/generated/admin-openapi.json' with { type: 'json' };
import { ADMIN_ROUTE_FACTS } from '../src/generated/admin-route-facts.js';

type Json = Record<string, any>;

describe('the $ref walker', () => {
  const doc = {
    components: {
      schemas: {
        'a/b': { type: 'string' },
        'c~d': { $ref: '#/components/schemas/a~1b' },
        Chain: { $ref: '#/components/schemas/c~0d' },
        Thing: {
          type: 'object',
          properties: { default: { $ref: '#/components/schemas/Chain' }, name: { type: 'string' } },
          examples: [{ $ref: 'not a reference: data' }],
        },
      },
    },
  };

  it('reads a JSON pointer with ~1 as / and ~0 as ~', () => {
    expect(pointer(doc, '#/components/schemas/a~1b')).toEqual({ type: 'string' });
    expect(pointer(doc, '#/components/schemas/c~0d')).toEqual({ $ref: '#/components/schemas/a~1b' });
  });

  it('follows a chain of $refs to what it names', () => {
    expect(deref(doc, { $ref: '#/components/schemas/Chain' })).toEqual({ type: 'string' });
    expect(deref(doc, { type: 'integer' })).toEqual({ type: 'integer' });
  });

  it('inlines every $ref of a schema, a property named like a keyword included, leaving examples as data', () => {
    expect(inline(doc, { $ref: '#/components/schemas/Thing' })).toEqual({
      type: 'object',
      properties: { default: { type: 'string' }, name: { type: 'string' } },
      examples: [{ $ref: 'not a reference: data' }],
    });
    expect(refsIn(doc.components.schemas.Thing)).toEqual(['#/components/schemas/Chain']);
  });

  it('refuses a $ref that points nowhere or outside the document, naming it', () => {
    expect(() => pointer(doc, '#/components/schemas/Missing')).toThrow('$ref #/components/schemas/Missing points nowhere');
    expect(() => pointer(doc, '#/components/schemas/Thing/properties/constructor')).toThrow(/points nowhere/);
    expect(() => deref(doc, { $ref: 'other.yaml#/Thing' })).toThrow('unsupported $ref other.yaml#/Thing (only local ones)');
  });

  it('refuses a $ref cycle, naming its links, rather than overflowing the stack', () => {
    const cyclic = { components: { schemas: { A: { $ref: '#/components/schemas/B' }, B: { $ref: '#/components/schemas/A' } } } };
    expect(() => deref(cyclic, { $ref: '#/components/schemas/A' })).toThrow(
      '$ref cycle: #/components/schemas/A -> #/components/schemas/B -> #/components/schemas/A',
    );
    const recursive = {
      components: { schemas: { Node: { type: 'object', properties: { next: { $ref: '#/components/schemas/Node' } } } } },
    };
    expect(() => inline(recursive, { $ref: '#/components/schemas/Node' })).toThrow(/\$ref cycle: .* cannot be inlined/);
  });
});

/** A one-operation admin-like document: `operation` at POST /things. */
const documentWith = (operation: Json, components: Json = {}): Json => ({
  openapi: '3.1.0',
  info: { title: 't', version: '1' },
  paths: { '/things/{thing_id}': { post: { operationId: 'createThing', responses: { 201: { description: 'ok' } }, ...operation } } },
  components: { schemas: { Thing: { type: 'object', properties: { name: { type: 'string' } } } }, ...components },
});
const jsonBody = { required: true, content: { 'application/json': { schema: { $ref: '#/components/schemas/Thing' } } } };
const tooLarge = { 201: { description: 'ok' }, 413: { description: 'too large' } };

describe('the admin route facts', () => {
  /** What admin.yaml says of an operation's body, read without the generators' walker. */
  const documented = (operation: Json) => {
    const body: Json | undefined = operation.requestBody?.$ref
      ? (adminDocument.components.requestBodies as Json)[operation.requestBody.$ref.replace('#/components/requestBodies/', '')]
      : operation.requestBody;
    if (!body) return { body: 'none', bodyRequired: false, bodyLimit: null, mediaTypes: [] };
    const mediaTypes = Object.keys(body.content);
    const KINDS: Json = { 'application/json': 'json', 'application/merge-patch+json': 'json', 'application/x-ndjson': 'ndjson' };
    const kinds = new Set(mediaTypes.map((type) => KINDS[type]));
    expect(kinds.size).toBe(1);
    const [kind] = kinds;
    return {
      body: kind,
      bodyRequired: body.required === true,
      bodyLimit: kind === 'json' ? 'adminBodyBytes' : 'importBodyBytes',
      mediaTypes,
    };
  };
  const operations = Object.entries(adminDocument.paths as Record<string, Json>).flatMap(([path, item]) =>
    Object.entries(item)
      .filter(([, operation]) => operation?.operationId)
      .map(([method, operation]) => ({ path, method, operation: operation as Json })),
  );

  it('list every operation of admin.yaml, each once', () => {
    expect(ADMIN_ROUTE_FACTS.map((f) => `${f.method} ${f.path}`).sort()).toEqual(
      operations.map((o) => `${o.method.toUpperCase()} ${o.path}`).sort(),
    );
    expect(new Set(ADMIN_ROUTE_FACTS.map((f) => f.operationId)).size).toBe(operations.length);
  });

  it.each(operations)('give $method $path the body its requestBody documents', ({ path, method, operation }) => {
    const facts = ADMIN_ROUTE_FACTS.find((f) => f.operationId === operation.operationId)!;
    expect({ body: facts.body, bodyRequired: facts.bodyRequired, bodyLimit: facts.bodyLimit, mediaTypes: facts.mediaTypes }).toEqual(
      documented(operation),
    );
    // A merge patch of another media type is answered 415, so the operation documents it.
    expect('415' in operation.responses).toBe(facts.mediaTypes.includes('application/merge-patch+json'));
    expect(facts).toMatchObject({ method: method.toUpperCase(), path, routerPath: path.replaceAll('{', ':').replaceAll('}', '') });
    // Only an operation that reads a body can find it too large.
    expect('413' in operation.responses).toBe(facts.body !== 'none');
  });

  it('are what the generator makes of the bundled document now', () => {
    expect(routeFacts(adminDocument as Json)).toEqual(ADMIN_ROUTE_FACTS);
  });

  it('refuse a body of a media type the server cannot read, and a 413 where no body is read or none where one is', () => {
    const form = { required: true, content: { 'application/x-www-form-urlencoded': { schema: { type: 'object' } } } };
    expect(() => routeFacts(documentWith({ requestBody: form, responses: tooLarge }))).toThrow(
      /createThing\): a request body needs media types of one kind among/,
    );
    const mergePatch = { required: true, content: { 'application/merge-patch+json': { schema: { type: 'object' } } } };
    expect(() => routeFacts(documentWith({ requestBody: mergePatch, responses: tooLarge }))).toThrow(/must document 415/);
    const mixed = { required: true, content: { ...jsonBody.content, 'application/x-ndjson': { schema: { type: 'string' } } } };
    expect(() => routeFacts(documentWith({ requestBody: mixed, responses: tooLarge }))).toThrow(/media types of one kind/);
    expect(() => routeFacts(documentWith({ requestBody: jsonBody }))).toThrow(/must document 413/);
    expect(() => routeFacts(documentWith({ responses: tooLarge }))).toThrow(/documents 413 but takes no request body/);
    expect(routeFacts(documentWith({ requestBody: { ...jsonBody, required: false }, responses: tooLarge }))[0]).toMatchObject({
      body: 'json',
      bodyRequired: false,
      bodyLimit: 'adminBodyBytes',
      routerPath: '/things/:thing_id',
    });
  });
});

describe('generation fails loudly', () => {
  const generators = {
    'the zod routes': (doc: Json) => emitZodModule(doc, { source: 'test' }),
    'the route facts': (doc: Json) => emitRouteFacts(doc, { source: 'test', name: 'FACTS' }),
  };

  it.each(Object.entries(generators))('on a dangling $ref: %s', (_, generate) => {
    const body = { $ref: '#/components/requestBodies/Missing' };
    expect(() => generate(documentWith({ requestBody: body, responses: tooLarge }))).toThrow(
      '$ref #/components/requestBodies/Missing points nowhere',
    );
  });

  it.each(Object.entries(generators))('on a $ref cycle: %s', (_, generate) => {
    const requestBodies = { A: { $ref: '#/components/requestBodies/B' }, B: { $ref: '#/components/requestBodies/A' } };
    expect(() =>
      generate(documentWith({ requestBody: { $ref: '#/components/requestBodies/A' }, responses: tooLarge }, { requestBodies })),
    ).toThrow(/\$ref cycle: #\/components\/requestBodies\/A -> #\/components\/requestBodies\/B -> #\/components\/requestBodies\/A/);
  });

  it('on a schema that names a missing schema, or itself, in the zod routes', () => {
    const schemas = (thing: Json) => ({ schemas: { Thing: thing } });
    expect(() =>
      emitZodModule(documentWith({}, schemas({ type: 'array', items: { $ref: '#/components/schemas/Gone' } })), { source: 'test' }),
    ).toThrow('$ref #/components/schemas/Gone points nowhere');
    expect(() =>
      emitZodModule(documentWith({}, schemas({ type: 'object', properties: { next: { $ref: '#/components/schemas/Thing' } } })), {
        source: 'test',
      }),
    ).toThrow('schema cycle through Thing is not supported');
  });

  describe('in the webhook generators', () => {
    const webhookDocument = (payload: Json, example: Json = { $ref: '#/components/examples/Price' }) => ({
      openapi: '3.1.0',
      info: { title: 't', version: '1' },
      paths: {},
      webhooks: {
        price: {
          post: {
            operationId: 'priceWebhook',
            summary: 'A price changed.',
            description: 'A price changed.',
            requestBody: {
              required: true,
              content: { 'application/json': { schema: { $ref: '#/components/schemas/Payload' }, examples: { price: example } } },
            },
            responses: { 200: { description: 'ok' } },
          },
        },
      },
      components: { schemas: { Payload: payload }, examples: { Price: { value: { event: 'price' } } } },
    });

    it('on a payload that refers to itself, or to a schema that is not there', () => {
      expect(() =>
        emitWebhookRegistry(webhookDocument({ type: 'object', properties: { next: { $ref: '#/components/schemas/Payload' } } }), {
          source: 'test',
        }),
      ).toThrow(/\$ref cycle: #\/components\/schemas\/Payload -> #\/components\/schemas\/Payload cannot be inlined/);
      expect(() =>
        emitWebhookRegistry(webhookDocument({ type: 'object', properties: { event: { $ref: '#/components/schemas/Event' } } }), {
          source: 'test',
        }),
      ).toThrow('$ref #/components/schemas/Event points nowhere');
    });

    it('on an example that is not there', () => {
      expect(emitWebhookEventDocs(webhookDocument({ type: 'object' }), { source: 'test' })).toContain('payload: {"event":"price"}');
      expect(() =>
        emitWebhookEventDocs(webhookDocument({ type: 'object' }, { $ref: '#/components/examples/Gone' }), { source: 'test' }),
      ).toThrow('$ref #/components/examples/Gone points nowhere');
    });
  });
});
