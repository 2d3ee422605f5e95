// docs/decisions.md#api-keys with CPS_API_KEY_CACHE_MS: a process accepts an active
// key it looked up for that long without looking again. A key revoked through this process's admin
// API stops working here at once; revoked by another process (written straight to the database
// here), it stops working within the cache time; unknown and revoked keys are never remembered.
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { hashApiKey } from '../../src/tenancy/api-keys.js';
import { adminOk, createMerchant, type MerchantHandle } from '../support/admin-http.js';
import { fakeClock, type FakeClock } from '../support/clock.js';
import { startTestService, type TestService } from '../support/service.js';

let service: TestService | undefined;
afterEach(async () => {
  await service?.close();
  service = undefined;
});

async function started(apiKeyCacheMs?: number): Promise<{ service: TestService; clock: FakeClock; merchant: MerchantHandle }> {
  const clock = fakeClock('2026-11-26T08:00:00.000Z');
  service = await startTestService({ now: clock.now, config: apiKeyCacheMs === undefined ? {} : { apiKeyCacheMs } });
  const merchant = await createMerchant(service, 'Key Holder');
  await adminOk(service, 'PUT', `${merchant.base}/stores/de`, { name: 'Deutschland', locale: 'de-DE', currency: 'EUR' });
  return { service, clock, merchant };
}

/** The key's id, as the admin API lists it. */
async function keyId(s: TestService, merchant: MerchantHandle): Promise<number> {
  return (await adminOk(s, 'GET', `${merchant.base}/api-keys`)).data[0].id;
}

describe('API keys remembered per process (CPS_API_KEY_CACHE_MS)', () => {
  it('defaults to 1000 ms', async () => {
    const { service: s } = await started();
    expect(s.config.apiKeyCacheMs).toBe(1000);
  });

  it('keeps accepting a key revoked by another process until the cache time has passed, then answers 401', async () => {
    const { service: s, clock, merchant } = await started(1000);
    expect((await s.api('/v1/stores', merchant.key)).status).toBe(200);
    // Another process revokes it: this one hears nothing of it.
    expect(await s.storage.revokeApiKey(merchant.id, await keyId(s, merchant), clock.iso)).toBe(true);
    clock.advance(999);
    expect((await s.api('/v1/stores', merchant.key)).status).toBe(200);
    clock.advance(1);
    const refused = await s.api('/v1/stores', merchant.key);
    expect(refused.status).toBe(401);
    expect(refused.headers.get('www-authenticate')).toBe('Bearer realm="catalog", error="invalid_token"');
    // A revoked key is not remembered: it stays refused.
    expect((await s.api('/v1/products', merchant.key)).status).toBe(401);
  });

  it("refuses a key revoked through this process's admin API at once, its other keys still accepted", async () => {
    const { service: s, merchant } = await started(60_000);
    const spare = await adminOk(s, 'POST', `${merchant.base}/api-keys`, { name: 'spare' }, 201);
    expect((await s.api('/v1/stores', spare.key)).status).toBe(200);
    expect((await s.api('/v1/stores', merchant.key)).status).toBe(200);
    await adminOk(s, 'DELETE', `${merchant.base}/api-keys/${spare.id}`);
    expect((await s.api('/v1/stores', spare.key)).status).toBe(401);
    expect((await s.api('/v1/stores', merchant.key)).status).toBe(200);
  });

  it('does not remember an unknown key: it works as soon as it exists', async () => {
    const { service: s, clock, merchant } = await started(60_000);
    const key = `cps_${randomBytes(32).toString('base64url')}`;
    expect((await s.api('/v1/stores', key)).status).toBe(401);
    await s.storage.insertApiKey({
      merchant_id: merchant.id,
      name: 'late',
      prefix: key.slice(0, 12),
      key_hash: hashApiKey(key),
      created_at: clock.iso,
    });
    expect((await s.api('/v1/stores', key)).status).toBe(200);
  });

  it('looks every key up when the cache time is 0: a revocation by another process counts at once', async () => {
    const { service: s, clock, merchant } = await started(0);
    expect((await s.api('/v1/stores', merchant.key)).status).toBe(200);
    await s.storage.revokeApiKey(merchant.id, await keyId(s, merchant), clock.iso);
    expect((await s.api('/v1/stores', merchant.key)).status).toBe(401);
  });
});
