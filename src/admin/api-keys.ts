// API keys (product decisions, "Tenancy, keys, stores"): 32 random bytes, shown once, stored only
// as a SHA-256 hash, compared in constant time, revocable. A key belongs to exactly one merchant.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { ApiKeyRecord, TenancyStore } from '../storage/port.js';

const KEY_PREFIX = 'cps_';
const KEY_SHAPE = /^cps_[A-Za-z0-9_-]{43}$/;

export function hashApiKey(key: string): Buffer {
  return createHash('sha256').update(key).digest();
}

/** Issues a key for the merchant; the plain key is returned here and never again. */
export async function issueApiKey(
  storage: TenancyStore, merchantId: number, name: string, now: Date,
): Promise<ApiKeyRecord & { key: string }> {
  const key = `${KEY_PREFIX}${randomBytes(32).toString('base64url')}`;
  const record = await storage.insertApiKey({
    merchant_id: merchantId, name, prefix: key.slice(0, 12), key_hash: hashApiKey(key), created_at: now.toISOString(),
  });
  return { ...record, key };
}

/** The active key a presented key is (its id and merchant), or undefined for a malformed, unknown or revoked key. */
export async function activeApiKey(storage: TenancyStore, key: string): Promise<{ id: number; merchant_id: number } | undefined> {
  if (!KEY_SHAPE.test(key)) return undefined;
  const presented = hashApiKey(key);
  const found = await storage.findActiveApiKey(presented);
  if (!found || !timingSafeEqual(found.key_hash, presented)) return undefined;
  return { id: found.id, merchant_id: found.merchant_id };
}

/** The merchant a presented key belongs to, or undefined for a malformed, unknown or revoked key. */
export async function merchantForApiKey(storage: TenancyStore, key: string): Promise<number | undefined> {
  return (await activeApiKey(storage, key))?.merchant_id;
}
