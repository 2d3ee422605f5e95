import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDemoCatalog } from '../../src/admin/demo.js';
import { startTestService, type TestService } from '../support/service.js';
import { ContractViolation, publicContract } from '../support/contract.js';

let service: TestService;
let key: string;

beforeAll(async () => {
  service = await startTestService();
  key = (await buildDemoCatalog(service.admin, 60)).api_key;
});
afterAll(() => service.close());

describe('the demo catalog over real HTTP', () => {
  it('lists the default store first and pages products by id', async () => {
    const stores = await service.api('/v1/stores', key);
    expect(stores.body.data.map((s: { slug: string }) => s.slug)).toEqual(['de', 'pl', 'uk']);
    const page = await service.api('/v1/products?per_page=25&page=3', key);
    expect(page.body.meta).toEqual({ current_page: 3, per_page: 25, last_page: 3, total: 60 });
    expect(page.body.data.map((p: { id: number }) => p.id)).toEqual(Array.from({ length: 10 }, (_, i) => 51 + i));
  });
});

describe('the contract harness', () => {
  it('rejects a response whose body breaks the schema', () => {
    const headers = new Headers({ 'content-type': 'application/json' });
    expect(() => publicContract.validateResponse('GET', '/v1/stores', 200, headers, '{"data":[{"slug":"de"}]}')).toThrow(ContractViolation);
  });
  it('rejects an undocumented status', () => {
    const headers = new Headers({ 'content-type': 'application/problem+json' });
    expect(() => publicContract.validateResponse('GET', '/v1/stores', 418, headers, '{}')).toThrow(/not documented/);
  });
});
