// The storage contract (src/storage/port.ts), run against every engine: the `sqlite` project runs it
// on a SQLite file, the `postgres` project on a database of the test PostgreSQL server (or on the
// embedded pglite without server binaries). Every port method is exercised; an engine passes when
// it answers exactly what the port promises. On the postgres project, the same catalog is also
// built on both engines and must give byte-identical published bytes and equal ETags.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CatalogStorage, DeliveryClaim, PublishedRow } from '../../src/storage/port.js';
import type { ClaimedDelivery, NewDelivery } from '../../src/webhooks/model.js';
import type { ProductSourceDocument } from '../../src/catalog/model.js';
import type { RecordedChange } from '../../src/changes/model.js';
import { CATCH_ALL_RULE } from '../../src/catalog/pricing-rules.js';
import { buildOutdoorCatalog, type OutdoorCatalog } from '../support/admin-http.js';
import { fakeClock } from '../support/clock.js';
import { postgresOnly, severalConnections, storagePerTest } from '../support/engine.js';
import { ENGINE, SOURCE, STORE } from '../support/storage-fixtures.js';
import { startTestService, type TestService } from '../support/service.js';

const AT = '2026-11-26T08:00:00Z';
const source = (patch: Partial<ProductSourceDocument> = {}): ProductSourceDocument => ({ ...SOURCE, ...patch });
const utf8 = (bytes: Uint8Array) => Buffer.from(bytes).toString('utf8');

let storage: CatalogStorage;
storagePerTest('contract', (fresh) => ({ storage } = fresh));

async function merchantWithStores(name = 'Alpine Outfitters') {
  const merchant = await storage.createMerchant({ name, sku_pattern: null, owner_emails: ['owner@alpine.example'], created_at: AT });
  const de = await storage.upsertStore(merchant.id, 'de', STORE);
  const pl = await storage.upsertStore(merchant.id, 'pl', {
    ...STORE,
    name: 'Polska',
    locale: 'pl-PL',
    currency: 'PLN',
    is_default: false,
  });
  return { merchant, de, pl };
}

describe(`the storage contract on ${ENGINE}`, () => {
  describe('tenancy', () => {
    it('creates, lists, reads, updates and counts merchants', async () => {
      const a = await storage.createMerchant({ name: 'A', sku_pattern: 'A-{ref}', owner_emails: ['a@x.example'], created_at: AT });
      const b = await storage.createMerchant({ name: 'B', sku_pattern: null, owner_emails: [], created_at: AT });
      expect(a).toEqual({ id: a.id, name: 'A', sku_pattern: 'A-{ref}', owner_emails: ['a@x.example'], created_at: AT });
      expect(b.id).toBeGreaterThan(a.id);
      expect(await storage.listMerchants()).toEqual([a, b]);
      expect(await storage.getMerchant(b.id)).toEqual(b);
      expect(await storage.getMerchant(999_999)).toBeUndefined();
      expect(await storage.updateMerchant(a.id, { name: 'A2', owner_emails: [] })).toEqual({ ...a, name: 'A2', owner_emails: [] });
      expect(await storage.updateMerchant(999_999, { name: 'x' })).toBeUndefined();
      expect(await storage.countMerchants()).toBe(2);
    });

    it('stores API keys by hash, finds only active ones, and revokes a key of its own merchant once', async () => {
      const { merchant } = await merchantWithStores();
      const other = await storage.createMerchant({ name: 'Other', sku_pattern: null, owner_emails: [], created_at: AT });
      const hash = Buffer.alloc(32, 7);
      const key = await storage.insertApiKey({
        merchant_id: merchant.id,
        name: 'integration',
        prefix: 'cps_live_ab',
        key_hash: hash,
        created_at: AT,
      });
      expect(key).toEqual({
        id: key.id,
        merchant_id: merchant.id,
        name: 'integration',
        prefix: 'cps_live_ab',
        // Without scopes, a catalog:read key for every store (as every key issued before scopes).
        scopes: ['catalog:read'],
        stores: null,
        allowed_origins: [],
        created_at: AT,
        revoked_at: null,
        expires_at: null,
        rolled_from: null,
        last_used_at: null,
      });
      expect(await storage.listApiKeys(merchant.id)).toEqual([key]);
      // A use is written unless one after `unlessAfter` is recorded, and never moves the time back.
      expect(await storage.recordApiKeyUse(key.id, '2026-11-26T08:01:00.000Z', '2026-11-26T08:00:00.000Z')).toBe(true);
      expect(await storage.recordApiKeyUse(key.id, '2026-11-26T08:01:30.000Z', '2026-11-26T08:00:30.000Z')).toBe(false);
      expect(await storage.recordApiKeyUse(key.id, '2026-11-26T08:00:59.000Z', '2026-11-26T07:59:59.000Z')).toBe(false);
      expect((await storage.listApiKeys(merchant.id))[0]!.last_used_at).toBe('2026-11-26T08:01:00.000Z');
      expect(await storage.recordApiKeyUse(key.id, '2026-11-26T08:02:00.000Z', '2026-11-26T08:01:00.000Z')).toBe(true);
      expect((await storage.listApiKeys(merchant.id))[0]!.last_used_at).toBe('2026-11-26T08:02:00.000Z');
      const found = await storage.findActiveApiKey(Buffer.alloc(32, 7));
      expect(found).toMatchObject({ id: key.id, merchant_id: merchant.id, name: 'integration', scopes: ['catalog:read'], stores: null });
      expect(Buffer.from(found!.key_hash).equals(hash)).toBe(true);
      expect(await storage.revokeApiKey(other.id, key.id, AT)).toBe(false);
      expect(await storage.revokeApiKey(merchant.id, key.id, '2026-11-26T09:00:00Z')).toBe(true);
      // Revoking again keeps the first revocation time.
      await storage.revokeApiKey(merchant.id, key.id, '2026-11-27T00:00:00Z');
      expect((await storage.listApiKeys(merchant.id))[0]!.revoked_at).toBe('2026-11-26T09:00:00Z');
      expect(await storage.findActiveApiKey(hash)).toBeUndefined();
      // The re-check of held keys: of the ids asked, those of keys that exist and are not revoked.
      const spare = await storage.insertApiKey({
        merchant_id: other.id,
        name: 'spare',
        prefix: 'cps_live_cd',
        key_hash: Buffer.alloc(32, 8),
        created_at: AT,
      });
      expect(await storage.activeApiKeyIds([key.id, spare.id, spare.id + 1000], AT)).toEqual([spare.id]);
      expect(await storage.activeApiKeyIds([], AT)).toEqual([]);
    });

    it("keeps a key's expiry and the key it was rolled from; an expired key is neither counted nor held active", async () => {
      const { merchant } = await merchantWithStores();
      const old = await storage.insertApiKey({
        merchant_id: merchant.id,
        name: 'erp',
        prefix: 'cps_live_gh',
        key_hash: Buffer.alloc(32, 10),
        created_at: AT,
        expires_at: '2026-12-01T00:00:00.000Z',
      });
      const rolled = await storage.insertApiKey({
        merchant_id: merchant.id,
        name: 'erp',
        prefix: 'cps_live_ij',
        key_hash: Buffer.alloc(32, 11),
        created_at: AT,
        rolled_from: old.id,
      });
      expect(old.expires_at).toBe('2026-12-01T00:00:00.000Z');
      expect(rolled).toMatchObject({ expires_at: null, rolled_from: old.id });
      expect(await storage.findActiveApiKey(Buffer.alloc(32, 10))).toMatchObject({ id: old.id, expires_at: '2026-12-01T00:00:00.000Z' });
      // A later expiry never lengthens a key's life; a sooner one shortens it.
      expect(await storage.expireApiKey(merchant.id, old.id, '2026-12-05T00:00:00.000Z')).toBe(false);
      expect(await storage.expireApiKey(merchant.id, old.id, '2026-11-28T00:00:00.000Z')).toBe(true);
      expect((await storage.listApiKeys(merchant.id)).find((k) => k.id === old.id)!.expires_at).toBe('2026-11-28T00:00:00.000Z');
      expect(await storage.countActiveApiKeys(merchant.id, '2026-11-27T23:59:59.999Z')).toBe(2);
      expect(await storage.countActiveApiKeys(merchant.id, '2026-11-28T00:00:00.000Z')).toBe(1);
      expect(await storage.activeApiKeyIds([old.id, rolled.id], '2026-11-27T23:59:59.999Z')).toEqual([old.id, rolled.id]);
      expect(await storage.activeApiKeyIds([old.id, rolled.id], '2026-11-28T00:00:00.000Z')).toEqual([rolled.id]);
    });

    it("keeps a key's allowed origins, changes them and its name alone, and lists the origins of active keys over the deployment", async () => {
      const { merchant } = await merchantWithStores();
      const other = await storage.createMerchant({ name: 'Other origins', sku_pattern: null, owner_emails: [], created_at: AT });
      const page = await storage.insertApiKey({
        merchant_id: merchant.id,
        name: 'pages',
        prefix: 'cps_live_or',
        key_hash: Buffer.alloc(32, 21),
        created_at: AT,
        allowed_origins: ['https://shop.example.com'],
      });
      const server = await storage.insertApiKey({
        merchant_id: merchant.id,
        name: 'server',
        prefix: 'cps_live_os',
        key_hash: Buffer.alloc(32, 22),
        created_at: AT,
      });
      expect(page.allowed_origins).toEqual(['https://shop.example.com']);
      expect(server.allowed_origins).toEqual([]);
      expect(await storage.findActiveApiKey(Buffer.alloc(32, 21))).toMatchObject({ allowed_origins: ['https://shop.example.com'] });
      expect(await storage.browserOrigins(AT)).toContain('https://shop.example.com');
      // Another merchant's id changes nothing; a field left out stays as it is.
      expect(await storage.updateApiKey(other.id, page.id, { name: 'x' })).toBeUndefined();
      const renamed = await storage.updateApiKey(merchant.id, page.id, { name: 'shop pages' });
      expect(renamed).toEqual({ ...page, name: 'shop pages' });
      const moved = await storage.updateApiKey(merchant.id, server.id, { allowed_origins: ['http://localhost:5173', 'https://b.example'] });
      expect(moved).toEqual({ ...server, allowed_origins: ['http://localhost:5173', 'https://b.example'] });
      expect(await storage.browserOrigins(AT)).toEqual(
        expect.arrayContaining(['https://shop.example.com', 'http://localhost:5173', 'https://b.example']),
      );
      // None again; a revoked or expired key's origins are no one's.
      expect((await storage.updateApiKey(merchant.id, server.id, { allowed_origins: [] }))!.allowed_origins).toEqual([]);
      expect(await storage.browserOrigins(AT)).not.toContain('http://localhost:5173');
      await storage.expireApiKey(merchant.id, page.id, '2026-11-28T00:00:00.000Z');
      expect(await storage.browserOrigins('2026-11-27T00:00:00.000Z')).toContain('https://shop.example.com');
      expect(await storage.browserOrigins('2026-11-28T00:00:00.000Z')).not.toContain('https://shop.example.com');
      await storage.revokeApiKey(merchant.id, page.id, AT);
      expect(await storage.browserOrigins(AT)).not.toContain('https://shop.example.com');
    });

    it("keeps a key's scopes and stores, and lists the audit entries of one key with its name and prefix", async () => {
      const { merchant } = await merchantWithStores();
      const scoped = await storage.insertApiKey({
        merchant_id: merchant.id,
        name: 'shop de',
        prefix: 'cps_live_ef',
        key_hash: Buffer.alloc(32, 9),
        created_at: AT,
        scopes: ['catalog:read', 'webhooks:write'],
        stores: ['de'],
      });
      expect(scoped).toMatchObject({ scopes: ['catalog:read', 'webhooks:write'], stores: ['de'] });
      expect(await storage.findActiveApiKey(Buffer.alloc(32, 9))).toMatchObject({
        scopes: ['catalog:read', 'webhooks:write'],
        stores: ['de'],
      });
      await storage.insertAuditEntry({ merchant_id: merchant.id, at: AT, actor: 'operator', action: 'store.update', detail: 'de' });
      await storage.insertAuditEntry({
        merchant_id: merchant.id,
        at: AT,
        actor: 'key "shop de" (cps_live_ef…)',
        api_key_id: scoped.id,
        action: 'endpoint.create',
        detail: 'endpoint 1',
      });
      const all = await storage.listAuditEntries(merchant.id, 10);
      expect(all.map((e) => e.api_key)).toEqual([{ id: scoped.id, name: 'shop de', prefix: 'cps_live_ef' }, null]);
      const own = await storage.listAuditEntries(merchant.id, 10, scoped.id);
      expect(own.map((e) => e.action)).toEqual(['endpoint.create']);
    });

    it('upserts stores with one default per merchant, lists the default first, and bumps catalog versions', async () => {
      const { merchant, de, pl } = await merchantWithStores();
      expect(de).toEqual({ id: de.id, merchant_id: merchant.id, slug: 'de', ...STORE, catalog_version: expect.any(Number) });
      expect(await storage.findDefaultStore(merchant.id)).toEqual(de);
      const plDefault = await storage.upsertStore(merchant.id, 'pl', { ...STORE, name: 'Polska', locale: 'pl-PL', currency: 'PLN' });
      expect(plDefault.id).toBe(pl.id);
      expect(await storage.findDefaultStore(merchant.id)).toMatchObject({ slug: 'pl' });
      expect((await storage.listStores(merchant.id)).map((s) => [s.slug, s.is_default])).toEqual([
        ['pl', true],
        ['de', false],
      ]);
      expect(await storage.findStore(merchant.id, 'de')).toMatchObject({ id: de.id, is_default: false });
      expect(await storage.findStore(merchant.id, 'xx')).toBeUndefined();
      await storage.bumpCatalogVersion([de.id]);
      const bumped = (await storage.findStore(merchant.id, 'de'))!.catalog_version;
      expect(bumped).toBeGreaterThan(de.catalog_version);
      expect((await storage.findStore(merchant.id, 'pl'))!.catalog_version).toBe(pl.catalog_version);
    });

    it('never hands out a deleted store id again, and deletes the store with its published payloads and changes', async () => {
      const { merchant, de, pl } = await merchantWithStores();
      const { id: productId } = await storage.upsertProductSource(merchant.id, 'TENT', source(), AT);
      await storage.upsertPublished(pl.id, [{ productId, payload: '{"id":1}', priceHash: 'p', contentHash: 'c' }]);
      await storage.transaction((tx) =>
        tx.recordChanges(merchant.id, [{ storeId: pl.id, productId, changeType: 'content' }], new Date(AT)),
      );
      await storage.deleteStore(pl.id);
      expect(await storage.findStore(merchant.id, 'pl')).toBeUndefined();
      expect(await storage.publishedProductIds(pl.id)).toEqual([]);
      expect(await storage.changesAfter(pl.id, { at: '', id: 0 }, 10)).toEqual([]);
      const again = await storage.upsertStore(merchant.id, 'pl', { ...STORE, is_default: false });
      expect(again.id).toBeGreaterThan(Math.max(de.id, pl.id));
    });
  });

  describe('catalog setup', () => {
    it('keeps customer groups and exchange rates per merchant', async () => {
      const { merchant } = await merchantWithStores();
      const retail = await storage.createCustomerGroup(merchant.id, 'retail');
      const wholesale = await storage.createCustomerGroup(merchant.id, 'wholesale');
      expect(await storage.listCustomerGroups(merchant.id)).toEqual([retail, wholesale]);
      expect(await storage.updateCustomerGroup(merchant.id, retail.id, 'Retail')).toEqual({ id: retail.id, name: 'Retail' });
      expect(await storage.updateCustomerGroup(merchant.id, 999_999, 'x')).toBeUndefined();
      expect(await storage.deleteCustomerGroup(merchant.id, wholesale.id)).toBe(true);
      expect(await storage.deleteCustomerGroup(merchant.id, wholesale.id)).toBe(false);
      expect(await storage.listCustomerGroups(merchant.id)).toEqual([{ id: retail.id, name: 'Retail' }]);

      await storage.upsertExchangeRate(merchant.id, { base: 'USD', quote: 'EUR', rate: '0.9' });
      await storage.upsertExchangeRate(merchant.id, { base: 'EUR', quote: 'PLN', rate: '4.25' });
      expect(await storage.upsertExchangeRate(merchant.id, { base: 'EUR', quote: 'PLN', rate: '4.30' })).toEqual({
        base: 'EUR',
        quote: 'PLN',
        rate: '4.30',
      });
      expect(await storage.listExchangeRates(merchant.id)).toEqual([
        { base: 'EUR', quote: 'PLN', rate: '4.30' },
        { base: 'USD', quote: 'EUR', rate: '0.9' },
      ]);
      expect(await storage.deleteExchangeRate(merchant.id, 'USD', 'EUR')).toBe(true);
      expect(await storage.deleteExchangeRate(merchant.id, 'USD', 'EUR')).toBe(false);
    });

    it('orders pricing rules by priority and never deletes the catch-all', async () => {
      const { merchant, de } = await merchantWithStores();
      const group = await storage.createCustomerGroup(merchant.id, 'retail');
      const input = {
        priority: 20,
        customer_group_id: group.id,
        store_id: de.id,
        manufacturer: 'Alpenwerk',
        min_cost: '10.00',
        max_cost: '99.99',
        markup_percent: '40',
        markup_amount: '0.50',
        price_ending: 99,
      };
      const catchAll = await storage.createPricingRule(
        merchant.id,
        {
          ...input,
          priority: 1000,
          customer_group_id: null,
          store_id: null,
          manufacturer: null,
          min_cost: null,
          max_cost: null,
          price_ending: null,
        },
        true,
      );
      const rule = await storage.createPricingRule(merchant.id, input);
      expect(rule).toEqual({ id: rule.id, ...input, is_catch_all: false });
      expect(catchAll.is_catch_all).toBe(true);
      expect((await storage.listPricingRules(merchant.id)).map((r) => r.id)).toEqual([rule.id, catchAll.id]);
      expect(await storage.getPricingRule(merchant.id, rule.id)).toEqual(rule);
      expect(await storage.updatePricingRule(merchant.id, rule.id, { ...input, priority: 5, markup_percent: '12.5' })).toEqual({
        ...rule,
        priority: 5,
        markup_percent: '12.5',
      });
      expect(await storage.updatePricingRule(merchant.id, 999_999, input)).toBeUndefined();
      expect(await storage.deletePricingRule(merchant.id, catchAll.id)).toBe(false);
      expect(await storage.deletePricingRule(merchant.id, rule.id)).toBe(true);
      expect(await storage.getPricingRule(merchant.id, rule.id)).toBeUndefined();
    });

    it('upserts suppliers and attribute definitions, and knows when a product references a supplier', async () => {
      const { merchant } = await merchantWithStores();
      const alpine = await storage.upsertSupplier(merchant.id, 'alpine', 'Alpine');
      expect(await storage.upsertSupplier(merchant.id, 'alpine', 'Alpine AG')).toEqual({ id: alpine.id, ref: 'alpine', name: 'Alpine AG' });
      const baltic = await storage.upsertSupplier(merchant.id, 'baltic', 'Baltic');
      expect(await storage.listSuppliers(merchant.id)).toEqual([{ id: alpine.id, ref: 'alpine', name: 'Alpine AG' }, baltic]);
      expect(await storage.isSupplierReferenced(merchant.id, 'alpine')).toBe(false);
      await storage.upsertProductSource(
        merchant.id,
        'A',
        source({ offers: [{ supplier_ref: 'alpine', quantity: 1, cost: '1.00', currency: 'EUR' }] }),
        AT,
      );
      await storage.upsertProductSource(
        merchant.id,
        'B',
        source({ supplier_attributes: [{ supplier_ref: 'baltic', key: 'weight', value: '1' }] }),
        AT,
      );
      expect(await storage.isSupplierReferenced(merchant.id, 'alpine')).toBe(true);
      expect(await storage.isSupplierReferenced(merchant.id, 'baltic')).toBe(true);
      expect(await storage.deleteSupplier(merchant.id, 'nobody')).toBe(false);
      expect(await storage.deleteSupplier(merchant.id, 'baltic')).toBe(true);

      const weight = { key: 'weight', unit: 'kg', labels: { de: 'Gewicht', pl: 'Waga' } };
      await storage.upsertAttributeDefinition(merchant.id, { key: 'color', unit: null, labels: { de: 'Farbe' } });
      expect(await storage.upsertAttributeDefinition(merchant.id, weight)).toEqual(weight);
      expect(await storage.listAttributeDefinitions(merchant.id)).toEqual([{ key: 'color', unit: null, labels: { de: 'Farbe' } }, weight]);
      expect(await storage.deleteAttributeDefinition(merchant.id, 'color')).toBe(true);
      expect(await storage.deleteAttributeDefinition(merchant.id, 'color')).toBe(false);
    });

    it('reads the merchant with its stores and every list of its catalog setup in one statement, each as its own list reads it', async () => {
      const { merchant, de } = await merchantWithStores();
      const other = await merchantWithStores('Baltic Outdoor');
      await storage.createCustomerGroup(other.merchant.id, 'theirs');
      expect(await storage.catalogSetup(other.merchant.id + 1000)).toBeUndefined();
      // An empty catalog setup reads as empty lists.
      const bare = (await storage.catalogSetup(merchant.id))!;
      expect(bare).toEqual({
        merchant: await storage.getMerchant(merchant.id),
        stores: await storage.listStores(merchant.id),
        customerGroups: [],
        pricingRules: [],
        exchangeRates: [],
        attributeDefinitions: [],
        suppliers: [],
      });
      const group = await storage.createCustomerGroup(merchant.id, 'wholesale');
      await storage.createCustomerGroup(merchant.id, 'retail');
      for (const [priority, storeId] of [
        [30, null],
        [10, de.id],
        [10, null],
      ] as const) {
        await storage.createPricingRule(merchant.id, {
          priority,
          customer_group_id: storeId === null ? null : group.id,
          store_id: storeId,
          manufacturer: storeId === null ? null : 'Alpenwerk "Süd"',
          min_cost: storeId === null ? null : '10.00',
          max_cost: null,
          markup_percent: '40.50',
          markup_amount: '0',
          price_ending: storeId === null ? null : 99,
        });
      }
      await storage.createPricingRule(merchant.id, { ...CATCH_ALL_RULE, priority: 1000 }, true);
      await storage.upsertExchangeRate(merchant.id, { base: 'USD', quote: 'EUR', rate: '0.9000' });
      await storage.upsertExchangeRate(merchant.id, { base: 'EUR', quote: 'PLN', rate: '4.25' });
      await storage.upsertAttributeDefinition(merchant.id, { key: 'weight', unit: 'kg', labels: { de: 'Gewicht', pl: 'Waga' } });
      await storage.upsertAttributeDefinition(merchant.id, { key: 'color', unit: null, labels: {} });
      await storage.upsertSupplier(merchant.id, 'zeta', 'Zeta');
      await storage.upsertSupplier(merchant.id, 'alpine', 'Alpine');
      await storage.upsertStore(merchant.id, 'at', { ...STORE, name: 'Österreich', is_default: true, active: false });
      expect(await storage.catalogSetup(merchant.id)).toEqual({
        merchant: await storage.getMerchant(merchant.id),
        stores: await storage.listStores(merchant.id),
        customerGroups: await storage.listCustomerGroups(merchant.id),
        pricingRules: await storage.listPricingRules(merchant.id),
        exchangeRates: await storage.listExchangeRates(merchant.id),
        attributeDefinitions: await storage.listAttributeDefinitions(merchant.id),
        suppliers: await storage.listSuppliers(merchant.id),
      });
      expect((await storage.catalogSetup(merchant.id))!.pricingRules.map((r) => r.priority)).toEqual([10, 10, 30, 1000]);
    });
  });

  describe('product sources', () => {
    it('upserts sources by ref and finds products by ref, id range, ids, store exclusion and image', async () => {
      const { merchant } = await merchantWithStores();
      const tent = source({
        content: { de: { title: 'Zelt für zwei', description: 'Ünïcödé ✓' } },
        images: [{ url: 'https://img.example/a.jpg' }],
        excluded_stores: ['pl'],
      });
      const first = await storage.upsertProductSource(merchant.id, 'TENT', tent, AT);
      expect(first.created).toBe(true);
      expect(await storage.upsertProductSource(merchant.id, 'TENT', tent, AT)).toEqual({ id: first.id, created: false });
      const lamp = await storage.upsertProductSource(merchant.id, 'LAMP', source({ images: [{ url: 'https://img.example/a.jpg' }] }), AT);
      const bag = await storage.upsertProductSource(merchant.id, 'BAG', source(), AT);
      expect(await storage.findProductByRef(merchant.id, 'TENT')).toEqual({ id: first.id, ref: 'TENT', source: tent });
      expect(await storage.findProductByRef(merchant.id, 'NONE')).toBeUndefined();
      expect((await storage.productsAfter(merchant.id, first.id, 1)).map((p) => p.ref)).toEqual(['LAMP']);
      expect((await storage.productsAfter(merchant.id, 0, 10)).map((p) => p.ref)).toEqual(['TENT', 'LAMP', 'BAG']);
      expect((await storage.productsByIds(merchant.id, [bag.id, first.id, 999_999])).map((p) => p.id)).toEqual([first.id, bag.id]);
      expect(await storage.productsByIds(merchant.id, [])).toEqual([]);
      expect((await storage.productsExcludedFrom(merchant.id, 'pl')).map((p) => p.ref)).toEqual(['TENT']);
      expect(await storage.productIdsWithImage(merchant.id, 'https://img.example/a.jpg')).toEqual([first.id, lamp.id]);
      await storage.deleteProduct(merchant.id, lamp.id);
      expect(await storage.productIdsWithImage(merchant.id, 'https://img.example/a.jpg')).toEqual([first.id]);
    });
  });

  describe('images', () => {
    it('adds unknown URLs as pending, hands out due work oldest first, and counts states of listed URLs only', async () => {
      const { merchant } = await merchantWithStores();
      const [a, b, c] = ['https://img.example/a.jpg', 'https://img.example/b.jpg', 'https://img.example/c.jpg'];
      await storage.ensureImageMirrors(merchant.id, [a, b], '2026-11-26T08:00:00.000Z');
      await storage.ensureImageMirrors(merchant.id, [b, c], '2026-11-26T08:00:05.000Z');
      expect([...(await storage.imageMirrors(merchant.id, [a, c, 'https://img.example/unknown.jpg'])).entries()]).toEqual(
        [
          [a, { url: a, state: 'pending', mirrored_url: null }],
          [c, { url: c, state: 'pending', mirrored_url: null }],
        ].sort(([x], [y]) => ((x as string) < (y as string) ? -1 : 1)),
      );
      // Claimed under a lease: returned as they were, and not due again until the lease ends.
      const due = await storage.claimDueImageMirrors('2026-11-26T08:00:01.000Z', 10, '2026-11-26T08:01:01.000Z');
      expect(due.map((m) => m.url).sort()).toEqual([a, b]);
      expect(due[0]).toMatchObject({ merchant_id: merchant.id, state: 'pending', attempts: 0, first_failure_at: null, last_error: null });
      expect(await storage.claimDueImageMirrors('2026-11-26T08:00:10.000Z', 10, '2026-11-26T08:01:10.000Z')).toMatchObject([{ url: c }]);
      expect(await storage.claimDueImageMirrors('2026-11-26T08:00:20.000Z', 10, '2026-11-26T08:01:20.000Z')).toEqual([]);
      expect(await storage.claimDueImageMirrors('2026-11-26T08:01:05.000Z', 1, '2026-11-26T08:02:05.000Z')).toHaveLength(1);
      await storage.updateImageMirror(merchant.id, a, {
        state: 'mirrored',
        mirrored_url: 'https://cdn.example/a.jpg',
        updated_at: '2026-11-26T08:01:00.000Z',
      });
      await storage.updateImageMirror(merchant.id, b, {
        state: 'dead',
        attempts: 5,
        last_error: 'HTTP 404',
        updated_at: '2026-11-26T08:02:00.000Z',
      });
      await storage.updateImageMirror(merchant.id, c, {
        state: 'dead',
        attempts: 5,
        last_error: 'HTTP 410',
        updated_at: '2026-11-26T08:03:00.000Z',
      });
      expect((await storage.imageMirrors(merchant.id, [a])).get(a)).toEqual({
        url: a,
        state: 'mirrored',
        mirrored_url: 'https://cdn.example/a.jpg',
      });
      // Only URLs a product still lists count.
      expect(await storage.imageStateCounts(merchant.id)).toEqual({ pending: 0, mirrored: 0, dead: 0 });
      await storage.upsertProductSource(merchant.id, 'P1', source({ images: [{ url: a }, { url: b }] }), AT);
      await storage.upsertProductSource(merchant.id, 'P2', source({ images: [{ url: b }, { url: c }] }), AT);
      expect(await storage.imageStateCounts(merchant.id)).toEqual({ pending: 0, mirrored: 1, dead: 2 });
      expect((await storage.deadImages(merchant.id, 10)).map((m) => [m.url, m.last_error])).toEqual([
        [c, 'HTTP 410'],
        [b, 'HTTP 404'],
      ]);
      expect(await storage.deadImages(merchant.id, 1)).toHaveLength(1);
    });
  });

  describe('published payloads', () => {
    // Stored bytes go out unchanged: key order, whitespace-free JSON, number literals and UTF-8 as written.
    const payload = (id: number, title: string, amount: string, extra = '') =>
      `{"id":${id},"title":${JSON.stringify(title)},"sku":"SKU-${id}","ean":"400${id}","excluded":${extra ? 'true' : 'false'},"exclusion_reason":${extra ? `"${extra}"` : 'null'},"prices":[{"customer_group_id":1,"amount":${amount}}]}`;
    const rows = (ids: number[]): PublishedRow[] =>
      ids.map((id) => ({
        productId: id,
        payload: payload(id, id === 2 ? 'Zelt für zwei ✓' : `Produkt ${id}`, id === 3 ? '1999.90' : '10.00', id === 4 ? 'no_offers' : ''),
        priceHash: `price${id}`.padEnd(16, '0'),
        contentHash: `content${id}`.padEnd(16, '0'),
      }));

    it('returns the stored bytes of a page, of some ids and of their prices, byte for byte', async () => {
      const { de } = await merchantWithStores();
      const published = rows([1, 2, 3, 4]);
      await storage.upsertPublished(de.id, published);
      expect(utf8((await storage.publishedPayload(de.id, 2))!)).toBe(published[1]!.payload);
      expect(await storage.publishedPayload(de.id, 99)).toBeUndefined();
      const page = await storage.publishedPage(de.id, 2, 3);
      expect(utf8(page.bytes)).toBe(`${published[1]!.payload},${published[2]!.payload}`);
      expect(utf8(page.digests)).toBe(
        `${published[1]!.priceHash}${published[1]!.contentHash}${published[2]!.priceHash}${published[2]!.contentHash}`,
      );
      const empty = await storage.publishedPage(de.id, 100, 200);
      expect([empty.bytes.length, empty.digests.length]).toEqual([0, 0]);
      expect(await storage.publishedProductIds(de.id)).toEqual([1, 2, 3, 4]);
      const byIds = await storage.publishedPayloadsByIds(de.id, [3, 1, 99]);
      expect([utf8(byIds.bytes), byIds.count]).toEqual([`${published[0]!.payload},${published[2]!.payload}`, 2]);
      expect(utf8(byIds.digests)).toBe(
        `${published[0]!.priceHash}${published[0]!.contentHash}${published[2]!.priceHash}${published[2]!.contentHash}`,
      );
      expect(byIds.publishedVersion).toBe(0);
      expect(await storage.publishedPayloadsByIds(de.id, [])).toMatchObject({ count: 0, publishedVersion: 0 });
      const prices =
        '{"id":1,"sku":"SKU-1","ean":"4001","prices":[{"customer_group_id":1,"amount":10.00}]},{"id":3,"sku":"SKU-3","ean":"4003","prices":[{"customer_group_id":1,"amount":1999.90}]}';
      expect(utf8(await storage.publishedPricesByIds(de.id, [3, 1]))).toBe(prices);
      expect(utf8(await storage.publishedPricesByIds(de.id, [99]))).toBe('');
      // By SKU or EAN: the same bytes as by the ids they name, values no product carries left out, at most `limit`.
      const bySku = await storage.publishedPayloadsByKeys(de.id, { field: 'sku', values: ['SKU-3', 'NONE', 'SKU-1'] }, 10);
      expect([utf8(bySku.bytes), utf8(bySku.digests), bySku.count, bySku.publishedVersion]).toEqual([
        utf8(byIds.bytes),
        utf8(byIds.digests),
        2,
        0,
      ]);
      const byEan = await storage.publishedPayloadsByKeys(de.id, { field: 'ean', values: ['4004', '4002', '4001'] }, 2);
      expect([utf8(byEan.bytes), byEan.count]).toEqual([`${published[0]!.payload},${published[1]!.payload}`, 2]);
      const pricesBySku = await storage.publishedPricesByKeys(de.id, { field: 'sku', values: ['SKU-1', 'SKU-3'] }, 10);
      expect([utf8(pricesBySku.bytes), pricesBySku.count]).toEqual([prices, 2]);
      const none = await storage.publishedPricesByKeys(de.id, { field: 'ean', values: ['SKU-1'] }, 10);
      expect([utf8(none.bytes), none.count]).toEqual(['', 0]);
    });

    it('reads a store and its expected page together, the page only while the store is that store at that catalog version', async () => {
      const { merchant, de, pl } = await merchantWithStores();
      const published = rows([1, 2, 3, 4]);
      await storage.upsertPublished(de.id, published);
      const expected = { storeId: de.id, catalogVersion: de.catalog_version, range: [2, 3] as [number, number] };
      const page = await storage.publishedPage(de.id, 2, 3);
      for (const slug of ['de', undefined]) {
        const read = await storage.publishedPageOfStore(merchant.id, slug, expected);
        expect([read.store, read.publishedVersion], `slug ${slug}`).toEqual([de, 0]);
        expect([utf8(read.page!.bytes), utf8(read.page!.digests)], `slug ${slug}`).toEqual([utf8(page.bytes), utf8(page.digests)]);
      }
      // A page past the end: the store alone.
      const storeOnly = await storage.publishedPageOfStore(merchant.id, 'de', { ...expected, range: null });
      expect([storeOnly.store, storeOnly.page!.bytes.length, storeOnly.page!.digests.length]).toEqual([de, 0, 0]);
      // Another store answers to the slug (or is the default now): no page.
      expect(await storage.publishedPageOfStore(merchant.id, 'pl', expected)).toEqual({ store: pl, publishedVersion: 0, page: null });
      const plDefault = await storage.upsertStore(merchant.id, 'pl', {
        ...STORE,
        name: 'Polska',
        locale: 'pl-PL',
        currency: 'PLN',
        is_default: true,
      });
      expect(await storage.publishedPageOfStore(merchant.id, undefined, expected)).toEqual({
        store: plDefault,
        publishedVersion: 0,
        page: null,
      });
      // The store's published products changed since the reader computed its range: no page.
      await storage.bumpCatalogVersion([de.id]);
      const bumped = await storage.publishedPageOfStore(merchant.id, 'de', expected);
      expect([bumped.store?.catalog_version, bumped.page]).toEqual([de.catalog_version + 1, null]);
      expect(await storage.publishedPageOfStore(merchant.id, 'fr', expected)).toEqual({
        store: undefined,
        publishedVersion: 0,
        page: null,
      });
      const other = await storage.createMerchant({ name: 'Other', sku_pattern: null, owner_emails: [], created_at: AT });
      expect(await storage.publishedPageOfStore(other.id, 'de', expected)).toEqual({ store: undefined, publishedVersion: 0, page: null });
      // Inside a snapshot too.
      const inSnapshot = await storage.snapshot((reader) =>
        reader.publishedPageOfStore(merchant.id, 'de', { ...expected, catalogVersion: de.catalog_version + 1 }),
      );
      expect(utf8(inSnapshot.page!.bytes)).toBe(utf8(page.bytes));
    });

    it("reads the merchant's published version with the store: the rows are not read again while it is the one the reader holds", async () => {
      const { merchant, de, pl } = await merchantWithStores();
      await storage.upsertPublished(de.id, rows([1, 2, 3]));
      expect(await storage.storeAtPublishedVersion(merchant.id, 'de')).toEqual({ store: de, publishedVersion: 0 });
      expect(await storage.storeAtPublishedVersion(merchant.id, undefined)).toEqual({ store: de, publishedVersion: 0 });
      expect(await storage.storeAtPublishedVersion(merchant.id, 'fr')).toEqual({ store: undefined, publishedVersion: 0 });
      // Every write of payloads records its changes in the same transaction: that is what moves the version.
      await storage.transaction(async (tx) => {
        await tx.upsertPublished(
          de.id,
          rows([2]).map((row) => ({ ...row, payload: row.payload.replace('10.00', '11.00'), priceHash: 'price2-new'.padEnd(16, '0') })),
        );
        await tx.recordChanges(merchant.id, [{ storeId: de.id, productId: 2, changeType: 'price' }], new Date(AT));
      });
      const moved = await storage.storeAtPublishedVersion(merchant.id, 'pl');
      expect(moved).toEqual({ store: pl, publishedVersion: 1 });
      const expected = { storeId: de.id, catalogVersion: de.catalog_version, range: [1, 3] as [number, number] };
      // Held at the current version: the store and the version, no rows.
      expect(await storage.publishedPageOfStore(merchant.id, 'de', { ...expected, heldVersion: 1 })).toEqual({
        store: de,
        publishedVersion: 1,
        page: null,
      });
      // Held at an older one: the rows as they are now.
      const fresh = await storage.publishedPageOfStore(merchant.id, 'de', { ...expected, heldVersion: 0 });
      expect(fresh.publishedVersion).toBe(1);
      expect(utf8(fresh.page!.bytes)).toContain('"amount":11.00');
      expect((await storage.publishedPayloadsByIds(de.id, [2])).publishedVersion).toBe(1);
      // Another merchant's version is its own.
      const other = await storage.createMerchant({ name: 'Other', sku_pattern: null, owner_emails: [], created_at: AT });
      const otherStore = await storage.upsertStore(other.id, 'de', { ...STORE, is_default: true });
      expect(await storage.storeAtPublishedVersion(other.id, 'de')).toEqual({ store: otherStore, publishedVersion: 0 });
    });

    it('replaces and deletes rows, reports their hashes, summaries, matches and exclusion counts', async () => {
      const { de, pl } = await merchantWithStores();
      await storage.upsertPublished(de.id, rows([1, 2, 3, 4]));
      await storage.upsertPublished(pl.id, rows([1]));
      await storage.upsertPublished(de.id, [{ ...rows([1])[0]!, priceHash: 'newprice' }]);
      expect([...(await storage.publishedHashes(de.id, [1, 4, 99])).entries()].sort()).toEqual([
        [1, { priceHash: 'newprice', contentHash: 'content1'.padEnd(16, '0') }],
        [4, { priceHash: 'price4'.padEnd(16, '0'), contentHash: 'content4'.padEnd(16, '0') }],
      ]);
      expect(await storage.findPublishedProducts(de.id, { sku: 'SKU-2' }, 10)).toEqual([
        { id: 2, title: 'Zelt für zwei ✓', sku: 'SKU-2', ean: '4002', excluded: false, exclusion_reason: null },
      ]);
      expect(await storage.findPublishedProducts(de.id, { sku: 'SKU-2', ean: '4003' }, 10)).toEqual([]);
      expect(await storage.findPublishedProducts(de.id, {}, 10)).toEqual([]);
      expect((await storage.publishedSummaries(de.id, { afterId: 1, limit: 2 })).map((s) => s.id)).toEqual([2, 3]);
      expect(await storage.publishedSummaries(de.id, { afterId: 0, limit: 10, excludedOnly: true })).toEqual([
        { id: 4, title: 'Produkt 4', sku: 'SKU-4', ean: '4004', excluded: true, exclusion_reason: 'no_offers' },
      ]);
      expect(await storage.publishedCountsByExclusion(de.id)).toEqual({
        total: 4,
        excluded: { manual: 0, missing_title: 0, no_offers: 1, out_of_stock: 0 },
      });
      await storage.deletePublished(de.id, [1, 4]);
      await storage.deletePublished(de.id, []);
      expect(await storage.publishedProductIds(de.id)).toEqual([2, 3]);
      expect(await storage.publishedProductIds(pl.id)).toEqual([1]);
    });
  });

  describe('changes and the feed', () => {
    const recorded = (storeId: number, productIds: number[], changeType: RecordedChange['changeType'] = 'content') =>
      productIds.map((productId): RecordedChange => ({ storeId, productId, changeType }));

    it("numbers each merchant's changes from 1, gives one write one whole-second created_at, never earlier than the last", async () => {
      const { merchant, de, pl } = await merchantWithStores();
      const other = await merchantWithStores('Other');
      await storage.transaction((tx) =>
        tx.recordChanges(merchant.id, [...recorded(de.id, [1, 2]), ...recorded(pl.id, [1], 'price')], new Date('2026-11-26T08:00:00.700Z')),
      );
      await storage.transaction((tx) =>
        tx.recordChanges(other.merchant.id, recorded(other.de.id, [9]), new Date('2026-11-26T08:00:01.000Z')),
      );
      // The clock stepped back: the merchant's created_at stays at its last one.
      await storage.transaction((tx) =>
        tx.recordChanges(merchant.id, recorded(de.id, [3], 'removed'), new Date('2026-11-26T07:59:58.000Z')),
      );
      await storage.transaction((tx) => tx.recordChanges(merchant.id, [], new Date('2026-11-26T09:00:00.000Z')));
      expect(await storage.changesAfter(de.id, { at: '', id: 0 }, 10)).toEqual([
        { id: 1, product_id: 1, change_type: 'content', created_at: '2026-11-26T08:00:00Z' },
        { id: 2, product_id: 2, change_type: 'content', created_at: '2026-11-26T08:00:00Z' },
        { id: 4, product_id: 3, change_type: 'removed', created_at: '2026-11-26T08:00:00Z' },
      ]);
      expect(await storage.changesAfter(pl.id, { at: '', id: 0 }, 10)).toEqual([
        { id: 3, product_id: 1, change_type: 'price', created_at: '2026-11-26T08:00:00Z' },
      ]);
      expect(await storage.changesAfter(other.de.id, { at: '', id: 0 }, 10)).toEqual([
        { id: 1, product_id: 9, change_type: 'content', created_at: '2026-11-26T08:00:01Z' },
      ]);
    });

    it('reads strictly after a position in (created_at, id) order, at most the limit', async () => {
      const { merchant, de } = await merchantWithStores();
      for (const [i, at] of ['08:00:00', '08:00:00', '08:00:02', '08:00:05'].entries()) {
        await storage.transaction((tx) =>
          tx.recordChanges(merchant.id, recorded(de.id, [i + 1, i + 11]), new Date(`2026-11-26T${at}.000Z`)),
        );
      }
      const all = await storage.changesAfter(de.id, { at: '', id: 0 }, 100);
      expect(all.map((c) => [c.created_at.slice(11, 19), c.id])).toEqual([
        ['08:00:00', 1],
        ['08:00:00', 2],
        ['08:00:00', 3],
        ['08:00:00', 4],
        ['08:00:02', 5],
        ['08:00:02', 6],
        ['08:00:05', 7],
        ['08:00:05', 8],
      ]);
      // Windows of 3, each resuming at the last position read, see every change once.
      const seen: number[] = [];
      let position = { at: '', id: 0 };
      for (;;) {
        const window = await storage.changesAfter(de.id, position, 3);
        if (window.length === 0) break;
        seen.push(...window.map((c) => c.id));
        const last = window[window.length - 1]!;
        position = { at: last.created_at, id: last.id };
      }
      expect(seen).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
      expect(await storage.changesAfter(de.id, { at: '2026-11-26T08:00:02Z', id: 5 }, 100)).toEqual(all.slice(5));
    });

    it("prunes the oldest changes before the cutoff in bounded steps and moves each store's horizon to the newest pruned position", async () => {
      const { merchant, de, pl } = await merchantWithStores();
      await storage.transaction((tx) =>
        tx.recordChanges(merchant.id, [...recorded(de.id, [1, 2]), ...recorded(pl.id, [1])], new Date('2026-11-20T08:00:00Z')),
      );
      await storage.transaction((tx) => tx.recordChanges(merchant.id, recorded(de.id, [3]), new Date('2026-11-21T08:00:00Z')));
      await storage.transaction((tx) => tx.recordChanges(merchant.id, recorded(de.id, [4]), new Date('2026-11-26T08:00:00Z')));
      expect(await storage.changeHorizon(de.id)).toBeUndefined();
      expect(await storage.pruneChangesBefore('2026-11-25T00:00:00Z', 2)).toBe(2);
      expect(await storage.changeHorizon(de.id)).toEqual({ at: '2026-11-20T08:00:00Z', id: 2 });
      expect(await storage.pruneChangesBefore('2026-11-25T00:00:00Z', 100)).toBe(2);
      expect(await storage.changeHorizon(de.id)).toEqual({ at: '2026-11-21T08:00:00Z', id: 4 });
      expect(await storage.changeHorizon(pl.id)).toEqual({ at: '2026-11-20T08:00:00Z', id: 3 });
      expect(await storage.pruneChangesBefore('2026-11-25T00:00:00Z', 100)).toBe(0);
      expect((await storage.changesAfter(de.id, { at: '', id: 0 }, 10)).map((c) => c.id)).toEqual([5]);
    });
  });

  describe('webhook endpoints, outbox and notifications', () => {
    async function endpointOf(merchantId: number, storeId: number | null = null) {
      return storage.createWebhookEndpoint({
        merchant_id: merchantId,
        url: 'https://hooks.example/catalog',
        store_id: storeId,
        events: ['price', 'content'],
        secret: 'whsec_x',
        created_at: AT,
      });
    }

    it('creates endpoints with a fresh health record, reads them per merchant, patches and deletes them (notifications stay)', async () => {
      const { merchant, de } = await merchantWithStores();
      const other = await storage.createMerchant({ name: 'Other', sku_pattern: null, owner_emails: [], created_at: AT });
      const endpoint = await endpointOf(merchant.id, de.id);
      expect(endpoint).toEqual({
        id: endpoint.id,
        merchant_id: merchant.id,
        url: 'https://hooks.example/catalog',
        store_id: de.id,
        events: ['price', 'content'],
        standard_webhooks: false,
        payload: 'thin',
        max_per_second: null,
        secret: 'whsec_x',
        pending_secret: null,
        secret_rotated_at: null,
        pending_secret_until: null,
        created_at: AT,
        status: 'active',
        consecutive_failures: 0,
        failure_streak_started_at: null,
        paused_until: null,
        owners_notified_at: null,
        disabled_reason: null,
        last_success_at: null,
        last_failure_at: null,
      });
      expect(await storage.listWebhookEndpoints(merchant.id)).toEqual([endpoint]);
      expect(await storage.getWebhookEndpoint(endpoint.id)).toEqual(endpoint);
      expect(await storage.findWebhookEndpoint(other.id, endpoint.id)).toBeUndefined();
      await storage.updateWebhookEndpoint(endpoint.id, {
        status: 'paused',
        consecutive_failures: 7,
        paused_until: '2026-11-26T09:00:00.000Z',
        events: ['removed'],
      });
      expect(await storage.findWebhookEndpoint(merchant.id, endpoint.id)).toMatchObject({
        status: 'paused',
        consecutive_failures: 7,
        events: ['removed'],
      });
      const note = await storage.insertNotification({
        merchant_id: merchant.id,
        endpoint_id: endpoint.id,
        kind: 'failing',
        subject: 's',
        body: 'b',
        created_at: AT,
      });
      expect(note).toEqual({
        id: note.id,
        merchant_id: merchant.id,
        endpoint_id: endpoint.id,
        kind: 'failing',
        subject: 's',
        body: 'b',
        created_at: AT,
        emailed_at: null,
        ended_at: null,
      });
      const delivery = await storage.insertDelivery(deliveryInput(endpoint.id));
      await storage.deleteWebhookEndpoint(endpoint.id);
      expect(await storage.getWebhookEndpoint(endpoint.id)).toBeUndefined();
      expect(await storage.getDelivery(delivery.id)).toBeUndefined();
      expect(await storage.listNotifications(merchant.id, 10)).toEqual([{ ...note, endpoint_id: null }]);
    });

    it('keeps a pending secret rotation beside the signing secret, through a health update, and clears it', async () => {
      const { merchant } = await merchantWithStores();
      const endpoint = await endpointOf(merchant.id);
      const rotation = { pending_secret: 'whsec_new', secret_rotated_at: AT, pending_secret_until: '2026-11-26T08:00:00.000Z' };
      await storage.updateWebhookEndpoint(endpoint.id, rotation);
      expect(await storage.findWebhookEndpoint(merchant.id, endpoint.id)).toEqual({ ...endpoint, ...rotation });
      await storage.transaction(async (tx) =>
        tx.updateWebhookEndpointsHealth([
          {
            id: endpoint.id,
            health: {
              status: 'active',
              consecutive_failures: 1,
              failure_streak_started_at: AT,
              paused_until: null,
              owners_notified_at: null,
              disabled_reason: null,
              last_success_at: null,
              last_failure_at: AT,
            },
          },
        ]),
      );
      expect(await storage.getWebhookEndpoint(endpoint.id)).toMatchObject({ secret: 'whsec_x', ...rotation, consecutive_failures: 1 });
      await storage.updateWebhookEndpoint(endpoint.id, {
        secret: 'whsec_new',
        pending_secret: null,
        secret_rotated_at: null,
        pending_secret_until: null,
      });
      expect(await storage.listWebhookEndpoints(merchant.id)).toEqual([
        expect.objectContaining({
          secret: 'whsec_new',
          pending_secret: null,
          secret_rotated_at: null,
          pending_secret_until: null,
        }),
      ]);
    });

    it("ends an endpoint's open notifications of the given kinds once, keeping when each ended", async () => {
      const { merchant } = await merchantWithStores();
      const [one, two] = [await endpointOf(merchant.id), await endpointOf(merchant.id)];
      const note = (endpointId: number, kind: 'failing' | 'paused' | 'disabled') =>
        storage.insertNotification({
          merchant_id: merchant.id,
          endpoint_id: endpointId,
          kind,
          subject: kind,
          body: 'b',
          created_at: AT,
        });
      const failing = await note(one.id, 'failing');
      const paused = await note(one.id, 'paused');
      const otherFailing = await note(two.id, 'failing');
      expect(await storage.endNotifications(one.id, ['failing'], '2026-11-26T09:00:00.000Z')).toBe(1);
      expect(await storage.endNotifications(one.id, ['failing', 'paused'], '2026-11-26T10:00:00.000Z')).toBe(1);
      const ended = new Map((await storage.listNotifications(merchant.id, 10)).map((n) => [n.id, n.ended_at]));
      expect([ended.get(failing.id), ended.get(paused.id), ended.get(otherFailing.id)]).toEqual([
        '2026-11-26T09:00:00.000Z',
        '2026-11-26T10:00:00.000Z',
        null,
      ]);
    });

    it('lists notifications newest first and marks them e-mailed', async () => {
      const { merchant } = await merchantWithStores();
      const first = await storage.insertNotification({
        merchant_id: merchant.id,
        endpoint_id: null,
        kind: 'failing',
        subject: '1',
        body: 'b',
        created_at: AT,
      });
      const second = await storage.insertNotification({
        merchant_id: merchant.id,
        endpoint_id: null,
        kind: 'failing',
        subject: '2',
        body: 'b',
        created_at: AT,
      });
      await storage.markNotificationEmailed(first.id, '2026-11-26T08:05:00.000Z');
      expect((await storage.listNotifications(merchant.id, 10)).map((n) => [n.id, n.emailed_at])).toEqual([
        [second.id, null],
        [first.id, '2026-11-26T08:05:00.000Z'],
      ]);
      expect(await storage.listNotifications(merchant.id, 1)).toHaveLength(1);
    });

    it("groups the outbox per (endpoint, event, store) and hands out each group's rows in arrival order", async () => {
      const { merchant, de, pl } = await merchantWithStores();
      const a = await endpointOf(merchant.id);
      const b = await endpointOf(merchant.id, de.id);
      const row = (endpointId: number, event: 'price' | 'content', storeId: number | null, productId: number, createdAt: string) => ({
        endpointId,
        event,
        storeId,
        productIds: [productId],
        createdAt,
      });
      await storage.insertOutbox([
        row(a.id, 'content', de.id, 1, '2026-11-26T08:00:01.000Z'),
        row(b.id, 'price', de.id, 1, '2026-11-26T08:00:02.000Z'),
        row(a.id, 'content', pl.id, 2, '2026-11-26T08:00:03.000Z'),
        row(a.id, 'content', de.id, 3, '2026-11-26T08:00:00.000Z'),
        row(a.id, 'content', null, 4, '2026-11-26T08:00:04.000Z'),
        row(a.id, 'content', null, 5, '2026-11-26T08:00:05.000Z'),
        row(a.id, 'price', de.id, 6, '2026-11-26T08:00:06.000Z'),
      ]);
      // The port does not promise an order of the groups (SQLite: arrival order; PostgreSQL: by key).
      const byKey = <T extends { endpointId: number; event: string; storeId: number | null }>(groups: T[]) =>
        [...groups].sort((x, y) => x.endpointId - y.endpointId || x.event.localeCompare(y.event) || (x.storeId ?? 0) - (y.storeId ?? 0));
      expect(byKey(await storage.outboxGroups())).toEqual(
        byKey([
          { endpointId: a.id, event: 'content', storeId: de.id, count: 2, oldestAt: '2026-11-26T08:00:00.000Z' },
          { endpointId: b.id, event: 'price', storeId: de.id, count: 1, oldestAt: '2026-11-26T08:00:02.000Z' },
          { endpointId: a.id, event: 'content', storeId: pl.id, count: 1, oldestAt: '2026-11-26T08:00:03.000Z' },
          { endpointId: a.id, event: 'content', storeId: null, count: 2, oldestAt: '2026-11-26T08:00:04.000Z' },
          { endpointId: a.id, event: 'price', storeId: de.id, count: 1, oldestAt: '2026-11-26T08:00:06.000Z' },
        ]),
      );
      const group = await storage.outboxRows({ endpointId: a.id, event: 'content', storeId: de.id }, 10);
      expect(group.map((r) => [r.productId, r.createdAt])).toEqual([
        [1, '2026-11-26T08:00:01.000Z'],
        [3, '2026-11-26T08:00:00.000Z'],
      ]);
      const storeless = await storage.outboxRows({ endpointId: a.id, event: 'content', storeId: null }, 1);
      expect(storeless.map((r) => r.productId)).toEqual([4]);
      await storage.deleteOutboxRows([...group.map((r) => r.id), ...storeless.map((r) => r.id)]);
      await storage.deleteOutboxRows([]);
      expect(byKey(await storage.outboxGroups()).map((g) => [g.endpointId, g.event, g.storeId, g.count])).toEqual(
        byKey([
          { endpointId: b.id, event: 'price', storeId: de.id, count: 1 },
          { endpointId: a.id, event: 'content', storeId: pl.id, count: 1 },
          { endpointId: a.id, event: 'content', storeId: null, count: 1 },
          { endpointId: a.id, event: 'price', storeId: de.id, count: 1 },
        ]).map((g) => [g.endpointId, g.event, g.storeId, g.count]),
      );
      expect((await storage.operationalCounts()).outboxDepth).toBe(4);
      // Counted up to a bound: a scrape never reads the whole backlog.
      expect((await storage.operationalCounts(3)).outboxDepth).toBe(3);
    });

    it('reads a window of the oldest outbox rows grouped with their rows, from after a given row, and holds the rows a pass batches', async () => {
      const { merchant, de } = await merchantWithStores();
      const a = await endpointOf(merchant.id);
      const b = await endpointOf(merchant.id, de.id);
      const at = (second: number) => `2026-11-26T08:00:0${second}.000Z`;
      await storage.insertOutbox([
        { endpointId: b.id, event: 'price', storeId: de.id, productIds: [1], createdAt: at(1) },
        { endpointId: a.id, event: 'content', storeId: null, productIds: [2], createdAt: at(2) },
        { endpointId: b.id, event: 'price', storeId: de.id, productIds: [3], createdAt: at(0) },
        { endpointId: a.id, event: 'content', storeId: null, productIds: [4], createdAt: at(3) },
        { endpointId: a.id, event: 'price', storeId: de.id, productIds: [5], createdAt: at(4) },
      ]);
      const shape = (groups: Awaited<ReturnType<typeof storage.outboxWindow>>) =>
        groups.map((g) => [g.endpointId, g.event, g.storeId, g.count, g.oldestAt, g.rows.map((r) => [...r.productIds, r.createdAt])]);
      // The oldest 4 rows: endpoint by endpoint, then by each group's oldest row; each group's rows in arrival order.
      const window = await storage.outboxWindow(4);
      expect(shape(window)).toEqual([
        [
          a.id,
          'content',
          null,
          2,
          at(2),
          [
            [2, at(2)],
            [4, at(3)],
          ],
        ],
        [
          b.id,
          'price',
          de.id,
          2,
          at(0),
          [
            [1, at(1)],
            [3, at(0)],
          ],
        ],
      ]);
      // From after the window's last row: the rest.
      const lastId = Math.max(...window.flatMap((g) => g.rows.map((r) => r.id)));
      expect(shape(await storage.outboxWindow(4, lastId))).toEqual([[a.id, 'price', de.id, 1, at(4), [[5, at(4)]]]]);
      // Held by the transaction that read them: every one (no other coalescer holds any).
      const ids = window.flatMap((g) => g.rows.map((r) => r.id)).sort((x, y) => x - y);
      const held = await storage.transaction(async (tx) => tx.holdOutboxRows((await tx.outboxWindow(4)).flatMap((g) => g.rows)));
      expect(held.map((r) => r.id).sort((x, y) => x - y)).toEqual(ids);
      expect(await storage.transaction((tx) => tx.holdOutboxRows([]))).toEqual([]);
    });

    it("keeps a write's products in one row: a window counts changes, a row is trimmed to the products a pass left, the depth counts changes", async () => {
      const { merchant, de } = await merchantWithStores();
      const a = await endpointOf(merchant.id);
      const at = '2026-11-26T08:00:00.000Z';
      await storage.insertOutbox([
        { endpointId: a.id, event: 'price', storeId: de.id, productIds: [7, 3, 9], createdAt: at },
        { endpointId: a.id, event: 'price', storeId: de.id, productIds: [4, 5], createdAt: at },
        { endpointId: a.id, event: 'content', storeId: de.id, productIds: [1], createdAt: at },
      ]);
      expect((await storage.operationalCounts()).outboxDepth).toBe(6);
      expect((await storage.outboxGroups()).map((g) => [g.event, g.count])).toEqual([
        ['price', 5],
        ['content', 1],
      ]);
      // Up to 2 changes: the first row carries 3 (a row is never split by a window); up to 4: two rows.
      const rowsOf = (groups: Awaited<ReturnType<typeof storage.outboxWindow>>) => groups.flatMap((g) => g.rows.map((r) => r.productIds));
      expect(rowsOf(await storage.outboxWindow(2))).toEqual([[7, 3, 9]]);
      expect(rowsOf(await storage.outboxWindow(4))).toEqual([
        [7, 3, 9],
        [4, 5],
      ]);
      const [first] = (await storage.outboxWindow(1))[0]!.rows;
      await storage.transaction((tx) => tx.trimOutboxRows([{ id: first!.id, productIds: [9] }]));
      expect(rowsOf(await storage.outboxWindow(10))).toEqual([[9], [4, 5], [1]]);
      expect((await storage.outboxRows({ endpointId: a.id, event: 'price', storeId: de.id }, 2)).map((r) => r.productId)).toEqual([9, 4]);
      expect((await storage.operationalCounts()).outboxDepth).toBe(4);
      expect((await storage.operationalCounts(3)).outboxDepth).toBe(3);
    });

    it("inserts a coalescing pass's deliveries of one group in their order, with the oldest change each carries", async () => {
      const { merchant, de } = await merchantWithStores();
      const endpoint = await endpointOf(merchant.id);
      const delivery = (productIds: number[], status: 'pending' | 'dropped') => ({
        endpoint_id: endpoint.id,
        event: 'price' as const,
        store_id: de.id,
        product_ids: productIds,
        occurred_at: null,
        status,
        attempts: 0,
        next_attempt_at: status === 'pending' ? '2026-11-26T08:00:10.000Z' : null,
        created_at: '2026-11-26T08:00:10.000Z',
      });
      await storage.transaction((tx) =>
        tx.insertCoalescedDeliveries([
          { delivery: delivery([1, 2], 'pending'), oldestChangeAt: '2026-11-26T08:00:01.000Z' },
          { delivery: delivery([3], 'pending'), oldestChangeAt: '2026-11-26T08:00:05.000Z' },
          { delivery: delivery([4], 'dropped'), oldestChangeAt: '2026-11-26T08:00:06.000Z' },
        ]),
      );
      await storage.transaction((tx) => tx.insertCoalescedDeliveries([]));
      const listed = (await storage.listDeliveries(endpoint.id, { limit: 10 })).reverse();
      expect(listed.map((d) => [d.product_ids, d.status, d.store_id, d.attempts, d.next_attempt_at, d.test, d.replaces])).toEqual([
        [[1, 2], 'pending', de.id, 0, '2026-11-26T08:00:10.000Z', false, null],
        [[3], 'pending', de.id, 0, '2026-11-26T08:00:10.000Z', false, null],
        [[4], 'dropped', de.id, 0, null, false, null],
      ]);
      // The oldest change each carries: the feed lag counts from the first pending one's.
      expect(await storage.oldestWaitingChangeAt(merchant.id)).toBe('2026-11-26T08:00:01.000Z');
    });
  });

  describe('the delivery lifecycle', () => {
    const claimAt = (iso: string, patch: Partial<DeliveryClaim> = {}): DeliveryClaim => ({
      now: () => new Date(iso),
      leaseMs: 60_000,
      limit: 10,
      perEndpoint: 10,
      inFlightByEndpoint: new Map(),
      ...patch,
    });

    it('inserts, claims under a lease, records attempts, updates, lists and drops deliveries', async () => {
      const { merchant, de } = await merchantWithStores();
      const endpoint = await storage.createWebhookEndpoint({
        merchant_id: merchant.id,
        url: 'https://hooks.example/a',
        store_id: null,
        events: ['price'],
        secret: 's',
        created_at: AT,
      });
      const first = await storage.insertDelivery(
        deliveryInput(endpoint.id, { store_id: de.id, product_ids: [3, 1, 2] }),
        '2026-11-26T07:59:00.000Z',
      );
      expect(first).toEqual({
        id: first.id,
        webhook_id: expect.stringMatching(/^dlv_[0-9a-f]{32}$/),
        ...deliveryInput(endpoint.id, { store_id: de.id, product_ids: [3, 1, 2] }),
        test: false,
        replaces: null,
        replaced_by: null,
        replaces_webhook_id: null,
      });
      const later = await storage.insertDelivery(deliveryInput(endpoint.id, { next_attempt_at: '2026-11-26T08:10:00.000Z' }));
      expect(await storage.getDelivery(first.id)).toEqual(first);
      expect(await storage.getDelivery(999_999)).toBeUndefined();
      expect((await storage.operationalCounts()).oldestWaitingAt).toBe('2026-11-26T07:59:00.000Z');

      // Claimed: leased until now + lease, occurred_at the claim's whole second; not due again meanwhile.
      // An engine that reads each delivery's endpoint with the claim (ClaimedDelivery.endpoint) reads it whole.
      const withoutEndpoint = async (claim: Promise<ClaimedDelivery[]>) => {
        const current = await storage.getWebhookEndpoint(endpoint.id);
        return (await claim).map(({ endpoint: read, ...delivery }) => {
          if (read !== undefined) expect(read).toEqual(current);
          return delivery;
        });
      };
      const claimed = await withoutEndpoint(storage.claimDueDeliveries(claimAt('2026-11-26T08:00:00.400Z')));
      // An endpoint without max_per_second: no slot to wait for (send_at null).
      expect(claimed).toEqual([
        { ...first, occurred_at: '2026-11-26T08:00:00Z', next_attempt_at: '2026-11-26T08:01:00.400Z', send_at: null },
      ]);
      expect(await storage.claimDueDeliveries(claimAt('2026-11-26T08:00:30.000Z'))).toEqual([]);
      await storage.recordAttempt(first.id, {
        at: '2026-11-26T08:00:01.000Z',
        status_code: 500,
        error: null,
        latency_ms: 12,
        response_snippet: 'oops',
      });
      await storage.updateDelivery(first.id, { status: 'failed', attempts: 1, next_attempt_at: '2026-11-26T08:00:40.000Z' });
      // A retry keeps its occurred_at.
      expect(await withoutEndpoint(storage.claimDueDeliveries(claimAt('2026-11-26T08:00:45.000Z')))).toEqual([
        {
          ...first,
          status: 'failed',
          attempts: 1,
          occurred_at: '2026-11-26T08:00:00Z',
          next_attempt_at: '2026-11-26T08:01:45.000Z',
          send_at: null,
        },
      ]);
      const request = {
        request_url: 'https://hooks.example/a',
        request_headers: { 'Content-Type': 'application/json', 'X-Service-Timestamp': '1764144036' },
      };
      await storage.recordAttempt(first.id, {
        at: '2026-11-26T08:00:46.000Z',
        status_code: null,
        error: 'timeout',
        latency_ms: 10_000,
        response_snippet: null,
        ...request,
      });
      await storage.updateDelivery(first.id, { status: 'succeeded', attempts: 2, next_attempt_at: null });
      expect(await storage.listAttempts(first.id)).toEqual([
        {
          at: '2026-11-26T08:00:01.000Z',
          status_code: 500,
          error: null,
          latency_ms: 12,
          response_snippet: 'oops',
          request_url: null,
          request_headers: null,
        },
        { at: '2026-11-26T08:00:46.000Z', status_code: null, error: 'timeout', latency_ms: 10_000, response_snippet: null, ...request },
      ]);

      const third = await storage.insertDelivery(
        deliveryInput(endpoint.id, { status: 'failed', attempts: 3, created_at: '2026-11-26T08:02:00.000Z' }),
      );
      expect((await storage.listDeliveries(endpoint.id, { limit: 10 })).map((d) => d.id)).toEqual([third.id, later.id, first.id]);
      expect((await storage.listDeliveries(endpoint.id, { limit: 10, status: 'succeeded' })).map((d) => d.id)).toEqual([first.id]);
      expect((await storage.listDeliveries(endpoint.id, { limit: 1, beforeId: third.id })).map((d) => d.id)).toEqual([later.id]);
      expect(await storage.dropPendingDeliveries(endpoint.id)).toBe(2);
      expect(await storage.getDelivery(later.id)).toMatchObject({ status: 'dropped', next_attempt_at: null });
      expect((await storage.unsuccessfulDeliveriesSince(endpoint.id, '2026-11-26T08:01:00.000Z')).map((d) => d.id)).toEqual([third.id]);
      expect((await storage.unsuccessfulDeliveriesSince(endpoint.id, '2026-11-26T08:00:00.000Z')).map((d) => d.id)).toEqual([
        later.id,
        third.id,
      ]);
    });

    it('marks tests and resends; a replaced delivery waiting for a retry is dropped, and no failed outcome makes it due again', async () => {
      const { merchant } = await merchantWithStores();
      const endpoint = await storage.createWebhookEndpoint({
        merchant_id: merchant.id,
        url: 'https://hooks.example/r',
        store_id: null,
        events: ['price'],
        secret: 's',
        created_at: AT,
      });
      const test = await storage.insertDelivery(deliveryInput(endpoint.id, { test: true }));
      expect(test).toMatchObject({ test: true, replaces: null, replaced_by: null });
      // A failed delivery in flight (claimed) is re-sent: dropped at once, and its attempt's failure keeps it dropped.
      const failed = await storage.insertDelivery(
        deliveryInput(endpoint.id, { status: 'failed', attempts: 1, next_attempt_at: '2026-11-26T07:59:00.000Z' }),
      );
      expect((await storage.claimDueDeliveries(claimAt('2026-11-26T08:00:00.000Z'))).map((d) => d.id)).toEqual([test.id, failed.id]);
      const resend = await storage.insertDelivery(deliveryInput(endpoint.id, { test: true, replaces: failed.id }));
      await storage.replaceDelivery(failed.id, resend.id);
      expect(await storage.getDelivery(resend.id)).toMatchObject({
        test: true,
        replaces: failed.id,
        replaces_webhook_id: failed.webhook_id,
        replaced_by: null,
        status: 'pending',
      });
      expect(await storage.getDelivery(failed.id)).toMatchObject({ status: 'dropped', next_attempt_at: null, replaced_by: resend.id });
      const attempt = { at: '2026-11-26T08:00:02.000Z', status_code: 503, error: 'http_status', latency_ms: 5, response_snippet: '' };
      await storage.recordAttemptOutcomes([
        { deliveryId: failed.id, attempt, status: 'failed', attempts: 2, next_attempt_at: '2026-11-26T08:02:00.000Z' },
        { deliveryId: test.id, attempt, status: 'failed', attempts: 1, next_attempt_at: '2026-11-26T08:02:00.000Z' },
      ]);
      expect(await storage.getDelivery(failed.id)).toMatchObject({ status: 'dropped', attempts: 2, next_attempt_at: null });
      expect(await storage.getDelivery(test.id)).toMatchObject({
        status: 'failed',
        attempts: 1,
        next_attempt_at: '2026-11-26T08:02:00.000Z',
      });
      expect((await storage.unsuccessfulDeliveriesSince(endpoint.id, '2026-11-26T08:00:00.000Z')).map((d) => d.id)).toEqual([test.id]);
      // A success is recorded as such, dropped or not; a replaced delivery that had succeeded keeps its status.
      await storage.recordAttemptOutcomes([
        {
          deliveryId: failed.id,
          attempt: { ...attempt, status_code: 200, error: null },
          status: 'succeeded',
          attempts: 3,
          next_attempt_at: null,
        },
      ]);
      const again = await storage.insertDelivery(deliveryInput(endpoint.id, { replaces: failed.id }));
      await storage.replaceDelivery(failed.id, again.id);
      expect(await storage.getDelivery(failed.id)).toMatchObject({ status: 'succeeded', replaced_by: again.id });
    });

    it('claims only due deliveries of active endpoints, endpoints taking turns within the per-endpoint and overall limits', async () => {
      const { merchant } = await merchantWithStores();
      const endpoint = (url: string) =>
        storage.createWebhookEndpoint({ merchant_id: merchant.id, url, store_id: null, events: ['price'], secret: 's', created_at: AT });
      const busy = await endpoint('https://hooks.example/busy');
      const quiet = await endpoint('https://hooks.example/quiet');
      const paused = await endpoint('https://hooks.example/paused');
      await storage.updateWebhookEndpoint(paused.id, { status: 'paused' });
      const busyIds: number[] = [];
      for (let i = 0; i < 5; i++) busyIds.push((await storage.insertDelivery(deliveryInput(busy.id))).id);
      const quietOne = await storage.insertDelivery(deliveryInput(quiet.id));
      await storage.insertDelivery(deliveryInput(paused.id));
      const claimed = await storage.claimDueDeliveries(
        claimAt('2026-11-26T08:00:00.000Z', {
          limit: 3,
          perEndpoint: 3,
          inFlightByEndpoint: new Map([[busy.id, 1]]),
        }),
      );
      // busy has one in flight: two more at most; quiet gets its turn before busy's second.
      expect(claimed.map((d) => d.id).sort((a, b) => a - b)).toEqual([busyIds[0]!, busyIds[1]!, quietOne.id].sort((a, b) => a - b));
      const rest = await storage.claimDueDeliveries(claimAt('2026-11-26T08:00:00.000Z'));
      expect(rest.map((d) => d.id)).toEqual(busyIds.slice(2));
      expect((await storage.operationalCounts()).waitingDeliveries).toEqual({ pending: 7, failed: 0 });
      expect((await storage.operationalCounts(5)).waitingDeliveries).toEqual({ pending: 5, failed: 0 });
    });
  });

  describe('panel accounts', () => {
    it('keeps invitations, users, sessions, sign-in failures and the audit log', async () => {
      const { merchant } = await merchantWithStores();
      const token = Buffer.alloc(32, 1);
      const invitation = {
        merchant_id: merchant.id,
        email: 'ana@alpine.example',
        role: 'member' as const,
        purpose: 'invitation' as const,
        created_at: AT,
        expires_at: '2026-11-27T08:00:00.000Z',
      };
      const inserted = await storage.insertPanelInvitation(token, invitation);
      expect(inserted).toEqual({ ...invitation, id: inserted.id, used_at: null, revoked_at: null });
      expect(await storage.panelInvitation(Buffer.alloc(32, 1))).toEqual(inserted);
      expect(await storage.markPanelInvitationUsed(token, '2026-11-26T08:30:00.000Z')).toBe(true);
      expect(await storage.markPanelInvitationUsed(token, '2026-11-26T08:31:00.000Z')).toBe(false);
      expect((await storage.panelInvitation(token))!.used_at).toBe('2026-11-26T08:30:00.000Z');
      expect(await storage.panelInvitation(Buffer.alloc(32, 2))).toBeUndefined();

      const user = await storage.upsertPanelUser(
        { merchant_id: merchant.id, email: 'ana@alpine.example', role: 'member', created_at: AT },
        'hash-1',
      );
      expect(user).toEqual({ id: user.id, merchant_id: merchant.id, email: 'ana@alpine.example', role: 'member', created_at: AT });
      const again = await storage.upsertPanelUser(
        { merchant_id: merchant.id, email: 'ana@alpine.example', role: 'owner', created_at: '2026-11-26T09:00:00.000Z' },
        'hash-2',
      );
      expect(again.id).toBe(user.id);
      expect(await storage.panelUserByEmail('ana@alpine.example')).toMatchObject({ id: user.id, role: 'owner', password_hash: 'hash-2' });
      expect(await storage.panelUserByEmail('nobody@alpine.example')).toBeUndefined();
      expect(await storage.panelUser(user.id)).toMatchObject({ id: user.id, role: 'owner' });
      expect((await storage.listPanelUsers(merchant.id)).map((u) => u.id)).toEqual([user.id]);

      const sessionToken = Buffer.alloc(32, 3);
      const session = { user_id: user.id, csrf_token: 'csrf', created_at: AT, last_seen_at: AT, expires_at: '2026-11-26T20:00:00.000Z' };
      await storage.insertPanelSession(sessionToken, session);
      await storage.insertPanelSession(Buffer.alloc(32, 4), { ...session, user_id: null });
      expect(await storage.panelSession(sessionToken)).toEqual(session);
      await storage.touchPanelSession(sessionToken, '2026-11-26T08:10:00.000Z');
      expect((await storage.panelSession(sessionToken))!.last_seen_at).toBe('2026-11-26T08:10:00.000Z');
      await storage.deletePanelSession(Buffer.alloc(32, 4));
      expect(await storage.panelSession(Buffer.alloc(32, 4))).toBeUndefined();
      expect(await storage.deletePanelUser(merchant.id, user.id)).toBe(true);
      expect(await storage.deletePanelUser(merchant.id, user.id)).toBe(false);
      expect(await storage.panelSession(sessionToken)).toBeUndefined();

      await storage.recordSignInFailure(['user:ana', 'ip:127.0.0.1'], '2026-11-26T08:00:00.000Z');
      await storage.recordSignInFailure(['user:ana'], '2026-11-26T08:01:00.000Z');
      const failures = await storage.countSignInFailures(['user:ana', 'ip:127.0.0.1', 'user:bob'], '2026-11-26T07:00:00.000Z');
      expect(Object.fromEntries(failures)).toEqual({
        'user:ana': { count: 2, oldest: '2026-11-26T08:00:00.000Z', newest: '2026-11-26T08:01:00.000Z' },
        'ip:127.0.0.1': { count: 1, oldest: '2026-11-26T08:00:00.000Z', newest: '2026-11-26T08:00:00.000Z' },
      });
      expect(Object.fromEntries(await storage.countSignInFailures(['user:ana'], '2026-11-26T08:00:30.000Z'))).toEqual({
        'user:ana': { count: 1, oldest: '2026-11-26T08:01:00.000Z', newest: '2026-11-26T08:01:00.000Z' },
      });
      await storage.clearSignInFailures('user:ana');
      expect(
        Object.keys(Object.fromEntries(await storage.countSignInFailures(['user:ana', 'ip:127.0.0.1'], AT.replace('08', '07')))),
      ).toEqual(['ip:127.0.0.1']);
      // A reservation's rows, forgiven by id: the subject's other failures stay.
      const reserved = await storage.recordSignInFailure(['user:bob', 'ip:127.0.0.1'], '2026-11-26T08:02:00.000Z');
      expect(reserved).toHaveLength(2);
      await storage.clearSignInFailures(null, reserved);
      expect(Object.fromEntries(await storage.countSignInFailures(['user:bob', 'ip:127.0.0.1'], '2026-11-26T07:00:00.000Z'))).toEqual({
        'ip:127.0.0.1': { count: 1, oldest: '2026-11-26T08:00:00.000Z', newest: '2026-11-26T08:00:00.000Z' },
      });

      await storage.insertAuditEntry({ merchant_id: merchant.id, at: AT, actor: 'operator', action: 'invite', detail: 'ana' });
      await storage.insertAuditEntry({
        merchant_id: merchant.id,
        at: '2026-11-26T08:01:00.000Z',
        actor: 'ana@alpine.example',
        action: 'pause',
        detail: 'endpoint 1',
      });
      expect((await storage.listAuditEntries(merchant.id, 10)).map((e) => e.action)).toEqual(['pause', 'invite']);
      expect(await storage.listAuditEntries(merchant.id, 1)).toHaveLength(1);
    });

    it('lists and revokes pending links, keeps one-time messages per session, and ends the other sessions of a user', async () => {
      const { merchant } = await merchantWithStores();
      const other = await storage.createMerchant({ name: 'Other', sku_pattern: null, owner_emails: [], created_at: AT });
      const link = {
        merchant_id: merchant.id,
        email: 'ana@alpine.example',
        role: 'owner' as const,
        purpose: 'invitation' as const,
        created_at: AT,
        expires_at: '2026-11-27T08:00:00.000Z',
      };
      const first = await storage.insertPanelInvitation(Buffer.alloc(32, 11), link);
      const reset = await storage.insertPanelInvitation(Buffer.alloc(32, 12), { ...link, purpose: 'reset' });
      const bob = await storage.insertPanelInvitation(Buffer.alloc(32, 13), { ...link, email: 'bob@alpine.example' });
      await storage.insertPanelInvitation(Buffer.alloc(32, 14), {
        ...link,
        email: 'old@alpine.example',
        expires_at: '2026-11-26T08:30:00.000Z',
      });
      await storage.insertPanelInvitation(Buffer.alloc(32, 15), { ...link, merchant_id: other.id, email: 'ana@alpine.example' });
      expect(reset.id).toBeGreaterThan(first.id);
      expect((await storage.listPendingPanelInvitations(merchant.id, '2026-11-26T09:00:00.000Z')).map((l) => l.id)).toEqual([
        first.id,
        reset.id,
        bob.id,
      ]);
      // By e-mail: every unused link of that e-mail in that merchant only; by id: that one, in its merchant only.
      expect(await storage.revokePanelInvitations(merchant.id, { email: 'ana@alpine.example' }, '2026-11-26T09:00:00.000Z')).toBe(2);
      expect(await storage.revokePanelInvitations(other.id, { id: bob.id }, '2026-11-26T09:00:00.000Z')).toBe(0);
      expect(await storage.revokePanelInvitations(merchant.id, { id: bob.id }, '2026-11-26T09:01:00.000Z')).toBe(1);
      expect(await storage.revokePanelInvitations(merchant.id, { id: bob.id }, '2026-11-26T09:02:00.000Z')).toBe(0);
      expect(await storage.panelInvitation(Buffer.alloc(32, 13))).toMatchObject({ revoked_at: '2026-11-26T09:01:00.000Z', used_at: null });
      expect(await storage.markPanelInvitationUsed(Buffer.alloc(32, 12), '2026-11-26T09:03:00.000Z')).toBe(false);
      expect(await storage.listPendingPanelInvitations(merchant.id, '2026-11-26T08:00:00.000Z')).toEqual([
        expect.objectContaining({ email: 'old@alpine.example' }),
      ]);
      expect((await storage.listPendingPanelInvitations(other.id, '2026-11-26T09:00:00.000Z')).map((l) => l.email)).toEqual([
        'ana@alpine.example',
      ]);

      const ana = await storage.upsertPanelUser(
        { merchant_id: merchant.id, email: 'ana@alpine.example', role: 'owner', created_at: AT },
        'hash-1',
      );
      const eve = await storage.upsertPanelUser(
        { merchant_id: merchant.id, email: 'eve@alpine.example', role: 'member', created_at: AT },
        'hash-1',
      );
      expect(await storage.panelOwnerIds(merchant.id)).toEqual([ana.id]);
      expect(await storage.transaction((tx) => tx.panelOwnerIds(merchant.id))).toEqual([ana.id]);
      expect(await storage.panelOwnerIds(other.id)).toEqual([]);
      await storage.setPanelUserPassword(ana.id, 'hash-2');
      expect((await storage.panelUserByEmail('ana@alpine.example'))!.password_hash).toBe('hash-2');
      expect((await storage.panelUserByEmail('eve@alpine.example'))!.password_hash).toBe('hash-1');

      const session = (user_id: number) => ({
        user_id,
        csrf_token: 'csrf',
        created_at: AT,
        last_seen_at: AT,
        expires_at: '2026-11-26T20:00:00.000Z',
      });
      for (const n of [21, 22, 23]) await storage.insertPanelSession(Buffer.alloc(32, n), session(ana.id));
      await storage.insertPanelSession(Buffer.alloc(32, 24), session(eve.id));
      expect(await storage.deletePanelSessionsOfUser(ana.id, Buffer.alloc(32, 21))).toBe(2);
      expect(await storage.panelSession(Buffer.alloc(32, 21))).toBeDefined();
      expect(await storage.panelSession(Buffer.alloc(32, 22))).toBeUndefined();
      expect(await storage.panelSession(Buffer.alloc(32, 24))).toBeDefined();

      const kept = await storage.insertPanelFlash(Buffer.alloc(32, 21), Buffer.from('sealed'), '2026-11-26T08:10:00.000Z');
      const stale = await storage.insertPanelFlash(Buffer.alloc(32, 21), Buffer.from('stale'), '2026-11-26T08:01:00.000Z');
      const eves = await storage.insertPanelFlash(Buffer.alloc(32, 24), Buffer.from('eve'), '2026-11-26T08:10:00.000Z');
      expect(await storage.takePanelFlash(Buffer.alloc(32, 24), kept)).toBeUndefined();
      expect(await storage.deleteExpiredPanelFlashes('2026-11-26T08:05:00.000Z')).toBe(1);
      expect(await storage.takePanelFlash(Buffer.alloc(32, 21), stale)).toBeUndefined();
      const taken = await storage.takePanelFlash(Buffer.alloc(32, 21), kept);
      expect({ ...taken, sealed: Buffer.from(taken!.sealed).toString() }).toEqual({
        sealed: 'sealed',
        expires_at: '2026-11-26T08:10:00.000Z',
      });
      expect(await storage.takePanelFlash(Buffer.alloc(32, 21), kept)).toBeUndefined();
      // A message goes with its session.
      await storage.deletePanelUser(merchant.id, eve.id);
      expect(await storage.takePanelFlash(Buffer.alloc(32, 24), eves)).toBeUndefined();
    });
  });

  describe('transactions, snapshots and the database itself', () => {
    it('commits everything a transaction did together, and nothing when it throws', async () => {
      const { merchant } = await merchantWithStores();
      await expect(
        storage.transaction(async (tx) => {
          await tx.createCustomerGroup(merchant.id, 'rolled back');
          await tx.upsertProductSource(merchant.id, 'GONE', source(), AT);
          throw new Error('abort');
        }),
      ).rejects.toThrow('abort');
      expect(await storage.listCustomerGroups(merchant.id)).toEqual([]);
      expect(await storage.findProductByRef(merchant.id, 'GONE')).toBeUndefined();
      const result = await storage.transaction(async (tx) => {
        await tx.createCustomerGroup(merchant.id, 'kept');
        return tx.upsertProductSource(merchant.id, 'KEPT', source(), AT);
      });
      expect(result.created).toBe(true);
      expect((await storage.listCustomerGroups(merchant.id)).map((g) => g.name)).toEqual(['kept']);
    });

    severalConnections.it('a snapshot reads one consistent view while a transaction commits', async () => {
      const { merchant } = await merchantWithStores();
      await storage.snapshot(async (reader) => {
        expect(await reader.listCustomerGroups(merchant.id)).toEqual([]);
        await storage.createCustomerGroup(merchant.id, 'committed meanwhile');
        expect(await reader.listCustomerGroups(merchant.id)).toEqual([]);
      });
      expect((await storage.listCustomerGroups(merchant.id)).map((g) => g.name)).toEqual(['committed meanwhile']);
    });

    it('answers ping, has every migration applied, and counts whole-service work', async () => {
      await storage.ping();
      expect(await storage.missingMigrations()).toEqual([]);
      expect(await storage.operationalCounts()).toEqual({
        endpoints: { active: 0, paused: 0, disabled: 0 },
        outboxDepth: 0,
        waitingDeliveries: { pending: 0, failed: 0 },
        oldestWaitingAt: null,
        images: { pending: 0, mirrored: 0, dead: 0 },
        imageOrigins: { failing: 0, down: 0 },
        imagesWaitingOnDownOrigins: 0,
      });
    });
  });
});

function deliveryInput(endpointId: number, patch: Partial<NewDelivery> = {}): NewDelivery {
  return {
    endpoint_id: endpointId,
    event: 'price',
    store_id: null,
    product_ids: [1],
    occurred_at: null,
    status: 'pending',
    attempts: 0,
    next_attempt_at: '2026-11-26T08:00:00.000Z',
    created_at: '2026-11-26T08:00:00.000Z',
    ...patch,
  };
}

// The same catalog, built through the admin API on both engines at the same (fake) times.
postgresOnly.describe('the same catalog on SQLite and PostgreSQL', () => {
  const services: Record<'sqlite' | 'postgres', TestService> = {} as never;
  const catalogs: Record<'sqlite' | 'postgres', OutdoorCatalog> = {} as never;

  beforeAll(async () => {
    for (const engine of ['sqlite', 'postgres'] as const) {
      const clock = fakeClock('2026-11-26T08:00:00.000Z');
      services[engine] = await startTestService({ engine, now: clock.now });
      catalogs[engine] = await buildOutdoorCatalog(services[engine]);
    }
  });
  afterAll(async () => {
    for (const service of Object.values(services)) await service?.close();
  });

  it('publishes byte-identical pages, payloads by id and prices by id', async () => {
    for (const slug of ['de', 'pl', 'jp'] as const) {
      const read = async (engine: 'sqlite' | 'postgres') => {
        const { storage: s } = services[engine];
        const storeId = catalogs[engine].stores[slug].id as number;
        const ids = await s.publishedProductIds(storeId);
        const page = await s.publishedPage(storeId, 0, 1_000_000);
        const store = (await s.findStore(catalogs[engine].merchant.id, slug))!;
        const withStore = await s.publishedPageOfStore(catalogs[engine].merchant.id, slug, {
          storeId,
          catalogVersion: store.catalog_version,
          range: [ids[1]!, ids.at(-1)!],
        });
        return {
          storeId,
          ids,
          page: utf8(page.bytes),
          digests: utf8(page.digests),
          withStore: [utf8(withStore.page!.bytes), utf8(withStore.page!.digests)],
          byIds: utf8((await s.publishedPayloadsByIds(storeId, [...ids].reverse())).bytes),
          prices: utf8(await s.publishedPricesByIds(storeId, ids)),
        };
      };
      const [onSqlite, onPostgres] = [await read('sqlite'), await read('postgres')];
      expect(onSqlite.page.length, `store ${slug} publishes something`).toBeGreaterThan(0);
      expect(onPostgres, `store ${slug}`).toEqual(onSqlite);
    }
  });

  it('answers the public reads with equal bodies and ETags', async () => {
    const ids = [catalogs.sqlite.products.backpack.id, catalogs.sqlite.products.lamp.id].join(',');
    // Each page twice: the second read is the store and the page in one statement (reads.ts).
    for (const request of [
      '/v1/stores',
      '/v1/products?store=de',
      '/v1/products?store=de',
      '/v1/products?store=pl&per_page=2',
      '/v1/products?store=pl&per_page=2&page=2',
      '/v1/products',
      '/v1/products?page=99',
      `/v1/products?store=de&ids=${ids}`,
      `/v1/prices?store=de&ids=${ids}`,
      `/v1/products/${catalogs.sqlite.products.backpack.id}?store=pl`,
      '/v1/changes?store=de',
    ]) {
      const [onSqlite, onPostgres] = await Promise.all(
        (['sqlite', 'postgres'] as const).map((engine) => services[engine].api(request, catalogs[engine].merchant.key)),
      );
      expect(onSqlite!.status, `${request}: ${onSqlite!.text}`).toBe(200);
      expect(onPostgres!.status, `${request}: ${onPostgres!.text}`).toBe(200);
      expect(onPostgres!.text, request).toBe(onSqlite!.text);
      expect(onPostgres!.headers.get('etag'), request).toBe(onSqlite!.headers.get('etag'));
    }
  });
});
