// Builds merchants' catalogs through the admin HTTP API (openapi/admin.yaml), so the endpoint
// tests exercise the whole path: admin request -> validation -> domain -> storage -> public read.
import { expect } from 'vitest';
import type { TestResponse, TestService } from './service.js';

/** Sends an admin request and fails the test unless it answers `status`. */
export async function adminOk(
  service: TestService,
  method: string,
  path: string,
  body?: unknown,
  status = method === 'DELETE' ? 204 : 200,
): Promise<any> {
  const response = await service.adminApi(method, path, body);
  expect(response.status, `${method} ${path}: ${response.text}`).toBe(status);
  return response.body;
}

/** An NDJSON import through the admin API. */
export function importNdjson(service: TestService, merchantId: number, lines: unknown[] | string): Promise<TestResponse> {
  const body = typeof lines === 'string' ? lines : `${lines.map((l) => JSON.stringify(l)).join('\n')}\n`;
  return service.adminApi('POST', `/admin/v1/merchants/${merchantId}/imports`, body, {
    headers: { 'Content-Type': 'application/x-ndjson' },
  });
}

export interface MerchantHandle {
  id: number;
  key: string;
  base: string;
}

/** Creates a merchant and an API key for it, both over the admin API. */
export async function createMerchant(service: TestService, name: string, extra: Record<string, unknown> = {}): Promise<MerchantHandle> {
  const merchant = await adminOk(service, 'POST', '/admin/v1/merchants', { name, ...extra }, 201);
  const key = await adminOk(service, 'POST', `/admin/v1/merchants/${merchant.id}/api-keys`, { name: 'integration' }, 201);
  return { id: merchant.id, key: key.key, base: `/admin/v1/merchants/${merchant.id}` };
}

/**
 * The outdoor catalog used across the endpoint tests, with hand-computed resolved values:
 * - stores: `de` (de-DE, EUR, default, excludes out-of-stock), `pl` (pl-PL, PLN), `jp` (ja-JP,
 *   JPY), `archive` (inactive);
 * - customer groups `retail` (40 %, ending 99) and `wholesale` (10 %), plus the catch-all rule;
 * - rates EUR->PLN 4.25, EUR->JPY 160, USD->EUR 0.9; suppliers `alpine` then `baltic`;
 * - `weight` (kg; Gewicht/Waga) and `color` (Farbe) attribute definitions.
 */
export async function buildOutdoorCatalog(service: TestService, name = 'Alpine Outfitters') {
  const merchant = await createMerchant(service, name, { sku_pattern: 'AO-{ref}' });
  const { base } = merchant;
  const store = (slug: string, body: Record<string, unknown>) => adminOk(service, 'PUT', `${base}/stores/${slug}`, body);
  const stores = {
    de: await store('de', { name: 'Alpine Deutschland', locale: 'de-DE', currency: 'EUR', exclude_out_of_stock: true }),
    pl: await store('pl', { name: 'Alpine Polska', locale: 'pl-PL', currency: 'PLN' }),
    jp: await store('jp', { name: 'Alpine Japan', locale: 'ja-JP', currency: 'JPY' }),
    archive: await store('archive', { name: 'Old shop', locale: 'en-GB', currency: 'GBP', active: false }),
  };
  const retail = await adminOk(service, 'POST', `${base}/customer-groups`, { name: 'retail' }, 201);
  const wholesale = await adminOk(service, 'POST', `${base}/customer-groups`, { name: 'wholesale' }, 201);
  await adminOk(service, 'PUT', `${base}/exchange-rates/EUR/PLN`, { rate: '4.25' });
  await adminOk(service, 'PUT', `${base}/exchange-rates/EUR/JPY`, { rate: '160' });
  await adminOk(service, 'PUT', `${base}/exchange-rates/USD/EUR`, { rate: '0.9' });
  await adminOk(service, 'PUT', `${base}/suppliers/alpine`, { name: 'Alpine Wholesale AG' });
  await adminOk(service, 'PUT', `${base}/suppliers/baltic`, { name: 'Baltic Outdoor' });
  await adminOk(service, 'PUT', `${base}/attributes/weight`, { unit: 'kg', labels: { de: 'Gewicht', pl: 'Waga' } });
  await adminOk(service, 'PUT', `${base}/attributes/color`, { labels: { de: 'Farbe' } });
  const wholesaleRule = await adminOk(
    service,
    'POST',
    `${base}/pricing-rules`,
    { priority: 10, customer_group_id: wholesale.id, markup_percent: '10' },
    201,
  );
  const retailRule = await adminOk(
    service,
    'POST',
    `${base}/pricing-rules`,
    { priority: 20, customer_group_id: retail.id, markup_percent: '40', price_ending: 99 },
    201,
  );
  const rules = (await adminOk(service, 'GET', `${base}/pricing-rules`)).data;
  const catchAll = rules.find((r: { is_catch_all: boolean }) => r.is_catch_all);

  // Backpack: best offer is baltic (cheaper and in stock); own stock 2 + baltic's 3 = 5.
  const backpack = await adminOk(service, 'PUT', `${base}/products/BP-40`, {
    eans: ['4006381333931', '4006381333948'],
    manufacturer: 'Alpenwerk',
    content: {
      de: { title: 'Wanderrucksack 40 l', description: 'Leicht und robust.' },
      pl: { title: 'Plecak turystyczny 40 l', description: 'Lekki i wytrzymały.' },
    },
    images: [{ url: 'https://img.example.test/bp-40/1.jpg' }, { url: 'https://img.example.test/bp-40/2.jpg' }],
    offers: [
      { supplier_ref: 'alpine', quantity: 5, cost: '20.00', currency: 'EUR' },
      { supplier_ref: 'baltic', quantity: 3, cost: '18.50', currency: 'EUR' },
    ],
    own_stock: { quantity: 2, cost: '17.00', currency: 'EUR' },
    supplier_attributes: [
      { supplier_ref: 'alpine', key: 'weight', value: '1.2' },
      { supplier_ref: 'baltic', key: 'weight', value: '1.1' },
      { supplier_ref: 'alpine', key: 'material', value: 'polyester' },
    ],
    overrides: { color: 'Grün' },
  });
  // Tent: one USD offer out of stock, converted to PLN and JPY through EUR; German title only.
  const tent = await adminOk(service, 'PUT', `${base}/products/TENT-2`, {
    manufacturer: 'Nordkamm',
    content: { de: { title: 'Zelt für zwei', description: null } },
    offers: [{ supplier_ref: 'alpine', quantity: 0, cost: '100.00', currency: 'USD' }],
  });
  // Lamp: no offers at all and manually excluded from pl.
  const lamp = await adminOk(service, 'PUT', `${base}/products/LAMP-1`, {
    content: { de: { title: 'Stirnlampe', description: null }, pl: { title: 'Latarka czołowa', description: null } },
    excluded_stores: ['pl'],
  });
  return {
    merchant,
    stores,
    groups: { retail, wholesale },
    rules: { wholesale: wholesaleRule, retail: retailRule, catchAll },
    products: { backpack, tent, lamp },
  };
}

export type OutdoorCatalog = Awaited<ReturnType<typeof buildOutdoorCatalog>>;

/** A minimal product upsert line for imports: a German title and one in-stock offer. */
export function simpleProduct(ref: string, cost = '10.00', supplier = 'alpine') {
  return {
    op: 'upsert_product',
    product: {
      ref,
      content: { de: { title: `Produkt ${ref}`, description: null } },
      offers: [{ supplier_ref: supplier, quantity: 4, cost, currency: 'EUR' }],
    },
  };
}
