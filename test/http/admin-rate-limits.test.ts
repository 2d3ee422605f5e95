// The admin API's rate limits (SECURITY.md "Admin API", docs/admin.md#rate-limits): a token
// bucket per credential (the admin token, each merchant API key) advertised with RateLimit-Policy
// and RateLimit and answered 429 `rate_limited` with Retry-After when empty; and wrong tokens
// throttled per client address, answered 429 before any token is checked. Real HTTP, the
// project's engine, an injected clock (no sleeps); client addresses through a trusted proxy's
// X-Forwarded-For.
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { fakeClock, SECOND, type FakeClock } from '../support/clock.js';
import { ADMIN_TOKEN, startTestService, type TestResponse, type TestService } from '../support/service.js';

let service: TestService | undefined;
afterEach(async () => {
  await service?.close();
  service = undefined;
});

async function started(clock: FakeClock, config: Parameters<typeof startTestService>[0] = {}): Promise<TestService> {
  service = await startTestService({ now: clock.now, ...config });
  return service;
}

/** A merchant with a catalog:write key, made in the domain (no admin request spent). */
async function merchantWithKey(s: TestService) {
  const merchant = await s.admin.createMerchant({ name: 'Alpine Outfitters' });
  const key = await s.admin.createApiKey(merchant.id, 'erp', undefined, { scopes: ['catalog:write'] });
  return { id: merchant.id, key: key.key, base: `/admin/v1/merchants/${merchant.id}` };
}

const as = (token: string, address?: string): RequestInit => ({
  headers: { Authorization: `Bearer ${token}`, ...(address ? { 'X-Forwarded-For': address } : {}) },
});

function expectRateLimited(response: TestResponse, retryAfter: string) {
  expect(response.status, response.text).toBe(429);
  expect(response.headers.get('content-type')).toContain('application/problem+json');
  expect(response.body.code).toBe('rate_limited');
  expect(response.headers.get('retry-after')).toBe(retryAfter);
}

describe('admin API rate limits per credential', () => {
  it('answers the operator token 429 with Retry-After once its bucket is empty, with RateLimit headers on every answer', async () => {
    const clock = fakeClock();
    const s = await started(clock, { config: { adminRateLimit: { burst: 3, perSecond: 1 } } });
    const remaining: string[] = [];
    for (let i = 0; i < 3; i++) {
      const response = await s.adminApi('GET', '/admin/v1/merchants');
      expect(response.status).toBe(200);
      expect(response.headers.get('ratelimit-policy')).toBe('"default";q=3;w=3');
      remaining.push(response.headers.get('ratelimit')!);
    }
    expect(remaining).toEqual(['"default";r=2;t=1', '"default";r=1;t=2', '"default";r=0;t=3']);
    const refused = await s.adminApi('POST', '/admin/v1/merchants', { name: 'Not Made' });
    expectRateLimited(refused, '1');
    expect(refused.headers.get('ratelimit')).toBe('"default";r=0;t=3');
    // Refused before its handler: nothing was written.
    expect((await s.admin.listMerchants()).map((m) => m.name)).not.toContain('Not Made');
    clock.advance(SECOND);
    expect((await s.adminApi('GET', '/admin/v1/merchants')).status).toBe(200);
  });

  it("keeps each credential's bucket its own: one key's exhaustion affects neither the operator, nor another key, nor the key's /v1 bucket", async () => {
    const clock = fakeClock();
    const s = await started(clock, { config: { adminRateLimit: { burst: 2, perSecond: 1 } } });
    const merchant = await merchantWithKey(s);
    const other = await s.admin.createApiKey(merchant.id, 'pim', undefined, { scopes: ['catalog:write'] });
    for (let i = 0; i < 2; i++) expect((await s.adminApi('GET', `${merchant.base}/stores`, undefined, as(merchant.key))).status).toBe(200);
    expectRateLimited(await s.adminApi('GET', `${merchant.base}/stores`, undefined, as(merchant.key)), '1');
    const operator = await s.adminApi('GET', `${merchant.base}/stores`);
    expect(operator.status).toBe(200);
    expect(operator.headers.get('ratelimit')).toBe('"default";r=1;t=1');
    const otherKey = await s.adminApi('GET', `${merchant.base}/stores`, undefined, as(other.key));
    expect(otherKey.status).toBe(200);
    expect(otherKey.headers.get('ratelimit')).toBe('"default";r=1;t=1');
    // The public API's bucket of the same key is untouched (600 at once by default).
    const read = await s.api('/v1/stores', merchant.key);
    expect(read.status).toBe(200);
    expect(read.headers.get('ratelimit')).toBe('"default";r=599;t=1');
  });

  it('leaves the defaults generous: 1000 at once, 100 per second', async () => {
    // The settings' defaults (the test service's own are wide open for the other tests).
    const defaults = loadConfig({}).adminRateLimit;
    const s = await started(fakeClock(), { config: { adminRateLimit: defaults } });
    expect(defaults).toEqual({ burst: 1000, perSecond: 100 });
    const response = await s.adminApi('GET', '/admin/v1/merchants');
    expect(response.headers.get('ratelimit-policy')).toBe('"default";q=1000;w=10');
    expect(response.headers.get('ratelimit')).toBe('"default";r=999;t=1');
  });
});

describe('wrong admin tokens throttled per client address', () => {
  const proxied = { trustedProxies: ['127.0.0.1'], adminAuthFailures: { max: 3, windowMinutes: 1 } };

  it('answers 429 with Retry-After after N wrong tokens from an address, before checking even the right token, until the wait is over', async () => {
    const clock = fakeClock();
    const s = await started(clock, { config: proxied });
    const merchant = await merchantWithKey(s);
    for (const wrong of [`${ADMIN_TOKEN}x`, `cps_${'A'.repeat(43)}`, 'not-a-token']) {
      const response = await s.adminApi('GET', '/admin/v1/merchants', undefined, as(wrong, '198.51.100.7'));
      expect(response.status).toBe(401);
    }
    // 3 failures in a minute: one more every 20 s.
    for (const token of [ADMIN_TOKEN, merchant.key, 'still-wrong']) {
      const response = await s.adminApi('GET', `${merchant.base}/stores`, undefined, as(token, '198.51.100.7'));
      expectRateLimited(response, '20');
      expect(response.headers.get('ratelimit')).toBeNull();
    }
    clock.advance(20 * SECOND);
    expect((await s.adminApi('GET', '/admin/v1/merchants', undefined, as(ADMIN_TOKEN, '198.51.100.7'))).status).toBe(200);
    expect((await s.adminApi('GET', '/admin/v1/merchants', undefined, as('wrong-again', '198.51.100.7'))).status).toBe(401);
    expectRateLimited(await s.adminApi('GET', '/admin/v1/merchants', undefined, as(ADMIN_TOKEN, '198.51.100.7')), '20');
  });

  it('throttles only that address, in every spelling of it, and never counts a request without a token', async () => {
    const clock = fakeClock();
    const s = await started(clock, { config: proxied });
    for (let i = 0; i < 3; i++) {
      expect((await s.adminApi('GET', '/admin/v1/merchants', undefined, as('wrong', '2001:db8::7'))).status).toBe(401);
    }
    expectRateLimited(await s.adminApi('GET', '/admin/v1/merchants', undefined, as(ADMIN_TOKEN, '2001:0DB8:0:0:0:0:0:0007')), '20');
    expect((await s.adminApi('GET', '/admin/v1/merchants', undefined, as(ADMIN_TOKEN, '2001:db8::8'))).status).toBe(200);
    expect((await s.adminApi('GET', '/admin/v1/merchants', undefined, as(ADMIN_TOKEN))).status).toBe(200);
    // Without a token nothing is guessed: 401 as ever, however often, and it costs the address nothing.
    for (let i = 0; i < 5; i++) {
      const response = await s.adminApi('GET', '/admin/v1/merchants', undefined, {
        headers: { Authorization: '', 'X-Forwarded-For': '203.0.113.9' },
      });
      expect(response.status).toBe(401);
    }
    expect((await s.adminApi('GET', '/admin/v1/merchants', undefined, as(ADMIN_TOKEN, '203.0.113.9'))).status).toBe(200);
  });
});
