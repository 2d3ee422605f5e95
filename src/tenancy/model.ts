// Tenancy's types (spec 1: a merchant, its API keys): the shapes the admin API states, plus what is
// kept beside them. Types only: storage imports these, never the other way round.
import type { components } from '../generated/admin-api.js';

type AdminSchemas = components['schemas'];

export type MerchantRecord = AdminSchemas['Merchant'];

export type ApiKeyRecord = AdminSchemas['ApiKey'] & { merchant_id: number };
