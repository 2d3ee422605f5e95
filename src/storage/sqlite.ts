// The storage port on better-sqlite3: WAL, forward-only migrations at open, prepared statements.
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import type {
  AttributeDefinitionRecord, CustomerGroupRecord, ExchangeRateRecord, ImageMirrorRecord,
  PricingRuleRecord, ProductRecord, ProductSourceDocument, StoreRecord, SupplierRecord,
} from '../catalog/model.js';
import { migrations } from './migrations.js';
import type {
  ImageMirrorWork, OperationalCounts, PublishedPage,
  AttemptRecord, DeliveryRecord, DeliveryStatus, NotificationRecord, OutboxGroup, OutboxRow,
  WebhookEndpointInputRecord, WebhookEndpointRecord,
  ApiKeyRecord, CatalogStorage, ChangeRow, StoredChange, MerchantRecord, PricingRuleInputRecord, PublishedRow,
  StoreInputRecord,
} from './port.js';

type Row = Record<string, unknown>;

const toStore = (r: Row): StoreRecord => ({
  id: r.id as number,
  merchant_id: r.merchant_id as number,
  slug: r.slug as string,
  name: r.name as string,
  locale: r.locale as string,
  currency: r.currency as string,
  is_default: r.is_default === 1,
  active: r.active === 1,
  exclude_out_of_stock: r.exclude_out_of_stock === 1,
  catalog_version: r.catalog_version as number,
});

const toMerchant = (r: Row): MerchantRecord => ({
  id: r.id as number,
  name: r.name as string,
  sku_pattern: (r.sku_pattern as string | null) ?? null,
  owner_emails: JSON.parse(r.owner_emails as string) as string[],
  created_at: r.created_at as string,
});

const toRule = (r: Row): PricingRuleRecord => ({
  id: r.id as number,
  priority: r.priority as number,
  customer_group_id: (r.customer_group_id as number | null) ?? null,
  store_id: (r.store_id as number | null) ?? null,
  manufacturer: (r.manufacturer as string | null) ?? null,
  min_cost: (r.min_cost as string | null) ?? null,
  max_cost: (r.max_cost as string | null) ?? null,
  markup_percent: r.markup_percent as string,
  markup_amount: r.markup_amount as string,
  price_ending: (r.price_ending as number | null) ?? null,
  is_catch_all: r.is_catch_all === 1,
});

const toProduct = (r: Row): ProductRecord => ({
  id: r.id as number,
  ref: r.ref as string,
  source: JSON.parse(r.source as string) as ProductSourceDocument,
});

const toEndpoint = (r: Row): WebhookEndpointRecord => ({
  ...(r as unknown as WebhookEndpointRecord),
  events: JSON.parse(r.events as string),
});

/** The record (the admin API's shape): bookkeeping columns such as oldest_change_at stay in storage. */
const toDelivery = ({ oldest_change_at: _bookkeeping, ...r }: Row): DeliveryRecord => ({
  ...(r as unknown as DeliveryRecord),
  product_ids: JSON.parse(r.product_ids as string),
});

const ENDPOINT_FIELDS = ['url', 'store_id', 'events', 'secret', 'status', 'consecutive_failures', 'failure_streak_started_at',
  'paused_until', 'owners_notified_at', 'disabled_reason', 'last_success_at', 'last_failure_at'] as const;
const DELIVERY_FIELDS = ['event', 'store_id', 'product_ids', 'occurred_at', 'status', 'attempts', 'next_attempt_at', 'created_at'] as const;
const DELIVERY_COLUMNS = `id, endpoint_id, ${DELIVERY_FIELDS.join(', ')}`;

const IMAGE_FIELDS = ['state', 'mirrored_url', 'attempts', 'first_failure_at', 'next_attempt_at', 'last_error', 'updated_at'] as const;

const API_KEY_COLUMNS = 'id, merchant_id, name, prefix, created_at, revoked_at';

/** Opens (creating when missing) the database file and applies pending migrations. */
export function openSqliteStorage(file: string): SqliteStorage {
  if (file !== ':memory:') fs.mkdirSync(path.dirname(file), { recursive: true });
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.pragma('foreign_keys = ON');
  db.pragma('busy_timeout = 5000');
  migrate(db);
  return new SqliteStorage(db);
}

function migrate(db: Database.Database): void {
  db.exec('CREATE TABLE IF NOT EXISTS schema_migrations (id INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)');
  const applied = new Set(
    (db.prepare('SELECT id FROM schema_migrations').all() as { id: number }[]).map((r) => r.id),
  );
  for (const migration of migrations) {
    if (applied.has(migration.id)) continue;
    db.transaction(() => {
      db.exec(migration.sql);
      db.prepare('INSERT INTO schema_migrations (id, name, applied_at) VALUES (?, ?, ?)')
        .run(migration.id, migration.name, new Date().toISOString());
    })();
  }
}

export class SqliteStorage implements CatalogStorage {
  private readonly statements = new Map<string, Database.Statement>();

  constructor(readonly db: Database.Database) {}

  private stmt(sql: string): Database.Statement {
    let statement = this.statements.get(sql);
    if (!statement) {
      statement = this.db.prepare(sql);
      this.statements.set(sql, statement);
    }
    return statement;
  }

  transaction<T>(fn: () => T): T {
    return this.db.inTransaction ? fn() : this.db.transaction(fn).immediate();
  }

  snapshot<T>(fn: () => T): T {
    return this.db.inTransaction ? fn() : this.db.transaction(fn).deferred();
  }

  close(): void {
    this.db.close();
  }

  ping(): void {
    this.stmt('SELECT 1').get();
  }

  missingMigrations(): number[] {
    const applied = new Set(this.stmt('SELECT id FROM schema_migrations').pluck().all() as number[]);
    return migrations.map((m) => m.id).filter((id) => !applied.has(id));
  }

  operationalCounts(): OperationalCounts {
    return this.snapshot(() => {
      const counts: OperationalCounts = {
        endpoints: { active: 0, paused: 0, disabled: 0 },
        outboxDepth: this.stmt('SELECT count(*) FROM webhook_outbox').pluck().get() as number,
        waitingDeliveries: { pending: 0, failed: 0 },
        oldestWaitingAt: null,
        images: { pending: 0, mirrored: 0, dead: 0 },
      };
      for (const row of this.stmt('SELECT status, count(*) AS n FROM webhook_endpoints GROUP BY status').all() as { status: 'active'; n: number }[]) {
        counts.endpoints[row.status] = row.n;
      }
      for (const row of this.stmt(`SELECT status, count(*) AS n FROM webhook_deliveries WHERE status IN ('pending', 'failed')
        GROUP BY status`).all() as { status: 'pending'; n: number }[]) {
        counts.waitingDeliveries[row.status] = row.n;
      }
      for (const row of this.stmt('SELECT state, count(*) AS n FROM image_mirrors GROUP BY state').all() as { state: 'pending'; n: number }[]) {
        counts.images[row.state] = row.n;
      }
      // Not yet attempted: a failed delivery waiting for its retry is the receiver's lag, not the
      // dispatcher's (it shows in cps_webhook_deliveries_waiting{status="failed"}).
      counts.oldestWaitingAt = this.stmt(`SELECT min(at) FROM (
        SELECT min(o.created_at) AS at FROM webhook_outbox AS o JOIN webhook_endpoints AS e ON e.id = o.endpoint_id WHERE e.status = 'active'
        UNION ALL
        SELECT min(coalesce(d.oldest_change_at, d.created_at)) FROM webhook_deliveries AS d JOIN webhook_endpoints AS e ON e.id = d.endpoint_id
          WHERE d.status = 'pending' AND d.attempts = 0 AND e.status = 'active')`).pluck().get() as string | null;
      return counts;
    });
  }

  /** An online backup (SQLite backup API): consistent, taken while the service keeps running. */
  async backup(destination: string): Promise<void> {
    fs.mkdirSync(path.dirname(path.resolve(destination)), { recursive: true });
    await this.db.backup(destination);
  }

  // Merchants and keys

  createMerchant(input: Omit<MerchantRecord, 'id'>): MerchantRecord {
    const info = this.stmt('INSERT INTO merchants (name, sku_pattern, owner_emails, created_at) VALUES (?, ?, ?, ?)')
      .run(input.name, input.sku_pattern, JSON.stringify(input.owner_emails), input.created_at);
    return this.getMerchant(Number(info.lastInsertRowid))!;
  }

  listMerchants(): MerchantRecord[] {
    return (this.stmt('SELECT * FROM merchants ORDER BY id').all() as Row[]).map(toMerchant);
  }

  getMerchant(id: number): MerchantRecord | undefined {
    const row = this.stmt('SELECT * FROM merchants WHERE id = ?').get(id) as Row | undefined;
    return row && toMerchant(row);
  }

  updateMerchant(id: number, patch: Partial<Omit<MerchantRecord, 'id' | 'created_at'>>): MerchantRecord | undefined {
    const current = this.getMerchant(id);
    if (!current) return undefined;
    const next = { ...current, ...patch };
    this.stmt('UPDATE merchants SET name = ?, sku_pattern = ?, owner_emails = ? WHERE id = ?')
      .run(next.name, next.sku_pattern, JSON.stringify(next.owner_emails), id);
    return this.getMerchant(id);
  }

  countMerchants(): number {
    return (this.stmt('SELECT count(*) AS n FROM merchants').get() as { n: number }).n;
  }

  insertApiKey(input: Omit<ApiKeyRecord, 'id' | 'revoked_at'> & { key_hash: Buffer }): ApiKeyRecord {
    const info = this.stmt('INSERT INTO api_keys (merchant_id, name, prefix, key_hash, created_at) VALUES (?, ?, ?, ?, ?)')
      .run(input.merchant_id, input.name, input.prefix, input.key_hash, input.created_at);
    return this.stmt(`SELECT ${API_KEY_COLUMNS} FROM api_keys WHERE id = ?`).get(info.lastInsertRowid) as ApiKeyRecord;
  }

  listApiKeys(merchantId: number): ApiKeyRecord[] {
    return this.stmt(`SELECT ${API_KEY_COLUMNS} FROM api_keys WHERE merchant_id = ? ORDER BY id`).all(merchantId) as ApiKeyRecord[];
  }

  revokeApiKey(merchantId: number, keyId: number, at: string): boolean {
    const info = this.stmt('UPDATE api_keys SET revoked_at = coalesce(revoked_at, ?) WHERE merchant_id = ? AND id = ?')
      .run(at, merchantId, keyId);
    return info.changes > 0;
  }

  findActiveApiKey(keyHash: Buffer): { id: number; merchant_id: number; key_hash: Buffer } | undefined {
    return this.stmt('SELECT id, merchant_id, key_hash FROM api_keys WHERE key_hash = ? AND revoked_at IS NULL')
      .get(keyHash) as { id: number; merchant_id: number; key_hash: Buffer } | undefined;
  }

  // Stores

  listStores(merchantId: number): StoreRecord[] {
    return (this.stmt('SELECT * FROM stores WHERE merchant_id = ? ORDER BY is_default DESC, id').all(merchantId) as Row[]).map(toStore);
  }

  findStore(merchantId: number, slug: string): StoreRecord | undefined {
    const row = this.stmt('SELECT * FROM stores WHERE merchant_id = ? AND slug = ?').get(merchantId, slug) as Row | undefined;
    return row && toStore(row);
  }

  findDefaultStore(merchantId: number): StoreRecord | undefined {
    const row = this.stmt('SELECT * FROM stores WHERE merchant_id = ? AND is_default = 1').get(merchantId) as Row | undefined;
    return row && toStore(row);
  }

  upsertStore(merchantId: number, slug: string, input: StoreInputRecord): StoreRecord {
    return this.transaction(() => {
      if (input.is_default) this.stmt('UPDATE stores SET is_default = 0 WHERE merchant_id = ? AND slug <> ?').run(merchantId, slug);
      const flags = [input.is_default ? 1 : 0, input.active ? 1 : 0, input.exclude_out_of_stock ? 1 : 0];
      if (this.findStore(merchantId, slug)) {
        this.stmt(`UPDATE stores SET name = ?, locale = ?, currency = ?, is_default = ?, active = ?, exclude_out_of_stock = ?
          WHERE merchant_id = ? AND slug = ?`).run(input.name, input.locale, input.currency, ...flags, merchantId, slug);
      } else {
        // A new store takes the next id never handed out (migration 2), not SQLite's max(id) + 1.
        const id = this.stmt('UPDATE store_id_sequence SET last_id = last_id + 1 RETURNING last_id').pluck().get() as number;
        this.stmt(`INSERT INTO stores (id, merchant_id, slug, name, locale, currency, is_default, active, exclude_out_of_stock)
          VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`).run(id, merchantId, slug, input.name, input.locale, input.currency, ...flags);
      }
      return this.findStore(merchantId, slug)!;
    });
  }

  deleteStore(storeId: number): void {
    this.transaction(() => {
      this.stmt('DELETE FROM published_products WHERE store_id = ?').run(storeId);
      this.stmt('DELETE FROM changes WHERE store_id = ?').run(storeId);
      this.stmt('DELETE FROM stores WHERE id = ?').run(storeId);
    });
  }

  bumpCatalogVersion(storeIds: number[]): void {
    const bump = this.stmt('UPDATE stores SET catalog_version = catalog_version + 1 WHERE id = ?');
    for (const id of storeIds) bump.run(id);
  }

  // Customer groups

  listCustomerGroups(merchantId: number): CustomerGroupRecord[] {
    return this.stmt('SELECT id, name FROM customer_groups WHERE merchant_id = ? ORDER BY id').all(merchantId) as CustomerGroupRecord[];
  }

  createCustomerGroup(merchantId: number, name: string): CustomerGroupRecord {
    const info = this.stmt('INSERT INTO customer_groups (merchant_id, name) VALUES (?, ?)').run(merchantId, name);
    return { id: Number(info.lastInsertRowid), name };
  }

  updateCustomerGroup(merchantId: number, id: number, name: string): CustomerGroupRecord | undefined {
    const info = this.stmt('UPDATE customer_groups SET name = ? WHERE merchant_id = ? AND id = ?').run(name, merchantId, id);
    return info.changes > 0 ? { id, name } : undefined;
  }

  deleteCustomerGroup(merchantId: number, id: number): boolean {
    return this.stmt('DELETE FROM customer_groups WHERE merchant_id = ? AND id = ?').run(merchantId, id).changes > 0;
  }

  // Exchange rates

  listExchangeRates(merchantId: number): ExchangeRateRecord[] {
    return this.stmt('SELECT base, quote, rate FROM exchange_rates WHERE merchant_id = ? ORDER BY base, quote').all(merchantId) as ExchangeRateRecord[];
  }

  upsertExchangeRate(merchantId: number, rate: ExchangeRateRecord): ExchangeRateRecord {
    this.stmt(`INSERT INTO exchange_rates (merchant_id, base, quote, rate) VALUES (?, ?, ?, ?)
      ON CONFLICT (merchant_id, base, quote) DO UPDATE SET rate = excluded.rate`)
      .run(merchantId, rate.base, rate.quote, rate.rate);
    return rate;
  }

  deleteExchangeRate(merchantId: number, base: string, quote: string): boolean {
    return this.stmt('DELETE FROM exchange_rates WHERE merchant_id = ? AND base = ? AND quote = ?').run(merchantId, base, quote).changes > 0;
  }

  // Pricing rules

  listPricingRules(merchantId: number): PricingRuleRecord[] {
    return (this.stmt('SELECT * FROM pricing_rules WHERE merchant_id = ? ORDER BY priority, id').all(merchantId) as Row[]).map(toRule);
  }

  getPricingRule(merchantId: number, id: number): PricingRuleRecord | undefined {
    const row = this.stmt('SELECT * FROM pricing_rules WHERE merchant_id = ? AND id = ?').get(merchantId, id) as Row | undefined;
    return row && toRule(row);
  }

  createPricingRule(merchantId: number, input: PricingRuleInputRecord, isCatchAll = false): PricingRuleRecord {
    const info = this.stmt(`INSERT INTO pricing_rules (merchant_id, priority, customer_group_id, store_id, manufacturer,
        min_cost, max_cost, markup_percent, markup_amount, price_ending, is_catch_all)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
      .run(merchantId, input.priority, input.customer_group_id, input.store_id, input.manufacturer, input.min_cost,
        input.max_cost, input.markup_percent, input.markup_amount, input.price_ending, isCatchAll ? 1 : 0);
    return this.getPricingRule(merchantId, Number(info.lastInsertRowid))!;
  }

  updatePricingRule(merchantId: number, id: number, input: PricingRuleInputRecord): PricingRuleRecord | undefined {
    const info = this.stmt(`UPDATE pricing_rules SET priority = ?, customer_group_id = ?, store_id = ?, manufacturer = ?,
        min_cost = ?, max_cost = ?, markup_percent = ?, markup_amount = ?, price_ending = ?
      WHERE merchant_id = ? AND id = ?`)
      .run(input.priority, input.customer_group_id, input.store_id, input.manufacturer, input.min_cost, input.max_cost,
        input.markup_percent, input.markup_amount, input.price_ending, merchantId, id);
    return info.changes > 0 ? this.getPricingRule(merchantId, id) : undefined;
  }

  deletePricingRule(merchantId: number, id: number): boolean {
    return this.stmt('DELETE FROM pricing_rules WHERE merchant_id = ? AND id = ? AND is_catch_all = 0').run(merchantId, id).changes > 0;
  }

  // Suppliers

  listSuppliers(merchantId: number): SupplierRecord[] {
    return this.stmt('SELECT id, ref, name FROM suppliers WHERE merchant_id = ? ORDER BY id').all(merchantId) as SupplierRecord[];
  }

  upsertSupplier(merchantId: number, ref: string, name: string): SupplierRecord {
    this.stmt(`INSERT INTO suppliers (merchant_id, ref, name) VALUES (?, ?, ?)
      ON CONFLICT (merchant_id, ref) DO UPDATE SET name = excluded.name`).run(merchantId, ref, name);
    return this.stmt('SELECT id, ref, name FROM suppliers WHERE merchant_id = ? AND ref = ?').get(merchantId, ref) as SupplierRecord;
  }

  deleteSupplier(merchantId: number, ref: string): boolean {
    return this.stmt('DELETE FROM suppliers WHERE merchant_id = ? AND ref = ?').run(merchantId, ref).changes > 0;
  }

  isSupplierReferenced(merchantId: number, ref: string): boolean {
    // Named parameters: better-sqlite3 rejects positional values for a repeated `?1`.
    return this.stmt(`SELECT 1 FROM products, json_each(products.source, '$.offers') AS offer
        WHERE products.merchant_id = @merchantId AND json_extract(offer.value, '$.supplier_ref') = @ref
      UNION ALL
      SELECT 1 FROM products, json_each(products.source, '$.supplier_attributes') AS value
        WHERE products.merchant_id = @merchantId AND json_extract(value.value, '$.supplier_ref') = @ref
      LIMIT 1`).get({ merchantId, ref }) !== undefined;
  }

  // Attribute definitions

  listAttributeDefinitions(merchantId: number): AttributeDefinitionRecord[] {
    return (this.stmt('SELECT key, unit, labels FROM attribute_definitions WHERE merchant_id = ? ORDER BY key').all(merchantId) as Row[])
      .map((r) => ({ key: r.key as string, unit: (r.unit as string | null) ?? null, labels: JSON.parse(r.labels as string) }));
  }

  upsertAttributeDefinition(merchantId: number, definition: AttributeDefinitionRecord): AttributeDefinitionRecord {
    this.stmt(`INSERT INTO attribute_definitions (merchant_id, key, unit, labels) VALUES (?, ?, ?, ?)
      ON CONFLICT (merchant_id, key) DO UPDATE SET unit = excluded.unit, labels = excluded.labels`)
      .run(merchantId, definition.key, definition.unit, JSON.stringify(definition.labels));
    return definition;
  }

  deleteAttributeDefinition(merchantId: number, key: string): boolean {
    return this.stmt('DELETE FROM attribute_definitions WHERE merchant_id = ? AND key = ?').run(merchantId, key).changes > 0;
  }

  // Product sources

  findProductByRef(merchantId: number, ref: string): ProductRecord | undefined {
    const row = this.stmt('SELECT id, ref, source FROM products WHERE merchant_id = ? AND ref = ?').get(merchantId, ref) as Row | undefined;
    return row && toProduct(row);
  }

  upsertProductSource(merchantId: number, ref: string, source: ProductSourceDocument, at: string): { id: number; created: boolean } {
    const json = JSON.stringify(source);
    const existing = this.stmt('SELECT id FROM products WHERE merchant_id = ? AND ref = ?').get(merchantId, ref) as { id: number } | undefined;
    if (existing) {
      this.stmt('UPDATE products SET source = ?, updated_at = ? WHERE id = ?').run(json, at, existing.id);
      return { id: existing.id, created: false };
    }
    const info = this.stmt('INSERT INTO products (merchant_id, ref, source, updated_at) VALUES (?, ?, ?, ?)').run(merchantId, ref, json, at);
    return { id: Number(info.lastInsertRowid), created: true };
  }

  deleteProduct(merchantId: number, productId: number): void {
    this.stmt('DELETE FROM products WHERE merchant_id = ? AND id = ?').run(merchantId, productId);
  }

  productsExcludedFrom(merchantId: number, slug: string): ProductRecord[] {
    return (this.stmt(`SELECT id, ref, source FROM products WHERE merchant_id = ? AND EXISTS
      (SELECT 1 FROM json_each(products.source, '$.excluded_stores') WHERE value = ?) ORDER BY id`)
      .all(merchantId, slug) as Row[]).map(toProduct);
  }

  productsAfter(merchantId: number, afterId: number, limit: number): ProductRecord[] {
    return (this.stmt('SELECT id, ref, source FROM products WHERE merchant_id = ? AND id > ? ORDER BY id LIMIT ?')
      .all(merchantId, afterId, limit) as Row[]).map(toProduct);
  }

  productsByIds(merchantId: number, ids: number[]): ProductRecord[] {
    if (ids.length === 0) return [];
    return (this.stmt(`SELECT id, ref, source FROM products
      WHERE merchant_id = ? AND id IN (SELECT value FROM json_each(?)) ORDER BY id`)
      .all(merchantId, JSON.stringify(ids)) as Row[]).map(toProduct);
  }

  imageMirrors(merchantId: number, urls: string[]): Map<string, ImageMirrorRecord> {
    const mirrors = new Map<string, ImageMirrorRecord>();
    if (urls.length === 0) return mirrors;
    const rows = this.stmt(`SELECT url, state, mirrored_url FROM image_mirrors
      WHERE merchant_id = ? AND url IN (SELECT value FROM json_each(?))`).all(merchantId, JSON.stringify(urls)) as ImageMirrorRecord[];
    for (const row of rows) mirrors.set(row.url, row);
    return mirrors;
  }

  ensureImageMirrors(merchantId: number, urls: string[], at: string): void {
    if (urls.length === 0) return;
    this.stmt(`INSERT OR IGNORE INTO image_mirrors (merchant_id, url, state, updated_at, next_attempt_at)
      SELECT ?, value, 'pending', ?, ? FROM json_each(?)`).run(merchantId, at, at, JSON.stringify(urls));
  }

  dueImageMirrors(now: string, limit: number): ImageMirrorWork[] {
    return this.stmt(`SELECT * FROM image_mirrors WHERE state = 'pending' AND next_attempt_at <= ?
      ORDER BY next_attempt_at LIMIT ?`).all(now, limit) as ImageMirrorWork[];
  }

  updateImageMirror(merchantId: number, url: string, patch: Partial<Omit<ImageMirrorWork, 'merchant_id' | 'url'>>): void {
    const fields = IMAGE_FIELDS.filter((f) => f in patch);
    if (fields.length === 0) return;
    this.stmt(`UPDATE image_mirrors SET ${fields.map((f) => `${f} = ?`).join(', ')} WHERE merchant_id = ? AND url = ?`)
      .run(...fields.map((f) => patch[f] as unknown), merchantId, url);
  }

  productIdsWithImage(merchantId: number, url: string): number[] {
    return this.stmt(`SELECT id FROM products WHERE merchant_id = ? AND EXISTS
      (SELECT 1 FROM json_each(products.source, '$.images') WHERE json_extract(value, '$.url') = ?) ORDER BY id`)
      .pluck().all(merchantId, url) as number[];
  }

  imageStateCounts(merchantId: number): Record<'pending' | 'mirrored' | 'dead', number> {
    const counts = { pending: 0, mirrored: 0, dead: 0 };
    // Per distinct source URL that a product of the merchant still lists.
    const rows = this.stmt(`SELECT m.state, count(*) AS n FROM image_mirrors AS m
      JOIN (SELECT DISTINCT json_extract(image.value, '$.url') AS url FROM products, json_each(products.source, '$.images') AS image
        WHERE products.merchant_id = @merchant) AS listed ON listed.url = m.url
      WHERE m.merchant_id = @merchant GROUP BY m.state`).all({ merchant: merchantId }) as { state: keyof typeof counts; n: number }[];
    for (const row of rows) {
      counts[row.state] = row.n;
    }
    return counts;
  }

  deadImages(merchantId: number, limit: number): ImageMirrorWork[] {
    // The ones imageStateCounts counts: a source URL no product lists any more is neither shown nor retried.
    return this.stmt(`SELECT m.* FROM image_mirrors AS m
      JOIN (SELECT DISTINCT json_extract(image.value, '$.url') AS url FROM products, json_each(products.source, '$.images') AS image
        WHERE products.merchant_id = @merchant) AS listed ON listed.url = m.url
      WHERE m.merchant_id = @merchant AND m.state = 'dead' ORDER BY m.updated_at DESC, m.url LIMIT @limit`)
      .all({ merchant: merchantId, limit }) as ImageMirrorWork[];
  }

  // Published payloads and changes

  publishedHashes(storeId: number, productIds: number[]): Map<number, { priceHash: string; contentHash: string }> {
    const hashes = new Map<number, { priceHash: string; contentHash: string }>();
    if (productIds.length === 0) return hashes;
    const rows = this.stmt(`SELECT product_id, price_hash, content_hash FROM published_products
      WHERE store_id = ? AND product_id IN (SELECT value FROM json_each(?))`).all(storeId, JSON.stringify(productIds)) as Row[];
    for (const r of rows) hashes.set(r.product_id as number, { priceHash: r.price_hash as string, contentHash: r.content_hash as string });
    return hashes;
  }

  upsertPublished(storeId: number, rows: PublishedRow[]): void {
    const upsert = this.stmt(`INSERT INTO published_products (store_id, product_id, payload, price_hash, content_hash)
      VALUES (?, ?, ?, ?, ?)
      ON CONFLICT (store_id, product_id) DO UPDATE SET payload = excluded.payload,
        price_hash = excluded.price_hash, content_hash = excluded.content_hash`);
    for (const row of rows) upsert.run(storeId, row.productId, row.payload, row.priceHash, row.contentHash);
  }

  deletePublished(storeId: number, productIds: number[]): void {
    if (productIds.length === 0) return;
    this.stmt('DELETE FROM published_products WHERE store_id = ? AND product_id IN (SELECT value FROM json_each(?))')
      .run(storeId, JSON.stringify(productIds));
  }

  publishedPayload(storeId: number, productId: number): Uint8Array | undefined {
    return this.stmt('SELECT CAST(payload AS BLOB) FROM published_products WHERE store_id = ? AND product_id = ?')
      .pluck().get(storeId, productId) as Uint8Array | undefined;
  }

  publishedPage(storeId: number, fromId: number, toId: number): PublishedPage {
    // One UTF-8 buffer built by SQLite: no per-row strings, no re-encoding on the way out; the
    // rows' hashes come from the same scan.
    const [bytes, digests] = this.stmt(`SELECT CAST(coalesce(group_concat(payload, ','), '') AS BLOB),
      CAST(coalesce(group_concat(price_hash || content_hash, ''), '') AS BLOB) FROM
      (SELECT payload, price_hash, content_hash FROM published_products WHERE store_id = ? AND product_id BETWEEN ? AND ? ORDER BY product_id)`)
      .raw().get(storeId, fromId, toId) as [Uint8Array, Uint8Array];
    return { bytes, digests };
  }

  publishedProductIds(storeId: number): number[] {
    return this.stmt('SELECT product_id FROM published_products WHERE store_id = ? ORDER BY product_id')
      .pluck().all(storeId) as number[];
  }

  publishedPayloadsByIds(storeId: number, productIds: number[]): { bytes: Uint8Array; count: number } {
    const row = this.stmt(`SELECT CAST(coalesce(group_concat(payload, ','), '') AS BLOB) AS bytes, count(*) AS count FROM
      (SELECT payload FROM published_products
        WHERE store_id = ? AND product_id IN (SELECT value FROM json_each(?)) ORDER BY product_id)`)
      .get(storeId, JSON.stringify(productIds)) as { bytes: Uint8Array; count: number };
    return row;
  }

  publishedPricesByIds(storeId: number, productIds: number[]): Uint8Array {
    // json() keeps the stored number literals, so amounts keep the currency's exact precision.
    return this.stmt(`SELECT CAST(coalesce(group_concat(json_object('id', product_id, 'prices', json(json_extract(payload, '$.prices'))), ','), '') AS BLOB)
      FROM (SELECT product_id, payload FROM published_products
        WHERE store_id = ? AND product_id IN (SELECT value FROM json_each(?)) ORDER BY product_id)`)
      .pluck().get(storeId, JSON.stringify(productIds)) as Uint8Array;
  }

  recordChanges(rows: ChangeRow[]): void {
    const insert = this.stmt('INSERT INTO changes (store_id, product_id, change_type, created_at) VALUES (?, ?, ?, ?)');
    for (const row of rows) insert.run(row.storeId, row.productId, row.changeType, row.createdAt);
  }

  lastChangeAt(): string | undefined {
    return this.stmt('SELECT last_at FROM change_clock WHERE id = 1').pluck().get() as string | undefined;
  }

  setLastChangeAt(at: string): void {
    this.stmt('INSERT INTO change_clock (id, last_at) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET last_at = excluded.last_at').run(at);
  }

  changesAfter(storeId: number, at: string, id: number, limit: number): StoredChange[] {
    return this.stmt(`SELECT id, product_id, change_type, created_at FROM changes
      WHERE store_id = ? AND (created_at, id) > (?, ?) ORDER BY created_at, id LIMIT ?`)
      .all(storeId, at, id, limit) as StoredChange[];
  }

  changeHorizon(storeId: number): { at: string; id: number } | undefined {
    return this.stmt('SELECT created_at AS at, change_id AS id FROM change_horizons WHERE store_id = ?')
      .get(storeId) as { at: string; id: number } | undefined;
  }

  pruneChangesBefore(cutoff: string): number {
    let deleted = 0;
    // Bounded batches, each its own transaction, so pruning never holds the write lock for long.
    for (;;) {
      const batch = this.transaction(() => {
        const ids = this.stmt('SELECT id FROM changes WHERE created_at < ? ORDER BY created_at, id LIMIT 10000')
          .pluck().all(cutoff) as number[];
        if (ids.length === 0) return 0;
        const list = JSON.stringify(ids);
        this.stmt(`INSERT INTO change_horizons (store_id, created_at, change_id)
            SELECT store_id, created_at, max(id) FROM changes WHERE id IN (SELECT value FROM json_each(?)) GROUP BY store_id
          ON CONFLICT (store_id) DO UPDATE SET created_at = excluded.created_at, change_id = excluded.change_id
            WHERE (excluded.created_at, excluded.change_id) > (change_horizons.created_at, change_horizons.change_id)`).run(list);
        this.stmt('DELETE FROM changes WHERE id IN (SELECT value FROM json_each(?))').run(list);
        return ids.length;
      });
      deleted += batch;
      if (batch === 0) return deleted;
    }
  }

  // Webhooks

  createWebhookEndpoint(input: WebhookEndpointInputRecord): WebhookEndpointRecord {
    const info = this.stmt(`INSERT INTO webhook_endpoints (merchant_id, url, store_id, events, secret, created_at)
      VALUES (?, ?, ?, ?, ?, ?)`).run(input.merchant_id, input.url, input.store_id, JSON.stringify(input.events), input.secret, input.created_at);
    return this.getWebhookEndpoint(Number(info.lastInsertRowid))!;
  }

  listWebhookEndpoints(merchantId: number): WebhookEndpointRecord[] {
    return (this.stmt('SELECT * FROM webhook_endpoints WHERE merchant_id = ? ORDER BY id').all(merchantId) as Row[]).map(toEndpoint);
  }

  getWebhookEndpoint(id: number, merchantId?: number): WebhookEndpointRecord | undefined {
    const row = this.stmt('SELECT * FROM webhook_endpoints WHERE id = ? AND merchant_id = coalesce(?, merchant_id)')
      .get(id, merchantId ?? null) as Row | undefined;
    return row && toEndpoint(row);
  }

  updateWebhookEndpoint(id: number, patch: Partial<Omit<WebhookEndpointRecord, 'id' | 'merchant_id' | 'created_at'>>): void {
    const fields = ENDPOINT_FIELDS.filter((f) => f in patch);
    if (fields.length === 0) return;
    const values = fields.map((f) => (f === 'events' ? JSON.stringify(patch.events) : (patch[f] as unknown)));
    this.stmt(`UPDATE webhook_endpoints SET ${fields.map((f) => `${f} = ?`).join(', ')} WHERE id = ?`).run(...values, id);
  }

  deleteWebhookEndpoint(id: number): void {
    this.transaction(() => {
      // Its deliveries and attempts go with it; the owners' notifications about it stay.
      this.stmt('UPDATE notifications SET endpoint_id = NULL WHERE endpoint_id = ?').run(id);
      this.stmt('DELETE FROM webhook_endpoints WHERE id = ?').run(id);
    });
  }

  insertOutbox(rows: OutboxRow[]): void {
    const insert = this.stmt('INSERT INTO webhook_outbox (endpoint_id, event, store_id, product_id, created_at) VALUES (?, ?, ?, ?, ?)');
    for (const row of rows) insert.run(row.endpointId, row.event, row.storeId, row.productId, row.createdAt);
  }

  outboxGroups(): OutboxGroup[] {
    return this.stmt(`SELECT endpoint_id AS endpointId, event, store_id AS storeId, count(*) AS count, min(created_at) AS oldestAt
      FROM webhook_outbox GROUP BY endpoint_id, event, store_id ORDER BY min(id)`).all() as OutboxGroup[];
  }

  outboxRows(group: Pick<OutboxGroup, 'endpointId' | 'event' | 'storeId'>, limit: number): { id: number; productId: number; createdAt: string }[] {
    return this.stmt(`SELECT id, product_id AS productId, created_at AS createdAt FROM webhook_outbox
      WHERE endpoint_id = ? AND event = ? AND store_id IS ? ORDER BY id LIMIT ?`)
      .all(group.endpointId, group.event, group.storeId, limit) as { id: number; productId: number; createdAt: string }[];
  }

  deleteOutboxRows(ids: number[]): void {
    if (ids.length === 0) return;
    this.stmt('DELETE FROM webhook_outbox WHERE id IN (SELECT value FROM json_each(?))').run(JSON.stringify(ids));
  }

  insertDelivery(input: Omit<DeliveryRecord, 'id'>, oldestChangeAt = input.created_at): DeliveryRecord {
    const info = this.stmt(`INSERT INTO webhook_deliveries (endpoint_id, event, store_id, product_ids, occurred_at, status, attempts, next_attempt_at, created_at, oldest_change_at)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`).run(input.endpoint_id, input.event, input.store_id, JSON.stringify(input.product_ids),
      input.occurred_at, input.status, input.attempts, input.next_attempt_at, input.created_at, oldestChangeAt);
    return this.getDelivery(Number(info.lastInsertRowid))!;
  }

  getDelivery(id: number): DeliveryRecord | undefined {
    const row = this.stmt('SELECT * FROM webhook_deliveries WHERE id = ?').get(id) as Row | undefined;
    return row && toDelivery(row);
  }

  dueDeliveries(now: string, limit: number): DeliveryRecord[] {
    // Endpoints take turns (each one's oldest due first, then each one's second, ...), so a
    // backlog at one endpoint never fills the whole batch and holds the others back.
    return (this.stmt(`SELECT ${DELIVERY_COLUMNS} FROM (
        SELECT d.*, row_number() OVER (PARTITION BY d.endpoint_id ORDER BY d.next_attempt_at, d.id) AS turn
        FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id
        WHERE d.status IN ('pending', 'failed') AND d.next_attempt_at <= ? AND e.status = 'active')
      ORDER BY turn, next_attempt_at, id LIMIT ?`).all(now, limit) as Row[]).map(toDelivery);
  }

  updateDelivery(id: number, patch: Partial<Omit<DeliveryRecord, 'id' | 'endpoint_id'>>): void {
    const fields = DELIVERY_FIELDS.filter((f) => f in patch);
    if (fields.length === 0) return;
    const values = fields.map((f) => (f === 'product_ids' ? JSON.stringify(patch.product_ids) : (patch[f] as unknown)));
    this.stmt(`UPDATE webhook_deliveries SET ${fields.map((f) => `${f} = ?`).join(', ')} WHERE id = ?`).run(...values, id);
  }

  dropPendingDeliveries(endpointId: number): number {
    return this.stmt(`UPDATE webhook_deliveries SET status = 'dropped', next_attempt_at = NULL
      WHERE endpoint_id = ? AND status IN ('pending', 'failed')`).run(endpointId).changes;
  }

  recordAttempt(deliveryId: number, attempt: AttemptRecord): void {
    this.stmt(`INSERT INTO webhook_attempts (delivery_id, at, status_code, error, latency_ms, response_snippet)
      VALUES (?, ?, ?, ?, ?, ?)`).run(deliveryId, attempt.at, attempt.status_code, attempt.error, attempt.latency_ms, attempt.response_snippet);
  }

  listDeliveries(endpointId: number, filter: { status?: DeliveryStatus; limit: number; beforeId?: number }): DeliveryRecord[] {
    return (this.stmt(`SELECT * FROM webhook_deliveries WHERE endpoint_id = ? AND status = coalesce(?, status)
      AND id < coalesce(?, 9223372036854775807) ORDER BY id DESC LIMIT ?`)
      .all(endpointId, filter.status ?? null, filter.beforeId ?? null, filter.limit) as Row[]).map(toDelivery);
  }

  listAttempts(deliveryId: number): AttemptRecord[] {
    return this.stmt('SELECT at, status_code, error, latency_ms, response_snippet FROM webhook_attempts WHERE delivery_id = ? ORDER BY id')
      .all(deliveryId) as AttemptRecord[];
  }

  unsuccessfulDeliveriesSince(endpointId: number, since: string): DeliveryRecord[] {
    return (this.stmt(`SELECT * FROM webhook_deliveries WHERE endpoint_id = ? AND created_at >= ?
      AND status IN ('failed', 'given_up', 'dropped') ORDER BY id`).all(endpointId, since) as Row[]).map(toDelivery);
  }

  insertNotification(input: Omit<NotificationRecord, 'id' | 'emailed_at'>): NotificationRecord {
    const info = this.stmt(`INSERT INTO notifications (merchant_id, endpoint_id, kind, subject, body, created_at)
      VALUES (?, ?, ?, ?, ?, ?)`).run(input.merchant_id, input.endpoint_id, input.kind, input.subject, input.body, input.created_at);
    return this.stmt('SELECT * FROM notifications WHERE id = ?').get(info.lastInsertRowid) as NotificationRecord;
  }

  listNotifications(merchantId: number, limit: number): NotificationRecord[] {
    return this.stmt('SELECT * FROM notifications WHERE merchant_id = ? ORDER BY id DESC LIMIT ?').all(merchantId, limit) as NotificationRecord[];
  }

  markNotificationEmailed(id: number, at: string): void {
    this.stmt('UPDATE notifications SET emailed_at = ? WHERE id = ?').run(at, id);
  }
}
