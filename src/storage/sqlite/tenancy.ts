// Merchants, API keys and stores on SQLite.
import type { TenancyStore } from '../port.js';
import type { ApiKeyRecord, MerchantRecord, StoreInputRecord, StoreRecord } from '../records.js';
import { toMerchant, toStore } from '../rows.js';
import type { Row, SqliteConnection } from './connection.js';

const API_KEY_COLUMNS = 'id, merchant_id, name, prefix, created_at, revoked_at, last_used_at';

export class SqliteTenancy implements TenancyStore {
  static readonly writes = [
    'createMerchant', 'updateMerchant', 'insertApiKey', 'revokeApiKey', 'recordApiKeyUse', 'upsertStore', 'deleteStore', 'bumpCatalogVersion',
  ] as const;

  constructor(private readonly c: SqliteConnection) {}

  private merchant(id: number): MerchantRecord | undefined {
    const row = this.c.stmt('SELECT * FROM merchants WHERE id = ?').get(id) as Row | undefined;
    return row && toMerchant(row);
  }

  private store(merchantId: number, slug: string): StoreRecord | undefined {
    const row = this.c.stmt('SELECT * FROM stores WHERE merchant_id = ? AND slug = ?').get(merchantId, slug) as Row | undefined;
    return row && toStore(row);
  }

  async createMerchant(input: Omit<MerchantRecord, 'id'>): Promise<MerchantRecord> {
    const info = this.c.stmt('INSERT INTO merchants (name, sku_pattern, owner_emails, created_at) VALUES (?, ?, ?, ?)')
      .run(input.name, input.sku_pattern, JSON.stringify(input.owner_emails), input.created_at);
    return this.merchant(Number(info.lastInsertRowid))!;
  }

  async listMerchants(): Promise<MerchantRecord[]> {
    return (this.c.stmt('SELECT * FROM merchants ORDER BY id').all() as Row[]).map(toMerchant);
  }

  async getMerchant(id: number): Promise<MerchantRecord | undefined> {
    return this.merchant(id);
  }

  async updateMerchant(id: number, patch: Partial<Omit<MerchantRecord, 'id' | 'created_at'>>): Promise<MerchantRecord | undefined> {
    const current = this.merchant(id);
    if (!current) return undefined;
    const next = { ...current, ...patch };
    this.c.stmt('UPDATE merchants SET name = ?, sku_pattern = ?, owner_emails = ? WHERE id = ?')
      .run(next.name, next.sku_pattern, JSON.stringify(next.owner_emails), id);
    return this.merchant(id);
  }

  async countMerchants(): Promise<number> {
    return this.c.stmt('SELECT count(*) FROM merchants').pluck().get() as number;
  }

  async insertApiKey(input: Omit<ApiKeyRecord, 'id' | 'revoked_at' | 'last_used_at'> & { key_hash: Buffer }): Promise<ApiKeyRecord> {
    const info = this.c.stmt('INSERT INTO api_keys (merchant_id, name, prefix, key_hash, created_at) VALUES (?, ?, ?, ?, ?)')
      .run(input.merchant_id, input.name, input.prefix, input.key_hash, input.created_at);
    return this.c.stmt(`SELECT ${API_KEY_COLUMNS} FROM api_keys WHERE id = ?`).get(info.lastInsertRowid) as ApiKeyRecord;
  }

  async listApiKeys(merchantId: number): Promise<ApiKeyRecord[]> {
    return this.c.stmt(`SELECT ${API_KEY_COLUMNS} FROM api_keys WHERE merchant_id = ? ORDER BY id`).all(merchantId) as ApiKeyRecord[];
  }

  async revokeApiKey(merchantId: number, keyId: number, at: string): Promise<boolean> {
    const info = this.c.stmt('UPDATE api_keys SET revoked_at = coalesce(revoked_at, ?) WHERE merchant_id = ? AND id = ?')
      .run(at, merchantId, keyId);
    return info.changes > 0;
  }

  async recordApiKeyUse(keyId: number, at: string, unlessAfter: string): Promise<boolean> {
    return this.c.stmt('UPDATE api_keys SET last_used_at = ? WHERE id = ? AND (last_used_at IS NULL OR last_used_at <= ?)')
      .run(at, keyId, unlessAfter).changes > 0;
  }

  async findActiveApiKey(keyHash: Buffer): Promise<{ id: number; merchant_id: number; key_hash: Buffer } | undefined> {
    return this.c.stmt('SELECT id, merchant_id, key_hash FROM api_keys WHERE key_hash = ? AND revoked_at IS NULL')
      .get(keyHash) as { id: number; merchant_id: number; key_hash: Buffer } | undefined;
  }

  async listStores(merchantId: number): Promise<StoreRecord[]> {
    return (this.c.stmt('SELECT * FROM stores WHERE merchant_id = ? ORDER BY is_default DESC, id').all(merchantId) as Row[]).map(toStore);
  }

  async findStore(merchantId: number, slug: string): Promise<StoreRecord | undefined> {
    return this.store(merchantId, slug);
  }

  async findDefaultStore(merchantId: number): Promise<StoreRecord | undefined> {
    const row = this.c.stmt('SELECT * FROM stores WHERE merchant_id = ? AND is_default = 1').get(merchantId) as Row | undefined;
    return row && toStore(row);
  }

  async upsertStore(merchantId: number, slug: string, input: StoreInputRecord): Promise<StoreRecord> {
    if (input.is_default) this.c.stmt('UPDATE stores SET is_default = 0 WHERE merchant_id = ? AND slug <> ?').run(merchantId, slug);
    const flags = [input.is_default ? 1 : 0, input.active ? 1 : 0, input.exclude_out_of_stock ? 1 : 0];
    if (this.store(merchantId, slug)) {
      this.c.stmt(`UPDATE stores SET name = ?, locale = ?, currency = ?, is_default = ?, active = ?, exclude_out_of_stock = ?
        WHERE merchant_id = ? AND slug = ?`).run(input.name, input.locale, input.currency, ...flags, merchantId, slug);
    } else {
      // A new store takes the next id never handed out (migration 2), not SQLite's max(id) + 1.
      const id = this.c.stmt('UPDATE store_id_sequence SET last_id = last_id + 1 RETURNING last_id').pluck().get() as number;
      this.c.stmt(`INSERT INTO stores (id, merchant_id, slug, name, locale, currency, is_default, active, exclude_out_of_stock)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`).run(id, merchantId, slug, input.name, input.locale, input.currency, ...flags);
    }
    return this.store(merchantId, slug)!;
  }

  async deleteStore(storeId: number): Promise<void> {
    this.c.stmt('DELETE FROM published_products WHERE store_id = ?').run(storeId);
    this.c.stmt('DELETE FROM changes WHERE store_id = ?').run(storeId);
    this.c.stmt('DELETE FROM stores WHERE id = ?').run(storeId);
  }

  async bumpCatalogVersion(storeIds: number[]): Promise<void> {
    const bump = this.c.stmt('UPDATE stores SET catalog_version = catalog_version + 1 WHERE id = ?');
    for (const id of storeIds) bump.run(id);
  }
}
