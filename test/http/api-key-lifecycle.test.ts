// A key's lifecycle (docs/admin.md#key-lifecycle): an optional expiry chosen at issue, after which
// the key answers 401 invalid_token on /v1 and the admin API and its open streams end; and rolling
// a key, which issues a new key record with the same name, scopes and stores while the old one
// keeps working until a time up to 7 days later, then stops. Real HTTP, the project's engine, an
// injected clock.
import { afterEach, describe, expect, it } from 'vitest';
import { fakeClock, HOUR, MINUTE, SECOND, type FakeClock } from '../support/clock.js';
import { adminOk } from '../support/admin-http.js';
import { publicContract } from '../support/contract.js';
import { startTestService, type TestResponse, type TestService } from '../support/service.js';

const DAY = 24 * HOUR;

let service: TestService | undefined;
afterEach(async () => {
  await service?.close();
  service = undefined;
});

async function started(clock: FakeClock, apiKeyCacheMs = 1000): Promise<TestService> {
  service = await startTestService({
    now: clock.now,
    config: { apiKeyCacheMs, changes: { heartbeatSeconds: 1, maxWaitSeconds: 60, livePollIntervalMs: 500 } },
  });
  return service;
}

/** A merchant with store `de` and one product. */
async function shop(s: TestService) {
  const merchant = await s.admin.createMerchant({ name: 'Alpine Outfitters' });
  await s.admin.upsertStore(merchant.id, 'de', {
    name: 'DE',
    locale: 'de-DE',
    currency: 'EUR',
    is_default: true,
    active: true,
    exclude_out_of_stock: false,
  });
  await s.admin.upsertSupplier(merchant.id, 'alpine', 'Alpine');
  await s.admin.createCustomerGroup(merchant.id, 'retail');
  await s.admin.upsertProduct(merchant.id, 'tent', {
    content: { de: { title: 'Zelt', description: null } },
    offers: [{ supplier_ref: 'alpine', quantity: 4, cost: '10.00', currency: 'EUR' }],
  });
  return { id: merchant.id, base: `/admin/v1/merchants/${merchant.id}` };
}

const bearer = (key: string): RequestInit => ({ headers: { Authorization: `Bearer ${key}` } });

/** A key's admin read and its public read: both 200 while it works. */
async function works(s: TestService, base: string, key: string): Promise<[number, number]> {
  return [(await s.adminApi('GET', `${base}/stores`, undefined, bearer(key))).status, (await s.api('/v1/stores', key)).status];
}

/** The 401 of an expired key on both APIs: the RFC 6750 invalid_token challenge of each realm. */
async function expectRefused(s: TestService, base: string, key: string) {
  const admin = await s.adminApi('GET', `${base}/stores`, undefined, bearer(key));
  expect(admin.status).toBe(401);
  expect(admin.headers.get('www-authenticate')).toBe('Bearer realm="admin", error="invalid_token"');
  expect(admin.body.code).toBe('unauthorized');
  const read = await s.api('/v1/stores', key);
  expect(read.status).toBe(401);
  expect(read.headers.get('www-authenticate')).toBe('Bearer realm="catalog", error="invalid_token"');
}

const keyOf = async (s: TestService, base: string, id: number) =>
  ((await adminOk(s, 'GET', `${base}/api-keys`)).data as { id: number; expires_at: string | null }[]).find((k) => k.id === id)!;

describe('a key issued with an expiry', () => {
  it('works until its expires_at, then answers 401 invalid_token on /v1 and the admin API (a remembered key too)', async () => {
    const clock = fakeClock();
    const s = await started(clock, 60_000);
    const merchant = await shop(s);
    const expiresAt = new Date(clock.ms + HOUR).toISOString();
    const created = await adminOk(
      s,
      'POST',
      `${merchant.base}/api-keys`,
      { name: 'temporary', scopes: ['catalog:write'], expires_at: expiresAt },
      201,
    );
    expect(created.expires_at).toBe(expiresAt);
    expect((await keyOf(s, merchant.base, created.id)).expires_at).toBe(expiresAt);
    expect(await works(s, merchant.base, created.key)).toEqual([200, 200]);
    clock.advance(HOUR - 1);
    expect(await works(s, merchant.base, created.key)).toEqual([200, 200]);
    // The key is remembered for a minute (CPS_API_KEY_CACHE_MS), but never past its expiry.
    clock.advance(1);
    await expectRefused(s, merchant.base, created.key);
  });

  it('refuses an expires_at already past, naming it, and issues nothing', async () => {
    const clock = fakeClock();
    const s = await started(clock);
    const merchant = await shop(s);
    const response = await s.adminApi('POST', `${merchant.base}/api-keys`, { name: 'late', expires_at: clock.iso });
    expect(response.status).toBe(400);
    expect(response.body.code).toBe('invalid_body');
    expect(response.body.invalid_params).toEqual([expect.objectContaining({ name: '/expires_at' })]);
    expect(await s.admin.listApiKeys(merchant.id)).toEqual([]);
  });
});

describe('rolling a key', () => {
  it('issues a new key with the same name, scopes and stores; the old one works until the time chosen, then answers 401', async () => {
    const clock = fakeClock();
    const s = await started(clock);
    const merchant = await shop(s);
    const old = await adminOk(
      s,
      'POST',
      `${merchant.base}/api-keys`,
      { name: 'shop de', scopes: ['catalog:read', 'webhooks:write'], stores: ['de'] },
      201,
    );
    const until = new Date(clock.ms + DAY).toISOString();
    const rolled = await adminOk(s, 'POST', `${merchant.base}/api-keys/${old.id}/roll`, { expires_at: until }, 201);
    expect(rolled).toEqual({
      id: expect.any(Number),
      name: 'shop de',
      prefix: rolled.key.slice(0, 12),
      scopes: ['catalog:read', 'webhooks:write'],
      stores: ['de'],
      allowed_origins: [],
      created_at: clock.iso,
      revoked_at: null,
      expires_at: null,
      rolled_from: old.id,
      last_used_at: null,
      key: expect.stringMatching(/^cps_[A-Za-z0-9_-]{43}$/),
    });
    expect(rolled.id).not.toBe(old.id);
    expect(rolled.key).not.toBe(old.key);
    expect((await keyOf(s, merchant.base, old.id)).expires_at).toBe(until);
    // Both work for the overlap (the old one on the admin API with its webhooks:write, on /v1 with catalog:read).
    expect((await s.adminApi('GET', `${merchant.base}/webhook-endpoints`, undefined, bearer(old.key))).status).toBe(200);
    expect((await s.adminApi('GET', `${merchant.base}/webhook-endpoints`, undefined, bearer(rolled.key))).status).toBe(200);
    expect((await s.api('/v1/stores', old.key)).status).toBe(200);
    clock.advance(DAY - SECOND);
    expect((await s.api('/v1/stores', old.key)).status).toBe(200);
    clock.advance(SECOND);
    const admin = await s.adminApi('GET', `${merchant.base}/webhook-endpoints`, undefined, bearer(old.key));
    expect(admin.status).toBe(401);
    expect(admin.headers.get('www-authenticate')).toBe('Bearer realm="admin", error="invalid_token"');
    expect((await s.api('/v1/stores', old.key)).status).toBe(401);
    expect((await s.api('/v1/stores', rolled.key)).status).toBe(200);
    // The audit log tells which key was rolled into which.
    const audit = (await adminOk(s, 'GET', `${merchant.base}/audit-log`)).data as { action: string; detail: string }[];
    expect(audit.find((e) => e.action === 'api_key.roll')?.detail).toContain(`rolled into key ${rolled.id}`);
  });

  it('stops the old key at once without a body', async () => {
    const clock = fakeClock();
    const s = await started(clock, 60_000);
    const merchant = await shop(s);
    const old = await adminOk(s, 'POST', `${merchant.base}/api-keys`, { name: 'erp', scopes: ['catalog:write'] }, 201);
    expect(await works(s, merchant.base, old.key)).toEqual([200, 200]);
    const rolled = await adminOk(s, 'POST', `${merchant.base}/api-keys/${old.id}/roll`, undefined, 201);
    expect((await keyOf(s, merchant.base, old.id)).expires_at).toBe(clock.iso);
    // Even though this process remembered the old key for a minute.
    await expectRefused(s, merchant.base, old.key);
    expect(await works(s, merchant.base, rolled.key)).toEqual([200, 200]);
  });

  it('refuses a time more than 7 days ahead or in the past (400), and a revoked or expired key (409)', async () => {
    const clock = fakeClock();
    const s = await started(clock);
    const merchant = await shop(s);
    const key = await adminOk(s, 'POST', `${merchant.base}/api-keys`, { name: 'erp' }, 201);
    for (const expiresAt of [new Date(clock.ms + 7 * DAY + SECOND).toISOString(), new Date(clock.ms - SECOND).toISOString()]) {
      const response = await s.adminApi('POST', `${merchant.base}/api-keys/${key.id}/roll`, { expires_at: expiresAt });
      expect(response.status).toBe(400);
      expect(response.body.invalid_params).toEqual([expect.objectContaining({ name: '/expires_at' })]);
    }
    expect(await s.admin.listApiKeys(merchant.id)).toHaveLength(1);
    // Exactly 7 days is allowed; a second roll of the same key keeps its earlier end.
    const week = new Date(clock.ms + 7 * DAY).toISOString();
    await adminOk(s, 'POST', `${merchant.base}/api-keys/${key.id}/roll`, { expires_at: week }, 201);
    await adminOk(s, 'POST', `${merchant.base}/api-keys/${key.id}/roll`, { expires_at: week }, 201);
    clock.advance(7 * DAY);
    const expired = await s.adminApi('POST', `${merchant.base}/api-keys/${key.id}/roll`);
    expect(expired.status).toBe(409);
    expect(expired.body.detail).toContain('expired');
    const revoked = await adminOk(s, 'POST', `${merchant.base}/api-keys`, { name: 'gone' }, 201);
    await adminOk(s, 'DELETE', `${merchant.base}/api-keys/${revoked.id}`);
    expect((await s.adminApi('POST', `${merchant.base}/api-keys/${revoked.id}/roll`)).status).toBe(409);
    expect((await s.adminApi('POST', `${merchant.base}/api-keys/${revoked.id + 100}/roll`)).status).toBe(404);
  });
});

/** An open event stream of `/v1/changes`; resolves once the body ends. */
async function openStream(s: TestService, key: string) {
  const first = (await s.api('/v1/changes?store=de', key)).body as { next_since: string; next_id: number };
  const url = `${s.url}/v1/changes?store=de&since=${encodeURIComponent(first.next_since)}&since_id=${first.next_id}`;
  const response = await fetch(url, { headers: { Authorization: `Bearer ${key}`, Accept: 'text/event-stream' } });
  publicContract.validateResponse('GET', url, response.status, response.headers, '');
  expect(response.status).toBe(200);
  const reader = response.body!.getReader();
  return {
    /** The client goes away. */
    close: () => reader.cancel(),
    async ended(): Promise<true> {
      for (;;) if ((await reader.read()).done) return true;
    },
  };
}

const waiting = (s: TestService, count: number) => expect.poll(() => s.service.liveFeed.waitingClients, { timeout: 5000 }).toBe(count);

describe('open streams and long-polls of an expiring key', () => {
  it('ends the stream of a key once its expiry passes (at the next re-check of held keys), and a long-poll answers 401', async () => {
    const clock = fakeClock();
    const s = await started(clock, 100);
    const merchant = await shop(s);
    const created = await s.admin.createApiKey(merchant.id, 'live', undefined, { expires_at: new Date(clock.ms + MINUTE).toISOString() });
    const kept = await s.admin.createApiKey(merchant.id, 'kept');
    const stream = await openStream(s, created.key);
    const other = await openStream(s, kept.key);
    await waiting(s, 2);
    const first = (await s.api('/v1/changes?store=de', created.key)).body as { next_since: string; next_id: number };
    const poll: Promise<TestResponse> = s.api(
      `/v1/changes?store=de&since=${encodeURIComponent(first.next_since)}&since_id=${first.next_id}&wait=60`,
      created.key,
    );
    await waiting(s, 3);
    clock.advance(MINUTE);
    expect(await stream.ended()).toBe(true);
    const answer = await poll;
    expect(answer.status).toBe(401);
    expect(answer.headers.get('www-authenticate')).toBe('Bearer realm="catalog", error="invalid_token"');
    // The other key's stream stays open.
    await waiting(s, 1);
    expect(s.service.heldApiKeys.keys).toBe(1);
    await other.close();
  });

  it('ends the streams of a key rolled to stop now at once', async () => {
    const clock = fakeClock();
    const s = await started(clock, 60_000);
    const merchant = await shop(s);
    const old = await s.admin.createApiKey(merchant.id, 'live');
    const stream = await openStream(s, old.key);
    await waiting(s, 1);
    await adminOk(s, 'POST', `${merchant.base}/api-keys/${old.id}/roll`, {}, 201);
    expect(await stream.ended()).toBe(true);
    expect(s.service.liveFeed.connections).toBe(0);
  });
});
