// Resolution of a product for a store: spec 2.1-2.3, docs/decisions.md#resolution,
// docs/domain.md#resolution-of-a-product-for-a-store-spec-21-23.
import { describe, it, expect } from 'vitest';
import type {
  AttributeDefinitionRecord,
  ExchangeRateRecord,
  ImageMirrorRecord,
  MerchantContext,
  OfferSource,
  Product,
  ProductRecord,
  ProductSourceDocument,
  PricingRuleRecord,
  StoreRecord,
  SupplierRecord,
} from '../../src/catalog/model.js';
import { findConversion } from '../../src/catalog/money.js';
import {
  applicablePricingRule,
  applyPriceEnding,
  baseCost,
  bestSupplierOffer,
  computedPrice,
  convertToMinorUnits,
  exclusionReason,
  explainResolution,
  exportedSku,
  localizedContent,
  pricedOffers,
  resolveProduct,
  resolvedAttributes,
  resolvedImages,
  sellableStock,
} from '../../src/catalog/resolve.js';

// ---------------------------------------------------------------------------------------------
// Fixtures

/** Table rows titled by their `name`, written out in full (vitest truncates `$name`). */
function named<T extends { name: string }>(cases: T[]): [string, T][] {
  return cases.map((c) => [c.name, c]);
}

const CATCH_ALL_PRIORITY = 2147483647;

/** Suppliers on purpose not in alphabetical id order, so "by supplier id" cannot pass by accident. */
const SUPPLIERS: SupplierRecord[] = [
  { id: 1, ref: 'north', name: 'North Wholesale' },
  { id: 2, ref: 'east', name: 'East Trading' },
  { id: 3, ref: 'alpine', name: 'Alpine Imports' },
];

function store(overrides: Partial<StoreRecord> = {}): StoreRecord {
  return {
    id: 1,
    merchant_id: 1,
    slug: 'de',
    name: 'Germany',
    locale: 'de-DE',
    currency: 'EUR',
    is_default: true,
    active: true,
    exclude_out_of_stock: false,
    catalog_version: 1,
    ...overrides,
  };
}

function rule(overrides: Partial<PricingRuleRecord> & Pick<PricingRuleRecord, 'id'>): PricingRuleRecord {
  return {
    priority: 100,
    customer_group_id: null,
    store_id: null,
    manufacturer: null,
    min_cost: null,
    max_cost: null,
    markup_percent: '0',
    markup_amount: '0',
    price_ending: null,
    is_catch_all: false,
    ...overrides,
  };
}

const catchAll = (overrides: Partial<PricingRuleRecord> = {}) =>
  rule({ id: 1, priority: CATCH_ALL_PRIORITY, is_catch_all: true, ...overrides });

/** A merchant context; `pricingRules` are given in the order storage returns them (priority, id). */
function context(overrides: Partial<MerchantContext> = {}): MerchantContext {
  return {
    merchantId: 1,
    skuPattern: null,
    stores: [store()],
    customerGroups: [{ id: 1, name: 'Retail' }],
    pricingRules: [catchAll()],
    exchangeRates: [],
    attributeDefinitions: new Map(),
    suppliersByRef: new Map(SUPPLIERS.map((s) => [s.ref, s])),
    ...overrides,
  };
}

function product(source: Partial<ProductSourceDocument> = {}, id = 42, ref = 'TENT-42'): ProductRecord {
  return {
    id,
    ref,
    source: {
      eans: ['4006381333931'],
      manufacturer: 'Acme',
      content: { 'de-DE': { title: 'Zelt', description: 'Ein Zelt für zwei' } },
      images: [],
      offers: [offer('north', 5, '10.00')],
      own_stock: null,
      supplier_attributes: [],
      overrides: {},
      excluded_stores: [],
      ...source,
    },
  };
}

function offer(supplier_ref: string, quantity: number, cost: string, currency = 'EUR'): OfferSource {
  return { supplier_ref, quantity, cost, currency };
}

function definition(key: string, unit: string | null, labels: Record<string, string>): AttributeDefinitionRecord {
  return { key, unit, labels };
}

function rate(base: string, quote: string, value: string): ExchangeRateRecord {
  return { base, quote, rate: value };
}

function mirrors(...records: ImageMirrorRecord[]): Map<string, ImageMirrorRecord> {
  return new Map(records.map((m) => [m.url, m]));
}

/** Resolves and parses the payload the read API serves. */
function resolved(
  p: ProductRecord,
  s: StoreRecord = store(),
  c: MerchantContext = context(),
  m: Map<string, ImageMirrorRecord> = new Map(),
): Product {
  return JSON.parse(resolveProduct(p, s, c, m).payload) as Product;
}

/** The best offer's supplier ref for a product in a store, or null. */
function bestSupplierRef(p: ProductRecord, s: StoreRecord = store(), c: MerchantContext = context()): string | null {
  return bestSupplierOffer(pricedOffers(p, s, c))?.offer.supplier_ref ?? null;
}

// ---------------------------------------------------------------------------------------------
// spec 2.1: stock rules

describe('spec 2.1 stock rules', () => {
  it.each(
    named([
      {
        name: "rule 1: with own stock, stock is own quantity + the best supplier's quantity",
        own_stock: { quantity: 3, cost: null, currency: null },
        offers: [offer('north', 5, '10.00'), offer('east', 7, '12.00')],
        stock: 3 + 5,
      },
      {
        name: 'rule 1: own stock sells first, the best supplier backfills even when another supplier holds more',
        own_stock: { quantity: 2, cost: '9.00', currency: 'EUR' },
        offers: [offer('north', 1, '10.00'), offer('east', 40, '11.00')],
        stock: 2 + 1,
      },
      {
        name: 'rule 1: own stock without any offer is the own quantity (supplier quantity 0)',
        own_stock: { quantity: 4, cost: '9.00', currency: 'EUR' },
        offers: [],
        stock: 4,
      },
      {
        name: "rule 2: without own stock, stock is the best supplier's quantity",
        own_stock: null,
        offers: [offer('north', 5, '10.00'), offer('east', 7, '12.00')],
        stock: 5,
      },
      {
        name: 'rule 2: the best supplier is the cheapest in stock, not the cheapest overall',
        own_stock: null,
        offers: [offer('north', 0, '8.00'), offer('east', 7, '12.00')],
        stock: 7,
      },
      {
        name: 'rule 2: with no offer in stock, stock is 0',
        own_stock: null,
        offers: [offer('north', 0, '8.00'), offer('east', 0, '12.00')],
        stock: 0,
      },
      {
        name: 'rule 3: with no offers at all, stock is 0',
        own_stock: null,
        offers: [],
        stock: 0,
      },
    ]),
  )('%s', (_name, { own_stock, offers, stock }) => {
    const p = product({ own_stock, offers });
    expect(sellableStock(p, bestSupplierOffer(pricedOffers(p, store(), context())))).toBe(stock);
    expect(resolved(p).stock).toBe(stock);
  });
});

// ---------------------------------------------------------------------------------------------
// spec 2.1: image rules

describe('spec 2.1 image rules', () => {
  const a = 'https://supplier.example/a.jpg';
  const b = 'https://supplier.example/b.jpg';
  const c = 'https://supplier.example/c.jpg';
  const hosted = (url: string) => `https://media.example/${url.split('/').pop()}`;

  it.each(
    named([
      {
        name: 'rule 1: once an image has been mirrored, its URL points at the service-hosted copy',
        mirrorRows: [{ url: a, state: 'mirrored' as const, mirrored_url: hosted(a) }],
        images: [hosted(a)],
      },
      {
        name: 'rule 2: until an image is mirrored, its original supplier URL is returned',
        mirrorRows: [{ url: a, state: 'pending' as const, mirrored_url: null }],
        images: [a],
      },
      {
        name: 'rule 2: an image without a mirror row is served from its original supplier URL',
        mirrorRows: [],
        images: [a],
      },
      {
        name: 'rule 3: an image whose source is permanently dead is omitted',
        mirrorRows: [{ url: a, state: 'dead' as const, mirrored_url: null }],
        images: [],
      },
    ]),
  )('%s', (_name, { mirrorRows, images }) => {
    const p = product({ images: [{ url: a }] });
    expect(resolvedImages(p, mirrors(...mirrorRows))).toEqual(images);
    expect(resolved(p, store(), context(), mirrors(...mirrorRows)).images).toEqual(images);
  });

  it('keeps the source order of images across mirrored, pending and dead ones', () => {
    const p = product({ images: [{ url: c }, { url: a }, { url: b }, { url: hosted('d.jpg') }] });
    const rows = mirrors(
      { url: a, state: 'mirrored', mirrored_url: hosted(a) },
      { url: b, state: 'dead', mirrored_url: null },
      { url: c, state: 'pending', mirrored_url: null },
    );
    expect(resolved(p, store(), context(), rows).images).toEqual([c, hosted(a), hosted('d.jpg')]);
  });
});

// ---------------------------------------------------------------------------------------------
// spec 2.2: attributes

describe('spec 2.2 attributes: merchant overrides layered over supplier values', () => {
  // Best supplier is `east` (id 2): cheapest in stock. `north` (id 1) and `alpine` (id 3) are others.
  const offers = [offer('north', 5, '12.00'), offer('east', 5, '10.00'), offer('alpine', 5, '11.00')];
  type Layers = Pick<ProductSourceDocument, 'supplier_attributes' | 'overrides'> & { name: string; value: string };

  it.each(
    named<Layers>([
      {
        name: "a merchant override wins over the best supplier's value",
        supplier_attributes: [{ supplier_ref: 'east', key: 'weight', value: '1.5' }],
        overrides: { weight: '1.2' },
        value: '1.2',
      },
      {
        name: "a merchant override wins over every supplier's value",
        supplier_attributes: [
          { supplier_ref: 'north', key: 'weight', value: '1.7' },
          { supplier_ref: 'east', key: 'weight', value: '1.5' },
        ],
        overrides: { weight: '1.2' },
        value: '1.2',
      },
      {
        name: "the best supplier's value wins over other suppliers' values (even with a lower supplier id)",
        supplier_attributes: [
          { supplier_ref: 'north', key: 'weight', value: '1.7' },
          { supplier_ref: 'east', key: 'weight', value: '1.5' },
          { supplier_ref: 'alpine', key: 'weight', value: '1.9' },
        ],
        overrides: {},
        value: '1.5',
      },
      {
        name: 'among other suppliers, the one with the lower supplier id wins',
        supplier_attributes: [
          { supplier_ref: 'alpine', key: 'weight', value: '1.9' },
          { supplier_ref: 'north', key: 'weight', value: '1.7' },
        ],
        overrides: {},
        value: '1.7',
      },
      {
        name: 'a value only another supplier has is still resolved',
        supplier_attributes: [{ supplier_ref: 'alpine', key: 'weight', value: '1.9' }],
        overrides: {},
        value: '1.9',
      },
      {
        name: 'a value only the merchant overrides is resolved',
        supplier_attributes: [],
        overrides: { weight: '2.0' },
        value: '2.0',
      },
    ]),
  )('%s', (_name, { supplier_attributes, overrides, value }) => {
    const p = product({ offers, supplier_attributes, overrides });
    expect(bestSupplierRef(p)).toBe('east');
    expect(resolved(p).attributes).toEqual([{ key: 'weight', label: 'weight', value }]);
  });

  it('is sorted by key, whichever layer a key comes from', () => {
    const p = product({
      offers,
      supplier_attributes: [
        { supplier_ref: 'north', key: 'weight', value: '1.7' },
        { supplier_ref: 'east', key: 'color', value: 'red' },
        { supplier_ref: 'alpine', key: 'material', value: 'nylon' },
      ],
      overrides: { size: 'L', brand_line: 'Trail' },
    });
    expect(resolved(p).attributes.map((attribute) => attribute.key)).toEqual(['brand_line', 'color', 'material', 'size', 'weight']);
  });

  it('values are strings in the payload', () => {
    const p = product({ overrides: { weight: '1.20' } });
    expect(resolved(p).attributes).toEqual([{ key: 'weight', label: 'weight', value: '1.20' }]);
  });
});

describe('spec 2.2 attribute labels: localized, with the unit in parentheses', () => {
  const definitions = new Map([
    ['weight', definition('weight', 'kg', { 'de-AT': 'Gewicht (AT)', de: 'Gewicht', en: 'Weight' })],
    ['material', definition('material', null, { en: 'Material', de: 'Material' })],
    ['volume', definition('volume', 'l', {})],
  ]);

  it.each(
    named([
      { name: 'the label in the exact store locale is used first', locale: 'de-AT', key: 'weight', label: 'Gewicht (AT) (kg)' },
      { name: "the label falls back to the store locale's language (de-DE -> de)", locale: 'de-DE', key: 'weight', label: 'Gewicht (kg)' },
      { name: 'the unit goes in parentheses: Weight (kg)', locale: 'en-GB', key: 'weight', label: 'Weight (kg)' },
      {
        name: 'without a label for the locale or its language, the label is the key (plus the unit)',
        locale: 'fr-FR',
        key: 'weight',
        label: 'weight (kg)',
      },
      {
        name: 'a definition without labels labels the attribute with its key and unit',
        locale: 'de-DE',
        key: 'volume',
        label: 'volume (l)',
      },
      { name: 'an attribute without a unit has no parentheses', locale: 'en-US', key: 'material', label: 'Material' },
      { name: 'an attribute without a definition is labelled with its key', locale: 'en-US', key: 'color', label: 'color' },
    ]),
  )('%s', (_name, { locale, key, label }) => {
    const p = product({ overrides: { [key]: 'x' } });
    const s = store({ locale });
    const c = context({ attributeDefinitions: definitions });
    expect(resolvedAttributes(p, null, s, c)).toEqual([{ key, label, value: 'x' }]);
    expect(resolved(p, s, c).attributes).toEqual([{ key, label, value: 'x' }]);
  });
});

// ---------------------------------------------------------------------------------------------
// spec 2.3: prices per customer group and pricing rules

describe('spec 2.3 prices: one entry per customer group', () => {
  it('lists one entry per customer group of the merchant, ordered by customer group id', () => {
    const c = context({
      customerGroups: [
        { id: 1, name: 'Retail' },
        { id: 2, name: 'Wholesale' },
        { id: 5, name: 'Staff' },
      ],
      pricingRules: [
        rule({ id: 10, priority: 1, customer_group_id: 2, markup_percent: '10' }),
        rule({ id: 11, priority: 2, customer_group_id: 5, markup_percent: '-10' }),
        catchAll({ markup_percent: '50' }),
      ],
    });
    expect(resolved(product(), store(), c).prices).toEqual([
      { customer_group_id: 1, customer_group: 'Retail', base_cost: 10, computed_price: 15, currency: 'EUR', applied_rule_id: 1 },
      { customer_group_id: 2, customer_group: 'Wholesale', base_cost: 10, computed_price: 11, currency: 'EUR', applied_rule_id: 10 },
      { customer_group_id: 5, customer_group: 'Staff', base_cost: 10, computed_price: 9, currency: 'EUR', applied_rule_id: 11 },
    ]);
  });

  it('has no entries when the merchant has no customer groups', () => {
    expect(resolved(product(), store(), context({ customerGroups: [] })).prices).toEqual([]);
  });

  it("carries the store's currency in every entry", () => {
    const c = context({
      customerGroups: [
        { id: 1, name: 'Retail' },
        { id: 2, name: 'Wholesale' },
      ],
    });
    const prices = resolved(product({ offers: [offer('north', 1, '1000', 'JPY')] }), store({ currency: 'JPY' }), c).prices;
    expect(prices.map((price) => price.currency)).toEqual(['JPY', 'JPY']);
  });
});

describe('spec 2.3 pricing rules: the first matching rule by priority, then id', () => {
  // Store 1 in EUR, product of manufacturer Acme with base_cost 10.00 (1000 minor units), group 1.
  const eur = store();
  const jpy = store({ id: 2, slug: 'jp', locale: 'ja-JP', currency: 'JPY' });

  it.each(
    named([
      {
        name: 'a lower priority runs first, whatever the rule ids',
        rules: [rule({ id: 9, priority: 1 }), rule({ id: 3, priority: 5 }), catchAll()],
        expected: 9,
      },
      {
        name: 'rules of equal priority are tried in id order',
        rules: [rule({ id: 3, priority: 5 }), rule({ id: 4, priority: 5 }), catchAll()],
        expected: 3,
      },
      {
        name: 'a rule for another customer group does not match',
        rules: [rule({ id: 2, priority: 1, customer_group_id: 7 }), catchAll()],
        expected: 1,
      },
      {
        name: 'a rule for the customer group matches',
        rules: [rule({ id: 2, priority: 1, customer_group_id: 1 }), catchAll()],
        expected: 2,
      },
      {
        name: 'a rule for another store does not match',
        rules: [rule({ id: 2, priority: 1, store_id: 99 }), catchAll()],
        expected: 1,
      },
      {
        name: 'a rule for the store matches',
        rules: [rule({ id: 2, priority: 1, store_id: 1 }), catchAll()],
        expected: 2,
      },
      {
        name: "a rule for the product's manufacturer matches (exact)",
        rules: [rule({ id: 2, priority: 1, manufacturer: 'Acme' }), catchAll()],
        expected: 2,
      },
      {
        name: 'a rule for another manufacturer does not match (exact, case-sensitive)',
        rules: [rule({ id: 2, priority: 1, manufacturer: 'ACME' }), catchAll()],
        expected: 1,
      },
      {
        name: 'min_cost is inclusive: base_cost equal to min_cost matches',
        rules: [rule({ id: 2, priority: 1, min_cost: '10.00' }), catchAll()],
        expected: 2,
      },
      {
        name: 'base_cost below min_cost does not match',
        rules: [rule({ id: 2, priority: 1, min_cost: '10.01' }), catchAll()],
        expected: 1,
      },
      {
        name: 'base_cost below min_cost does not match, even by less than a minor unit',
        rules: [rule({ id: 2, priority: 1, min_cost: '10.004' }), catchAll()],
        expected: 1,
      },
      {
        name: 'max_cost is inclusive: base_cost equal to max_cost matches',
        rules: [rule({ id: 2, priority: 1, max_cost: '10' }), catchAll()],
        expected: 2,
      },
      {
        name: 'base_cost above max_cost does not match',
        rules: [rule({ id: 2, priority: 1, max_cost: '9.99' }), catchAll()],
        expected: 1,
      },
      {
        name: 'base_cost above max_cost does not match, even by less than a minor unit',
        rules: [rule({ id: 2, priority: 1, max_cost: '9.995' }), catchAll()],
        expected: 1,
      },
      {
        name: 'base_cost within [min_cost, max_cost] matches',
        rules: [rule({ id: 2, priority: 1, min_cost: '5', max_cost: '20' }), catchAll()],
        expected: 2,
      },
      {
        name: 'every condition of a rule must match',
        rules: [rule({ id: 2, priority: 1, customer_group_id: 1, store_id: 1, manufacturer: 'Other' }), catchAll()],
        expected: 1,
      },
      {
        name: 'the catch-all rule applies when no other rule matches',
        rules: [rule({ id: 2, priority: 1, customer_group_id: 7 }), rule({ id: 3, priority: 2, store_id: 99 }), catchAll()],
        expected: 1,
      },
    ]),
  )('%s', (_name, { rules, expected }) => {
    expect(applicablePricingRule(rules, 1, eur, 'Acme', 1000n).id).toBe(expected);
    const payload = resolved(product(), eur, context({ pricingRules: rules }));
    expect(payload.prices[0]?.applied_rule_id).toBe(expected);
  });

  it('a manufacturer rule does not match a product without a manufacturer', () => {
    const rules = [rule({ id: 2, priority: 1, manufacturer: 'Acme' }), catchAll()];
    expect(applicablePricingRule(rules, 1, eur, null, 1000n).id).toBe(1);
  });

  it.each(
    named([
      { name: 'cost bounds are in the store currency: 1500 JPY is within max_cost 1500.5', base: 1500, expected: 2 },
      { name: 'cost bounds are in the store currency: 1501 JPY is above max_cost 1500.5', base: 1501, expected: 1 },
    ]),
  )('%s', (_name, { base, expected }) => {
    const rules = [rule({ id: 2, priority: 1, max_cost: '1500.5' }), catchAll()];
    expect(applicablePricingRule(rules, 1, jpy, 'Acme', BigInt(base)).id).toBe(expected);
  });

  it('applied_rule_id is always an integer: the catch-all rule matches every product', () => {
    const p = product({ manufacturer: null, offers: [], own_stock: null });
    expect(resolved(p, eur, context()).prices[0]?.applied_rule_id).toBe(1);
  });
});

describe('spec 2.3 computed price: markup percent, then markup amount, then price ending', () => {
  it.each(
    named([
      { name: 'no markup: the price is the base cost', base: 1000, percent: '0', amount: '0', ending: null, currency: 'EUR', price: 1000 },
      {
        name: 'markup percent is added to the base cost',
        base: 1000,
        percent: '23',
        amount: '0',
        ending: null,
        currency: 'EUR',
        price: 1230,
      },
      {
        name: 'markup amount is added after the percentage',
        base: 1000,
        percent: '20',
        amount: '0.50',
        ending: null,
        currency: 'EUR',
        price: 1250,
      },
      {
        name: 'a negative markup percent is a discount',
        base: 1000,
        percent: '-10',
        amount: '0',
        ending: null,
        currency: 'EUR',
        price: 900,
      },
      { name: 'fractional markup percent is exact', base: 1000, percent: '12.5', amount: '0', ending: null, currency: 'EUR', price: 1125 },
      {
        name: 'the marked-up cost rounds half away from zero (EUR 0.505 -> 0.51)',
        base: 50,
        percent: '1',
        amount: '0',
        ending: null,
        currency: 'EUR',
        price: 51,
      },
      {
        name: 'the marked-up cost rounds half away from zero (JPY 151.5 -> 152)',
        base: 150,
        percent: '1',
        amount: '0',
        ending: null,
        currency: 'JPY',
        price: 152,
      },
      {
        name: 'the marked-up cost rounds half away from zero (KWD 0.0505 -> 0.051)',
        base: 50,
        percent: '1',
        amount: '0',
        ending: null,
        currency: 'KWD',
        price: 51,
      },
      {
        name: 'below half rounds down (EUR 0.5049 -> 0.50)',
        base: 4999,
        percent: '1',
        amount: '0',
        ending: null,
        currency: 'EUR',
        price: 5049,
      },
      {
        name: 'markup amount is in the store currency (JPY has no decimals)',
        base: 1200,
        percent: '25',
        amount: '100',
        ending: null,
        currency: 'JPY',
        price: 1600,
      },
      {
        name: 'markup amount is in the store currency (KWD has 3 decimals)',
        base: 10000,
        percent: '0',
        amount: '2.345',
        ending: null,
        currency: 'KWD',
        price: 12345,
      },
      { name: 'the price is never negative', base: 100, percent: '0', amount: '-5.00', ending: null, currency: 'EUR', price: 0 },
      {
        name: 'a price clamped to zero stays zero with a price ending (1.00 - 1.50 -> 0, not 0.99)',
        base: 100,
        percent: '0',
        amount: '-1.50',
        ending: 99,
        currency: 'EUR',
        price: 0,
      },
      {
        name: 'the price ending is applied after the markup (12.00 -> 12.99)',
        base: 1000,
        percent: '20',
        amount: '0',
        ending: 99,
        currency: 'EUR',
        price: 1299,
      },
    ]),
  )('%s', (_name, { base, percent, amount, ending, currency, price }) => {
    const r = rule({ id: 1, markup_percent: percent, markup_amount: amount, price_ending: ending });
    expect(computedPrice(BigInt(base), r, currency)).toBe(BigInt(price));
  });
});

describe('spec 2.3 price_ending: raised to the next amount ending in these minor-unit digits', () => {
  it.each(
    named([
      { name: '99 makes x.99 in EUR', price: 1230, ending: 99, result: 1299 },
      { name: 'a price already ending in .99 is unchanged', price: 1299, ending: 99, result: 1299 },
      { name: 'the price is raised, never lowered: 13.00 -> 13.99', price: 1300, ending: 99, result: 1399 },
      { name: 'a price below the ending is raised to it: 0.50 -> 0.99', price: 50, ending: 99, result: 99 },
      { name: 'a zero price stays zero', price: 0, ending: 99, result: 0 },
      { name: 'no ending leaves the price as computed', price: 1234, ending: null, result: 1234 },
      { name: 'a one-digit ending replaces the last digit: 12.31 -> 12.39', price: 1231, ending: 9, result: 1239 },
      { name: 'a one-digit ending already met is unchanged', price: 1239, ending: 9, result: 1239 },
      { name: 'a one-digit ending 0 raises to the next ten: 12.31 -> 12.40', price: 1231, ending: 0, result: 1240 },
      { name: '99 makes ...99 in JPY: 1500 -> 1599', price: 1500, ending: 99, result: 1599 },
      { name: 'a three-digit ending: 1500 -> 1990', price: 1500, ending: 990, result: 1990 },
      { name: 'a three-digit ending raises past the thousand: 1995 -> 2990', price: 1995, ending: 990, result: 2990 },
    ]),
  )('%s', (_name, { price, ending, result }) => {
    expect(applyPriceEnding(BigInt(price), ending)).toBe(BigInt(result));
  });
});

describe('spec 2.3 amounts: rounded per currency exponent, written with exactly that precision', () => {
  it.each(
    named([
      {
        name: 'EUR has 2 decimals: "computed_price":12.30',
        currency: 'EUR',
        cost: '10.00',
        markup: '23',
        fragments: ['"base_cost":10.00', '"computed_price":12.30', '"currency":"EUR"'],
      },
      {
        name: 'EUR keeps trailing zeros of whole amounts: "base_cost":10.00',
        currency: 'EUR',
        cost: '10',
        markup: '0',
        fragments: ['"base_cost":10.00', '"computed_price":10.00'],
      },
      {
        name: 'JPY has no decimals: "computed_price":1500',
        currency: 'JPY',
        cost: '1200',
        markup: '25',
        fragments: ['"base_cost":1200,', '"computed_price":1500,', '"currency":"JPY"'],
      },
      {
        name: 'KWD has 3 decimals: "computed_price":12.345',
        currency: 'KWD',
        cost: '12.345',
        markup: '0',
        fragments: ['"base_cost":12.345', '"computed_price":12.345', '"currency":"KWD"'],
      },
      {
        name: 'KWD keeps trailing zeros: "computed_price":12.300',
        currency: 'KWD',
        cost: '10',
        markup: '23',
        fragments: ['"base_cost":10.000', '"computed_price":12.300'],
      },
      {
        name: 'costs are rounded half away from zero to the currency (EUR 12.345 -> 12.35)',
        currency: 'EUR',
        cost: '12.345',
        markup: '0',
        fragments: ['"base_cost":12.35', '"computed_price":12.35'],
      },
      {
        name: 'costs are rounded half away from zero to the currency (JPY 1499.5 -> 1500)',
        currency: 'JPY',
        cost: '1499.5',
        markup: '0',
        fragments: ['"base_cost":1500,', '"computed_price":1500,'],
      },
    ]),
  )('%s', (_name, { currency, cost, markup, fragments }) => {
    const p = product({ offers: [offer('north', 1, cost, currency)] });
    const s = store({ currency });
    const c = context({ pricingRules: [catchAll({ markup_percent: markup })] });
    const { payload } = resolveProduct(p, s, c, new Map());
    for (const fragment of fragments) expect(payload).toContain(fragment);
    expect(() => JSON.parse(payload)).not.toThrow();
  });
});

// ---------------------------------------------------------------------------------------------
// Exchange rates and the best supplier

describe('exchange rates: supplier costs are converted to the store currency', () => {
  it.each(
    named([
      { name: 'the same currency needs no rate', amount: '12.30', from: 'EUR', to: 'EUR', rates: [], minor: 1230 },
      {
        name: 'the direct pair converts: 1 base = rate quote',
        amount: '10.00',
        from: 'USD',
        to: 'EUR',
        rates: [rate('USD', 'EUR', '0.9')],
        minor: 900,
      },
      {
        name: 'the inverse pair converts with 1/rate',
        amount: '10.00',
        from: 'USD',
        to: 'EUR',
        rates: [rate('EUR', 'USD', '1.25')],
        minor: 800,
      },
      {
        name: 'the direct pair is used before the inverse pair',
        amount: '10.00',
        from: 'USD',
        to: 'EUR',
        rates: [rate('EUR', 'USD', '1.25'), rate('USD', 'EUR', '0.9')],
        minor: 900,
      },
      {
        name: "conversion rounds half away from zero to the store currency's minor unit",
        amount: '1.00',
        from: 'USD',
        to: 'EUR',
        rates: [rate('USD', 'EUR', '0.125')],
        minor: 13,
      },
      {
        name: 'conversion into JPY lands in whole yen',
        amount: '10.00',
        from: 'EUR',
        to: 'JPY',
        rates: [rate('EUR', 'JPY', '160.55')],
        minor: 1606,
      },
      {
        name: 'conversion into KWD lands in fils (3 decimals)',
        amount: '10.00',
        from: 'EUR',
        to: 'KWD',
        rates: [rate('KWD', 'EUR', '3')],
        minor: 3333,
      },
      { name: 'a missing rate cannot convert', amount: '10.00', from: 'USD', to: 'EUR', rates: [rate('USD', 'GBP', '0.8')], minor: null },
    ]),
  )('%s', (_name, { amount, from, to, rates, minor }) => {
    expect(convertToMinorUnits(amount, from, to, { exchangeRates: rates })).toBe(minor === null ? null : BigInt(minor));
  });

  it('an offer whose currency cannot be converted is ignored for that store, not for others', () => {
    // A cheap, well-stocked USD offer and an EUR offer; only USD->... rates are missing.
    const p = product({ offers: [offer('east', 9, '5.00', 'USD'), offer('north', 2, '10.00', 'EUR')] });
    const eurStore = store();
    const usdStore = store({ id: 2, slug: 'us', locale: 'en-US', currency: 'USD' });

    const inEur = resolved(p, eurStore, context());
    expect(inEur.stock).toBe(2);
    expect(inEur.prices[0]?.base_cost).toBe(10);

    const inUsd = resolved(p, usdStore, context());
    expect(inUsd.stock).toBe(9);
    expect(inUsd.prices[0]?.base_cost).toBe(5);
  });

  it('with the rate known, the converted offer takes part again', () => {
    const p = product({ offers: [offer('east', 9, '5.00', 'USD'), offer('north', 2, '10.00', 'EUR')] });
    const c = context({ exchangeRates: [rate('USD', 'EUR', '0.9')] });
    const payload = resolved(p, store(), c);
    expect(payload.stock).toBe(9);
    expect(payload.prices[0]?.base_cost).toBe(4.5);
  });
});

describe('exchange rates through an intermediate currency: the fewest rates, then fewer inverted ones, then the intermediate currencies alphabetically', () => {
  const jpyStore = store({ id: 3, slug: 'jp', locale: 'ja-JP', currency: 'JPY' });

  it.each(
    named([
      {
        name: 'USD reaches JPY through EUR when only USD->EUR and EUR->JPY exist',
        rates: [rate('USD', 'EUR', '0.9'), rate('EUR', 'JPY', '160')],
        amount: '10.00',
        from: 'USD',
        to: 'JPY',
        minor: 1440,
      },
      {
        name: 'a path may invert a rate: USD->EUR, then JPY->EUR inverted',
        rates: [rate('USD', 'EUR', '0.9'), rate('JPY', 'EUR', '0.00625')],
        amount: '10.00',
        from: 'USD',
        to: 'JPY',
        minor: 1440,
      },
      {
        name: 'a path may be three rates long',
        rates: [rate('USD', 'EUR', '0.9'), rate('EUR', 'CHF', '0.95'), rate('CHF', 'JPY', '170')],
        amount: '10.00',
        from: 'USD',
        to: 'JPY',
        minor: 1454,
      },
      // Rounded in EUR first, 1.00 USD would be 0.13 EUR and 130 JPY; the exact product is 125 JPY.
      {
        name: 'rounds once, in the store currency, never in the intermediate one',
        rates: [rate('USD', 'EUR', '0.125'), rate('EUR', 'JPY', '1000')],
        amount: '1.00',
        from: 'USD',
        to: 'JPY',
        minor: 125,
      },
      // 1/3 EUR per USD, times 3 JPY per EUR: exactly 1 JPY per USD, whatever the decimals of 1/3.
      {
        name: 'composes the rates exactly, inverted ones as exact fractions',
        rates: [rate('EUR', 'USD', '3'), rate('EUR', 'JPY', '3')],
        amount: '1234.56',
        from: 'USD',
        to: 'JPY',
        minor: 1235,
      },
      {
        name: 'a rate between the two currencies wins over any path',
        rates: [rate('USD', 'EUR', '0.9'), rate('EUR', 'JPY', '160'), rate('USD', 'JPY', '150')],
        amount: '10.00',
        from: 'USD',
        to: 'JPY',
        minor: 1500,
      },
      {
        name: 'so does the inverse of the opposite pair',
        rates: [rate('USD', 'EUR', '0.9'), rate('EUR', 'JPY', '160'), rate('JPY', 'USD', '0.008')],
        amount: '10.00',
        from: 'USD',
        to: 'JPY',
        minor: 1250,
      },
      {
        name: 'between paths of equal length, the one with fewer inverted rates',
        rates: [rate('USD', 'EUR', '0.9'), rate('JPY', 'EUR', '0.00625'), rate('USD', 'GBP', '0.8'), rate('GBP', 'JPY', '190')],
        amount: '10.00',
        from: 'USD',
        to: 'JPY',
        minor: 1520,
      },
      {
        name: 'between paths of equal length and inversions, the one through the alphabetically first currency',
        rates: [rate('USD', 'GBP', '0.8'), rate('GBP', 'JPY', '190'), rate('USD', 'EUR', '0.9'), rate('EUR', 'JPY', '160')],
        amount: '10.00',
        from: 'USD',
        to: 'JPY',
        minor: 1440,
      },
      {
        name: 'the same path whichever order the rates are stored in',
        rates: [rate('EUR', 'JPY', '160'), rate('USD', 'EUR', '0.9'), rate('GBP', 'JPY', '190'), rate('USD', 'GBP', '0.8')],
        amount: '10.00',
        from: 'USD',
        to: 'JPY',
        minor: 1440,
      },
      {
        name: 'no chain of rates: no conversion',
        rates: [rate('USD', 'EUR', '0.9'), rate('GBP', 'JPY', '190')],
        amount: '10.00',
        from: 'USD',
        to: 'JPY',
        minor: null,
      },
    ]),
  )('%s', (_name, { rates, amount, from, to, minor }) => {
    expect(convertToMinorUnits(amount, from, to, { exchangeRates: rates })).toBe(minor === null ? null : BigInt(minor));
    expect(convertToMinorUnits(amount, from, to, { exchangeRates: [...rates].reverse() })).toBe(minor === null ? null : BigInt(minor));
  });

  it('names the path it takes: the rates in order, each as stated or inverted', () => {
    const conversion = findConversion('USD', 'JPY', [rate('JPY', 'EUR', '0.00625'), rate('USD', 'EUR', '0.9')]);
    expect(conversion?.steps.map((s) => [s.from, s.to, s.inverted])).toEqual([
      ['USD', 'EUR', false],
      ['EUR', 'JPY', true],
    ]);
    expect(conversion?.factor).toEqual({ n: 144n, d: 1n });
  });

  it('an offer in USD takes part in a JPY store through EUR, where before it was ignored', () => {
    const p = product({ offers: [offer('east', 9, '10.00', 'USD'), offer('north', 2, '1600', 'JPY')] });
    const without = resolved(p, jpyStore, context({ exchangeRates: [rate('EUR', 'JPY', '160')] }));
    expect([without.stock, without.prices[0]?.base_cost]).toEqual([2, 1600]);
    const through = context({ exchangeRates: [rate('USD', 'EUR', '0.9'), rate('EUR', 'JPY', '160')] });
    const payload = resolved(p, jpyStore, through);
    expect([payload.stock, payload.prices[0]?.base_cost]).toEqual([9, 1440]);
    expect(explainResolution(p, jpyStore, through).ignoredOffers).toEqual([]);
  });

  it("converts own stock's cost through a path too", () => {
    const p = product({ offers: [], own_stock: { quantity: 1, cost: '10.00', currency: 'USD' } });
    const payload = resolved(p, jpyStore, context({ exchangeRates: [rate('USD', 'EUR', '0.9'), rate('EUR', 'JPY', '160')] }));
    expect(payload.prices[0]?.base_cost).toBe(1440);
  });
});

describe('best supplier: quantity > 0 and lowest converted cost', () => {
  it.each(
    named([
      {
        name: 'the offer in stock with the lowest cost is the best',
        offers: [offer('north', 5, '10.00'), offer('east', 5, '9.00'), offer('alpine', 5, '9.50')],
        best: 'east',
      },
      {
        name: 'an offer without quantity is passed over for a dearer one in stock',
        offers: [offer('north', 0, '5.00'), offer('east', 3, '9.00')],
        best: 'east',
      },
      {
        name: 'costs are compared after conversion to the store currency',
        offers: [offer('north', 5, '10.00', 'EUR'), offer('east', 5, '10.00', 'USD')],
        rates: [rate('USD', 'EUR', '0.9')],
        best: 'east',
      },
      {
        name: 'ties on cost go to the larger quantity',
        offers: [offer('north', 2, '10.00'), offer('east', 8, '10.00')],
        best: 'east',
      },
      {
        name: 'ties on cost and quantity go to the lower supplier id',
        offers: [offer('alpine', 5, '10.00'), offer('east', 5, '10.00')],
        best: 'east',
      },
      {
        name: 'ties after conversion go to the larger quantity',
        offers: [offer('north', 2, '9.00', 'EUR'), offer('east', 4, '10.00', 'USD')],
        rates: [rate('USD', 'EUR', '0.9')],
        best: 'east',
      },
      {
        name: 'with no offer in stock, the lowest-cost offer is the best',
        offers: [offer('north', 0, '10.00'), offer('east', 0, '8.00'), offer('alpine', 0, '9.00')],
        best: 'east',
      },
      {
        name: 'with no offer in stock, equal costs go to the lower supplier id',
        offers: [offer('alpine', 0, '8.00'), offer('east', 0, '8.00')],
        best: 'east',
      },
      {
        name: 'an offer whose currency cannot be converted is never the best',
        offers: [offer('north', 5, '10.00'), offer('east', 50, '1.00', 'GBP')],
        best: 'north',
      },
      {
        name: 'there is no best supplier without offers',
        offers: [],
        best: null,
      },
    ]),
  )('%s', (_name, { offers, rates, best }) => {
    expect(bestSupplierRef(product({ offers }), store(), context({ exchangeRates: rates ?? [] }))).toBe(best);
  });
});

describe('base_cost: the best offer, else own stock cost, else 0', () => {
  const usd = [rate('USD', 'EUR', '0.9')];

  it.each(
    named([
      {
        name: "is the best offer's cost",
        offers: [offer('north', 5, '12.00'), offer('east', 5, '10.00')],
        own_stock: null,
        base: 10,
      },
      {
        name: "is the best offer's cost even when own stock costs less",
        offers: [offer('north', 5, '12.00')],
        own_stock: { quantity: 3, cost: '4.00', currency: 'EUR' },
        base: 12,
      },
      {
        name: "is the best offer's cost converted to the store currency",
        offers: [offer('east', 5, '10.00', 'USD')],
        own_stock: null,
        base: 9,
      },
      {
        name: "is the lowest-cost offer's cost when no offer is in stock",
        offers: [offer('north', 0, '12.00'), offer('east', 0, '11.00')],
        own_stock: null,
        base: 11,
      },
      {
        name: 'without offers, is the own stock cost',
        offers: [],
        own_stock: { quantity: 3, cost: '7.50', currency: 'EUR' },
        base: 7.5,
      },
      {
        name: 'without offers, is the own stock cost converted to the store currency',
        offers: [],
        own_stock: { quantity: 3, cost: '20.00', currency: 'USD' },
        base: 18,
      },
      {
        name: 'without offers and an own stock cost that cannot be converted, is 0',
        offers: [],
        own_stock: { quantity: 3, cost: '20.00', currency: 'GBP' },
        base: 0,
      },
      {
        name: 'without offers and own stock without a cost, is 0',
        offers: [],
        own_stock: { quantity: 3, cost: null, currency: null },
        base: 0,
      },
      {
        name: 'without offers and without own stock, is 0',
        offers: [],
        own_stock: null,
        base: 0,
      },
    ]),
  )('%s', (_name, { offers, own_stock, base }) => {
    const p = product({ offers, own_stock });
    const c = context({ exchangeRates: usd });
    const best = bestSupplierOffer(pricedOffers(p, store(), c));
    expect(baseCost(p, best, store(), c)).toBe(BigInt(Math.round(base * 100)));
    expect(resolved(p, store(), c).prices[0]?.base_cost).toBe(base);
  });
});

// ---------------------------------------------------------------------------------------------
// exclusion_reason

describe('exclusion_reason: manual, missing_title, no_offers, out_of_stock; first match wins', () => {
  const noTitle = { 'de-DE': { title: null, description: 'Nur Beschreibung' } };
  const excludesOutOfStock = store({ exclude_out_of_stock: true });

  it.each(
    named([
      {
        name: 'manual: the merchant excluded the product from this store',
        source: { excluded_stores: ['de'] },
        store: store(),
        reason: 'manual',
      },
      {
        name: 'manual wins over every other reason',
        source: { excluded_stores: ['de'], content: noTitle, offers: [], own_stock: null },
        store: excludesOutOfStock,
        reason: 'manual',
      },
      {
        name: 'a manual exclusion from another store does not exclude it here',
        source: { excluded_stores: ['at'] },
        store: store(),
        reason: null,
      },
      {
        name: "missing_title: no title in the store's locale nor its language",
        source: { content: { en: { title: 'Tent', description: null } } },
        store: store(),
        reason: 'missing_title',
      },
      {
        name: 'missing_title wins over no_offers and out_of_stock',
        source: { content: noTitle, offers: [], own_stock: null },
        store: excludesOutOfStock,
        reason: 'missing_title',
      },
      {
        name: 'no_offers: no offer and no own stock',
        source: { offers: [], own_stock: null },
        store: store(),
        reason: 'no_offers',
      },
      {
        name: 'no_offers wins over out_of_stock',
        source: { offers: [], own_stock: null },
        store: excludesOutOfStock,
        reason: 'no_offers',
      },
      {
        name: 'no_offers: an offer that cannot be converted is ignored for the store',
        source: { offers: [offer('north', 5, '10.00', 'GBP')], own_stock: null },
        store: store(),
        reason: 'no_offers',
      },
      {
        name: 'own stock without offers is not no_offers',
        source: { offers: [], own_stock: { quantity: 2, cost: '5.00', currency: 'EUR' } },
        store: store(),
        reason: null,
      },
      {
        name: 'out_of_stock: stock 0 and the store excludes out-of-stock products',
        source: { offers: [offer('north', 0, '10.00')] },
        store: excludesOutOfStock,
        reason: 'out_of_stock',
      },
      {
        name: 'out_of_stock: own stock of 0 without offers, in a store that excludes out-of-stock products',
        source: { offers: [], own_stock: { quantity: 0, cost: null, currency: null } },
        store: excludesOutOfStock,
        reason: 'out_of_stock',
      },
      {
        name: 'stock 0 is not excluded when the store keeps out-of-stock products',
        source: { offers: [offer('north', 0, '10.00')] },
        store: store({ exclude_out_of_stock: false }),
        reason: null,
      },
      {
        name: 'a product in stock with a title and an offer is not excluded',
        source: {},
        store: excludesOutOfStock,
        reason: null,
      },
    ]),
  )('%s', (_name, { source, store: s, reason }) => {
    const payload = resolved(product(source), s);
    expect(payload.exclusion_reason).toBe(reason);
    expect(payload.excluded).toBe(reason !== null);
  });

  it('exclusionReason checks the reasons in order: manual, missing_title, no_offers, out_of_stock', () => {
    const s = store({ exclude_out_of_stock: true });
    const usable = (p: ProductRecord) => pricedOffers(p, s, context());
    const manual = product({ excluded_stores: ['de'], offers: [], own_stock: null });
    expect(exclusionReason(manual, s, null, 0, usable(manual))).toBe('manual');
    const noOffers = product({ offers: [], own_stock: null });
    expect(exclusionReason(noOffers, s, null, 0, usable(noOffers))).toBe('missing_title');
    expect(exclusionReason(noOffers, s, 'Zelt', 0, usable(noOffers))).toBe('no_offers');
    const soldOut = product({ offers: [offer('north', 0, '1.00')] });
    expect(exclusionReason(soldOut, s, 'Zelt', 0, usable(soldOut))).toBe('out_of_stock');
    expect(exclusionReason(soldOut, s, 'Zelt', 3, usable(soldOut))).toBeNull();
  });

  it('excluded products stay resolved with their full payload', () => {
    const payload = resolved(product({ excluded_stores: ['de'] }));
    expect(payload).toMatchObject({ excluded: true, exclusion_reason: 'manual', title: 'Zelt', stock: 5 });
    expect(payload.prices).toHaveLength(1);
  });
});

// ---------------------------------------------------------------------------------------------
// Localized content

describe("title and description in the store's locale: exact locale, then its language", () => {
  const content = {
    'de-DE': { title: 'Zelt (DE)', description: 'Beschreibung (DE)' },
    de: { title: 'Zelt', description: 'Beschreibung' },
    en: { title: 'Tent', description: null },
  };

  it.each(
    named([
      { name: 'the exact store locale is used first', locale: 'de-DE', title: 'Zelt (DE)', description: 'Beschreibung (DE)' },
      { name: 'de-AT falls back to de', locale: 'de-AT', title: 'Zelt', description: 'Beschreibung' },
      { name: 'a language-only locale uses that language', locale: 'de', title: 'Zelt', description: 'Beschreibung' },
      { name: 'en-GB falls back to en; a missing description is null', locale: 'en-GB', title: 'Tent', description: null },
      {
        name: 'without content in the locale or its language, title and description are null',
        locale: 'fr-FR',
        title: null,
        description: null,
      },
    ]),
  )('%s', (_name, { locale, title, description }) => {
    const p = product({ content });
    expect(localizedContent(p, locale)?.title ?? null).toBe(title);
    const payload = resolved(p, store({ locale }));
    expect(payload.title).toBe(title);
    expect(payload.description).toBe(description);
  });

  it("falls back field by field: a locale entry without a title takes its language's title", () => {
    const p = product({
      content: { 'de-CH': { title: null, description: 'Beschreibung (CH)' }, de: { title: 'Zelt', description: 'Beschreibung' } },
    });
    const payload = resolved(p, store({ locale: 'de-CH' }));
    expect(payload.title).toBe('Zelt');
    expect(payload.description).toBe('Beschreibung (CH)');
    expect(payload.exclusion_reason).not.toBe('missing_title');
  });
});

// ---------------------------------------------------------------------------------------------
// SKU pattern

describe("sku: the merchant's SKU pattern over {id}, {ref}, {ean}, {manufacturer}", () => {
  it.each(
    named([
      { name: '{id} is the service product id', pattern: 'ACME-{id}', source: {}, sku: 'ACME-42' },
      { name: '{ref} is the product ref', pattern: '{ref}', source: {}, sku: 'TENT-42' },
      {
        name: '{ean} is the primary (first) EAN',
        pattern: '{ean}',
        source: { eans: ['4006381333931', '5901234123457'] },
        sku: '4006381333931',
      },
      { name: '{manufacturer} is the manufacturer name', pattern: '{manufacturer}/{ref}', source: {}, sku: 'Acme/TENT-42' },
      { name: 'tokens may repeat and mix with literal text', pattern: 'X{id}-{id}-{ean}', source: {}, sku: 'X42-42-4006381333931' },
      { name: 'a pattern without tokens is used as it is', pattern: 'FIXED', source: {}, sku: 'FIXED' },
      { name: 'null without a pattern', pattern: null, source: {}, sku: null },
      { name: 'null when {ean} is used and the product has no EAN', pattern: 'ACME-{ean}', source: { eans: [] }, sku: null },
      {
        name: 'null when {manufacturer} is used and none is set',
        pattern: '{manufacturer}-{id}',
        source: { manufacturer: null },
        sku: null,
      },
      {
        name: 'a token without a value that the pattern does not use does not matter',
        pattern: 'ACME-{id}',
        source: { eans: [], manufacturer: null },
        sku: 'ACME-42',
      },
    ]),
  )('%s', (_name, { pattern, source, sku }) => {
    const p = product(source);
    expect(exportedSku(pattern, p)).toBe(sku);
    expect(resolved(p, store(), context({ skuPattern: pattern })).sku).toBe(sku);
  });
});

// ---------------------------------------------------------------------------------------------
// resolveProduct: the payload and its hashes

describe('resolveProduct: the Product payload (spec 2.1)', () => {
  const p = product({
    images: [{ url: 'https://supplier.example/a.jpg' }],
    own_stock: { quantity: 1, cost: null, currency: null },
    supplier_attributes: [{ supplier_ref: 'north', key: 'weight', value: '1.5' }],
  });
  const c = context({
    skuPattern: 'ACME-{id}',
    customerGroups: [
      { id: 1, name: 'Retail' },
      { id: 2, name: 'Wholesale' },
    ],
    pricingRules: [rule({ id: 7, priority: 1, customer_group_id: 2, markup_percent: '10' }), catchAll({ markup_percent: '23' })],
    attributeDefinitions: new Map([['weight', definition('weight', 'kg', { de: 'Gewicht' })]]),
  });

  it("is valid JSON with every field of the spec, in the spec's order", () => {
    const { payload } = resolveProduct(p, store(), c, new Map());
    const parsed = JSON.parse(payload) as Record<string, unknown>;
    expect(Object.keys(parsed)).toEqual([
      'id',
      'sku',
      'ean',
      'title',
      'description',
      'manufacturer',
      'images',
      'store',
      'excluded',
      'exclusion_reason',
      'attributes',
      'prices',
      'stock',
    ]);
  });

  it('resolves every field for the requested store', () => {
    expect(resolved(p, store(), c)).toEqual({
      id: 42,
      sku: 'ACME-42',
      ean: '4006381333931',
      title: 'Zelt',
      description: 'Ein Zelt für zwei',
      manufacturer: 'Acme',
      images: ['https://supplier.example/a.jpg'],
      store: 'de',
      excluded: false,
      exclusion_reason: null,
      attributes: [{ key: 'weight', label: 'Gewicht (kg)', value: '1.5' }],
      prices: [
        { customer_group_id: 1, customer_group: 'Retail', base_cost: 10, computed_price: 12.3, currency: 'EUR', applied_rule_id: 1 },
        { customer_group_id: 2, customer_group: 'Wholesale', base_cost: 10, computed_price: 11, currency: 'EUR', applied_rule_id: 7 },
      ],
      stock: 6,
    });
  });

  it("writes price entries with their fields in the spec's order and exact precision", () => {
    const { payload } = resolveProduct(p, store(), c, new Map());
    expect(payload).toContain(
      '"prices":[{"customer_group_id":1,"customer_group":"Retail","base_cost":10.00,"computed_price":12.30,' +
        '"currency":"EUR","applied_rule_id":1},{"customer_group_id":2,"customer_group":"Wholesale",' +
        '"base_cost":10.00,"computed_price":11.00,"currency":"EUR","applied_rule_id":7}],"stock":6}',
    );
  });

  it('ean, manufacturer, sku, title and description are null, never absent, when they have no value', () => {
    const bare = product({ eans: [], manufacturer: null, content: {} });
    expect(resolved(bare, store(), context())).toMatchObject({
      sku: null,
      ean: null,
      title: null,
      description: null,
      manufacturer: null,
    });
  });

  it('escapes customer group names as JSON strings', () => {
    const quoted = context({ customerGroups: [{ id: 1, name: 'B2B "Gold"\\Partners' }] });
    expect(resolved(product(), store(), quoted).prices[0]?.customer_group).toBe('B2B "Gold"\\Partners');
  });
});

describe('resolveProduct: priceHash changes with prices, contentHash with everything else', () => {
  const base = () =>
    product({
      images: [{ url: 'https://supplier.example/a.jpg' }],
      own_stock: { quantity: 1, cost: null, currency: null },
    });
  const baseContext = () => context({ pricingRules: [catchAll({ markup_percent: '20' })] });
  const a = 'https://supplier.example/a.jpg';

  type Variation = {
    name: string;
    product?: ProductRecord;
    context?: MerchantContext;
    store?: StoreRecord;
    mirrors?: Map<string, ImageMirrorRecord>;
    price: boolean;
    content: boolean;
  };

  it.each(
    named<Variation>([
      { name: 'resolving the same inputs again changes neither hash', price: false, content: false },
      {
        name: 'a title change is a content change only',
        product: product({ ...base().source, content: { 'de-DE': { title: 'Kuppelzelt', description: 'Ein Zelt für zwei' } } }),
        price: false,
        content: true,
      },
      {
        name: 'a description change is a content change only',
        product: product({ ...base().source, content: { 'de-DE': { title: 'Zelt', description: 'Neu' } } }),
        price: false,
        content: true,
      },
      {
        name: 'a stock change is a content change only',
        product: product({ ...base().source, own_stock: { quantity: 9, cost: null, currency: null } }),
        price: false,
        content: true,
      },
      {
        name: 'an added image is a content change only',
        product: product({ ...base().source, images: [{ url: a }, { url: 'https://supplier.example/b.jpg' }] }),
        price: false,
        content: true,
      },
      {
        name: 'a mirrored image is a content change only',
        mirrors: mirrors({ url: a, state: 'mirrored', mirrored_url: 'https://media.example/a.jpg' }),
        price: false,
        content: true,
      },
      {
        name: 'a dead image is a content change only',
        mirrors: mirrors({ url: a, state: 'dead', mirrored_url: null }),
        price: false,
        content: true,
      },
      {
        name: 'a flip of excluded is a content change only',
        product: product({ ...base().source, excluded_stores: ['de'] }),
        price: false,
        content: true,
      },
      {
        name: 'an attribute change is a content change only',
        product: product({ ...base().source, overrides: { color: 'green' } }),
        price: false,
        content: true,
      },
      {
        name: 'a SKU pattern change is a content change only',
        context: context({ ...baseContext(), skuPattern: 'ACME-{id}' }),
        price: false,
        content: true,
      },
      {
        name: 'a cost change is a price change only',
        product: product({ ...base().source, offers: [offer('north', 5, '11.00')] }),
        price: true,
        content: false,
      },
      {
        name: 'a markup change is a price change only',
        context: context({ ...baseContext(), pricingRules: [catchAll({ markup_percent: '25' })] }),
        price: true,
        content: false,
      },
      {
        name: 'a price ending change is a price change only',
        context: context({ ...baseContext(), pricingRules: [catchAll({ markup_percent: '20', price_ending: 99 })] }),
        price: true,
        content: false,
      },
      {
        name: 'a new customer group is a price change only',
        context: context({
          ...baseContext(),
          customerGroups: [
            { id: 1, name: 'Retail' },
            { id: 2, name: 'Wholesale' },
          ],
        }),
        price: true,
        content: false,
      },
      {
        name: 'a change of both cost and title is both a price and a content change',
        product: product({
          ...base().source,
          offers: [offer('north', 5, '11.00')],
          content: { 'de-DE': { title: 'Kuppelzelt', description: null } },
        }),
        price: true,
        content: true,
      },
    ]),
  )('%s', (_name, variation) => {
    const before = resolveProduct(base(), store(), baseContext(), new Map());
    const after = resolveProduct(
      variation.product ?? base(),
      variation.store ?? store(),
      variation.context ?? baseContext(),
      variation.mirrors ?? new Map(),
    );
    expect(after.priceHash !== before.priceHash).toBe(variation.price);
    expect(after.contentHash !== before.contentHash).toBe(variation.content);
    expect(after.payload !== before.payload).toBe(variation.price || variation.content);
  });
});

// ---------------------------------------------------------------------------------------------
// explainResolution: the chosen supplier and the applied pricing rules, beside the payload

describe('explainResolution: why a product resolved as it did (docs/panel.md#pages, "Catalog")', () => {
  const c = context({
    customerGroups: [
      { id: 1, name: 'Retail' },
      { id: 2, name: 'Wholesale' },
    ],
    pricingRules: [rule({ id: 7, priority: 1, customer_group_id: 2, markup_percent: '10' }), catchAll({ markup_percent: '23' })],
    exchangeRates: [rate('USD', 'EUR', '0.5')],
  });
  const p = product({
    offers: [
      offer('north', 0, '5.00'),
      offer('east', 3, '9.00'),
      offer('alpine', 8, '16.00', 'USD'),
      offer('nobody', 50, '1.00'),
      offer('north', 2, '1.00', 'JPY'),
    ],
    own_stock: { quantity: 2, cost: null, currency: null },
  });

  it('names the chosen supplier: the cheapest offer in stock, with the offers ranked and the ignored ones with their reason', () => {
    const why = explainResolution(p, store(), c);
    expect(why.chosenSupplier).toEqual({
      supplierRef: 'alpine',
      supplierName: 'Alpine Imports',
      quantity: 8,
      cost: '8.00',
      why: 'in_stock',
    });
    expect(why.rankedOffers).toEqual([
      { supplierRef: 'north', quantity: 0, cost: '5.00' },
      { supplierRef: 'alpine', quantity: 8, cost: '8.00' },
      { supplierRef: 'east', quantity: 3, cost: '9.00' },
    ]);
    expect(why.ignoredOffers).toEqual([
      { supplierRef: 'nobody', reason: 'unknown_supplier' },
      { supplierRef: 'north', reason: 'no_exchange_rate' },
    ]);
    expect(why.baseCost).toEqual({ amount: '8.00', from: 'chosen_offer' });
    expect(why.stock).toEqual({ own: 2, supplier: 8, sellable: 10 });
  });

  it('names the pricing rule applied per customer group, the same rule and price the payload states', () => {
    const why = explainResolution(p, store(), c);
    const payload = resolved(p, store(), c);
    expect(why.prices.map((price) => [price.customerGroup, price.rule.id, price.computedPrice])).toEqual([
      ['Retail', 1, '9.84'],
      ['Wholesale', 7, '8.80'],
    ]);
    expect(why.prices.map((price) => price.rule.id)).toEqual(payload.prices.map((price) => price.applied_rule_id));
    expect(why.prices.map((price) => Number(price.computedPrice))).toEqual(payload.prices.map((price) => price.computed_price));
    expect(payload.stock).toBe(why.stock.sellable);
  });

  it('says when no offer is in stock (the cheapest is chosen), and when there is no usable offer at all', () => {
    const none = product({ offers: [offer('east', 0, '9.00'), offer('north', 0, '7.00')] });
    expect(explainResolution(none, store(), c).chosenSupplier).toMatchObject({ supplierRef: 'north', why: 'none_in_stock' });
    const own = product({ offers: [], own_stock: { quantity: 4, cost: '3.00', currency: 'EUR' } });
    const why = explainResolution(own, store(), c);
    expect(why.chosenSupplier).toBeNull();
    expect(why.baseCost).toEqual({ amount: '3.00', from: 'own_stock' });
    expect(explainResolution(product({ offers: [] }), store(), c)).toMatchObject({
      chosenSupplier: null,
      baseCost: { from: 'none' },
      exclusionReason: 'no_offers',
    });
  });

  it('explains per store: the same product chooses differently where a rate is missing', () => {
    const usd = store({ id: 2, slug: 'us', name: 'USA', currency: 'USD', locale: 'en-US' });
    const why = explainResolution(p, usd, context({ ...c, exchangeRates: [] }));
    expect(why.store).toMatchObject({ slug: 'us', currency: 'USD' });
    expect(why.chosenSupplier).toMatchObject({ supplierRef: 'alpine', cost: '16.00' });
    expect(why.ignoredOffers.map((o) => o.supplierRef)).toEqual(['north', 'east', 'nobody', 'north']);
  });
});
