// A merchant has at most CPS_API_KEYS_PER_MERCHANT active keys (3 here): one more
// answers 409 conflict naming the limit, whoever creates it and however many at once (the count
// and the insert are one step under the merchant's row lock); a revoked key frees its place, and
// another merchant's keys are its own. Real HTTP on 127.0.0.1, on either engine.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService } from '../support/service.js';

const LIMIT = 3;

describe('API keys per merchant', () => {
  let service: TestService;

  beforeAll(async () => {
    service = await startTestService({ config: { apiKeysPerMerchant: LIMIT } });
  });
  afterAll(() => service.close());

  const create = (merchantId: number, name: string) => service.adminApi('POST', `/admin/v1/merchants/${merchantId}/api-keys`, { name });

  it('refuses one more active key than the limit with 409 naming it, and takes one again once a key is revoked', async () => {
    const merchant = (await service.admin.createMerchant({ name: 'Key Collector' })).id;
    const created = [];
    for (let i = 0; i < LIMIT; i++) created.push(await create(merchant, `key ${i}`));
    expect(created.map((r) => r.status)).toEqual([201, 201, 201]);

    const refused = await create(merchant, 'one more');
    expect(refused.status).toBe(409);
    expect(refused.headers.get('content-type')).toContain('application/problem+json');
    expect(refused.body.code).toBe('conflict');
    expect(refused.body.detail).toContain(`has ${LIMIT} active API keys, the most a merchant may have (${LIMIT})`);

    // Another merchant's keys are its own.
    const other = (await service.admin.createMerchant({ name: 'Other Merchant' })).id;
    expect((await create(other, 'first')).status).toBe(201);

    expect((await service.adminApi('DELETE', `/admin/v1/merchants/${merchant}/api-keys/${created[0]!.body.id}`)).status).toBe(204);
    expect((await create(merchant, 'replacement')).status).toBe(201);
    expect((await create(merchant, 'one more again')).status).toBe(409);
  });

  it('holds the limit for creations sent all at once', async () => {
    const merchant = (await service.admin.createMerchant({ name: 'Parallel Keys' })).id;
    const statuses = (await Promise.all(Array.from({ length: 12 }, (_, i) => create(merchant, `parallel ${i}`)))).map((r) => r.status);
    expect(statuses.filter((s) => s === 201)).toHaveLength(LIMIT);
    expect(statuses.filter((s) => s === 409)).toHaveLength(12 - LIMIT);
    const listed = await service.adminApi('GET', `/admin/v1/merchants/${merchant}/api-keys`);
    expect(listed.body.data).toHaveLength(LIMIT);
  });
});
