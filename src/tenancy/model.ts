// Tenancy's types (spec 1: a merchant, its API keys): the shapes the admin API states, plus what is
// kept beside them. Types only: storage imports these, never the other way round.
import type { components } from '../generated/admin-api.js';

type AdminSchemas = components['schemas'];

export type MerchantRecord = AdminSchemas['Merchant'];

export type ApiKeyRecord = AdminSchemas['ApiKey'] & { merchant_id: number };

/**
 * A key to store: without scopes, a catalog:read key; without stores, one for every store; without
 * expires_at, one that works until revoked; rolled_from, the key a roll replaces.
 */
export type NewApiKey = Omit<
  ApiKeyRecord,
  'id' | 'revoked_at' | 'last_used_at' | 'scopes' | 'stores' | 'expires_at' | 'rolled_from' | 'allowed_origins'
> &
  Partial<Pick<ApiKeyRecord, 'scopes' | 'stores' | 'expires_at' | 'rolled_from' | 'allowed_origins'>> & { key_hash: Buffer };

/** What an update of a key may change (admin.yaml: UpdateApiKeyInput); an absent field stays as it is. */
export type ApiKeyPatch = Partial<Pick<ApiKeyRecord, 'name' | 'allowed_origins'>>;

/** What a request needs of its unrevoked key: who it is, its merchant, scopes, stores and browser origins, and when it expires. */
export type ActiveApiKeyRecord = Pick<
  ApiKeyRecord,
  'id' | 'merchant_id' | 'name' | 'prefix' | 'scopes' | 'stores' | 'allowed_origins' | 'expires_at'
>;
