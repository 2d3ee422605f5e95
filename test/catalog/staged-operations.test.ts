// An import's staged chunk (catalog/product-sources.ts): operationsJson writes it an operation a
// line, parseOperations reads it back with each source's text as it was written there, which the
// chunk's writes store (sourceJson: the source is not written as JSON again).
import { describe, expect, it, vi } from 'vitest';
import { normalizeSource, operationsJson, parseOperations, sourceJson, type ProductOperation } from '../../src/catalog/product-sources.js';

const operations: ProductOperation[] = [
  {
    op: 'upsert_product',
    ref: 'A-1',
    line: 1,
    source: normalizeSource({
      manufacturer: 'Nordkamm "Zelt"\n\\ \u2028 😀',
      content: { de: { title: 'Zelt für 2', description: null }, '10': { title: 'x' } },
      offers: [{ supplier_ref: 'alpine', quantity: 3, cost: '1e3', currency: 'EUR' }],
      overrides: { '2': 'b', a: 'c' },
    }),
  },
  { op: 'delete_product', ref: 'B-2', line: 3 },
  { op: 'upsert_product', ref: 'C-3', source: normalizeSource({}) },
  { op: 'upsert_product', ref: 'D-4', line: 7, source: normalizeSource({ own_stock: { quantity: 0.5 } }) },
];

describe('a staged chunk of operations', () => {
  it('is one JSON array, an operation a line, read back as the same operations', () => {
    const text = operationsJson(operations);
    expect(text.split('\n')).toHaveLength(operations.length);
    expect(JSON.parse(text)).toEqual(operations);
    expect(parseOperations(text)).toEqual(operations);
  });

  it('gives each upsert source its text as staged (not written again), which is the text JSON.stringify writes of it', () => {
    const parsed = parseOperations(operationsJson(operations));
    const stringify = vi.spyOn(JSON, 'stringify');
    const texts = parsed.map((operation) => (operation.op === 'upsert_product' ? sourceJson(operation.source) : null));
    expect(stringify).not.toHaveBeenCalled();
    stringify.mockRestore();
    parsed.forEach((operation, index) => {
      if (operation.op === 'upsert_product') expect(texts[index]).toBe(JSON.stringify(operation.source));
    });
  });

  it('reads a chunk staged on one line (as before) and a single operation alike', () => {
    const oneLine = JSON.stringify(operations);
    expect(parseOperations(oneLine)).toEqual(JSON.parse(oneLine));
    const single = parseOperations(operationsJson(operations.slice(0, 1)));
    expect(single).toEqual(operations.slice(0, 1));
    expect(sourceJson((single[0] as Extract<ProductOperation, { op: 'upsert_product' }>).source)).toBe(
      JSON.stringify((operations[0] as Extract<ProductOperation, { op: 'upsert_product' }>).source),
    );
  });
});
