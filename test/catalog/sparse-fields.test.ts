// SparseFields (catalog/sparse-fields.ts): stored payloads cut down to some members, byte for byte as
// a parse, a pick and JSON.stringify would give them, whatever the strings hold; and the member list
// the document's FieldsParam offers is exactly Product's.
import fs from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { PRODUCT_FIELDS, SparseFields, type ProductField } from '../../src/catalog/sparse-fields.js';

const document = JSON.parse(fs.readFileSync(new URL('../../src/generated/public-openapi.json', import.meta.url), 'utf8'));

const product = (id: number, title: string) => ({
  id,
  sku: `S-${id}`,
  ean: null,
  title,
  description: 'a "quoted" \\ back\\slash, {braces} [brackets], commas, and\nnewlines ✓',
  manufacturer: null,
  images: ['https://x.example/a.jpg'],
  store: 'de',
  excluded: false,
  exclusion_reason: null,
  attributes: [{ key: 'k', label: 'L', value: '}' }],
  prices: [{ customer_group_id: 1, base_cost: 12.3, computed_price: 19.99 }],
  stock: 4,
});

const pick = (value: Record<string, unknown>, fields: ReadonlySet<string>) =>
  Object.fromEntries(Object.entries(value).filter(([key]) => fields.has(key)));

describe('SparseFields', () => {
  it("offers exactly Product's members, in its order", () => {
    expect(PRODUCT_FIELDS).toEqual(Object.keys(document.components.schemas.Product.properties));
    expect(document.components.parameters.FieldsParam.schema.items.enum).toEqual(PRODUCT_FIELDS);
  });

  it('keeps id always, the members in stored order, and one key for one set however it is asked', () => {
    const fields = SparseFields.of(['stock', 'sku'])!;
    expect(fields.key).toBe('id,sku,stock');
    expect(SparseFields.of(['id', 'sku', 'stock', 'sku'])!.key).toBe('id,sku,stock');
    expect(SparseFields.of(undefined)).toBeUndefined();
    expect(SparseFields.of([...PRODUCT_FIELDS])).toBeUndefined();
    const page = [product(1, 'A'), product(2, 'B')].map((p) => JSON.stringify(p)).join(',');
    expect(Buffer.from(fields.project(Buffer.from(page))).toString()).toBe('{"id":1,"sku":"S-1","stock":4},{"id":2,"sku":"S-2","stock":4}');
  });

  it('gives what parse, pick and stringify give, for any strings and any set of fields, in pages and in NDJSON lines', () => {
    fc.assert(
      fc.property(
        fc.array(fc.string({ unit: 'binary' }), { minLength: 1, maxLength: 4 }),
        fc.subarray([...PRODUCT_FIELDS] as ProductField[], { minLength: 1 }),
        (titles, requested) => {
          const fields = SparseFields.of(requested);
          const wanted = new Set<string>(['id', ...requested]);
          const products = titles.map((title, i) => product(i + 1, title));
          const expected = products.map((p) => JSON.stringify(pick(p, wanted)));
          const page = products.map((p) => JSON.stringify(p)).join(',');
          const lines = `${products.map((p) => JSON.stringify(p)).join('\n')}\n{"store":"de","count":${products.length},"next_since":"2026-11-30T00:00:00Z","next_id":7}\n`;
          if (!fields) return;
          expect(Buffer.from(fields.project(Buffer.from(page))).toString()).toBe(expected.join(','));
          // The export's trailer is kept whole.
          expect(Buffer.from(fields.project(Buffer.from(lines))).toString()).toBe(
            `${expected.join('\n')}\n{"store":"de","count":${products.length},"next_since":"2026-11-30T00:00:00Z","next_id":7}\n`,
          );
        },
      ),
      { numRuns: 300 },
    );
  });

  it('projects nothing out of nothing', () => {
    expect(SparseFields.of(['sku'])!.project(new Uint8Array(0))).toHaveLength(0);
  });
});
