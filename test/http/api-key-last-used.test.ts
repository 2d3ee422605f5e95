// API keys show when each was last used, recorded without a write per request: a
// process writes a key's use at most once per CPS_API_KEY_LAST_USED_SECONDS (default 60 s), in the
// background, and the admin API's key list shows it. A failed write fails no request and is tried
// again with the key's next use.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { adminOk, createMerchant, type MerchantHandle } from '../support/admin-http.js';
import { fakeClock, SECOND, type FakeClock } from '../support/clock.js';
import { startTestService, type TestService } from '../support/service.js';

let service: TestService | undefined;
afterEach(async () => {
  vi.restoreAllMocks();
  await service?.close();
  service = undefined;
});

async function started(apiKeyLastUsedSeconds?: number): Promise<{ s: TestService; clock: FakeClock; merchant: MerchantHandle }> {
  const clock = fakeClock('2026-11-26T08:00:00.000Z');
  service = await startTestService({ now: clock.now, config: apiKeyLastUsedSeconds === undefined ? {} : { apiKeyLastUsedSeconds } });
  const merchant = await createMerchant(service, 'Key User');
  await adminOk(service, 'PUT', `${merchant.base}/stores/de`, { name: 'Deutschland', locale: 'de-DE', currency: 'EUR' });
  return { s: service, clock, merchant };
}

/** The merchant's key as the admin API lists it, once the writes under way are done. */
async function listedKey(s: TestService, merchant: MerchantHandle): Promise<{ id: number; last_used_at: string | null }> {
  await s.service.apiKeyUses.flush();
  return (await adminOk(s, 'GET', `${merchant.base}/api-keys`)).data[0];
}

describe("an API key's last use (CPS_API_KEY_LAST_USED_SECONDS)", () => {
  it('defaults to 60 s, and refuses 0 (a write per request) naming the variable', () => {
    expect(loadConfig({}).apiKeyLastUsedSeconds).toBe(60);
    expect(loadConfig({ CPS_API_KEY_LAST_USED_SECONDS: '300' }).apiKeyLastUsedSeconds).toBe(300);
    expect(() => loadConfig({ CPS_API_KEY_LAST_USED_SECONDS: '0' })).toThrow(/CPS_API_KEY_LAST_USED_SECONDS must be at least 1/);
  });

  it('is null until the key is used, then the time of a request, written once per interval however many requests come', async () => {
    const { s, clock, merchant } = await started();
    expect((await listedKey(s, merchant)).last_used_at).toBeNull();
    const writes = vi.spyOn(s.storage, 'recordApiKeyUse');

    for (let i = 0; i < 5; i++) expect((await s.api('/v1/stores', merchant.key)).status).toBe(200);
    expect(await listedKey(s, merchant)).toMatchObject({ last_used_at: '2026-11-26T08:00:00.000Z' });
    expect(writes).toHaveBeenCalledTimes(1);

    clock.advance(59 * SECOND);
    for (let i = 0; i < 5; i++) expect((await s.api('/v1/products', merchant.key)).status).toBe(200);
    expect(await listedKey(s, merchant)).toMatchObject({ last_used_at: '2026-11-26T08:00:00.000Z' });
    expect(writes).toHaveBeenCalledTimes(1);

    clock.advance(SECOND);
    expect((await s.api('/v1/stores', merchant.key)).status).toBe(200);
    expect(await listedKey(s, merchant)).toMatchObject({ last_used_at: '2026-11-26T08:01:00.000Z' });
    expect(writes).toHaveBeenCalledTimes(2);
  });

  it('records nothing for a refused request, and each key on its own', async () => {
    const { s, clock, merchant } = await started(10);
    const spare = await adminOk(s, 'POST', `${merchant.base}/api-keys`, { name: 'spare' }, 201);
    expect((await s.api('/v1/stores', `${merchant.key.slice(0, -2)}xx`)).status).toBe(401);
    clock.advance(5 * SECOND);
    expect((await s.api('/v1/stores', spare.key)).status).toBe(200);
    await s.service.apiKeyUses.flush();
    const keys = (await adminOk(s, 'GET', `${merchant.base}/api-keys`)).data;
    expect(keys.map((k: { id: number; last_used_at: string | null }) => [k.id, k.last_used_at])).toEqual([
      [keys[0].id, null],
      [spare.id, '2026-11-26T08:00:05.000Z'],
    ]);
  });

  it("never fails a request when the write fails, and writes at the key's next use instead", async () => {
    const { s, clock, merchant } = await started();
    const writes = vi.spyOn(s.storage, 'recordApiKeyUse').mockRejectedValueOnce(new Error('database is locked'));
    expect((await s.api('/v1/stores', merchant.key)).status).toBe(200);
    expect((await listedKey(s, merchant)).last_used_at).toBeNull();
    clock.advance(SECOND);
    expect((await s.api('/v1/stores', merchant.key)).status).toBe(200);
    expect((await listedKey(s, merchant)).last_used_at).toBe('2026-11-26T08:00:01.000Z');
    expect(writes).toHaveBeenCalledTimes(2);
  });
});
