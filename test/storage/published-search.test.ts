// PublishedStore.findPublishedProducts and publishedSummaries, and the CatalogReads functions the
// panel's catalog page calls over them: exact SKU and EAN lookup in a store's published payloads,
// and the store's products by id with keyset paging, optionally the excluded ones only; the SKU and
// EAN lookups read an index range (EXPLAIN QUERY PLAN of the statement the search prepares).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { StoreRecord } from '../../src/catalog/model.js';
import { openSqliteStorage } from '../../src/storage/sqlite/index.js';
import { startTestService, type TestService } from '../support/service.js';

let service: TestService;
let merchantId: number;
let de: StoreRecord;
let at: StoreRecord;
const ids: Record<string, number> = {};

beforeAll(async () => {
  service = await startTestService();
  const { admin } = service;
  merchantId = (await admin.createMerchant({ name: 'Search Outfitters', sku_pattern: 'SO-{ref}' })).id;
  await admin.upsertStore(merchantId, 'de', {
    name: 'DE',
    locale: 'de-DE',
    currency: 'EUR',
    is_default: true,
    active: true,
    exclude_out_of_stock: false,
  });
  await admin.upsertStore(merchantId, 'at', {
    name: 'AT',
    locale: 'de-AT',
    currency: 'EUR',
    is_default: false,
    active: true,
    exclude_out_of_stock: true,
  });
  await admin.upsertSupplier(merchantId, 'alpine', 'Alpine');
  const offer = (quantity: number) => [{ supplier_ref: 'alpine', quantity, cost: '10.00', currency: 'EUR' }];
  const products: [string, Parameters<typeof admin.upsertProduct>[2]][] = [
    ['pack', { eans: ['4006381333931'], content: { de: { title: 'Rucksack' } }, offers: offer(3) }],
    ['tent-green', { eans: ['4012345678901'], content: { de: { title: 'Zelt grün' } }, offers: offer(3) }],
    ['tent-red', { eans: ['4012345678901'], content: { de: { title: 'Zelt rot' } }, offers: offer(3) }],
    ['no-offers', { content: { de: { title: 'Schlafsack' } } }],
    ['untitled', { offers: offer(2) }],
  ];
  for (const [ref, input] of products) ids[ref] = (await admin.upsertProduct(merchantId, ref, input)).id;
  const stores = await service.storage.listStores(merchantId);
  de = stores.find((s) => s.slug === 'de')!;
  at = stores.find((s) => s.slug === 'at')!;
});
afterAll(() => service?.close());

describe('finding published products by SKU or EAN', () => {
  it('finds the product whose payload has exactly the SKU, in that store only', async () => {
    expect(await service.storage.findPublishedProducts(de.id, { sku: 'SO-pack' }, 10)).toEqual([
      { id: ids.pack, title: 'Rucksack', sku: 'SO-pack', ean: '4006381333931', excluded: false, exclusion_reason: null },
    ]);
    expect(await service.storage.findPublishedProducts(de.id, { sku: 'SO-PACK' }, 10)).toEqual([]);
    expect(await service.storage.findPublishedProducts(de.id, { sku: 'SO-pa' }, 10)).toEqual([]);
    expect(await service.storage.findPublishedProducts(999_999, { sku: 'SO-pack' }, 10)).toEqual([]);
  });

  it('finds every product sharing an EAN, ascending by id, at most the limit', async () => {
    const both = await service.storage.findPublishedProducts(de.id, { ean: '4012345678901' }, 10);
    expect(both.map((p) => p.id)).toEqual([ids['tent-green'], ids['tent-red']]);
    expect((await service.storage.findPublishedProducts(de.id, { ean: '4012345678901' }, 1)).map((p) => p.id)).toEqual([ids['tent-green']]);
  });

  it('requires every field given to match, and matches nothing when none is given', async () => {
    expect((await service.storage.findPublishedProducts(de.id, { sku: 'SO-tent-red', ean: '4012345678901' }, 10)).map((p) => p.id)).toEqual(
      [ids['tent-red']],
    );
    expect(await service.storage.findPublishedProducts(de.id, { sku: 'SO-pack', ean: '4012345678901' }, 10)).toEqual([]);
    expect(await service.storage.findPublishedProducts(de.id, {}, 10)).toEqual([]);
  });

  it('CatalogReads.findProducts tries the id, then the ref, then the SKU, then the EAN', async () => {
    const { reads } = service.service;
    const field = async (query: string) => {
      const found = await reads.findProducts(merchantId, 'de', query);
      return [found.field, found.matches.map((m) => m.ref)];
    };
    expect(await field(String(ids.pack))).toEqual(['id', ['pack']]);
    expect(await field('tent-red')).toEqual(['ref', ['tent-red']]);
    expect(await field('SO-no-offers')).toEqual(['sku', ['no-offers']]);
    expect(await field('4006381333931')).toEqual(['ean', ['pack']]);
    expect(await field('4012345678901')).toEqual(['ean', ['tent-green', 'tent-red']]);
    expect(await field('nothing-like-it')).toEqual([null, []]);
    await expect(reads.findProducts(merchantId, 'nowhere', 'pack')).rejects.toMatchObject({ code: 'store_not_found' });
  });

  it("does not find another merchant's product by its id", async () => {
    const other = (await service.admin.createMerchant({ name: 'Other' })).id;
    await service.admin.upsertStore(other, 'de', {
      name: 'DE',
      locale: 'de-DE',
      currency: 'EUR',
      is_default: true,
      active: true,
      exclude_out_of_stock: false,
    });
    expect((await service.service.reads.findProducts(other, 'de', String(ids.pack))).matches).toEqual([]);
  });
});

describe("listing a store's published products", () => {
  it('pages by id with a keyset after the last id', async () => {
    const first = await service.storage.publishedSummaries(de.id, { afterId: 0, limit: 2 });
    expect(first.map((p) => p.id)).toEqual([ids.pack, ids['tent-green']]);
    const rest = await service.storage.publishedSummaries(de.id, { afterId: first[1]!.id, limit: 10 });
    expect(rest.map((p) => p.id)).toEqual([ids['tent-red'], ids['no-offers'], ids.untitled]);
    expect(rest[2]).toEqual({
      id: ids.untitled,
      title: null,
      sku: 'SO-untitled',
      ean: null,
      excluded: true,
      exclusion_reason: 'missing_title',
    });
  });

  it("lists the excluded products only, each with its reason as the store's payload states it", async () => {
    const reasons = async (store: StoreRecord) =>
      (await service.storage.publishedSummaries(store.id, { afterId: 0, limit: 10, excludedOnly: true })).map((p) => [
        p.id,
        p.exclusion_reason,
      ]);
    expect(await reasons(de)).toEqual([
      [ids['no-offers'], 'no_offers'],
      [ids.untitled, 'missing_title'],
    ]);
    expect(await reasons(at)).toEqual([
      [ids['no-offers'], 'no_offers'],
      [ids.untitled, 'missing_title'],
    ]);
  });

  it("CatalogReads.productSummaries gives the page, the next after_id while more follow, and the store's counts", async () => {
    const { reads } = service.service;
    const page1 = await reads.productSummaries(merchantId, 'de', { perPage: 2 });
    expect(page1.products.map((p) => p.id)).toEqual([ids.pack, ids['tent-green']]);
    expect(page1.nextAfterId).toBe(ids['tent-green']);
    expect(page1.counts).toEqual({ total: 5, excluded: { manual: 0, missing_title: 1, no_offers: 1, out_of_stock: 0 } });
    const page3 = await reads.productSummaries(merchantId, 'de', { perPage: 2, afterId: ids['no-offers'] });
    expect(page3.products.map((p) => p.id)).toEqual([ids.untitled]);
    expect(page3.nextAfterId).toBeNull();
    // Exactly a full last page: no next page.
    const excluded = await reads.productSummaries(merchantId, 'de', { perPage: 2, excludedOnly: true });
    expect(excluded.products.map((p) => p.exclusion_reason)).toEqual(['no_offers', 'missing_title']);
    expect(excluded.nextAfterId).toBeNull();
  });
});

describe('SKU and EAN search without scanning (migration 44)', () => {
  /** The query plan of every published_products statement findPublishedProducts prepares for this match. */
  async function plansFor(match: { sku?: string; ean?: string }): Promise<string[]> {
    // A storage of its own: its connections prepare the search's statements afresh, so they are seen here.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-search-plan-'));
    const storage = openSqliteStorage(path.join(dir, 'catalog.db'));
    const prepared: string[] = [];
    const prepare = vi.spyOn(Database.prototype, 'prepare').mockImplementation(function (this: Database.Database, sql: string) {
      if (/FROM published_products/.test(sql) && /published_products\.(sku|ean) =/.test(sql)) prepared.push(sql);
      return originalPrepare.call(this, sql);
    });
    try {
      const merchant = await storage.createMerchant({
        name: 'Plan',
        sku_pattern: null,
        owner_emails: [],
        created_at: new Date().toISOString(),
      });
      const store = await storage.upsertStore(merchant.id, 'de', {
        name: 'DE',
        locale: 'de-DE',
        currency: 'EUR',
        is_default: true,
        active: true,
        exclude_out_of_stock: false,
      });
      await storage.upsertPublished(
        store.id,
        Array.from({ length: 50 }, (_, i) => ({
          productId: i + 1,
          payload: JSON.stringify({
            id: i + 1,
            sku: `SKU-${i}`,
            ean: `400000000${String(i).padStart(4, '0')}`,
            title: 't',
            excluded: false,
            exclusion_reason: null,
          }),
          priceHash: 'p',
          contentHash: 'c',
        })),
      );
      expect(await storage.findPublishedProducts(store.id, match, 10)).toHaveLength(1);
      expect(prepared).toHaveLength(1);
      const params = { storeId: store.id, limit: 10, ...match };
      return (storage.db.prepare(`EXPLAIN QUERY PLAN ${prepared[0]}`).all(params) as { detail: string }[]).map((row) => row.detail);
    } finally {
      prepare.mockRestore();
      await storage.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }
  // eslint-disable-next-line @typescript-eslint/unbound-method -- called with its database as `this` (originalPrepare.call(this, …))
  const originalPrepare = Database.prototype.prepare;

  it("finds by SKU from the store's SKU index range, in id order without a sort", async () => {
    const plan = await plansFor({ sku: 'SKU-7' });
    expect(plan.join('\n')).toMatch(/SEARCH published_products USING INDEX published_products_sku \(store_id=\? AND sku=\?\)/);
    expect(plan.join('\n')).not.toMatch(/SCAN|TEMP B-TREE/);
  });

  it("finds by EAN from the store's EAN index range", async () => {
    const plan = await plansFor({ ean: '4000000000007' });
    expect(plan.join('\n')).toMatch(/SEARCH published_products USING INDEX published_products_ean \(store_id=\? AND ean=\?\)/);
    expect(plan.join('\n')).not.toMatch(/SCAN|TEMP B-TREE/);
  });

  it('finds by SKU and EAN together from one of the two indexes', async () => {
    const plan = await plansFor({ sku: 'SKU-7', ean: '4000000000007' });
    expect(plan.join('\n')).toMatch(/SEARCH published_products USING INDEX published_products_(sku|ean) \(store_id=\? AND (sku|ean)=\?\)/);
    expect(plan.join('\n')).not.toMatch(/SCAN/);
  });
});
