// Tenancy's types (spec 1: a merchant, its API keys): the shapes the admin API states, plus what is
// kept beside them. Types only: storage imports these, never the other way round.
import type { components } from '../generated/admin-api.js';

type AdminSchemas = components['schemas'];

export type MerchantRecord = AdminSchemas['Merchant'];

export type ApiKeyRecord = AdminSchemas['ApiKey'] & { merchant_id: number };

/** A key to store: without scopes, a catalog:read key; without stores, one for every store. */
export type NewApiKey = Omit<ApiKeyRecord, 'id' | 'revoked_at' | 'last_used_at' | 'scopes' | 'stores'> &
  Partial<Pick<ApiKeyRecord, 'scopes' | 'stores'>> & { key_hash: Buffer };

/** What a request needs of its active key: who it is, its merchant, scopes and stores. */
export type ActiveApiKeyRecord = Pick<ApiKeyRecord, 'id' | 'merchant_id' | 'name' | 'prefix' | 'scopes' | 'stores'>;
