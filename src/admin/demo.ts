// The demo catalog: a realistic, deterministic merchant built through the same admin paths a real
// merchant uses. Three stores in different locales and currencies, two customer groups, suppliers
// with overlapping offers in two currencies, own stock on some products, merchant overrides, and
// products excluded for each reason.
import type { ProductSourceDocument } from '../catalog/model.js';
import type { CatalogAdmin } from './catalog-admin.js';

export interface DemoResult {
  merchant_id: number;
  api_key: string;
  stores: string[];
  products: number;
}

/** mulberry32: a small seeded generator, so the same N always builds the same catalog. */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const KINDS = [
  { de: 'Wanderrucksack', en: 'Hiking backpack', pl: 'Plecak turystyczny', material: 'polyester' },
  { de: 'Zelt', en: 'Tent', pl: 'Namiot', material: 'nylon' },
  { de: 'Schlafsack', en: 'Sleeping bag', pl: 'Śpiwór', material: 'down' },
  { de: 'Trinkflasche', en: 'Water bottle', pl: 'Butelka na wodę', material: 'steel' },
  { de: 'Stirnlampe', en: 'Head torch', pl: 'Latarka czołowa', material: 'aluminium' },
  { de: 'Trekkingstöcke', en: 'Trekking poles', pl: 'Kijki trekkingowe', material: 'carbon' },
];
const MANUFACTURERS = ['Alpenwerk', 'Nordkamm', 'Tatra Gear', 'Fjellsport'];
const COLORS = [
  { de: 'Rot', en: 'Red' },
  { de: 'Blau', en: 'Blue' },
  { de: 'Grün', en: 'Green' },
  { de: 'Schwarz', en: 'Black' },
];

function ean13(n: number): string {
  const body = `400${String(n).padStart(9, '0')}`;
  const sum = [...body].reduce((s, d, i) => s + Number(d) * (i % 2 ? 3 : 1), 0);
  return `${body}${(10 - (sum % 10)) % 10}`;
}

const money = (value: number) => value.toFixed(2);

/** The source document of demo product n (1-based). */
export function demoProduct(n: number): { ref: string; source: ProductSourceDocument } {
  const random = seeded(n);
  const kind = KINDS[n % KINDS.length]!;
  const color = COLORS[Math.floor(random() * COLORS.length)]!;
  const manufacturer = MANUFACTURERS[n % MANUFACTURERS.length]!;
  const cost = 8 + Math.floor(random() * 20000) / 100;
  const offers: ProductSourceDocument['offers'] = [];
  // Every 17th product has no offer; the others have one to three overlapping offers.
  if (n % 17 !== 0) {
    offers.push({
      supplier_ref: 'alpine-wholesale',
      quantity: n % 11 === 0 ? 0 : Math.floor(random() * 40),
      cost: money(cost),
      currency: 'EUR',
    });
    if (n % 2 === 0)
      offers.push({
        supplier_ref: 'baltic-outdoor',
        quantity: n % 11 === 0 ? 0 : Math.floor(random() * 25),
        cost: money(cost * (0.95 + random() * 0.1)),
        currency: 'EUR',
      });
    if (n % 3 === 0)
      offers.push({
        supplier_ref: 'pacific-imports',
        quantity: n % 11 === 0 ? 0 : Math.floor(random() * 60),
        cost: money(cost * 1.05),
        currency: 'USD',
      });
  }
  // Every 9th product is held in own stock (some of them with no supplier at all).
  const ownStock = n % 9 === 0 ? { quantity: 1 + (n % 7), cost: money(cost * 0.9), currency: 'EUR' } : null;
  const content: ProductSourceDocument['content'] = {
    de: { title: `${manufacturer} ${kind.de} ${color.de} ${n}`, description: `${kind.de} aus ${kind.material}, Modell ${n}.` },
    en: { title: `${manufacturer} ${kind.en} ${color.en} ${n}`, description: `${kind.en} made of ${kind.material}, model ${n}.` },
  };
  // Polish content exists for four products in five: the rest are excluded as missing_title there.
  if (n % 5 !== 0) content.pl = { title: `${manufacturer} ${kind.pl} ${n}`, description: `${kind.pl}, model ${n}.` };
  const images = Array.from({ length: 1 + (n % 3) }, (_, i) => ({ url: `https://images.demo-supplier.test/products/${n}/${i + 1}.jpg` }));
  return {
    ref: `DEMO-${String(n).padStart(6, '0')}`,
    source: {
      eans: n % 13 === 0 ? [] : [ean13(n)],
      manufacturer,
      content,
      images,
      offers,
      own_stock: ownStock,
      supplier_attributes: [
        { supplier_ref: 'alpine-wholesale', key: 'weight', value: (0.2 + random() * 4).toFixed(2) },
        { supplier_ref: 'alpine-wholesale', key: 'material', value: kind.material },
        ...(n % 2 === 0 ? [{ supplier_ref: 'baltic-outdoor', key: 'weight', value: (0.2 + random() * 4).toFixed(2) }] : []),
        ...(n % 2 === 0 ? [{ supplier_ref: 'baltic-outdoor', key: 'color', value: color.en }] : []),
      ],
      overrides: n % 4 === 0 ? { color: color.en } : {},
      excluded_stores: n % 23 === 0 ? ['uk'] : [],
    },
  };
}

/** Builds the demo merchant with `products` products and issues an API key for it. */
export async function buildDemoCatalog(admin: CatalogAdmin, products: number, onProgress?: (done: number) => void): Promise<DemoResult> {
  const merchant = await admin.createMerchant({
    name: 'Demo Outdoor GmbH',
    sku_pattern: 'DEMO-{id}',
    owner_emails: ['owner@demo-outdoor.test'],
  });
  const id = merchant.id;
  await admin.upsertStore(id, 'de', {
    name: 'Demo Outdoor Deutschland',
    locale: 'de-DE',
    currency: 'EUR',
    is_default: true,
    active: true,
    exclude_out_of_stock: true,
  });
  await admin.upsertStore(id, 'pl', {
    name: 'Demo Outdoor Polska',
    locale: 'pl-PL',
    currency: 'PLN',
    is_default: false,
    active: true,
    exclude_out_of_stock: false,
  });
  await admin.upsertStore(id, 'uk', {
    name: 'Demo Outdoor UK',
    locale: 'en-GB',
    currency: 'GBP',
    is_default: false,
    active: true,
    exclude_out_of_stock: false,
  });
  const retail = await admin.createCustomerGroup(id, 'retail');
  const wholesale = await admin.createCustomerGroup(id, 'wholesale');
  await admin.upsertExchangeRate(id, { base: 'EUR', quote: 'PLN', rate: '4.2715' });
  await admin.upsertExchangeRate(id, { base: 'EUR', quote: 'GBP', rate: '0.8571' });
  await admin.upsertExchangeRate(id, { base: 'USD', quote: 'EUR', rate: '0.9240' });
  await admin.upsertExchangeRate(id, { base: 'USD', quote: 'PLN', rate: '3.9470' });
  await admin.upsertExchangeRate(id, { base: 'USD', quote: 'GBP', rate: '0.7920' });
  await admin.upsertSupplier(id, 'alpine-wholesale', 'Alpine Wholesale AG');
  await admin.upsertSupplier(id, 'baltic-outdoor', 'Baltic Outdoor Sp. z o.o.');
  await admin.upsertSupplier(id, 'pacific-imports', 'Pacific Imports Inc.');
  await admin.upsertAttributeDefinition(id, { key: 'weight', unit: 'kg', labels: { de: 'Gewicht', pl: 'Waga', en: 'Weight' } });
  await admin.upsertAttributeDefinition(id, { key: 'color', unit: null, labels: { de: 'Farbe', pl: 'Kolor', en: 'Colour' } });
  await admin.upsertAttributeDefinition(id, { key: 'material', unit: null, labels: { de: 'Material', pl: 'Materiał', en: 'Material' } });
  const rule = { store_id: null, manufacturer: null, min_cost: null, max_cost: null, markup_amount: '0' };
  await admin.createPricingRule(id, { ...rule, priority: 10, customer_group_id: wholesale.id, markup_percent: '12', price_ending: null });
  await admin.createPricingRule(id, {
    ...rule,
    priority: 20,
    customer_group_id: retail.id,
    manufacturer: 'Alpenwerk',
    markup_percent: '45',
    price_ending: 99,
  });
  await admin.createPricingRule(id, { ...rule, priority: 30, customer_group_id: retail.id, markup_percent: '35', price_ending: 99 });
  const chunk = 1000;
  for (let start = 1; start <= products; start += chunk) {
    const batch = [];
    for (let n = start; n < Math.min(products + 1, start + chunk); n++) batch.push({ op: 'upsert_product' as const, ...demoProduct(n) });
    await admin.applyProductBatch(id, batch);
    onProgress?.(Math.min(products, start + chunk - 1));
  }
  const key = await admin.createApiKey(id, 'demo');
  return { merchant_id: id, api_key: key.key, stores: ['de', 'pl', 'uk'], products };
}
