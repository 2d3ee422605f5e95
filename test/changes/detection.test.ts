// Change detection (spec 6; docs/decisions.md#changes-and-the-feed): every write path records,
// per store and in the same transaction, `price` when only prices changed, `content` when title,
// description, attributes, images or the excluded flag changed (and stock, sku, ean, manufacturer,
// the rest of the payload), both when both, `removed` when the product left the store's catalog,
// and nothing when the resolved payload stayed as it was. Observed through GET /v1/changes over
// real HTTP, with a window of 1 so that every recorded change is one response (the feed collapses
// the changes of one product within a window, which would hide a `price` recorded beside a
// `content`).
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { normalizeSource, type ProductSourceInput } from '../../src/catalog/product-sources.js';
import { loadConfig } from '../../src/config.js';
import { scopeToMerchant } from '../../src/storage/merchant-scope.js';
import type { StoreInputRecord } from '../../src/catalog/model.js';
import { adminOk, importNdjson } from '../support/admin-http.js';
import { startTestService, type TestService } from '../support/service.js';

type Slug = 'de' | 'pl';
type Recorded = [productId: number, changeType: 'price' | 'content' | 'removed'];

const SLUGS: Slug[] = ['de', 'pl'];
const clock = { ms: Date.parse('2025-03-14T09:26:53Z') };

let service: TestService;
let merchantId: number;
let key: string;
const cursors = new Map<Slug, { since: string; id: number }>();
const ids: Record<string, number> = {};
const sources: Record<string, ProductSourceInput> = {};

const DE: StoreInputRecord = {
  name: 'Alpine Deutschland',
  locale: 'de-DE',
  currency: 'EUR',
  is_default: true,
  active: true,
  exclude_out_of_stock: false,
};
const PL: StoreInputRecord = {
  name: 'Alpine Polska',
  locale: 'pl-PL',
  currency: 'PLN',
  is_default: false,
  active: true,
  exclude_out_of_stock: false,
};

/** Reads the store's feed from the kept cursor until caught up; every change is one window. */
async function drain(slug: Slug): Promise<Recorded[]> {
  const read: Recorded[] = [];
  for (;;) {
    const cursor = cursors.get(slug);
    const query = cursor ? `&since=${encodeURIComponent(cursor.since)}&since_id=${cursor.id}` : '';
    const response = await service.api(`/v1/changes?store=${slug}${query}`, key);
    expect(response.status, response.text).toBe(200);
    cursors.set(slug, { since: response.body.next_since, id: response.body.next_id });
    if (response.body.changes.length === 0) return read;
    for (const change of response.body.changes) read.push([change.product_id, change.change_type]);
  }
}

/** The changes one write records in each store. */
async function recorded(write: () => unknown): Promise<Record<Slug, Recorded[]>> {
  for (const slug of SLUGS) await drain(slug);
  clock.ms += 1000;
  await write();
  return { de: await drain('de'), pl: await drain('pl') };
}

/** Within one write, products may come in any order; each product's own changes keep theirs. */
const byProduct = (changes: Recorded[]) => [...changes].sort((a, b) => a[0] - b[0]);

async function upsert(ref: string, source: ProductSourceInput): Promise<number> {
  sources[ref] = source;
  ids[ref] = (await service.admin.upsertProduct(merchantId, ref, source)).id;
  return ids[ref];
}

const backpack = (): ProductSourceInput => ({
  eans: ['4006381333931'],
  manufacturer: 'Alpenwerk',
  content: {
    de: { title: 'Wanderrucksack 40 l', description: 'Leicht und robust.' },
    pl: { title: 'Plecak turystyczny 40 l', description: 'Lekki i wytrzymały.' },
  },
  images: [{ url: 'https://img.example.test/bp-40/1.jpg' }],
  offers: [{ supplier_ref: 'alpine', quantity: 5, cost: '20.00', currency: 'EUR' }],
  supplier_attributes: [{ supplier_ref: 'alpine', key: 'weight', value: '1.2' }],
  overrides: { color: 'Grün' },
});

beforeAll(async () => {
  service = await startTestService({
    now: () => new Date(clock.ms),
    config: { changes: { ...loadConfig({}).changes, feedWindow: 1 } },
  });
  const admin = service.admin;
  merchantId = (await admin.createMerchant({ name: 'Alpine Outfitters', sku_pattern: 'AO-{ref}' })).id;
  key = await service.keyFor(merchantId);
  await admin.upsertStore(merchantId, 'de', DE);
  await admin.upsertStore(merchantId, 'pl', PL);
  await admin.createCustomerGroup(merchantId, 'retail');
  await admin.upsertExchangeRate(merchantId, { base: 'EUR', quote: 'PLN', rate: '4.25' });
  await admin.upsertSupplier(merchantId, 'alpine', 'Alpine Wholesale AG');
  await admin.upsertAttributeDefinition(merchantId, { key: 'weight', unit: 'kg', labels: { de: 'Gewicht', pl: 'Waga' } });
  await upsert('BP-40', backpack());
  // Out of stock: excluded once a store excludes out-of-stock products.
  await upsert('LAMP-1', {
    content: { de: { title: 'Stirnlampe', description: null }, pl: { title: 'Latarka czołowa', description: null } },
    offers: [{ supplier_ref: 'alpine', quantity: 0, cost: '8.00', currency: 'EUR' }],
  });
  // No offers: excluded (no_offers) everywhere, every price 0.
  await upsert('FREE-1', {
    content: { de: { title: 'Aufkleber', description: null }, pl: { title: 'Naklejka', description: null } },
  });
});
afterAll(() => service.close());

describe('product upsert (admin PUT /products/{ref})', () => {
  it('records price and content in every store for a product new to the catalog', async () => {
    let tent = 0;
    const changes = await recorded(async () => {
      tent = await upsert('TENT-2', {
        content: { de: { title: 'Zelt für zwei', description: null }, pl: { title: 'Namiot dla dwojga', description: null } },
        offers: [{ supplier_ref: 'alpine', quantity: 2, cost: '100.00', currency: 'EUR' }],
      });
    });
    expect(changes).toEqual({
      de: [
        [tent, 'price'],
        [tent, 'content'],
      ],
      pl: [
        [tent, 'price'],
        [tent, 'content'],
      ],
    });
  });

  it('records nothing when the same product is PUT again', async () => {
    expect(await recorded(() => upsert('BP-40', backpack()))).toEqual({ de: [], pl: [] });
    // The same through the admin HTTP API: a bodily identical PUT leaves the payload as it was.
    expect(await recorded(() => adminOk(service, 'PUT', `/admin/v1/merchants/${merchantId}/products/BP-40`, backpack()))).toEqual({
      de: [],
      pl: [],
    });
  });

  it('records price when only prices changed', async () => {
    const changes = await recorded(() =>
      upsert('BP-40', {
        ...backpack(),
        offers: [{ supplier_ref: 'alpine', quantity: 5, cost: '21.00', currency: 'EUR' }],
      }),
    );
    expect(changes).toEqual({ de: [[ids['BP-40'], 'price']], pl: [[ids['BP-40'], 'price']] });
  });

  it('records content only in the store whose title changed', async () => {
    const source = sources['BP-40']!;
    const changes = await recorded(() =>
      upsert('BP-40', {
        ...source,
        content: { ...source.content, de: { title: 'Wanderrucksack 40 Liter', description: 'Leicht und robust.' } },
      }),
    );
    expect(changes).toEqual({ de: [[ids['BP-40'], 'content']], pl: [] });
  });

  const contentEdits: [string, (s: ProductSourceInput) => ProductSourceInput, Slug[]][] = [
    ['description', (s) => ({ ...s, content: { ...s.content, pl: { title: 'Plecak turystyczny 40 l', description: 'Lekki.' } } }), ['pl']],
    ['images', (s) => ({ ...s, images: [...s.images!, { url: 'https://img.example.test/bp-40/2.jpg' }] }), ['de', 'pl']],
    ['attributes (merchant override)', (s) => ({ ...s, overrides: { color: 'Blau' } }), ['de', 'pl']],
    [
      'attributes (supplier value)',
      (s) => ({ ...s, supplier_attributes: [{ supplier_ref: 'alpine', key: 'weight', value: '1.3' }] }),
      ['de', 'pl'],
    ],
    ['stock', (s) => ({ ...s, offers: [{ ...s.offers![0]!, quantity: 9 }] }), ['de', 'pl']],
    ['ean', (s) => ({ ...s, eans: ['4006381333948'] }), ['de', 'pl']],
    ['manufacturer', (s) => ({ ...s, manufacturer: 'Alpenwerk GmbH' }), ['de', 'pl']],
  ];
  it.each(contentEdits)('records content when the %s changed', async (_field, edit, stores) => {
    const changes = await recorded(() => upsert('BP-40', edit(sources['BP-40']!)));
    expect(changes).toEqual({
      de: stores.includes('de') ? [[ids['BP-40'], 'content']] : [],
      pl: stores.includes('pl') ? [[ids['BP-40'], 'content']] : [],
    });
  });

  it('records both price and content when both changed', async () => {
    const source = sources['BP-40']!;
    const changes = await recorded(() =>
      upsert('BP-40', {
        ...source,
        content: { ...source.content, de: { title: 'Rucksack 40 l', description: 'Leicht und robust.' } },
        offers: [{ ...source.offers![0]!, cost: '22.00' }],
      }),
    );
    expect(changes).toEqual({
      de: [
        [ids['BP-40'], 'price'],
        [ids['BP-40'], 'content'],
      ],
      pl: [[ids['BP-40'], 'price']],
    });
  });

  it('records content only in the store a product is manually excluded from', async () => {
    const changes = await recorded(() => upsert('BP-40', { ...sources['BP-40']!, excluded_stores: ['pl'] }));
    expect(changes).toEqual({ de: [], pl: [[ids['BP-40'], 'content']] });
    const excluded = await service.api(`/v1/products/${ids['BP-40']}?store=pl`, key);
    expect(excluded.body.data).toMatchObject({ excluded: true, exclusion_reason: 'manual' });
    // And back: the flag flips again, in that store only.
    expect(await recorded(() => upsert('BP-40', { ...sources['BP-40']!, excluded_stores: [] }))).toEqual({
      de: [],
      pl: [[ids['BP-40'], 'content']],
    });
  });

  it('records the change in the transaction of the write: a rolled-back write records nothing', async () => {
    const before = await service.api(`/v1/products/${ids['BP-40']}`, key);
    // Transactions do not nest any more (admin.upsertProduct opens its own): the write path of an
    // upsert (source, image mirrors, re-publish with change recording) runs on one tx, which fails.
    const changed: ProductSourceInput = {
      ...sources['BP-40']!,
      offers: [{ supplier_ref: 'alpine', quantity: 1, cost: '99.00', currency: 'EUR' }],
    };
    let publishedChanges = 0;
    const changes = await recorded(async () => {
      await expect(
        service.storage.transaction(async (tx) => {
          const { id } = await tx.upsertProductSource(merchantId, 'BP-40', normalizeSource(changed), new Date(clock.ms).toISOString());
          await tx.ensureImageMirrors(
            merchantId,
            changed.images!.map((i) => i.url),
            new Date(clock.ms).toISOString(),
          );
          publishedChanges = (await service.admin.publisher.publishProducts(tx, scopeToMerchant(tx, merchantId), [id])).changes;
          throw new Error('the write fails after publishing');
        }),
      ).rejects.toThrow('the write fails after publishing');
    });
    // The write did detect and record changes in its transaction, and they rolled back with it.
    expect(publishedChanges).toBeGreaterThan(0);
    expect(changes).toEqual({ de: [], pl: [] });
    expect((await service.api(`/v1/products/${ids['BP-40']}`, key)).text).toBe(before.text);
    sources['BP-40'] = (await service.admin.product(merchantId, 'BP-40')).source;
  });
});

describe('product delete (admin DELETE /products/{ref})', () => {
  it('records removed in every store the product was published in', async () => {
    const tent = ids['TENT-2']!;
    expect(await recorded(() => service.admin.deleteProduct(merchantId, 'TENT-2'))).toEqual({
      de: [[tent, 'removed']],
      pl: [[tent, 'removed']],
    });
    expect((await service.api(`/v1/products/${tent}`, key)).status).toBe(404);
  });
});

describe('NDJSON import (admin POST /imports)', () => {
  it('records price, content, both and removed per line, and nothing for an unchanged line', async () => {
    await upsert('GONE-1', { content: { de: { title: 'Alt', description: null }, pl: { title: 'Stary', description: null } } });
    const gone = ids['GONE-1']!;
    const lamp = ids['LAMP-1']!;
    const lines = [
      {
        op: 'upsert_product',
        product: {
          ref: 'NEW-1',
          content: { de: { title: 'Neu', description: null } },
          offers: [{ supplier_ref: 'alpine', quantity: 3, cost: '5.00', currency: 'EUR' }],
        },
      },
      {
        op: 'upsert_product',
        product: { ref: 'LAMP-1', ...sources['LAMP-1'], offers: [{ supplier_ref: 'alpine', quantity: 0, cost: '8.50', currency: 'EUR' }] },
      },
      { op: 'upsert_product', product: { ref: 'FREE-1', ...sources['FREE-1'] } },
      { op: 'delete_product', ref: 'GONE-1' },
    ];
    const changes = await recorded(async () => {
      const response = await importNdjson(service, merchantId, lines);
      expect(response.status, response.text).toBe(200);
    });
    sources['LAMP-1'] = (await service.admin.product(merchantId, 'LAMP-1')).source;
    const created = (await service.admin.product(merchantId, 'NEW-1')).id;
    ids['NEW-1'] = created;
    // NEW-1 has no Polish title: it is published in pl too, excluded (missing_title).
    expect({ de: byProduct(changes.de), pl: byProduct(changes.pl) }).toEqual({
      de: byProduct([
        [lamp, 'price'],
        [created, 'price'],
        [created, 'content'],
        [gone, 'removed'],
      ]),
      pl: byProduct([
        [lamp, 'price'],
        [created, 'price'],
        [created, 'content'],
        [gone, 'removed'],
      ]),
    });
  });

  it('records nothing for an import that changes no payload', async () => {
    const lines = ['BP-40', 'LAMP-1', 'FREE-1'].map((ref) => ({ op: 'upsert_product', product: { ref, ...sources[ref] } }));
    const changes = await recorded(async () => {
      expect((await importNdjson(service, merchantId, lines)).status).toBe(200);
    });
    expect(changes).toEqual({ de: [], pl: [] });
  });
});

describe('exchange-rate changes', () => {
  it('re-prices only the stores whose prices change: a PLN rate records price in the PLN store only', async () => {
    const changes = await recorded(() => service.admin.upsertExchangeRate(merchantId, { base: 'EUR', quote: 'PLN', rate: '4.30' }));
    // FREE-1 has no cost: its prices stay 0 and nothing is recorded for it.
    expect({ ...changes, pl: byProduct(changes.pl) }).toEqual({
      de: [],
      pl: byProduct([
        [ids['BP-40']!, 'price'],
        [ids['LAMP-1']!, 'price'],
        [ids['NEW-1']!, 'price'],
      ]),
    });
  });

  it('records nothing for the rate of a currency no store uses', async () => {
    expect(await recorded(() => service.admin.upsertExchangeRate(merchantId, { base: 'EUR', quote: 'CHF', rate: '0.95' }))).toEqual({
      de: [],
      pl: [],
    });
  });

  it('re-publishes no store when no cost of the merchant converts differently: CHF->PLN changes no conversion of an EUR cost', async () => {
    const runs = vi.spyOn(service.admin.publishRuns, 'begin');
    try {
      // A path CHF->EUR->PLN exists already; a direct CHF->PLN rate changes CHF's conversion into
      // PLN, but no product bills in CHF: no publish run at all.
      expect(await recorded(() => service.admin.upsertExchangeRate(merchantId, { base: 'CHF', quote: 'PLN', rate: '4.6' }))).toEqual({
        de: [],
        pl: [],
      });
      expect(runs).not.toHaveBeenCalled();
      await service.admin.deleteExchangeRate(merchantId, 'CHF', 'PLN');
      expect(runs).not.toHaveBeenCalled();
    } finally {
      runs.mockRestore();
    }
  });

  it('records price and content where a deleted rate makes offers unusable, and again when it is back', async () => {
    const priced = [ids['BP-40']!, ids['LAMP-1']!, ids['NEW-1']!];
    // Without EUR->PLN the EUR offers are unusable in pl: stock 0 and no_offers (content), cost 0 (price).
    const both = (list: number[]): Recorded[] =>
      list.flatMap((id): Recorded[] => [
        [id, 'price'],
        [id, 'content'],
      ]);
    const removedRate = await recorded(() => service.admin.deleteExchangeRate(merchantId, 'EUR', 'PLN'));
    expect({ ...removedRate, pl: byProduct(removedRate.pl) }).toEqual({ de: [], pl: both(priced) });
    const restored = await recorded(() => service.admin.upsertExchangeRate(merchantId, { base: 'EUR', quote: 'PLN', rate: '4.30' }));
    expect({ ...restored, pl: byProduct(restored.pl) }).toEqual({ de: [], pl: both(priced) });
  });
});

describe('pricing-rule changes', () => {
  let ruleId: number;

  it('records price for every product whose price entry changed', async () => {
    const retail = (await service.storage.listCustomerGroups(merchantId)).find((g) => g.name === 'retail')!;
    const all = [ids['BP-40']!, ids['LAMP-1']!, ids['FREE-1']!, ids['NEW-1']!].sort((a, b) => a - b);
    const changes = await recorded(async () => {
      ruleId = (
        await service.admin.createPricingRule(merchantId, {
          priority: 10,
          customer_group_id: retail.id,
          store_id: null,
          manufacturer: null,
          min_cost: null,
          max_cost: null,
          markup_percent: '40',
          markup_amount: '0',
          price_ending: 99,
        })
      ).id;
    });
    // Every entry now names the new rule (applied_rule_id), FREE-1's too although its price stays 0.
    const expected = all.map((id): Recorded => [id, 'price']);
    expect({ de: byProduct(changes.de), pl: byProduct(changes.pl) }).toEqual({ de: expected, pl: expected });
  });

  it('records nothing for products whose prices the rule change leaves as they were', async () => {
    const rule = (await service.storage.getPricingRule(merchantId, ruleId))!;
    const changes = await recorded(() => service.admin.updatePricingRule(merchantId, ruleId, { ...rule, markup_percent: '50' }));
    // FREE-1 costs 0, which stays 0 under any markup. NEW-1 costs 5.00 EUR: 7.00 and 7.50 both end
    // as 7.99 in de, while in pl (21.50 PLN) 30.99 becomes 32.99.
    const price = (refs: string[]) => refs.map((ref): Recorded => [ids[ref]!, 'price']);
    expect({ de: byProduct(changes.de), pl: byProduct(changes.pl) }).toEqual({
      de: byProduct(price(['BP-40', 'LAMP-1'])),
      pl: byProduct(price(['BP-40', 'LAMP-1', 'NEW-1'])),
    });
  });

  it('records price only in the store a store-scoped rule applies to', async () => {
    const rule = (await service.storage.getPricingRule(merchantId, ruleId))!;
    const pl = (await service.storage.findStore(merchantId, 'pl'))!;
    const changes = await recorded(() => service.admin.updatePricingRule(merchantId, ruleId, { ...rule, store_id: pl.id }));
    // In de the retail entries fall back to the catch-all rule; in pl the rule still applies unchanged.
    const all = [ids['BP-40']!, ids['LAMP-1']!, ids['FREE-1']!, ids['NEW-1']!].sort((a, b) => a - b);
    expect({ de: byProduct(changes.de), pl: changes.pl }).toEqual({ de: all.map((id): Recorded => [id, 'price']), pl: [] });
  });
});

describe('customer-group changes', () => {
  it('records price in every store for every product when a customer group is added', async () => {
    const changes = await recorded(() => service.admin.createCustomerGroup(merchantId, 'wholesale'));
    const all = [ids['BP-40']!, ids['LAMP-1']!, ids['FREE-1']!, ids['NEW-1']!].sort((a, b) => a - b).map((id): Recorded => [id, 'price']);
    expect({ de: byProduct(changes.de), pl: byProduct(changes.pl) }).toEqual({ de: all, pl: all });
  });
});

describe('store setting changes', () => {
  it('records content in that store only when exclude_out_of_stock flips the excluded flag', async () => {
    // LAMP-1 (stock 0) becomes excluded in de; FREE-1 is excluded already (no_offers comes first).
    const on = await recorded(() => service.admin.upsertStore(merchantId, 'de', { ...DE, exclude_out_of_stock: true }));
    expect(on).toEqual({ de: [[ids['LAMP-1'], 'content']], pl: [] });
    const lamp = await service.api(`/v1/products/${ids['LAMP-1']}?store=de`, key);
    expect(lamp.body.data).toMatchObject({ excluded: true, exclusion_reason: 'out_of_stock' });
    const off = await recorded(() => service.admin.upsertStore(merchantId, 'de', DE));
    expect(off).toEqual({ de: [[ids['LAMP-1'], 'content']], pl: [] });
  });

  it('records nothing when a store is saved with the same settings', async () => {
    expect(await recorded(() => service.admin.upsertStore(merchantId, 'pl', PL))).toEqual({ de: [], pl: [] });
  });
});

describe('attribute-definition changes', () => {
  it('records content in the store whose label changed, for the products that carry the attribute', async () => {
    const changes = await recorded(() =>
      service.admin.upsertAttributeDefinition(merchantId, { key: 'weight', unit: 'kg', labels: { de: 'Gewicht', pl: 'Masa' } }),
    );
    expect(changes).toEqual({ de: [], pl: [[ids['BP-40'], 'content']] });
    const product = await service.api(`/v1/products/${ids['BP-40']}?store=pl`, key);
    expect(product.body.data.attributes).toContainEqual({ key: 'weight', label: 'Masa (kg)', value: '1.3' });
  });
});

describe('merchant changes', () => {
  it('records content for every product in every store when the sku_pattern changes', async () => {
    const changes = await recorded(() => service.admin.updateMerchant(merchantId, { sku_pattern: 'ALP-{ref}' }));
    const all = [ids['BP-40']!, ids['LAMP-1']!, ids['FREE-1']!, ids['NEW-1']!].sort((a, b) => a - b).map((id): Recorded => [id, 'content']);
    expect({ de: byProduct(changes.de), pl: byProduct(changes.pl) }).toEqual({ de: all, pl: all });
    const product = await service.api(`/v1/products/${ids['BP-40']}`, key);
    expect(product.body.data.sku).toBe('ALP-BP-40');
  });

  it('records nothing when only the merchant name changes', async () => {
    expect(await recorded(() => service.admin.updateMerchant(merchantId, { name: 'Alpine Outfitters GmbH' }))).toEqual({ de: [], pl: [] });
  });
});

describe('exchange rates through an intermediate currency', () => {
  it('re-prices the stores whose prices use a rate through a path: a USD->EUR rate records in the PLN store too (USD->EUR->PLN)', async () => {
    const plnPerEur = (await service.storage.listExchangeRates(merchantId)).find((r) => r.base === 'EUR' && r.quote === 'PLN')!.rate;
    const usd = await upsert('USD-1', {
      content: { de: { title: 'Kompass', description: null }, pl: { title: 'Kompas', description: null } },
      offers: [{ supplier_ref: 'alpine', quantity: 3, cost: '10.00', currency: 'USD' }],
    });
    // No USD rate: the offer is ignored in both stores.
    expect((await service.api(`/v1/products/${usd}?store=pl`, key)).body.data).toMatchObject({ stock: 0, exclusion_reason: 'no_offers' });

    const added = await recorded(() => service.admin.upsertExchangeRate(merchantId, { base: 'USD', quote: 'EUR', rate: '0.9' }));
    expect(added).toEqual({
      de: [
        [usd, 'price'],
        [usd, 'content'],
      ],
      pl: [
        [usd, 'price'],
        [usd, 'content'],
      ],
    });
    const pl = (await service.api(`/v1/products/${usd}?store=pl`, key)).body.data;
    // 10.00 USD × 0.9 × the EUR->PLN rate, rounded once in PLN.
    expect(pl.prices[0].base_cost).toBe(Math.round(10 * 0.9 * Number(plnPerEur) * 100) / 100);
    expect([pl.stock, pl.excluded]).toEqual([3, false]);

    const changed = await recorded(() => service.admin.upsertExchangeRate(merchantId, { base: 'USD', quote: 'EUR', rate: '0.8' }));
    expect(changed).toEqual({ de: [[usd, 'price']], pl: [[usd, 'price']] });
    expect((await service.api(`/v1/products/${usd}?store=pl`, key)).body.data.prices[0].base_cost).toBe(
      Math.round(10 * 0.8 * Number(plnPerEur) * 100) / 100,
    );

    const deleted = await recorded(() => service.admin.deleteExchangeRate(merchantId, 'USD', 'EUR'));
    expect(deleted).toEqual({
      de: [
        [usd, 'price'],
        [usd, 'content'],
      ],
      pl: [
        [usd, 'price'],
        [usd, 'content'],
      ],
    });
  });
});
