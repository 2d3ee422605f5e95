// The list parameters of an import's statements (PostgreSQL writes them as array literals itself:
// storage/postgres/json-texts.ts) keep every value as it was given: SKUs and EANs with quotes,
// backslashes, commas, braces, spaces, the word NULL and non-ASCII letters, null ones, hashes and
// ids, read back as they were written.
import { expect, it } from 'vitest';
import type { CatalogStorage } from '../../src/storage/port.js';
import { storagePerTest, TEST_ENGINE } from '../support/engine.js';
import { STORE } from '../support/storage-fixtures.js';

const AT = '2026-11-26T08:00:00.000Z';
const ODD = ['with "quotes"', 'back\\slash', 'comma,here', '{braces}', ' spaced ', 'NULL', 'Zürich ✓', '', 'a\\"b'];

let storage: CatalogStorage;
storagePerTest('array-parameters', (fresh) => ({ storage } = fresh));

it(`keeps odd SKU, EAN and hash values, nulls and ids as written (${TEST_ENGINE})`, async () => {
  const merchant = await storage.createMerchant({ name: 'Arrays', sku_pattern: null, owner_emails: [], created_at: AT });
  const store = await storage.upsertStore(merchant.id, 'de', STORE);
  const rows = ODD.map((value, i) => {
    const ean = i % 3 === 0 ? null : `${value}-ean`;
    return {
      productId: 1000 + i,
      payload: JSON.stringify({ id: 1000 + i, sku: value, ean, excluded: false, exclusion_reason: null }),
      priceHash: `p-${i}_x`,
      contentHash: `c-${i}_y`,
      exclusionReason: null,
      sku: value,
      ean,
    };
  });
  await storage.upsertPublished(store.id, rows);
  for (const row of rows) {
    expect((await storage.findPublishedProducts(store.id, { sku: row.sku }, 10)).map((p) => [p.id, p.sku, p.ean])).toEqual([
      [row.productId, row.sku, row.ean],
    ]);
  }
  expect(await storage.findPublishedProducts(store.id, { ean: `${ODD[1]}-ean` }, 10)).toHaveLength(1);
  const hashes = await storage.publishedHashes(
    store.id,
    rows.map((r) => r.productId),
  );
  expect([...hashes.entries()].sort((a, b) => a[0] - b[0])).toEqual(
    rows.map((r) => [r.productId, { priceHash: r.priceHash, contentHash: r.contentHash }]),
  );
  // A price-only rewrite keeps the others' values.
  await storage.updatePublishedPrices(store.id, [{ productId: 1001, payload: rows[1]!.payload, priceHash: 'new "price" \\ hash' }]);
  expect((await storage.publishedHashes(store.id, [1001])).get(1001)).toEqual({ priceHash: 'new "price" \\ hash', contentHash: 'c-1_y' });
  await storage.transaction((tx) =>
    tx.recordChanges(
      merchant.id,
      rows.map((r, i) => ({ storeId: store.id, productId: r.productId, changeType: i % 2 === 0 ? 'price' : 'content' })),
      new Date(AT),
    ),
  );
  const changes = await storage.changesAfter(store.id, { at: '', id: 0 }, 100);
  expect(changes.map((c) => [c.product_id, c.change_type])).toEqual(rows.map((r, i) => [r.productId, i % 2 === 0 ? 'price' : 'content']));
});
