// A merchant's scope over the storage port (src/storage/merchant-scope.ts), on every engine: a
// scoped call reads and writes its own merchant's rows only, whatever ids it is handed, and its
// methods take no merchant id at all (the @ts-expect-error lines fail to compile if one does).
import { describe, expect, it } from 'vitest';
import { forMerchant, scopeToMerchant } from '../../src/storage/merchant-scope.js';
import type { CatalogStorage } from '../../src/storage/port.js';
import { storagePerTest } from '../support/engine.js';
import { ENGINE, SOURCE, STORE } from '../support/storage-fixtures.js';

const AT = '2026-11-26T08:00:00.000Z';

let storage: CatalogStorage;
storagePerTest('merchant-scope', (fresh) => ({ storage } = fresh));

/** A merchant with a store `de`, a customer group, a supplier and a product `tent`: the same names for every merchant. */
async function merchantNamed(name: string) {
  const merchant = await storage.createMerchant({ name, sku_pattern: null, owner_emails: [], created_at: AT });
  const store = await storage.upsertStore(merchant.id, 'de', STORE);
  const group = await storage.createCustomerGroup(merchant.id, 'Wholesale');
  await storage.upsertSupplier(merchant.id, 'acme', 'Acme');
  const product = await storage.upsertProductSource(merchant.id, 'tent', SOURCE, AT);
  return { merchant, store, group, product };
}

describe(`a merchant's scope on ${ENGINE}`, () => {
  it("reads only its own merchant's rows, by the same names and by another merchant's ids", async () => {
    const a = await merchantNamed('Alpine');
    const b = await merchantNamed('Baltic');
    const scope = scopeToMerchant(storage, a.merchant.id);
    expect(scope.merchantId).toBe(a.merchant.id);
    expect((await scope.getMerchant())?.name).toBe('Alpine');
    expect((await scope.listStores()).map((s) => s.id)).toEqual([a.store.id]);
    expect((await scope.findStore('de'))?.id).toBe(a.store.id);
    expect((await scope.findProductByRef('tent'))?.id).toBe(a.product.id);
    expect(await scope.productsByIds([b.product.id])).toEqual([]);
    expect((await scope.listCustomerGroups()).map((g) => g.id)).toEqual([a.group.id]);
    expect((await scope.listSuppliers()).map((s) => s.ref)).toEqual(['acme']);
    // @ts-expect-error: a scoped operation takes no merchant id
    await scope.listStores(b.merchant.id);
  });

  it("writes only its own merchant's rows: another merchant's ids change nothing there", async () => {
    const a = await merchantNamed('Alpine');
    const b = await merchantNamed('Baltic');
    const scope = forMerchant(storage, a.merchant.id);
    await scope.transaction(async (tx) => {
      expect(await tx.deleteCustomerGroup(b.group.id)).toBe(false);
      expect(await tx.updateCustomerGroup(b.group.id, 'Taken over')).toBeUndefined();
      await tx.deleteProduct(b.product.id);
      await tx.insertAuditEntry({ at: AT, actor: 'operator', action: 'store.update', detail: 'scoped' });
    });
    expect((await storage.listCustomerGroups(b.merchant.id)).map((g) => g.name)).toEqual(['Wholesale']);
    expect((await storage.findProductByRef(b.merchant.id, 'tent'))?.id).toBe(b.product.id);
    // A row written through the scope is its merchant's, whatever the caller meant.
    expect((await storage.listAuditEntries(a.merchant.id, 10)).map((e) => e.detail)).toEqual(['scoped']);
    expect(await storage.listAuditEntries(b.merchant.id, 10)).toEqual([]);
  });

  it("refuses another merchant's store where the port keys by store, before any statement", async () => {
    const a = await merchantNamed('Alpine');
    const b = await merchantNamed('Baltic');
    const scope = forMerchant(storage, a.merchant.id);
    await expect(scope.deleteStore(b.store)).rejects.toThrow(`store ${b.store.id} is not merchant ${a.merchant.id}'s`);
    await expect(scope.publishedCountsByExclusion(b.store)).rejects.toThrow('is not merchant');
    expect(await storage.findStore(b.merchant.id, 'de')).toEqual(b.store);
    expect((await scope.publishedCountsByExclusion(a.store)).total).toBe(0);
  });

  it('reads a snapshot of its own merchant only', async () => {
    const a = await merchantNamed('Alpine');
    await merchantNamed('Baltic');
    const refs = await forMerchant(storage, a.merchant.id).snapshot(async (reader) => (await reader.productsAfter(0, 10)).map((p) => p.id));
    expect(refs).toEqual([a.product.id]);
  });
});
