// The fuzzer's world: two merchants seeded over the admin API with recognizable data, the pools
// their ids and refs are drawn from, and the tenancy checks. Merchant A ("Aardvark") is the one the
// fuzzer works on and writes to; merchant B ("Zebra") is only ever read, through its own key and
// paths, and probed through A's key and paths with its ids and refs: at the end B must be exactly
// as seeded, and no response in A's scope may hold anything of B (nor the other way round).
import { createHash } from 'node:crypto';
import { LocalFolderMediaStore } from '../../src/images/media-store.js';
import type { TestResponse, TestService } from '../support/service.js';
import { SchemaArbitraries, type Json } from './schema-arbitrary.js';

/** The kinds of record a tenancy check tracks by id. */
export type Kind = 'merchant' | 'product' | 'store' | 'group' | 'rule' | 'supplier' | 'endpoint' | 'delivery' | 'apiKey';
const KINDS: Kind[] = ['merchant', 'product', 'store', 'group', 'rule', 'supplier', 'endpoint', 'delivery', 'apiKey'];

/** Which members of which component schemas hold ids of which kind (the ownership map of the documents). */
export const OWNED_MEMBERS: Record<string, Record<string, Kind>> = {
  Merchant: { id: 'merchant' },
  Product: { id: 'product' },
  ProductPrices: { id: 'product' },
  PriceEntry: { customer_group_id: 'group', applied_rule_id: 'rule' },
  Store: { id: 'store' },
  AdminStore: { id: 'store' },
  ChangeEntry: { product_id: 'product' },
  ProductSource: { id: 'product' },
  CustomerGroup: { id: 'group' },
  PricingRule: { id: 'rule', customer_group_id: 'group', store_id: 'store' },
  Supplier: { id: 'supplier' },
  WebhookEndpoint: { id: 'endpoint' },
  CreatedWebhookEndpoint: { id: 'endpoint' },
  Delivery: { id: 'delivery', endpoint_id: 'endpoint', store_id: 'store', product_ids: 'product' },
  DeliveryDetail: { id: 'delivery', endpoint_id: 'endpoint', store_id: 'store', product_ids: 'product' },
  Notification: { endpoint_id: 'endpoint' },
  ApiKey: { id: 'apiKey' },
  CreatedApiKey: { id: 'apiKey' },
};

/** Values requests draw from: what a merchant has now (refreshed as the fuzzer changes it). */
export interface Pools {
  productIds: number[];
  productRefs: string[];
  storeIds: number[];
  storeSlugs: string[];
  groupIds: number[];
  ruleIds: number[];
  supplierRefs: string[];
  attributeKeys: string[];
  currencies: string[];
  endpointIds: number[];
  deliveryIds: number[];
  apiKeyIds: number[];
}
export type PoolName = keyof Pools;

export interface SeededMerchant {
  label: 'A' | 'B';
  animal: string;
  id: number;
  base: string;
  /** The key the fuzzer reads with; never revoked. */
  key: string;
  keyId: number;
  revokedKey: string;
  /** Ids this merchant held when seeded: never another merchant's, before or after. */
  ids: Record<Kind, Set<number>>;
  /** Texts that only this merchant's data holds (names, titles, e-mail and webhook hosts). */
  markers: string[];
  /** Credentials shown once: no response may ever hold them again. */
  secrets: string[];
  pools: Pools;
  /** The endpoint of each delivery in the pools. */
  deliveryEndpoints: Map<number, number>;
}

export interface World {
  a: SeededMerchant;
  b: SeededMerchant;
  /** Merchants the fuzzer created; requests address them too (their responses may hold nothing of A or B). */
  others: number[];
  mediaKeys: string[];
  /** ETags seen per request path and query, for If-None-Match. */
  etags: Map<string, string>;
}

class Seeder {
  constructor(private readonly service: TestService) {}

  async call(method: string, path: string, body?: unknown, expected?: number): Promise<any> {
    const response: TestResponse = await this.service.adminApi(method, path, body);
    const wanted = expected ?? (method === 'DELETE' ? 204 : method === 'POST' ? 201 : 200);
    if (response.status !== wanted) throw new Error(`seeding ${method} ${path}: ${response.status} ${response.text}`);
    return response.body;
  }
}

const emptyIds = (): Record<Kind, Set<number>> => Object.fromEntries(KINDS.map((k) => [k, new Set<number>()])) as Record<Kind, Set<number>>;

/** The seeded definition of a merchant's catalog; `restore` re-applies it after the fuzzer's deletions. */
function catalogOf(animal: string) {
  const lower = animal.toLowerCase();
  const prefix = animal.slice(0, 2).toUpperCase();
  return {
    merchant: { name: `${animal} Outfitters`, sku_pattern: `${prefix}-{ref}`, owner_emails: [`owner@${lower}.example`] },
    stores: {
      de: { name: `${animal} Deutschland`, locale: 'de-DE', currency: 'EUR', is_default: true, active: true, exclude_out_of_stock: false },
      pl: { name: `${animal} Polska`, locale: 'pl-PL', currency: 'PLN', is_default: false, active: true, exclude_out_of_stock: true },
      [`${lower}-outlet`]: {
        name: `${animal} Outlet`,
        locale: 'en-GB',
        currency: 'GBP',
        is_default: false,
        active: false,
        exclude_out_of_stock: false,
      },
    } as Record<string, Json>,
    groups: ['retail', `${animal} VIP`],
    rates: [
      ['EUR', 'PLN', '4.25'],
      ['USD', 'EUR', '0.9'],
      ['EUR', 'GBP', '0.85'],
    ],
    suppliers: { alpine: `${animal} Alpine Supplies`, [`${lower}-direct`]: `${animal} Direct` } as Record<string, string>,
    attributes: { weight: { unit: 'kg', labels: { de: 'Gewicht' } }, [`${lower}_color`]: { labels: { de: `${animal}farbe` } } } as Record<
      string,
      Json
    >,
    products: Array.from({ length: 5 }, (_, i) => ({
      ref: `${prefix}-${i + 1}`,
      source: {
        eans: [`40063813339${30 + i}`],
        manufacturer: `${animal} Works`,
        content: {
          de: { title: `${animal} Zelt ${i + 1}`, description: `${animal} description ${i + 1}` },
          pl: { title: `${animal} Namiot ${i + 1}` },
        },
        images: [{ url: `https://img.${lower}.example/${prefix}-${i + 1}.jpg` }],
        offers: [
          { supplier_ref: 'alpine', quantity: i, cost: `${10 + i}.50`, currency: 'EUR' },
          { supplier_ref: `${lower}-direct`, quantity: 3, cost: `${12 + i}.00`, currency: 'USD' },
        ],
        own_stock: i % 2 ? { quantity: 2, cost: '9.00', currency: 'EUR' } : null,
        supplier_attributes: [{ supplier_ref: 'alpine', key: 'weight', value: `${i}.5` }],
        overrides: { [`${lower}_color`]: `${animal} grey` },
        excluded_stores: i === 4 ? ['pl'] : [],
      },
    })),
    endpoint: { url: `https://hooks.${lower}-outfitters.com/catalog`, store: null },
  };
}

async function seedMerchant(service: TestService, label: 'A' | 'B', animal: string): Promise<SeededMerchant> {
  const seed = new Seeder(service);
  const catalog = catalogOf(animal);
  const merchant = await seed.call('POST', '/admin/v1/merchants', catalog.merchant);
  const base = `/admin/v1/merchants/${merchant.id}`;
  const ids = emptyIds();
  ids.merchant.add(merchant.id);
  const main = await seed.call('POST', `${base}/api-keys`, { name: 'fuzz reader' });
  const spare = await seed.call('POST', `${base}/api-keys`, { name: 'spare' });
  const revoked = await seed.call('POST', `${base}/api-keys`, { name: 'revoked' });
  await seed.call('DELETE', `${base}/api-keys/${revoked.id}`);
  for (const key of [main, spare, revoked]) ids.apiKey.add(key.id);
  // The endpoint first, so every seeded change also lands in its outbox as deliveries.
  const endpoint = await seed.call('POST', `${base}/webhook-endpoints`, catalog.endpoint);
  ids.endpoint.add(endpoint.id);
  const merchantHandle: SeededMerchant = {
    label,
    animal,
    id: merchant.id,
    base,
    key: main.key,
    keyId: main.id,
    revokedKey: revoked.key,
    ids,
    markers: [`${animal} `, `${animal.toLowerCase()}.example`],
    secrets: [main.key, spare.key, revoked.key, endpoint.secret],
    pools: {
      productIds: [],
      productRefs: catalog.products.map((p) => p.ref),
      storeIds: [],
      storeSlugs: Object.keys(catalog.stores),
      groupIds: [],
      ruleIds: [],
      supplierRefs: Object.keys(catalog.suppliers),
      attributeKeys: Object.keys(catalog.attributes),
      currencies: ['EUR', 'PLN', 'USD', 'GBP'],
      endpointIds: [endpoint.id],
      deliveryIds: [],
      apiKeyIds: [spare.id, revoked.id],
    },
    deliveryEndpoints: new Map(),
  };
  await restore(service, merchantHandle, true);
  await seed.call('POST', `${base}/webhook-endpoints/${endpoint.id}/test`, undefined, 202);
  await refreshPools(service, merchantHandle, true);
  return merchantHandle;
}

/**
 * Puts back the seeded definition of a merchant (stores, groups, rates, suppliers, attributes,
 * rules, products, the endpoint) after the fuzzer deleted or changed parts of it.
 */
export async function restore(service: TestService, merchant: SeededMerchant, initial = false): Promise<void> {
  const seed = new Seeder(service);
  const catalog = catalogOf(merchant.animal);
  const { base } = merchant;
  if (!initial) await seed.call('PATCH', base, catalog.merchant);
  for (const [slug, store] of Object.entries(catalog.stores)) {
    const saved = await seed.call('PUT', `${base}/stores/${slug}`, store);
    if (initial) merchant.ids.store.add(saved.id);
  }
  const groups = (await seed.call('GET', `${base}/customer-groups`)).data as { id: number; name: string }[];
  for (const name of catalog.groups) {
    if (groups.some((g) => g.name === name)) continue;
    groups.push(await seed.call('POST', `${base}/customer-groups`, { name }));
  }
  for (const [from, to, rate] of catalog.rates) await seed.call('PUT', `${base}/exchange-rates/${from}/${to}`, { rate });
  for (const [ref, name] of Object.entries(catalog.suppliers)) {
    const saved = await seed.call('PUT', `${base}/suppliers/${ref}`, { name });
    if (initial) merchant.ids.supplier.add(saved.id);
  }
  for (const [key, definition] of Object.entries(catalog.attributes)) await seed.call('PUT', `${base}/attributes/${key}`, definition);
  const rules = (await seed.call('GET', `${base}/pricing-rules`)).data as { priority: number }[];
  const vip = groups.find((g) => g.name === `${merchant.animal} VIP`)!;
  if (!rules.some((r) => r.priority === 10)) {
    await seed.call('POST', `${base}/pricing-rules`, { priority: 10, customer_group_id: vip.id, markup_percent: '25', price_ending: 99 });
  }
  for (const product of catalog.products) await seed.call('PUT', `${base}/products/${product.ref}`, product.source);
  const endpoints = (await seed.call('GET', `${base}/webhook-endpoints`)).data as { id: number; url: string; status: string }[];
  const seeded = endpoints.find((e) => e.url === catalog.endpoint.url);
  if (!seeded) await seed.call('POST', `${base}/webhook-endpoints`, catalog.endpoint);
  else if (seeded.status !== 'active') await seed.call('PATCH', `${base}/webhook-endpoints/${seeded.id}`, { status: 'active' });
}

/** Reads a merchant's current ids and refs into its pools (and, when seeding, into its owned ids). */
export async function refreshPools(service: TestService, merchant: SeededMerchant, initial = false): Promise<void> {
  const seed = new Seeder(service);
  const { base, pools, ids } = merchant;
  const list = async (path: string) => (await seed.call('GET', `${base}${path}`)).data as Json[];
  const stores = await list('/stores');
  const groups = await list('/customer-groups');
  const rules = await list('/pricing-rules');
  const suppliers = await list('/suppliers');
  const attributes = await list('/attributes');
  const endpoints = await list('/webhook-endpoints');
  const keys = await list('/api-keys');
  const deliveries: Json[] = [];
  for (const endpoint of endpoints.slice(0, 3)) deliveries.push(...(await list(`/webhook-endpoints/${endpoint.id}/deliveries?limit=20`)));
  const products: Json[] = [];
  for (const ref of pools.productRefs.slice(0, 8)) {
    const response = await service.adminApi('GET', `${base}/products/${encodeURIComponent(ref)}`);
    if (response.status === 200) products.push(response.body);
  }
  // What exists now replaces what the pools held: a stale id would only ever answer 404.
  const merge = <T>(_current: T[], fresh: T[], cap = 12) => [...new Set(fresh)].slice(0, cap);
  pools.storeIds = merge(
    pools.storeIds,
    stores.map((s) => s.id),
  );
  pools.storeSlugs = merge(
    pools.storeSlugs,
    stores.map((s) => s.slug),
  );
  pools.groupIds = merge(
    pools.groupIds,
    groups.map((g) => g.id),
  );
  pools.ruleIds = merge(
    pools.ruleIds,
    rules.map((r) => r.id),
  );
  pools.supplierRefs = merge(
    pools.supplierRefs,
    suppliers.map((s) => s.ref),
  );
  pools.attributeKeys = merge(
    pools.attributeKeys,
    attributes.map((a) => a.key),
  );
  pools.endpointIds = merge(
    pools.endpointIds,
    endpoints.map((e) => e.id),
  );
  pools.deliveryIds = merge(
    pools.deliveryIds,
    deliveries.map((d) => d.id),
  );
  for (const delivery of deliveries) merchant.deliveryEndpoints.set(delivery.id, delivery.endpoint_id);
  pools.apiKeyIds = merge(
    pools.apiKeyIds,
    keys.map((k) => k.id).filter((id) => id !== merchant.keyId),
  );
  pools.productIds = merge(
    pools.productIds,
    products.map((p) => p.id),
  );
  if (!initial) return;
  for (const [kind, rows] of [
    ['store', stores],
    ['group', groups],
    ['rule', rules],
    ['supplier', suppliers],
    ['endpoint', endpoints],
    ['delivery', deliveries],
    ['apiKey', keys],
    ['product', products],
  ] as [Kind, Json[]][]) {
    for (const row of rows) ids[kind].add(row.id);
  }
}

/** Seeds A then B (so B's ids are above A's and, B never losing a row, never reused), and one media file. */
export async function seedWorld(service: TestService): Promise<World> {
  // A bystander first, owning product 1: a test delivery of a merchant without products names
  // product 1 (admin.yaml, sendTestWebhook), which must not count as A's or B's.
  const bystander = new Seeder(service);
  const { id } = await bystander.call('POST', '/admin/v1/merchants', { name: 'Bystander' });
  await bystander.call('PUT', `/admin/v1/merchants/${id}/products/PLACEHOLDER`, { content: { en: { title: 'Placeholder' } } });
  const a = await seedMerchant(service, 'A', 'Aardvark');
  const b = await seedMerchant(service, 'B', 'Zebra');
  const bytes = Buffer.from('GIF89a\x01\x00\x01\x00\x00\x00\x00;', 'latin1');
  const mediaKey = `${createHash('sha256').update(bytes).digest('hex')}.gif`;
  await new LocalFolderMediaStore(service.config.images.mediaDir).put(mediaKey, bytes);
  return { a, b, others: [id], mediaKeys: [mediaKey], etags: new Map() };
}

/** Everything of B a request could have changed, read over B's own paths and key. */
export async function snapshotOf(service: TestService, merchant: SeededMerchant): Promise<unknown> {
  const state: Record<string, unknown> = {};
  const read = async (label: string, response: Promise<TestResponse>) => {
    const { status, body } = await response;
    state[label] = { status, body };
  };
  // A key's last use is written by any request with B's key: the run's cross-tenant
  // attempts and this snapshot's own public reads. It is B's usage, not B's data.
  const withoutLastUse = (body: { data?: Record<string, unknown>[] }) =>
    Array.isArray(body?.data) ? { ...body, data: body.data.map(({ last_used_at: _used, ...key }) => key) } : body;
  for (const part of [
    '',
    '/api-keys',
    '/stores',
    '/customer-groups',
    '/exchange-rates',
    '/pricing-rules',
    '/suppliers',
    '/attributes',
    '/images',
    '/webhook-endpoints',
    '/notifications',
  ]) {
    const response = service.adminApi('GET', `${merchant.base}${part}`);
    await read(`admin ${part || '/'}`, part === '/api-keys' ? response.then((r) => ({ ...r, body: withoutLastUse(r.body) })) : response);
  }
  for (const id of merchant.ids.endpoint)
    await read(`deliveries ${id}`, service.adminApi('GET', `${merchant.base}/webhook-endpoints/${id}/deliveries?limit=200`));
  for (const ref of merchant.pools.productRefs) await read(`product ${ref}`, service.adminApi('GET', `${merchant.base}/products/${ref}`));
  await read('public stores', service.api('/v1/stores', merchant.key));
  for (const store of ['de', 'pl']) {
    await read(`public products ${store}`, service.api(`/v1/products?store=${store}&per_page=200`, merchant.key));
    await read(`public changes ${store}`, service.api(`/v1/changes?store=${store}`, merchant.key));
  }
  return state;
}

/**
 * The ids of each kind a JSON response holds, found by walking it along its schema: a member
 * counts when the component it belongs to maps it in OWNED_MEMBERS.
 */
export function idsInResponse(
  schemas: SchemaArbitraries,
  schema: Json,
  value: unknown,
  found: Array<[Kind, number]> = [],
  component?: string,
): Array<[Kind, number]> {
  const name = SchemaArbitraries.refName(schema) ?? component;
  const resolved = schemas.resolve(schema);
  if (Array.isArray(value)) {
    for (const item of value) idsInResponse(schemas, resolved.items ?? {}, item, found);
    return found;
  }
  if (!value || typeof value !== 'object') return found;
  const owned = (name && OWNED_MEMBERS[name]) || {};
  for (const [member, memberValue] of Object.entries(value as Json)) {
    const kind = owned[member];
    if (kind) {
      for (const id of Array.isArray(memberValue) ? memberValue : [memberValue]) if (typeof id === 'number') found.push([kind, id]);
    }
    const memberSchema =
      resolved.properties?.[member] ?? (typeof resolved.additionalProperties === 'object' ? resolved.additionalProperties : undefined);
    if (memberSchema) idsInResponse(schemas, memberSchema, memberValue, found);
  }
  return found;
}
