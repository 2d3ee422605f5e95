// The cursor of GET /v1/changes never moves backwards (spec 4.4; openapi/paths/v1_changes.yaml):
// whatever cursor a client sends, the answer is a window whose next cursor is at or after it, or
// 400 `invalid_parameter` for a `since` outside the instants a change can carry
// (0000-01-01T00:00:00Z to 9999-12-31T23:59:59Z): a `since` past year 9999 used to round up into
// year 10000 and restart the feed from the beginning. Real server on 127.0.0.1, injected clock.
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { importNdjson } from '../../src/admin/import.js';
import { startTestService, type TestService } from '../support/service.js';

const T0 = Date.parse('2025-03-14T09:26:53Z');
const FIRST_SECOND = Date.parse('0000-01-01T00:00:00Z');
const LAST_SECOND = Date.parse('9999-12-31T23:59:59Z');

let service: TestService;
let key: string;
/** Positions of the store's changes: three seconds, several changes in each. */
let positions: { at: number; id: number; product: number }[];
const clock = { ms: T0 };

beforeAll(async () => {
  service = await startTestService({ now: () => new Date(clock.ms) });
  const { admin } = service;
  const merchant = (await admin.createMerchant({ name: 'Cursor Outdoor' })).id;
  await admin.upsertStore(merchant, 'de', {
    name: 'Deutschland',
    locale: 'de-DE',
    currency: 'EUR',
    is_default: true,
    active: true,
    exclude_out_of_stock: false,
  });
  await admin.upsertSupplier(merchant, 'alpine', 'Alpine AG');
  for (let second = 0; second < 3; second++) {
    clock.ms = T0 + second * 1000;
    const lines = Array.from({ length: 4 }, (_, i) =>
      JSON.stringify({
        op: 'upsert_product',
        product: {
          ref: `P-${i}`,
          content: { de: { title: `Produkt ${i} (${second})`, description: null } },
          offers: [{ supplier_ref: 'alpine', quantity: 4, cost: `${10 + second}.00`, currency: 'EUR' }],
        },
      }),
    );
    await importNdjson(admin, merchant, `${lines.join('\n')}\n`);
  }
  key = await service.keyFor(merchant);
  const store = (await service.storage.findStore(merchant, 'de'))!.id;
  positions = (await service.storage.changesAfter(store, { at: '', id: 0 }, 1000)).map((row) => ({
    at: Date.parse(row.created_at),
    id: row.id,
    product: row.product_id,
  }));
});
afterAll(() => service.close());

const changes = (since: string, sinceId: number) =>
  service.api(`/v1/changes?store=de&since=${encodeURIComponent(since)}&since_id=${sinceId}`, key);

/** A `since` as sent: its whole second in UTC (Date.parse of it without the fraction) and whether a fraction follows. */
function instantOf(since: string): { second: number; fractional: boolean } {
  const fraction = /\.([0-9]+)/.exec(since)?.[1] ?? '';
  return { second: Date.parse(since.replace(/\.[0-9]+/, '')), fractional: /[1-9]/.test(fraction) };
}

describe('a cursor outside the instants a change can carry', () => {
  it.each([
    ['half a second past the last whole second of year 9999', '9999-12-31T23:59:59.5Z'],
    ['a nanosecond past it', '9999-12-31T23:59:59.000000001Z'],
    ['year 10000 once its offset is applied', '9999-12-31T23:59:59-00:30'],
    ['before year 0 once its offset is applied', '0000-01-01T00:00:00+00:01'],
  ])('answers 400 invalid_parameter naming since for %s (never a window from the beginning)', async (_, since) => {
    const response = await changes(since, 0);
    expect(response.status, response.text).toBe(400);
    expect(response.body).toMatchObject({ code: 'invalid_parameter', invalid_params: [{ name: 'since', in: 'query' }] });
  });

  it('answers the last whole second of year 9999 with an empty window and the cursor unchanged', async () => {
    const response = await changes('9999-12-31T23:59:59Z', 7);
    expect(response.status).toBe(200);
    expect(response.body).toEqual({ changes: [], next_since: '9999-12-31T23:59:59Z', next_id: 7, store: 'de' });
    const first = await changes('0000-01-01T00:00:00Z', 0);
    expect(first.status).toBe(200);
    expect(first.body.changes.length).toBe(4);
  });
});

describe('the next cursor', () => {
  // Instants from year 0 to 9999, biased towards both ends and the seconds holding the store's changes.
  const year = fc.oneof(fc.integer({ min: 0, max: 9999 }), fc.constantFrom(0, 2025, 9999));
  const two = (max: number, min = 0) => fc.integer({ min, max }).map((n) => String(n).padStart(2, '0'));
  const anyInstant = fc
    .tuple(year, two(12, 1), two(28, 1), two(23), two(59), two(59))
    .map(([y, mo, d, h, mi, s]) => `${String(y).padStart(4, '0')}-${mo}-${d}T${h}:${mi}:${s}`);
  const edge = fc.constantFrom(
    '9999-12-31T23:59:59',
    '9999-12-31T23:59:58',
    '9999-12-31T23:30:00',
    '0000-01-01T00:00:00',
    '0000-01-01T00:59:59',
  );
  const nearChanges = fc.integer({ min: -2, max: 4 }).map((s) => new Date(T0 + s * 1000).toISOString().slice(0, 19));
  const fraction = fc.oneof(fc.constant(''), fc.constant('.0'), fc.constant('.5'), fc.stringMatching(/^\.[0-9]{1,12}$/));
  const offset = fc.oneof(
    fc.constant('Z'),
    fc.constant('+00:00'),
    fc.tuple(fc.constantFrom('+', '-'), two(23), two(59)).map(([sign, h, m]) => `${sign}${h}:${m}`),
  );
  const since = fc.tuple(fc.oneof(anyInstant, edge, nearChanges, nearChanges), fraction, offset).map(([at, f, o]) => `${at}${f}${o}`);
  const sinceId = fc.oneof(fc.integer({ min: 0, max: 16 }), fc.constant(Number.MAX_SAFE_INTEGER), fc.maxSafeNat());

  it('is never before the cursor sent; 400 only for a since after 9999-12-31T23:59:59Z or before 0000-01-01T00:00:00Z', async () => {
    await fc.assert(
      fc.asyncProperty(since, sinceId, async (sent, sentId) => {
        const response = await changes(sent, sentId);
        const { second, fractional } = instantOf(sent);
        const outside = second < FIRST_SECOND || second > LAST_SECOND || (second === LAST_SECOND && fractional);
        if (outside) {
          expect(response.status, `${sent} ${response.text}`).toBe(400);
          expect(response.body.code).toBe('invalid_parameter');
          return;
        }
        expect(response.status, `${sent} ${response.text}`).toBe(200);
        const next = { at: Date.parse(response.body.next_since), id: response.body.next_id as number };
        // At or after the cursor: a later second, or the same whole second (no fraction) with an id not smaller.
        const notBefore = next.at > second || (next.at === second && !fractional && next.id >= sentId);
        expect(notBefore, `${sent} ${sentId} -> ${response.body.next_since} ${next.id}`).toBe(true);
        // And the window holds the latest change of each product after the cursor's position, up to the next cursor.
        const from = fractional ? { at: second + 1000, id: 0 } : { at: second, id: sentId };
        const after = (p: { at: number; id: number }, c: { at: number; id: number }) => p.at > c.at || (p.at === c.at && p.id > c.id);
        const covered = positions.filter((p) => after(p, from) && !after(p, next));
        expect(response.body.changes.map((c: { product_id: number }) => c.product_id).sort()).toEqual(
          [...new Set(covered.map((p) => p.product))].sort(),
        );
      }),
      { numRuns: 300 },
    );
  });
});
