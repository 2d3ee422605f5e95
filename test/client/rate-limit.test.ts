// The typed client waits out the per-key rate limit: a 429 with Retry-After is slept off (on the
// service's fake clock, so no real time passes) and the request sent again.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDemoCatalog } from '../../src/admin/demo.js';
import { CatalogApiError, createCatalogClient, iterateProducts, listStores, type RateLimitRetryOptions } from '../../src/client/index.js';
import { startTestService, type TestService } from '../support/service.js';

let ms = Date.parse('2026-03-01T10:00:00Z');
let service: TestService;
let key: string;

beforeAll(async () => {
  // A bucket of 3 requests refilling at 1 per second, on a clock the test moves.
  service = await startTestService({ now: () => new Date(ms), config: { rateLimit: { burst: 3, perSecond: 1 } } });
  key = (await buildDemoCatalog(service.admin, 60)).api_key;
});
afterAll(() => service.close());

function client(rateLimit: RateLimitRetryOptions = {}) {
  const statuses: number[] = [];
  const slept: number[] = [];
  const catalog = createCatalogClient({
    baseUrl: service.url,
    apiKey: key,
    fetch: async (request) => {
      const response = await service.fetch(request);
      statuses.push(response.status);
      return response;
    },
    rateLimit: {
      ...rateLimit,
      sleep: async (wait) => {
        slept.push(wait);
        ms += wait;
      },
    },
  });
  return { catalog, statuses, slept };
}

describe('the client and the rate limit', () => {
  it('waits Retry-After on a 429 and sends the request again, so a paged read completes', async () => {
    ms += 60_000; // a full bucket
    const { catalog, statuses, slept } = client();
    const ids: number[] = [];
    for await (const product of iterateProducts(catalog, { store: 'de', perPage: 10 })) ids.push(product.id);
    expect(ids.length).toBeGreaterThan(30);
    expect(new Set(ids).size).toBe(ids.length);
    expect(statuses.filter((s) => s === 429).length).toBeGreaterThan(0);
    expect(statuses.at(-1)).toBe(200);
    expect(slept.length).toBe(statuses.filter((s) => s === 429).length);
    expect(slept.every((wait) => wait === 1000)).toBe(true);
  });

  it('hands the 429 back at once as a CatalogApiError with retries: 0', async () => {
    ms += 60_000;
    for (let i = 0; i < 3; i++) await listStores(client({ retries: 0 }).catalog);
    const { catalog, statuses, slept } = client({ retries: 0 });
    const error = await listStores(catalog).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(CatalogApiError);
    expect((error as CatalogApiError).status).toBe(429);
    expect((error as CatalogApiError).problem?.code).toBe('rate_limited');
    expect(statuses).toEqual([429]);
    expect(slept).toEqual([]);
  });

  it('gives up after `retries` waits when the bucket stays empty, handing the last 429 back', async () => {
    ms += 60_000;
    for (let i = 0; i < 3; i++) await listStores(client({ retries: 0 }).catalog);
    const statuses: number[] = [];
    const slept: number[] = [];
    const catalog = createCatalogClient({
      baseUrl: service.url,
      apiKey: key,
      fetch: async (request) => {
        const response = await service.fetch(request);
        statuses.push(response.status);
        return response;
      },
      // Sleeps that take no time on the service's clock: the bucket never refills.
      rateLimit: {
        retries: 2,
        sleep: async (wait) => {
          slept.push(wait);
        },
      },
    });
    const error = await listStores(catalog).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect((error as CatalogApiError).status).toBe(429);
    expect(statuses).toEqual([429, 429, 429]);
    expect(slept).toEqual([1000, 1000]);
  });

  it('stops waiting as soon as the request is aborted', async () => {
    ms += 60_000;
    for (let i = 0; i < 3; i++) await listStores(client({ retries: 0 }).catalog);
    const controller = new AbortController();
    let requests = 0;
    const catalog = createCatalogClient({
      baseUrl: service.url,
      apiKey: key,
      fetch: (request) => {
        requests++;
        return service.fetch(request);
      },
      // The default, real timer: Retry-After is 1 s, the abort comes after 20 ms. (The service's
      // clock stands still, so without the abort the client would retry 3 times and get a 429.)
      rateLimit: { retries: 3 },
    });
    setTimeout(() => controller.abort(new Error('cancelled by the caller')), 20);
    const error = await catalog.GET('/v1/stores', { signal: controller.signal }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect((error as Error).message).toBe('cancelled by the caller');
    expect(requests).toBe(1);
  });

  it('does not wait longer than maxWaitSeconds', async () => {
    ms += 60_000;
    for (let i = 0; i < 3; i++) await listStores(client({ retries: 0 }).catalog);
    const { catalog, statuses, slept } = client({ maxWaitSeconds: 0 });
    await expect(listStores(catalog)).rejects.toBeInstanceOf(CatalogApiError);
    expect(statuses).toEqual([429]);
    expect(slept).toEqual([]);
  });
});
