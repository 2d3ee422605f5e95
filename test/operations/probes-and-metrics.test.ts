// The operations API (openapi/operations.yaml): /healthz, /readyz and /metrics on the real
// service, every response checked against the operations document by the contract harness.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { adminOk, createMerchant, importNdjson, simpleProduct } from '../support/admin-http.js';
import { LogCapture } from '../support/logs.js';
import { sample } from '../support/metrics.js';
import { ASSUMED_DESCRIPTOR_LIMIT, readDescriptorLimit } from '../../src/operations/descriptors.js';
import { sqliteStorageOf, startTestService, type TestService } from '../support/service.js';
import { startWebhookWorld, MINUTE, SECOND, type WebhookWorld } from '../webhooks/harness.js';

async function scrape(service: TestService, token?: string): Promise<string> {
  const response = await service.fetch(`${service.url}/metrics`, token ? { headers: { Authorization: `Bearer ${token}` } } : {});
  expect(response.status).toBe(200);
  expect(response.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
  return response.text();
}

describe('probes', () => {
  let service: TestService;
  beforeAll(async () => {
    service = await startTestService();
  });
  afterAll(() => service.close());
  afterEach(() => {
    service.server.lifecycle.shuttingDown = false;
  });

  it('/healthz answers 200 ok without credentials, with a request id', async () => {
    const response = await service.fetch(`${service.url}/healthz`);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ status: 'ok' });
    expect(response.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('/readyz answers 200 ready with every check ok', async () => {
    const response = await service.fetch(`${service.url}/readyz`);
    expect(response.status).toBe(200);
    const body = await response.json();
    expect(body).toEqual({ status: 'ready', checks: { database: 'ok', schema: 'ok', shutdown: 'ok' }, connections: expect.any(Object) });
    // The cap below this process's descriptor limit (CPS_MAX_CONNECTIONS unset: the limit minus the reserve).
    expect(body.connections).toEqual({
      descriptor_limit: readDescriptorLimit() ?? null,
      descriptor_reserve: 128,
      max_connections: (readDescriptorLimit() ?? ASSUMED_DESCRIPTOR_LIMIT) - 128,
      open: expect.any(Number),
    });
    expect(body.connections.open).toBeGreaterThanOrEqual(1);
  });

  it('/readyz answers 503 once the process is shutting down, while /healthz stays 200', async () => {
    service.server.lifecycle.shuttingDown = true;
    const ready = await service.fetch(`${service.url}/readyz`);
    expect(ready.status).toBe(503);
    expect(await ready.json()).toMatchObject({ status: 'not_ready', checks: { database: 'ok', schema: 'ok', shutdown: 'shutting down' } });
    expect((await service.fetch(`${service.url}/healthz`)).status).toBe(200);
  });

  it('/readyz answers 503 naming the migration a database lacks', async () => {
    sqliteStorageOf(service).db.prepare('DELETE FROM schema_migrations WHERE id = 6').run();
    try {
      const response = await service.fetch(`${service.url}/readyz`);
      expect(response.status).toBe(503);
      expect((await response.json()).checks).toEqual({ database: 'ok', schema: 'migrations not applied: 6', shutdown: 'ok' });
    } finally {
      sqliteStorageOf(service)
        .db.prepare("INSERT INTO schema_migrations (id, name, applied_at) VALUES (6, 'operational_counts', '2026-01-01')")
        .run();
    }
  });
});

describe('a database that cannot answer', () => {
  it('makes /readyz 503 (the error logged, not shown), leaves /healthz 200 and /metrics without the database gauges', async () => {
    const logs = new LogCapture();
    const service = await startTestService({ logger: logs.logger });
    try {
      // Both connections (the storage reads on its own read connection): closed under the running service.
      await service.storage.close();
      const ready = await service.fetch(`${service.url}/readyz`);
      expect(ready.status).toBe(503);
      const body = await ready.json();
      expect(body.status).toBe('not_ready');
      expect(body.checks.database).toBe('unavailable');
      expect(body.checks.schema).toBe('unavailable');
      const failed = logs.find('readiness check failed');
      expect(failed.map((line) => line.check)).toEqual(['database', 'schema']);
      expect(JSON.stringify(failed[0]!.err)).toMatch(/not open/);
      expect((await service.fetch(`${service.url}/healthz`)).status).toBe(200);
      const metrics = await scrape(service);
      expect(sample(metrics, 'cps_webhook_endpoints', { state: 'active' })).toBeUndefined();
      expect(sample(metrics, 'process_resident_memory_bytes')).toBeGreaterThan(0);
    } finally {
      await service.close();
    }
  });
});

describe('/metrics', () => {
  let service: TestService;
  let key: string;
  let merchantId: number;
  beforeAll(async () => {
    service = await startTestService({ config: { rateLimit: { burst: 5, perSecond: 1 } } });
    const merchant = await createMerchant(service, 'Metrics Outfitters');
    merchantId = merchant.id;
    key = merchant.key;
    await adminOk(service, 'PUT', `${merchant.base}/stores/de`, { name: 'DE', locale: 'de-DE', currency: 'EUR' });
    await adminOk(service, 'PUT', `${merchant.base}/suppliers/alpine`, { name: 'Alpine' });
    const withImages = (ref: string, urls: string[]) => {
      const line = simpleProduct(ref);
      return { ...line, product: { ...line.product, images: urls.map((url) => ({ url })) } };
    };
    const imported = await importNdjson(service, merchant.id, [
      withImages('A', ['https://img.example.test/a/1.jpg', 'https://img.example.test/a/2.jpg']),
      withImages('B', ['https://img.example.test/b/1.jpg']),
    ]);
    expect(imported.status).toBe(200);
  });
  afterAll(() => service.close());

  it('counts requests by method, route template and status, with no id or key in any label', async () => {
    const before = await scrape(service);
    const count = (text: string, route: string, status: string) =>
      sample(text, 'cps_http_request_duration_seconds_count', { method: 'GET', route, status }) ?? 0;
    const products = await service.api('/v1/products?store=de', key);
    expect(products.status).toBe(200);
    const id = products.body.data[0].id;
    expect((await service.api(`/v1/products/${id}?store=de`, key)).status).toBe(200);
    expect((await service.api('/v1/products/999999?store=de', key)).status).toBe(404);
    expect((await service.api('/v1/stores', null)).status).toBe(401);
    const unmatched = await fetch(`${service.url}/no/such/path`);
    expect(unmatched.status).toBe(404);
    const after = await scrape(service);
    expect(count(after, '/v1/products', '200') - count(before, '/v1/products', '200')).toBe(1);
    expect(count(after, '/v1/products/:id', '200') - count(before, '/v1/products/:id', '200')).toBe(1);
    expect(count(after, '/v1/products/:id', '404') - count(before, '/v1/products/:id', '404')).toBe(1);
    expect(count(after, '/v1/stores', '401') - count(before, '/v1/stores', '401')).toBe(1);
    expect(count(after, 'unmatched', '404') - count(before, 'unmatched', '404')).toBe(1);
    expect(
      sample(after, 'cps_http_request_duration_seconds_bucket', { method: 'GET', route: '/v1/products', status: '200', le: '+Inf' }),
    ).toBe(count(after, '/v1/products', '200'));
    expect(after).not.toContain(key);
    expect(after).not.toContain(`/v1/products/${id}`);
    expect(after).not.toContain('Metrics Outfitters');
  });

  it('counts requests answered 429 by the rate limit', async () => {
    const limited = async () => sample(await scrape(service), 'cps_rate_limited_total') ?? 0;
    const before = await limited();
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++) statuses.push((await service.api('/v1/stores', key)).status);
    const answered429 = statuses.filter((s) => s === 429).length;
    expect(answered429).toBeGreaterThan(0);
    expect((await limited()) - before).toBe(answered429);
  });

  it('reports image source URLs by mirroring state', async () => {
    const metrics = await scrape(service);
    expect(sample(metrics, 'cps_images', { state: 'pending' })).toBe(3);
    expect(sample(metrics, 'cps_images', { state: 'mirrored' })).toBe(0);
    expect(sample(metrics, 'cps_images', { state: 'dead' })).toBe(0);
  });

  it('reports image origins failing and down, and the images waiting on the down ones, with no origin in a label', async () => {
    const origin = 'https://img.example.test';
    let metrics = await scrape(service);
    expect(sample(metrics, 'cps_image_origins', { state: 'down' })).toBe(0);
    expect(sample(metrics, 'cps_images_waiting_on_down_origins')).toBe(0);
    const at = new Date().toISOString();
    await service.storage.putImageOrigin(merchantId, {
      origin,
      failures: 20,
      down_since: at,
      next_probe_at: at,
      probe_ms: 30_000,
      last_error: 'blocked_address',
    });
    await service.storage.countImageOriginFailure(merchantId, 'https://other.example.test', 'timeout');
    try {
      metrics = await scrape(service);
      expect(sample(metrics, 'cps_image_origins', { state: 'down' })).toBe(1);
      expect(sample(metrics, 'cps_image_origins', { state: 'failing' })).toBe(1);
      expect(sample(metrics, 'cps_images_waiting_on_down_origins')).toBe(3);
      expect(metrics).not.toContain('img.example.test');
    } finally {
      await service.storage.clearImageOrigin(merchantId, origin, at);
      await service.storage.clearImageOrigin(merchantId, 'https://other.example.test', at);
    }
  });

  it('includes the process metrics', async () => {
    const metrics = await scrape(service);
    expect(sample(metrics, 'process_resident_memory_bytes')).toBeGreaterThan(0);
    expect(metrics).toContain('# TYPE nodejs_eventloop_lag_seconds gauge');
  });
});

describe('/metrics with CPS_METRICS_COUNT_MAX set', () => {
  let service: TestService;
  afterAll(() => service.close());

  it('counts the images waiting on a down origin up to the bound, and the kept image counts whole', async () => {
    service = await startTestService({ config: { operations: { metricsCountMax: 2 } } });
    const merchant = await createMerchant(service, 'Bounded Outfitters');
    await adminOk(service, 'PUT', `${merchant.base}/stores/de`, { name: 'DE', locale: 'de-DE', currency: 'EUR' });
    await adminOk(service, 'PUT', `${merchant.base}/suppliers/alpine`, { name: 'Alpine' });
    const line = simpleProduct('A');
    const urls = ['1', '2', '3'].map((n) => ({ url: `https://img.example.test/a/${n}.jpg` }));
    expect((await importNdjson(service, merchant.id, [{ ...line, product: { ...line.product, images: urls } }])).status).toBe(200);
    const at = new Date().toISOString();
    await service.storage.putImageOrigin(merchant.id, {
      origin: 'https://img.example.test',
      failures: 20,
      down_since: at,
      next_probe_at: at,
      probe_ms: 30_000,
      last_error: 'blocked_address',
    });
    const metrics = await scrape(service);
    expect(sample(metrics, 'cps_images_waiting_on_down_origins')).toBe(2);
    expect(sample(metrics, 'cps_images', { state: 'pending' })).toBe(3);
    expect(sample(metrics, 'cps_image_origins', { state: 'down' })).toBe(1);
  });
});

describe('/metrics with CPS_METRICS_TOKEN set', () => {
  let service: TestService;
  beforeAll(async () => {
    service = await startTestService({ config: { operations: { metricsToken: 'mtok_0123456789' } } });
  });
  afterAll(() => service.close());

  it('answers 401 with the metrics challenge without the token or with a wrong one, and 200 with it', async () => {
    const attempts: Record<string, string>[] = [{}, { Authorization: 'Bearer wrong' }, { Authorization: 'Basic bXRvaw==' }];
    for (const headers of attempts) {
      const response = await service.fetch(`${service.url}/metrics`, { headers });
      expect(response.status).toBe(401);
      expect(response.headers.get('www-authenticate')).toBe('Bearer realm="metrics"');
      expect((await response.json()).code).toBe('unauthorized');
    }
    expect(await scrape(service, 'mtok_0123456789')).toContain('cps_webhook_endpoints');
  });

  it('leaves the probes open', async () => {
    expect((await service.fetch(`${service.url}/healthz`)).status).toBe(200);
    expect((await service.fetch(`${service.url}/readyz`)).status).toBe(200);
  });
});

describe('/metrics for webhooks', () => {
  let world: WebhookWorld;
  beforeAll(async () => {
    world = await startWebhookWorld({ stores: ['de'] });
  });
  afterAll(() => world.close());

  it('reports endpoints by state, the outbox, waiting deliveries, the feed lag and deliveries by outcome', async () => {
    const { service, clock } = world;
    const ok = await world.receiver({ behaviour: { status: 204 } });
    const failing = await world.receiver({ behaviour: { status: 500 } });
    const paused = await world.receiver();
    await world.register(ok, { events: ['content'] });
    await world.register(failing, { events: ['content'] });
    const pausedEndpoint = await world.register(paused, { events: ['content'] });
    await service.storage.updateWebhookEndpoint(pausedEndpoint.id, {
      status: 'paused',
      paused_until: new Date(clock.ms + 60 * MINUTE).toISOString(),
    });

    let metrics = await scrape(service);
    expect(sample(metrics, 'cps_webhook_endpoints', { state: 'active' })).toBe(2);
    expect(sample(metrics, 'cps_webhook_endpoints', { state: 'paused' })).toBe(1);
    expect(sample(metrics, 'cps_webhook_endpoints', { state: 'disabled' })).toBe(0);
    expect(sample(metrics, 'cps_webhook_outbox_depth')).toBe(0);
    expect(sample(metrics, 'cps_feed_lag_seconds')).toBe(0);

    // Two new products: a content change each, for each of the three endpoints.
    await world.putProduct('P1');
    await world.putProduct('P2');
    // The paused endpoint's backlog is older still, and does not count towards the lag.
    sqliteStorageOf(service)
      .db.prepare('UPDATE webhook_outbox SET created_at = ? WHERE endpoint_id = ?')
      .run(new Date(clock.ms - 500 * SECOND).toISOString(), pausedEndpoint.id);
    clock.advance(90 * SECOND);
    metrics = await scrape(service);
    expect(sample(metrics, 'cps_webhook_outbox_depth')).toBe(6);
    expect(sample(metrics, 'cps_feed_lag_seconds')).toBe(90);

    await world.dispatcher.coalesce();
    metrics = await scrape(service);
    expect(sample(metrics, 'cps_webhook_outbox_depth')).toBe(0);
    expect(sample(metrics, 'cps_webhook_deliveries_waiting', { status: 'pending' })).toBe(2);
    // Batched into deliveries, the changes are as old as they were: the lag does not reset.
    expect(sample(metrics, 'cps_feed_lag_seconds')).toBe(90);

    await world.deliverDue();
    metrics = await scrape(service);
    expect(sample(metrics, 'cps_webhook_deliveries_total', { outcome: 'succeeded' })).toBe(1);
    expect(sample(metrics, 'cps_webhook_deliveries_total', { outcome: 'failed' })).toBe(1);
    expect(sample(metrics, 'cps_webhook_deliveries_total', { outcome: 'given_up' })).toBe(0);
    expect(sample(metrics, 'cps_webhook_delivery_duration_seconds_count', { outcome: 'succeeded' })).toBe(1);
    expect(sample(metrics, 'cps_webhook_deliveries_waiting', { status: 'pending' })).toBe(0);
    expect(sample(metrics, 'cps_webhook_deliveries_waiting', { status: 'failed' })).toBe(1);
    // Everything was attempted: the failed delivery waiting for its retry is the receiver's lag,
    // counted as waiting, not the dispatcher's.
    clock.advance(10 * SECOND);
    expect(sample(await scrape(service), 'cps_feed_lag_seconds')).toBe(0);
    expect(ok.requests).toHaveLength(1);
  });

  it('counts an attempt whose retries ran out as given_up, and one that pauses its endpoint as dropped', async () => {
    const counted = async (outcome: string) => sample(await scrape(world.service), 'cps_webhook_deliveries_total', { outcome }) ?? 0;
    const before = { failed: await counted('failed'), given_up: await counted('given_up'), dropped: await counted('dropped') };
    // One retry, then given up (the endpoint of the first test stays as it is: this is another world).
    const other = await startWebhookWorld({ stores: ['de'], webhooks: { backoffSeconds: [1], pauseAfterFailures: 100 } });
    try {
      const failing = await other.receiver({ behaviour: { status: 500 } });
      await other.register(failing, { events: ['content'] });
      await other.putProduct('G1');
      await other.after(3 * SECOND);
      await other.after(2 * SECOND);
      const metrics = await scrape(other.service);
      expect(sample(metrics, 'cps_webhook_deliveries_total', { outcome: 'failed' })).toBe(1);
      expect(sample(metrics, 'cps_webhook_deliveries_total', { outcome: 'given_up' })).toBe(1);
    } finally {
      await other.close();
    }
    // Pausing: two failures spanning no minimum time pause the endpoint on the second attempt.
    const pausing = await startWebhookWorld({
      stores: ['de'],
      webhooks: { backoffSeconds: [1, 1, 1], pauseAfterFailures: 2, pauseMinStreakMinutes: 0 },
    });
    try {
      const failing = await pausing.receiver({ behaviour: { status: 503 } });
      await pausing.register(failing, { events: ['content'] });
      await pausing.putProduct('D1');
      await pausing.after(3 * SECOND);
      await pausing.after(2 * SECOND);
      const metrics = await scrape(pausing.service);
      expect(sample(metrics, 'cps_webhook_deliveries_total', { outcome: 'failed' })).toBe(1);
      expect(sample(metrics, 'cps_webhook_deliveries_total', { outcome: 'dropped' })).toBe(1);
      expect(sample(metrics, 'cps_webhook_endpoints', { state: 'paused' })).toBe(1);
    } finally {
      await pausing.close();
    }
    // Each world counts its own: the first one's counters did not move.
    expect({ failed: await counted('failed'), given_up: await counted('given_up'), dropped: await counted('dropped') }).toEqual(before);
  });
});
