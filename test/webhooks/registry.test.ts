// The registry generated from the document's `webhooks:` section (src/generated/public-webhooks.ts):
// its events, headers and schemas are the document's, and its standalone validator accepts and
// rejects exactly what Ajv over the bundled document does (a property test over near-payloads).
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import publicDocument from '../../src/generated/public-openapi.json' with { type: 'json' };
import { WEBHOOKS, WEBHOOK_EVENTS, WEBHOOK_HEADERS, webhookPayloadErrors } from '../../src/generated/public-webhooks.js';
import { CHANGES_MAX_ITEMS, IDS_MAX_ITEMS, PER_PAGE_MAXIMUM, WEBHOOK_PRODUCT_IDS_MAX_ITEMS } from '../../src/generated/public-limits.js';

type Json = Record<string, any>;
const doc = publicDocument as Json;
const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;
const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: true });
addFormats(ajv);
ajv.addSchema(doc, 'public');

/** Ajv over the document: the body schema of one webhook, by its $ref. */
function ajvFor(event: string): ValidateFunction {
  const ref: string = doc.webhooks[event].post.requestBody.content['application/json'].schema.$ref;
  return ajv.compile({ $ref: `public${ref}` });
}

const VALID = { event: 'price', store_id: 1, product_ids: [1042, 1043], occurred_at: '2025-03-14T09:26:55Z' };

describe('the webhook registry', () => {
  it('lists the events, headers and limits the document states', () => {
    expect(WEBHOOK_EVENTS).toEqual(Object.keys(doc.webhooks));
    expect(WEBHOOK_EVENTS).toEqual(doc.components.schemas.ChangeType.enum);
    for (const event of WEBHOOK_EVENTS) {
      expect(WEBHOOKS[event].operationId).toBe(doc.webhooks[event].post.operationId);
      const declared = doc.webhooks[event].post.parameters.map((p: Json) => doc.components.parameters[p.$ref.split('/').at(-1)].name);
      expect(WEBHOOKS[event].headers.map((h) => h.name)).toEqual(declared);
    }
    expect(WEBHOOK_HEADERS.map((h) => [h.name, h.required])).toEqual([
      ['X-Service-Timestamp', true],
      ['X-Service-Signature', true],
      ['webhook-id', true],
      ['X-Service-Replaces', false],
      ['X-Service-Test', false],
      ['webhook-timestamp', false],
      ['webhook-signature', false],
    ]);
    expect(WEBHOOK_PRODUCT_IDS_MAX_ITEMS).toBe(doc.components.schemas.WebhookPayload.properties.product_ids.maxItems);
    expect([IDS_MAX_ITEMS, PER_PAGE_MAXIMUM, CHANGES_MAX_ITEMS]).toEqual([200, 200, 1000]);
  });

  it("accepts the document's own webhook examples", () => {
    for (const event of WEBHOOK_EVENTS) {
      const examples = doc.webhooks[event].post.requestBody.content['application/json'].examples as Record<string, Json>;
      for (const example of Object.values(examples)) {
        const value = example.$ref ? doc.components.examples[example.$ref.split('/').at(-1)].value : example.value;
        expect(webhookPayloadErrors(value)).toEqual([]);
      }
    }
  });

  it.each([
    [
      '101 product ids',
      { ...VALID, product_ids: Array.from({ length: 101 }, (_, i) => i + 1) },
      '/product_ids',
      'must NOT have more than 100 items',
    ],
    ['no product ids', { ...VALID, product_ids: [] }, '/product_ids', 'must NOT have fewer than 1 items'],
    ['a date without a time zone', { ...VALID, occurred_at: '2025-03-14T09:26:55' }, '/occurred_at', 'must match format "date-time"'],
    ['a 30th of February', { ...VALID, occurred_at: '2025-02-30T09:26:55Z' }, '/occurred_at', 'must match format "date-time"'],
    ['a product id 0', { ...VALID, product_ids: [0] }, '/product_ids/0', 'must be >= 1'],
    ['an unknown property', { ...VALID, extra: true }, '', 'must NOT have additional properties'],
    ['no store_id', { event: 'price', product_ids: [1], occurred_at: VALID.occurred_at }, '', "must have required property 'store_id'"],
    ['an unknown event', { ...VALID, event: 'deleted' }, '/event', 'must be one of price, content, removed'],
  ])('rejects %s, as Ajv does', (_name, value, instancePath, message) => {
    expect(webhookPayloadErrors(value)).toContainEqual({ instancePath, message });
    expect(ajvFor('price')(value)).toBe(false);
  });

  it('accepts and rejects exactly what Ajv over the bundled document does', () => {
    const validators = Object.fromEntries(WEBHOOK_EVENTS.map((e) => [e, ajvFor(e)]));
    const productId = fc.oneof(
      fc.integer({ min: -2, max: 2 ** 40 }),
      fc.double({ noNaN: true, noDefaultInfinity: true }),
      fc.string({ maxLength: 3 }),
      fc.constant(null),
    );
    const instant = fc.oneof(
      fc.date({ min: new Date('1970-01-01'), max: new Date('2999-12-31'), noInvalidDate: true }).map((d) => d.toISOString()),
      fc.constantFrom(
        '2025-03-14T09:26:55Z',
        '2025-03-14t09:26:55+01:00',
        '2024-02-29T23:59:60Z',
        '2023-02-29T10:00:00Z',
        '2025-03-14 09:26:55Z',
        '2025-03-14T09:26:55',
        '2025-13-01T00:00:00Z',
        '2025-03-14T24:00:00Z',
        '2025-03-14',
        '',
        'now',
        '2016-12-31T23:59:60Z',
        '2025-03-14T09:26:55.123456+05:30',
        '2025-03-14T09:26:55+2400',
      ),
      fc.string({ maxLength: 25 }),
      fc.integer(),
    );
    const payload = fc.record(
      {
        event: fc.oneof(fc.constantFrom(...WEBHOOK_EVENTS), fc.constantFrom('deleted', '', 'Price'), fc.integer()),
        store_id: fc.oneof(
          fc.constant(null),
          fc.integer({ min: -1, max: 1000 }),
          fc.double({ noNaN: true, noDefaultInfinity: true }),
          fc.string({ maxLength: 2 }),
        ),
        product_ids: fc.oneof(
          fc.array(fc.integer({ min: 1, max: 2 ** 40 }), { minLength: 0, maxLength: 120 }),
          fc.array(productId, { maxLength: 5 }),
          fc.constant('1,2'),
        ),
        occurred_at: instant,
        extra: fc.anything({ maxDepth: 1 }),
      },
      { requiredKeys: [] },
    );
    const value = fc.oneof({ weight: 8, arbitrary: payload }, { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 2 }) });
    fc.assert(
      fc.property(value, (input) => {
        const generated = webhookPayloadErrors(input).length === 0;
        // Ajv: valid when the body validates against its event's schema (an unknown event is valid against none).
        const event = (input as Json | null)?.event;
        const byAjv = WEBHOOK_EVENTS.includes(event) ? validators[event]!(input) : false;
        expect(generated).toBe(byAjv);
        if (!generated && WEBHOOK_EVENTS.includes(event)) {
          const ajvPaths = new Set(validators[event]!.errors!.map((e) => e.instancePath));
          expect(new Set(webhookPayloadErrors(input).map((e) => e.instancePath))).toEqual(ajvPaths);
        }
      }),
      { numRuns: 3000 },
    );
  });
});
