// PublishedStore.publishedCountsByExclusion and CatalogAdmin.publishedCounts: a store's published
// products, and the excluded ones per exclusion reason as the payloads carry it (spec: the reasons
// in priority order manual, missing_title, no_offers, out_of_stock).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService } from '../support/service.js';

let service: TestService;
let merchantId: number;

beforeAll(async () => {
  service = await startTestService();
  const { admin } = service;
  merchantId = (await admin.createMerchant({ name: 'Count Outfitters' })).id;
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
  await admin.upsertProduct(merchantId, 'sellable', { content: { de: { title: 'Rucksack' } }, offers: offer(3) });
  await admin.upsertProduct(merchantId, 'not-in-at', { content: { de: { title: 'Zelt' } }, offers: offer(3), excluded_stores: ['at'] });
  await admin.upsertProduct(merchantId, 'no-offers', { content: { de: { title: 'Schlafsack' } } });
  await admin.upsertProduct(merchantId, 'untitled', { offers: offer(2) });
  await admin.upsertProduct(merchantId, 'sold-out', { content: { de: { title: 'Stirnlampe' } }, offers: offer(0) });
});
afterAll(() => service?.close());

describe('published counts by exclusion reason', () => {
  it('counts every published product of the store and the excluded ones under the reason their payload states', async () => {
    const stores = await service.storage.listStores(merchantId);
    const de = stores.find((s) => s.slug === 'de')!;
    const at = stores.find((s) => s.slug === 'at')!;
    expect(await service.storage.publishedCountsByExclusion(de.id)).toEqual({
      total: 5,
      excluded: { manual: 0, missing_title: 1, no_offers: 1, out_of_stock: 0 },
    });
    // The AT store excludes out-of-stock products, and one product is excluded from it by hand.
    expect(await service.storage.publishedCountsByExclusion(at.id)).toEqual({
      total: 5,
      excluded: { manual: 1, missing_title: 1, no_offers: 1, out_of_stock: 1 },
    });
  });

  it('answers zeros for a store that publishes nothing', async () => {
    expect(await service.storage.publishedCountsByExclusion(999_999)).toEqual({
      total: 0,
      excluded: { manual: 0, missing_title: 0, no_offers: 0, out_of_stock: 0 },
    });
  });

  it('follows a product whose exclusion changes (CatalogAdmin.publishedCounts, per store of the merchant)', async () => {
    await service.admin.upsertProduct(merchantId, 'untitled', {
      content: { de: { title: 'Jetzt mit Titel' } },
      offers: [{ supplier_ref: 'alpine', quantity: 2, cost: '10.00', currency: 'EUR' }],
    });
    const counts = await service.admin.publishedCounts(merchantId);
    expect(counts.map(({ store, total, excluded }) => [store.slug, total, excluded.missing_title])).toEqual(
      expect.arrayContaining([
        ['de', 5, 0],
        ['at', 5, 0],
      ]),
    );
    await expect(service.admin.publishedCounts(999_999)).rejects.toMatchObject({ code: 'not_found' });
  });
});
