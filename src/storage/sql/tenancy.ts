// Merchants, API keys and stores, written once for both engines (dialect.ts). A new store's id is
// each engine's own: SqliteTenancy, PgTenancy.
import type { TenancyStore } from '../port.js';
import type { ActiveApiKeyRecord, ApiKeyPatch, ApiKeyRecord, MerchantRecord, NewApiKey } from '../../tenancy/model.js';
import type { StoreInputRecord, StoreRecord } from '../../catalog/model.js';
import { toMerchant, toStore } from '../rows.js';
import type { Row, SqlConnection } from './dialect.js';

/** Every column of stores, listed (PostgreSQL's prepared statements: postgres/published.ts). */
export const STORE_COLUMNS = [
  'id',
  'merchant_id',
  'slug',
  'name',
  'locale',
  'currency',
  'is_default',
  'active',
  'exclude_out_of_stock',
  'catalog_version',
];

const API_KEY_COLUMNS =
  'id, merchant_id, name, prefix, scopes, stores, allowed_origins, created_at, revoked_at, expires_at, rolled_from, last_used_at';

/** A key's allowed origins as kept: JSON text, NULL for none (so the index of keys with origins holds only those: migration 61). */
const originsColumn = (origins: readonly string[] | undefined): string | null => (origins?.length ? JSON.stringify(origins) : null);
const originsOf = (text: unknown): string[] => (typeof text === 'string' ? (JSON.parse(text) as string[]) : []);

/** A key's row: its scopes and stores are kept as JSON text. */
const toApiKey = (row: Row): ApiKeyRecord => ({
  id: Number(row.id),
  merchant_id: Number(row.merchant_id),
  name: row.name as string,
  prefix: row.prefix as string,
  scopes: JSON.parse(row.scopes as string) as ApiKeyRecord['scopes'],
  stores: row.stores === null || row.stores === undefined ? null : (JSON.parse(row.stores as string) as string[]),
  allowed_origins: originsOf(row.allowed_origins),
  created_at: row.created_at as string,
  revoked_at: (row.revoked_at as string | null) ?? null,
  expires_at: (row.expires_at as string | null) ?? null,
  rolled_from: row.rolled_from === null || row.rolled_from === undefined ? null : Number(row.rolled_from),
  last_used_at: (row.last_used_at as string | null) ?? null,
});

/** A store's columns an upsert sets, as insertStore receives them: $1 merchant_id, $2 slug, then these. */
export const STORE_INPUT_COLUMNS = 'merchant_id, slug, name, locale, currency, is_default, active, exclude_out_of_stock';

export abstract class SqlTenancy<C extends SqlConnection = SqlConnection> implements TenancyStore {
  static readonly writes = [
    'createMerchant',
    'updateMerchant',
    'insertApiKey',
    'updateApiKey',
    'revokeApiKey',
    'expireApiKey',
    'recordApiKeyUse',
    'upsertStore',
    'deleteStore',
    'bumpCatalogVersion',
  ] as const;

  constructor(protected readonly c: C) {}

  /** Inserts a new store (values as STORE_INPUT_COLUMNS), returning its row: each engine draws its id its own way. */
  protected abstract insertStore(values: unknown[]): Promise<Row>;

  async createMerchant(input: Omit<MerchantRecord, 'id'>): Promise<MerchantRecord> {
    const row = await this.c.one(
      'INSERT INTO merchants (name, sku_pattern, owner_emails, created_at) VALUES ($1, $2, $3, $4) RETURNING *',
      [input.name, input.sku_pattern, JSON.stringify(input.owner_emails), input.created_at],
    );
    return toMerchant(row!);
  }

  async listMerchants(): Promise<MerchantRecord[]> {
    return (await this.c.rows('SELECT * FROM merchants ORDER BY id')).map(toMerchant);
  }

  async getMerchant(id: number): Promise<MerchantRecord | undefined> {
    const row = await this.c.one('SELECT * FROM merchants WHERE id = $1', [id]);
    return row && toMerchant(row);
  }

  async updateMerchant(id: number, patch: Partial<Omit<MerchantRecord, 'id' | 'created_at'>>): Promise<MerchantRecord | undefined> {
    // The patch merges into the row as it is when this transaction locks it.
    const current = await this.c.one(`SELECT * FROM merchants WHERE id = $1${this.c.locksRows ? ' FOR UPDATE' : ''}`, [id]);
    if (!current) return undefined;
    const next = { ...toMerchant(current), ...patch };
    const row = await this.c.one('UPDATE merchants SET name = $1, sku_pattern = $2, owner_emails = $3 WHERE id = $4 RETURNING *', [
      next.name,
      next.sku_pattern,
      JSON.stringify(next.owner_emails),
      id,
    ]);
    return row && toMerchant(row);
  }

  async countMerchants(): Promise<number> {
    return (await this.c.one<{ n: number }>('SELECT count(*) AS n FROM merchants'))!.n;
  }

  async insertApiKey(input: NewApiKey): Promise<ApiKeyRecord> {
    const row = await this.c.one(
      `INSERT INTO api_keys (merchant_id, name, prefix, key_hash, created_at, scopes, stores, expires_at, rolled_from, allowed_origins)
      VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING ${API_KEY_COLUMNS}`,
      [
        input.merchant_id,
        input.name,
        input.prefix,
        input.key_hash,
        input.created_at,
        JSON.stringify(input.scopes ?? ['catalog:read']),
        input.stores ? JSON.stringify(input.stores) : null,
        input.expires_at ?? null,
        input.rolled_from ?? null,
        originsColumn(input.allowed_origins),
      ],
    );
    return toApiKey(row!);
  }

  async updateApiKey(merchantId: number, keyId: number, patch: ApiKeyPatch): Promise<ApiKeyRecord | undefined> {
    const row = await this.c.one(
      `UPDATE api_keys SET name = coalesce($3, name), allowed_origins = CASE WHEN $4 THEN $5 ELSE allowed_origins END
      WHERE merchant_id = $1 AND id = $2 RETURNING ${API_KEY_COLUMNS}`,
      [
        merchantId,
        keyId,
        patch.name ?? null,
        this.c.dialect.bool(patch.allowed_origins !== undefined),
        originsColumn(patch.allowed_origins),
      ],
    );
    return row && toApiKey(row);
  }

  async browserOrigins(at: string): Promise<string[]> {
    // Only keys with origins are in the partial index api_keys_with_origins (migration 61): bounded by them, not by every key.
    const rows = await this.c.rows(
      'SELECT allowed_origins FROM api_keys WHERE allowed_origins IS NOT NULL AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $1)',
      [at],
    );
    return [...new Set(rows.flatMap((row) => originsOf(row.allowed_origins)))];
  }

  async countActiveApiKeys(merchantId: number, at: string): Promise<number> {
    // In a write, the merchant's row is locked first: two key creations count one after the other.
    if (this.c.locksRows) await this.c.one('SELECT id FROM merchants WHERE id = $1 FOR UPDATE', [merchantId]);
    return Number(
      (await this.c.one<{ n: number }>(
        'SELECT count(*) AS n FROM api_keys WHERE merchant_id = $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $2)',
        [merchantId, at],
      ))!.n,
    );
  }

  async listApiKeys(merchantId: number): Promise<ApiKeyRecord[]> {
    return (await this.c.rows(`SELECT ${API_KEY_COLUMNS} FROM api_keys WHERE merchant_id = $1 ORDER BY id`, [merchantId])).map(toApiKey);
  }

  async revokeApiKey(merchantId: number, keyId: number, at: string): Promise<boolean> {
    return (
      (await this.c.run('UPDATE api_keys SET revoked_at = coalesce(revoked_at, $1) WHERE merchant_id = $2 AND id = $3', [
        at,
        merchantId,
        keyId,
      ])) > 0
    );
  }

  async expireApiKey(merchantId: number, keyId: number, at: string): Promise<boolean> {
    // A key that expires sooner keeps its time: a roll never lengthens a key's life.
    return (
      (await this.c.run(
        'UPDATE api_keys SET expires_at = $1 WHERE merchant_id = $2 AND id = $3 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $1)',
        [at, merchantId, keyId],
      )) > 0
    );
  }

  async recordApiKeyUse(keyId: number, at: string, unlessAfter: string): Promise<boolean> {
    return (
      (await this.c.run('UPDATE api_keys SET last_used_at = $1 WHERE id = $2 AND (last_used_at IS NULL OR last_used_at <= $3)', [
        at,
        keyId,
        unlessAfter,
      ])) > 0
    );
  }

  async findActiveApiKey(keyHash: Buffer): Promise<(ActiveApiKeyRecord & { key_hash: Buffer }) | undefined> {
    const row = await this.c.one(
      'SELECT id, merchant_id, name, prefix, scopes, stores, allowed_origins, expires_at, key_hash FROM api_keys WHERE key_hash = $1 AND revoked_at IS NULL',
      [keyHash],
    );
    if (!row) return undefined;
    const { id, merchant_id, name, prefix, scopes, stores, allowed_origins, expires_at } = toApiKey(row);
    return { id, merchant_id, name, prefix, scopes, stores, allowed_origins, expires_at, key_hash: row.key_hash as Buffer };
  }

  async activeApiKeyIds(keyIds: readonly number[], at: string): Promise<number[]> {
    if (keyIds.length === 0) return [];
    const rows = await this.c.rows<{ id: number }>(
      `SELECT id FROM api_keys WHERE ${this.c.dialect.inList('id', '$1', 'bigint')} AND revoked_at IS NULL
      AND (expires_at IS NULL OR expires_at > $2) ORDER BY id`,
      [this.c.dialect.list(keyIds), at],
    );
    return rows.map((row) => Number(row.id));
  }

  async listStores(merchantId: number): Promise<StoreRecord[]> {
    return (await this.c.rows('SELECT * FROM stores WHERE merchant_id = $1 ORDER BY is_default DESC, id', [merchantId])).map(toStore);
  }

  async findStore(merchantId: number, slug: string): Promise<StoreRecord | undefined> {
    const row = await this.c.one('SELECT * FROM stores WHERE merchant_id = $1 AND slug = $2', [merchantId, slug]);
    return row && toStore(row);
  }

  async findDefaultStore(merchantId: number): Promise<StoreRecord | undefined> {
    const row = await this.c.one('SELECT * FROM stores WHERE merchant_id = $1 AND is_default', [merchantId]);
    return row && toStore(row);
  }

  async upsertStore(merchantId: number, slug: string, input: StoreInputRecord): Promise<StoreRecord> {
    const d = this.c.dialect;
    if (input.is_default)
      await this.c.run('UPDATE stores SET is_default = false WHERE merchant_id = $1 AND slug <> $2 AND is_default', [merchantId, slug]);
    const values = [
      merchantId,
      slug,
      input.name,
      input.locale,
      input.currency,
      d.bool(input.is_default),
      d.bool(input.active),
      d.bool(input.exclude_out_of_stock),
    ];
    const updated = await this.c.one(
      `UPDATE stores SET name = $3, locale = $4, currency = $5, is_default = $6, active = $7,
      exclude_out_of_stock = $8 WHERE merchant_id = $1 AND slug = $2 RETURNING *`,
      values,
    );
    return toStore(updated ?? (await this.insertStore(values)));
  }

  async deleteStore(storeId: number): Promise<void> {
    await this.c.run('DELETE FROM published_products WHERE store_id = $1', [storeId]);
    await this.c.run('DELETE FROM changes WHERE store_id = $1', [storeId]);
    await this.c.run('DELETE FROM stores WHERE id = $1', [storeId]);
  }

  async bumpCatalogVersion(storeIds: number[]): Promise<void> {
    if (storeIds.length === 0) return;
    await this.c.run(`UPDATE stores SET catalog_version = catalog_version + 1 WHERE ${this.c.dialect.inList('id', '$1', 'bigint')}`, [
      this.c.dialect.list(storeIds),
    ]);
  }
}
