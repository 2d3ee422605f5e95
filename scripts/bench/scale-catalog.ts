// The catalogs of `npm run bench:scale`, built through the admin API of a `serve` started for the
// build alone (workers off, so nothing is mirrored or delivered before the measured start), and the
// history the service would have accumulated over months, seeded straight into the database while
// no service runs (old changes for retention to prune; an endpoint's log of past deliveries).
// Everything here talks to a version of the service only through its HTTP API, or to its database
// tables by name (as bench:changes and bench:postgres do): never through src/ imports, so it drives
// a baseline checkout as well as the working tree.
import Database from 'better-sqlite3';
import pg from 'pg';

/** JSON over the admin API with the bench's admin token; throws on any non-2xx. */
export class AdminClient {
  constructor(
    readonly base: string,
    private readonly token: string,
  ) {}

  async call<T = any>(method: string, path: string, body?: unknown, contentType = 'application/json'): Promise<T> {
    const response = await fetch(`${this.base}/admin/v1${path}`, {
      method,
      headers: { Authorization: `Bearer ${this.token}`, ...(body === undefined ? {} : { 'Content-Type': contentType }) },
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
      signal: AbortSignal.timeout(30 * 60_000),
    });
    const text = await response.text();
    if (!response.ok) throw new Error(`${method} /admin/v1${path}: ${response.status} ${text.slice(0, 800)}`);
    return (text ? JSON.parse(text) : null) as T;
  }
}

const money = (value: number) => value.toFixed(2);

function ean13(n: number): string {
  const body = `41${String(n).padStart(10, '0')}`;
  const sum = [...body].reduce((s, d, i) => s + Number(d) * (i % 2 ? 3 : 1), 0);
  return `${body}${(10 - (sum % 10)) % 10}`;
}

/**
 * The demo's image host (src/admin/demo.ts): a name reserved for tests (RFC 6761) that the
 * service's outbound guard refuses before any DNS query, so every fetch of it fails at once
 * (`blocked_address`) and nothing leaves the machine: a supplier host that is dead for good.
 */
export const DEAD_IMAGE_HOST = 'https://images.demo-supplier.test';

export interface ImageHosts {
  /** http://127.0.0.1:PORT of the fast origin: the catalog's live origin. */
  origin: string;
  /** http://127.0.0.1:PORT of the origin that never answers. */
  hang: string;
  /** http://127.0.0.1:PORT of a second fast origin (a host of its own): the dead-origin phase's 200 products. */
  fresh: string;
  /** The dead host (DEAD_IMAGE_HOST). */
  dead: string;
}

/**
 * Where a product's images are: `dead` all on the dead host (as the demo's catalog); `live` the
 * first on the dead host, the others on the live origin; `fresh` all on the fresh origin; `origin`
 * all on the live origin (bench:cost).
 */
export type ImagePlace = 'dead' | 'live' | 'fresh' | 'origin';

/**
 * Which products of the main catalog have a share on the live origin and which have a hanging
 * image: the build, the storm's re-import of the same refs and the import phase use it alike.
 */
export interface CatalogLayout {
  products: number;
  /** Products 1..liveProducts are `live`, the others `dead`. */
  liveProducts: number;
  /** Products whose last image is on the hanging host, spread over the catalog. */
  hanging: number;
  /** False: no dead host, every image on the live origin (a reference for what the dead host costs). */
  deadHost: boolean;
}

/** Live-origin images of products 1..n (product n has 2 + n % 4 images, the first on the dead host). */
export const liveImagesUpTo = (n: number) => {
  let images = 0;
  for (let i = 1; i <= n; i++) images += 1 + (i % 4);
  return images;
};

/** The fewest first products whose live-origin images are at least `images` (at most `products`). */
export function liveProductsFor(images: number, products: number): number {
  let n = 0;
  for (let count = 0; count < images && n < products; ) count += 1 + (++n % 4);
  return n;
}

/** Product n's options in the main catalog's layout. */
export function layoutOf(layout: CatalogLayout, n: number): { images: ImagePlace; hanging: boolean } {
  const hangingEvery = Math.max(1, Math.floor(layout.products / Math.max(1, layout.hanging)));
  return {
    images: !layout.deadHost ? 'origin' : n <= layout.liveProducts ? 'live' : 'dead',
    hanging: layout.hanging > 0 && n % hangingEvery === 0 && n / hangingEvery <= layout.hanging,
  };
}

/**
 * Product `n` of the main merchant (3 stores de/pl/uk, suppliers alpine/baltic/pacific): 2 to 5
 * images, where `images` says (default: all on the live origin), except that a `hanging` product's
 * last image is on the hanging host. `variant` changes every cost (a re-import of the same refs then
 * changes their prices).
 */
export function mainProductLine(
  n: number,
  hosts: ImageHosts,
  options: { tag: string; variant?: number; hanging?: boolean; images?: ImagePlace },
): string {
  const variant = options.variant ?? 0;
  const cost = 10 + ((n * 7919) % 20000) / 100 + variant * 0.37;
  const offers: { supplier_ref: string; quantity: number; cost: string; currency: string }[] = [
    { supplier_ref: 'alpine-wholesale', quantity: 1 + (n % 40), cost: money(cost), currency: 'EUR' },
  ];
  if (n % 2 === 0) offers.push({ supplier_ref: 'baltic-outdoor', quantity: n % 25, cost: money(cost * 0.98), currency: 'EUR' });
  if (n % 3 === 0) offers.push({ supplier_ref: 'pacific-imports', quantity: 5, cost: money(cost * 1.05), currency: 'USD' });
  const count = 2 + (n % 4);
  const place = options.images ?? 'origin';
  const hostOf = (i: number) =>
    place === 'fresh' ? hosts.fresh : place === 'dead' || (place === 'live' && i === 0) ? hosts.dead : hosts.origin;
  const images = Array.from({ length: count }, (_, i) => ({ url: `${hostOf(i)}/p/${options.tag}/${n}/${i + 1}.jpg` }));
  if (options.hanging) images[count - 1] = { url: `${hosts.hang}/slow/${options.tag}/${n}.jpg` };
  return JSON.stringify({
    op: 'upsert_product',
    product: {
      ref: `${options.tag.toUpperCase()}-${String(n).padStart(7, '0')}`,
      eans: n % 13 === 0 ? [] : [ean13(n)],
      manufacturer: ['Alpenwerk', 'Nordkamm', 'Tatra Gear', 'Fjellsport'][n % 4],
      content: {
        de: { title: `Nordkamm Zelt ${n}`, description: `Zelt aus Nylon, Modell ${n}.` },
        en: { title: `Nordkamm Tent ${n}`, description: `Tent made of nylon, model ${n}.` },
        ...(n % 5 === 0 ? {} : { pl: { title: `Nordkamm Namiot ${n}`, description: `Namiot, model ${n}.` } }),
      },
      images,
      offers,
      own_stock: n % 9 === 0 ? { quantity: 1 + (n % 7), cost: money(cost * 0.9), currency: 'EUR' } : null,
      supplier_attributes: [{ supplier_ref: 'alpine-wholesale', key: 'weight', value: (1 + (n % 30) / 10).toFixed(2) }],
      overrides: n % 4 === 0 ? { color: 'Red' } : {},
      excluded_stores: n % 23 === 0 ? ['uk'] : [],
    },
  });
}

/** Product `n` of a tenant (one EUR store, one supplier): 2 to 5 images on the one origin. */
export function tenantProductLine(merchant: number, n: number, hosts: ImageHosts): string {
  const cost = 5 + ((n * 104729 + merchant) % 30000) / 100;
  const count = 2 + ((n + merchant) % 4);
  return JSON.stringify({
    op: 'upsert_product',
    product: {
      ref: `T${merchant}-${n}`,
      eans: [ean13(merchant * 100_000 + n)],
      manufacturer: 'Tenant Goods',
      content: { de: { title: `Artikel ${n} von Händler ${merchant}`, description: `Beschreibung ${n}.` } },
      images: Array.from({ length: count }, (_, i) => ({ url: `${hosts.origin}/t/${merchant}/${n}/${i + 1}.jpg` })),
      offers: [{ supplier_ref: 'main-supplier', quantity: 1 + (n % 30), cost: money(cost), currency: 'EUR' }],
      supplier_attributes: [],
      overrides: {},
      excluded_stores: [],
    },
  });
}

/** Lines first..last (inclusive) as one NDJSON body. */
export function ndjson(first: number, last: number, line: (n: number) => string): string {
  const lines: string[] = [];
  for (let n = first; n <= last; n++) lines.push(line(n));
  return `${lines.join('\n')}\n`;
}

export interface MainCatalog {
  merchantId: number;
  /** One API key per reader loop, plus one spare. */
  apiKeys: string[];
  endpoints: { id: number; url: string; store: string | null }[];
  /** The merchant whose store's old history retention prunes (no products). */
  archive: { merchantId: number; storeId: number };
  /** Products per import request of the build. */
  importChunk: number;
}

/** The main merchant as the demo sets one up (3 stores, 2 groups, rates, 3 suppliers, rules), then its products. */
export async function buildMainCatalog(
  admin: AdminClient,
  options: {
    products: number;
    hosts: ImageHosts;
    endpoints: number;
    receiver: string;
    readers: number;
    layout: CatalogLayout;
    log: (line: string) => void;
  },
): Promise<MainCatalog> {
  const merchant = await admin.call('POST', '/merchants', {
    name: 'Scale Outdoor GmbH',
    sku_pattern: 'SC-{id}',
    owner_emails: ['owner@scale-outdoor.test'],
  });
  const m = `/merchants/${merchant.id}`;
  await admin.call('PUT', `${m}/stores/de`, {
    name: 'Scale DE',
    locale: 'de-DE',
    currency: 'EUR',
    is_default: true,
    active: true,
    exclude_out_of_stock: true,
  });
  await admin.call('PUT', `${m}/stores/pl`, {
    name: 'Scale PL',
    locale: 'pl-PL',
    currency: 'PLN',
    is_default: false,
    active: true,
    exclude_out_of_stock: false,
  });
  await admin.call('PUT', `${m}/stores/uk`, {
    name: 'Scale UK',
    locale: 'en-GB',
    currency: 'GBP',
    is_default: false,
    active: true,
    exclude_out_of_stock: false,
  });
  const retail = await admin.call('POST', `${m}/customer-groups`, { name: 'retail' });
  const wholesale = await admin.call('POST', `${m}/customer-groups`, { name: 'wholesale' });
  for (const [base, quote, rate] of [
    ['EUR', 'PLN', '4.2715'],
    ['EUR', 'GBP', '0.8571'],
    ['USD', 'EUR', '0.9240'],
    ['USD', 'PLN', '3.9470'],
    ['USD', 'GBP', '0.7920'],
  ]) {
    await admin.call('PUT', `${m}/exchange-rates/${base}/${quote}`, { rate });
  }
  for (const [ref, name] of [
    ['alpine-wholesale', 'Alpine Wholesale AG'],
    ['baltic-outdoor', 'Baltic Outdoor'],
    ['pacific-imports', 'Pacific Imports Inc.'],
  ]) {
    await admin.call('PUT', `${m}/suppliers/${ref}`, { name });
  }
  await admin.call('PUT', `${m}/attributes/weight`, { unit: 'kg', labels: { de: 'Gewicht', pl: 'Waga', en: 'Weight' } });
  await admin.call('PUT', `${m}/attributes/color`, { unit: null, labels: { de: 'Farbe', pl: 'Kolor', en: 'Colour' } });
  const rule = { store_id: null, manufacturer: null, min_cost: null, max_cost: null, markup_amount: '0' };
  await admin.call('POST', `${m}/pricing-rules`, {
    ...rule,
    priority: 10,
    customer_group_id: wholesale.id,
    markup_percent: '12',
    price_ending: null,
  });
  await admin.call('POST', `${m}/pricing-rules`, {
    ...rule,
    priority: 20,
    customer_group_id: retail.id,
    manufacturer: 'Alpenwerk',
    markup_percent: '45',
    price_ending: 99,
  });
  await admin.call('POST', `${m}/pricing-rules`, {
    ...rule,
    priority: 30,
    customer_group_id: retail.id,
    markup_percent: '35',
    price_ending: 99,
  });

  const importChunk = 20_000;
  const started = performance.now();
  for (let first = 1; first <= options.products; first += importChunk) {
    const last = Math.min(options.products, first + importChunk - 1);
    const body = ndjson(first, last, (n) => mainProductLine(n, options.hosts, { tag: 'scale', ...layoutOf(options.layout, n) }));
    const result = await admin.call('POST', `${m}/imports`, body, 'application/x-ndjson');
    if (result.upserted !== last - first + 1) throw new Error(`import ${first}..${last}: upserted ${result.upserted}`);
    const seconds = (performance.now() - started) / 1000;
    if (last === options.products || (last / importChunk) % 5 === 0)
      options.log(`  main catalog: ${last}/${options.products} products (${(last / seconds).toFixed(0)}/s)`);
  }
  // Endpoints after the products: the measured start has no delivery backlog of the build, only
  // what the workers then cause (every mirrored image is a content change).
  const endpoints: MainCatalog['endpoints'] = [];
  for (let i = 1; i <= options.endpoints; i++) {
    // Every 4th endpoint is for one store; the others get every store's changes.
    const store = i % 4 === 0 ? (['de', 'pl', 'uk'] as const)[(i / 4) % 3]! : null;
    const url = `${options.receiver}/main/${i}`;
    const created = await admin.call('POST', `${m}/webhook-endpoints`, { url, store });
    endpoints.push({ id: created.id, url, store });
  }
  const apiKeys: string[] = [];
  for (let i = 0; i <= options.readers; i++) apiKeys.push((await admin.call('POST', `${m}/api-keys`, { name: `reader-${i}` })).key);
  const archiveMerchant = await admin.call('POST', '/merchants', { name: 'Scale Archive', owner_emails: [] });
  const archiveStore = await admin.call('PUT', `/merchants/${archiveMerchant.id}/stores/main`, {
    name: 'Archive',
    locale: 'de-DE',
    currency: 'EUR',
    is_default: true,
    active: true,
  });
  return {
    merchantId: merchant.id,
    apiKeys,
    endpoints,
    archive: { merchantId: archiveMerchant.id, storeId: archiveStore.id },
    importChunk,
  };
}

export interface Tenant {
  merchantId: number;
  apiKey: string;
  endpointId: number;
}

/** `merchants` merchants of `products` products each: one store, one supplier, an endpoint (before the products: a delivery backlog), a key. */
export async function buildTenants(
  admin: AdminClient,
  options: { merchants: number; products: number; hosts: ImageHosts; receiver: string; log: (line: string) => void },
): Promise<Tenant[]> {
  const tenants: Tenant[] = new Array(options.merchants);
  let next = 0;
  let done = 0;
  const started = performance.now();
  const one = async (index: number) => {
    const merchant = await admin.call('POST', '/merchants', {
      name: `Tenant ${index + 1}`,
      owner_emails: [`owner${index + 1}@tenants.test`],
    });
    const m = `/merchants/${merchant.id}`;
    await admin.call('PUT', `${m}/stores/main`, {
      name: `Tenant ${index + 1}`,
      locale: 'de-DE',
      currency: 'EUR',
      is_default: true,
      active: true,
    });
    await admin.call('POST', `${m}/customer-groups`, { name: 'retail' });
    await admin.call('PUT', `${m}/suppliers/main-supplier`, { name: 'Main Supplier' });
    const endpoint = await admin.call('POST', `${m}/webhook-endpoints`, { url: `${options.receiver}/tenant/${merchant.id}` });
    const key = await admin.call('POST', `${m}/api-keys`, { name: 'reader' });
    const result = await admin.call(
      'POST',
      `${m}/imports`,
      ndjson(1, options.products, (n) => tenantProductLine(merchant.id, n, options.hosts)),
      'application/x-ndjson',
    );
    if (result.upserted !== options.products) throw new Error(`tenant ${merchant.id}: upserted ${result.upserted}`);
    tenants[index] = { merchantId: merchant.id, apiKey: key.key, endpointId: endpoint.id };
    done++;
    if (done === options.merchants || done % 100 === 0) {
      options.log(
        `  tenants: ${done}/${options.merchants} merchants (${((done * options.products) / ((performance.now() - started) / 1000)).toFixed(0)} products/s)`,
      );
    }
  };
  // A few at once: the builder's writes queue anyway; this keeps its loop busy between requests.
  await Promise.all(
    Array.from({ length: 3 }, async () => {
      while (next < options.merchants) await one(next++);
    }),
  );
  return tenants;
}

const wholeSecondIso = (ms: number) => new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');

/** Where a version's catalog lives: an SQLite file, or a PostgreSQL database URL. */
export type DatabaseRef = { engine: 'sqlite'; path: string } | { engine: 'postgres'; url: string };

/**
 * Runs `onSqlite` on the SQLite file (waiting up to 30 s for its lock) or `onPostgres` on a client
 * of the database, and closes what it opened.
 */
async function onDatabase(
  db: DatabaseRef,
  onSqlite: (sqlite: Database.Database) => void,
  onPostgres: (client: pg.Client) => Promise<void>,
): Promise<void> {
  if (db.engine === 'sqlite') {
    const sqlite = new Database(db.path);
    try {
      sqlite.pragma('busy_timeout = 30000');
      onSqlite(sqlite);
    } finally {
      sqlite.close();
    }
    return;
  }
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  try {
    await onPostgres(client);
  } finally {
    await client.end();
  }
}

/**
 * `count` changes of the archive store, `ageDays` old and older (500 per second of history), ids
 * after the merchant's sequence, which goes on from them (as bench:changes builds a history).
 */
export async function seedOldChanges(
  db: DatabaseRef,
  archive: { merchantId: number; storeId: number },
  count: number,
  ageDays: number,
): Promise<void> {
  const start = Date.now() - ageDays * 86_400_000 - Math.ceil(count / 500) * 1000;
  const lastAt = wholeSecondIso(start + Math.floor((count - 1) / 500) * 1000);
  await onDatabase(
    db,
    (sqlite) => {
      const first =
        ((sqlite.prepare('SELECT last_id FROM change_sequences WHERE merchant_id = ?').pluck().get(archive.merchantId) as
          | number
          | undefined) ?? 0) + 1;
      const insert = sqlite.prepare(
        'INSERT INTO changes (merchant_id, id, store_id, product_id, change_type, created_at) VALUES (?, ?, ?, ?, ?, ?)',
      );
      const types = ['price', 'content', 'removed'];
      sqlite.transaction(() => {
        for (let i = 0; i < count; i++)
          insert.run(
            archive.merchantId,
            first + i,
            archive.storeId,
            1 + (i % 50_000),
            types[i % 3],
            wholeSecondIso(start + Math.floor(i / 500) * 1000),
          );
        sqlite
          .prepare(`INSERT INTO change_sequences (merchant_id, last_id, last_at) VALUES (?, ?, ?)
          ON CONFLICT (merchant_id) DO UPDATE SET last_id = excluded.last_id, last_at = excluded.last_at`)
          .run(archive.merchantId, first + count - 1, lastAt);
      })();
    },
    async (client) => {
      const row = await client.query<{ last_id: string }>('SELECT last_id FROM change_sequences WHERE merchant_id = $1', [
        archive.merchantId,
      ]);
      const first = Number(row.rows[0]?.last_id ?? 0) + 1;
      await client.query('BEGIN');
      await client.query(
        `INSERT INTO changes (merchant_id, id, store_id, product_id, change_type, created_at)
      SELECT $1, $2 + i, $3, 1 + i % 50000, (ARRAY['price', 'content', 'removed'])[1 + i % 3],
        to_char(to_timestamp($4::bigint / 1000 + i / 500) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
      FROM generate_series(0, $5::bigint - 1) AS i`,
        [archive.merchantId, first, archive.storeId, start, count],
      );
      await client.query(
        `INSERT INTO change_sequences (merchant_id, last_id, last_at) VALUES ($1, $2, $3)
      ON CONFLICT (merchant_id) DO UPDATE SET last_id = excluded.last_id, last_at = excluded.last_at`,
        [archive.merchantId, first + count - 1, lastAt],
      );
      await client.query('COMMIT');
      await client.query('VACUUM (ANALYZE) changes');
    },
  );
}

/**
 * `count` finished deliveries of one endpoint over the past days (90 % succeeded, 6 % given up,
 * 4 % dropped), each with its attempt: the delivery log the panel's endpoint page pages through, and
 * (counted per hour by the attempt log's trigger, migration 36) the week its success-rate charts show.
 */
export async function seedDeliveryLog(db: DatabaseRef, endpointId: number, count: number): Promise<void> {
  const from = Date.now() - 7 * 86_400_000;
  await onDatabase(
    db,
    (sqlite) => {
      const before = sqlite.prepare('SELECT coalesce(max(id), 0) FROM webhook_deliveries').pluck().get() as number;
      const insert =
        sqlite.prepare(`INSERT INTO webhook_deliveries (endpoint_id, event, store_id, product_ids, occurred_at, status, attempts, next_attempt_at, created_at)
        VALUES (?, ?, NULL, ?, ?, ?, ?, NULL, ?)`);
      const attempt = sqlite.prepare(`INSERT INTO webhook_attempts (delivery_id, at, status_code, error, latency_ms, response_snippet)
        SELECT id, created_at, CASE status WHEN 'succeeded' THEN 200 ELSE 503 END, CASE status WHEN 'succeeded' THEN NULL ELSE 'http_status' END, 12, CASE status WHEN 'succeeded' THEN 'ok' ELSE 'unavailable' END
        FROM webhook_deliveries WHERE id > ? AND status <> 'dropped'`);
      sqlite.transaction(() => {
        for (let i = 0; i < count; i++) {
          const at = wholeSecondIso(from + Math.floor((i * 7 * 86_400_000) / count));
          const status = i % 50 < 3 ? 'given_up' : i % 50 < 5 ? 'dropped' : 'succeeded';
          insert.run(
            endpointId,
            ['price', 'content', 'removed'][i % 3],
            `[${1 + (i % 1000)}]`,
            at,
            status,
            status === 'given_up' ? 6 : status === 'dropped' ? 0 : 1,
            at,
          );
        }
        attempt.run(before);
      })();
    },
    async (client) => {
      await client.query('BEGIN');
      const before = Number((await client.query<{ id: string }>('SELECT coalesce(max(id), 0) AS id FROM webhook_deliveries')).rows[0]!.id);
      await client.query(
        `INSERT INTO webhook_deliveries (endpoint_id, event, store_id, product_ids, occurred_at, status, attempts, next_attempt_at, created_at)
      SELECT $1, (ARRAY['price', 'content', 'removed'])[1 + i % 3], NULL, '[' || (1 + i % 1000) || ']', at,
        CASE WHEN i % 50 < 3 THEN 'given_up' WHEN i % 50 < 5 THEN 'dropped' ELSE 'succeeded' END,
        CASE WHEN i % 50 < 3 THEN 6 WHEN i % 50 < 5 THEN 0 ELSE 1 END, NULL, at
      FROM (SELECT i, to_char(to_timestamp($2::bigint / 1000 + (i::bigint * 604800) / $3) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS at
            FROM generate_series(0, $3::bigint - 1) AS i) AS s ORDER BY i`,
        [endpointId, from, count],
      );
      await client.query(
        `INSERT INTO webhook_attempts (delivery_id, at, status_code, error, latency_ms, response_snippet)
      SELECT id, created_at, CASE status WHEN 'succeeded' THEN 200 ELSE 503 END, CASE status WHEN 'succeeded' THEN NULL ELSE 'http_status' END, 12, CASE status WHEN 'succeeded' THEN 'ok' ELSE 'unavailable' END
      FROM webhook_deliveries WHERE id > $1 AND status <> 'dropped'`,
        [before],
      );
      await client.query('COMMIT');
      await client.query('VACUUM (ANALYZE) webhook_deliveries');
    },
  );
}
