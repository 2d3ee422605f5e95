// The full-recompute check (test/support/verify.ts) the fault tests rely on: it passes on a catalog
// the service built, and it notices each kind of disagreement a crash could leave behind. On the
// project's engine (test/support/engine.ts).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CatalogAdmin } from '../../src/admin/catalog-admin.js';
import type { CatalogStorage } from '../../src/storage/port.js';
import type { PostgresStorage } from '../../src/storage/postgres/index.js';
import type { SqliteStorage } from '../../src/storage/sqlite/index.js';
import { createTestDatabase, type TestDatabase } from '../support/engine.js';
import { verifyCatalog } from '../support/verify.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-verify-'));
let database: TestDatabase;
let storage: CatalogStorage;
let merchantId: number;
let ids: Record<string, number> = {};

/** Two stores, an all-stores endpoint, 10 products of which one deleted: the ids of the stores and products checked. */
async function buildCatalog(storage: CatalogStorage): Promise<Record<string, number>> {
  const ids: Record<string, number> = {};
  const admin = new CatalogAdmin(storage, () => new Date(), 3);
  merchantId = (await admin.createMerchant({ name: 'Verify Outfitters' })).id;
  const store = { is_default: false, active: true, exclude_out_of_stock: false };
  ids.de = (await admin.upsertStore(merchantId, 'de', { ...store, name: 'DE', locale: 'de-DE', currency: 'EUR' })).id;
  ids.pl = (await admin.upsertStore(merchantId, 'pl', { ...store, name: 'PL', locale: 'pl-PL', currency: 'PLN' })).id;
  await admin.createCustomerGroup(merchantId, 'retail');
  await admin.upsertSupplier(merchantId, 'alpine', 'Alpine');
  await admin.upsertExchangeRate(merchantId, { base: 'EUR', quote: 'PLN', rate: '4.25' });
  await storage.createWebhookEndpoint({
    merchant_id: merchantId,
    url: 'https://hooks.example.test/catalog',
    store_id: null,
    events: ['price', 'content', 'removed'],
    secret: 'whsec_verify',
    created_at: '2000-01-01T00:00:00.000Z',
  });
  for (let i = 0; i < 10; i++) {
    await admin.upsertProduct(merchantId, `P-${i}`, {
      content: { de: { title: `Produkt ${i}` }, pl: { title: `Produkt ${i}` } },
      offers: [{ supplier_ref: 'alpine', quantity: 3, cost: `${10 + i}.50`, currency: 'EUR' }],
    });
  }
  ids.deleted = (await storage.findProductByRef(merchantId, 'P-9'))!.id;
  await admin.deleteProduct(merchantId, 'P-9');
  ids.product = (await storage.findProductByRef(merchantId, 'P-1'))!.id;
  return ids;
}

beforeAll(async () => {
  database = await createTestDatabase(dir);
  storage = await database.open();
  ids = await buildCatalog(storage);
});

afterAll(async () => {
  await storage?.close();
  await database?.drop();
  fs.rmSync(dir, { recursive: true, force: true });
});

let copies = 0;

/**
 * Runs the check on the catalog as the statement `sql` (`?` placeholders, SQL both engines accept)
 * leaves it, leaving the shared catalog untouched: the check reads committed data only, so the
 * tampering is committed, on the same catalog built again in a database of its own (same ids).
 */
async function verifyAfter(sql: string, ...params: unknown[]) {
  const copyDir = path.join(dir, `tampered-${++copies}`);
  fs.mkdirSync(copyDir);
  const copyDatabase = await createTestDatabase(copyDir);
  const copy = await copyDatabase.open();
  try {
    expect(await buildCatalog(copy)).toEqual(ids);
    if (copyDatabase.engine === 'sqlite') {
      (copy as SqliteStorage).db.prepare(sql).run(...params);
    } else {
      let n = 0;
      await (copy as PostgresStorage).pool.query(
        sql.replace(/\?/g, () => `$${++n}`),
        params,
      );
    }
    return await verifyCatalog(copy);
  } finally {
    await copy.close();
    await copyDatabase.drop();
  }
}

// Each tampering builds the catalog again: seconds on pglite (a clone of the database).
describe('verifyCatalog', { timeout: 60_000 }, () => {
  it('finds nothing wrong with a catalog the publisher built, having compared every payload, change and outbox row', async () => {
    const report = await verifyCatalog(storage);
    expect(report.problems).toEqual([]);
    expect(report).toMatchObject({ merchants: 1, stores: 2, products: 9, payloadsCompared: 18, endpoints: 1 });
    // 10 products x 2 stores x (price + content), then 2 removals.
    expect(report.changes).toBe(42);
    expect(report.deliveriesCovered).toBe(42);
  });

  it('notices a stored payload that differs from resolving the sources again', async () => {
    const report = await verifyAfter(
      'UPDATE published_products SET payload = replace(payload, \'"stock":3\', \'"stock":4\') WHERE store_id = ? AND product_id = ?',
      ids.pl,
      ids.product,
    );
    expect(report.problems).toEqual([
      expect.stringMatching(/store pl .* product \d+ \(P-1\): stored payload differs from a full recompute/),
    ]);
  });

  it('notices a source change that was never re-published (an exchange rate written without re-pricing)', async () => {
    const report = await verifyAfter("UPDATE exchange_rates SET rate = '4.5' WHERE merchant_id = ?", merchantId);
    expect(report.problemCount).toBe(9);
    expect(report.problems.every((p) => p.includes('store pl') && p.includes('differs from a full recompute'))).toBe(true);
  });

  it('notices stored hashes that do not match the payload (change detection would go wrong)', async () => {
    const report = await verifyAfter(
      "UPDATE published_products SET price_hash = 'x' WHERE store_id = ? AND product_id = ?",
      ids.de,
      ids.product,
    );
    expect(report.problems).toEqual([expect.stringContaining('hashes differ from a full recompute')]);
  });

  it('notices a payload still published for a deleted product, and a product never published', async () => {
    const deleted = await verifyAfter('DELETE FROM products WHERE id = ?', ids.product);
    expect(deleted.problems).toEqual([
      `store de (${ids.de}): product ${ids.product} is published but does not exist`,
      `store pl (${ids.pl}): product ${ids.product} is published but does not exist`,
    ]);
    const missing = await verifyAfter('DELETE FROM published_products WHERE store_id = ? AND product_id = ?', ids.de, ids.product);
    expect(missing.problems).toContainEqual(expect.stringMatching(/store de .* product \d+ \(P-1\): not published/));
  });

  it('notices a feed whose latest change disagrees with what is published', async () => {
    const removedButPublished = await verifyAfter(
      "INSERT INTO changes (merchant_id, id, store_id, product_id, change_type, created_at) SELECT merchant_id, 1000000, id, ?, 'removed', '2999-01-01T00:00:00Z' FROM stores WHERE id = ?",
      ids.product,
      ids.de,
    );
    expect(removedButPublished.problems).toContainEqual(
      `store de (${ids.de}): product ${ids.product} is published but its latest change is "removed"`,
    );
    const neverAnnounced = await verifyAfter('DELETE FROM changes WHERE store_id = ? AND product_id = ?', ids.pl, ids.product);
    expect(neverAnnounced.problems).toEqual([`store pl (${ids.pl}): product ${ids.product} is published but the feed never announced it`]);
    const removalLost = await verifyAfter("DELETE FROM changes WHERE product_id = ? AND change_type = 'removed'", ids.deleted);
    expect(removalLost.problems).toEqual([
      `store de (${ids.de}): product ${ids.deleted} is not published but its latest change is "content", not "removed"`,
      `store pl (${ids.pl}): product ${ids.deleted} is not published but its latest change is "content", not "removed"`,
    ]);
  });

  it('notices a change that reached neither the outbox nor a delivery of a subscribed endpoint', async () => {
    const report = await verifyAfter(
      "DELETE FROM webhook_outbox WHERE product_ids = '[' || ? || ']' AND event = 'removed'",
      String(ids.deleted),
    );
    // An all-stores endpoint gets the removal with store_id null (spec 2.7): both stores' changes are lost.
    expect(report.problems).toEqual([
      expect.stringMatching(
        new RegExp(
          `endpoint \\d+: change \\d+ \\(removed, store ${ids.de}, product ${ids.deleted}\\) is neither in the outbox nor in a delivery`,
        ),
      ),
      expect.stringMatching(
        new RegExp(
          `endpoint \\d+: change \\d+ \\(removed, store ${ids.pl}, product ${ids.deleted}\\) is neither in the outbox nor in a delivery`,
        ),
      ),
    ]);
  });
});
