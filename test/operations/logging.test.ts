// Structured logs (pino): one JSON line per request with its request id, the workers' failures
// and transitions with ids rather than URLs, and never a key, token or signing secret.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { loggableUrl } from '../../src/images/mirror.js';
import { createLogger } from '../../src/operations/log.js';
import { adminOk, createMerchant, type MerchantHandle } from '../support/admin-http.js';
import { LogCapture } from '../support/logs.js';
import { ADMIN_TOKEN, startTestService, type TestService } from '../support/service.js';
import { startWebhookWorld } from '../webhooks/harness.js';

describe('the access log', () => {
  let service: TestService;
  let merchant: MerchantHandle;
  const logs = new LogCapture('info');
  beforeAll(async () => {
    service = await startTestService({ logger: logs.logger });
    merchant = await createMerchant(service, 'Logged Outfitters');
    await adminOk(service, 'PUT', `${merchant.base}/stores/de`, { name: 'DE', locale: 'de-DE', currency: 'EUR' });
  });
  afterAll(() => service.close());

  it('writes one JSON line per request with the request id of the response, the route, status, duration and merchant', async () => {
    const response = await service.api('/v1/stores', merchant.key, { headers: { 'X-Request-Id': 'trace-log-1' } });
    expect(response.status).toBe(200);
    const lines = logs.find('request').filter((line) => line.request_id === 'trace-log-1');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      level: 'info',
      service: 'catalog-publishing-service',
      method: 'GET',
      route: '/v1/stores',
      path: '/v1/stores',
      status: 200,
      merchant_id: merchant.id,
    });
    expect(lines[0]!.duration_ms).toEqual(expect.any(Number));
    expect(Date.parse(lines[0]!.time)).not.toBeNaN();
  });

  it('logs a generated request id when none was sent, the same one the response carries', async () => {
    const response = await service.api('/v1/products/12345', merchant.key);
    expect(response.status).toBe(404);
    const id = response.headers.get('x-request-id');
    expect(logs.find('request').filter((line) => line.request_id === id)).toEqual([
      expect.objectContaining({ route: '/v1/products/:id', status: 404, level: 'info' }),
    ]);
  });

  it('never writes an API key, the admin token or a webhook signing secret', async () => {
    const created = await adminOk(
      service,
      'POST',
      `${merchant.base}/webhook-endpoints`,
      { url: 'https://hooks.outfitters-shop.com/in' },
      201,
    );
    expect(created.secret).toMatch(/^whsec_/);
    await service.api('/v1/stores', `${merchant.key}x`);
    await service.api('/v1/stores', merchant.key);
    expect(logs.raw.length).toBeGreaterThan(3);
    expect(logs.text).not.toContain(merchant.key);
    expect(logs.text).not.toContain(ADMIN_TOKEN);
    expect(logs.text).not.toContain(created.secret);
    expect(logs.text).not.toContain('Bearer');
  });

  it('logs probes and scrapes at debug, not info', async () => {
    const before = logs.find('request').length;
    for (const path of ['/healthz', '/readyz', '/metrics']) expect((await service.fetch(`${service.url}${path}`)).status).toBe(200);
    expect(logs.find('request').length).toBe(before);
    const debug = new LogCapture('debug');
    const verbose = await startTestService({ logger: debug.logger });
    try {
      await verbose.fetch(`${verbose.url}/healthz`, { headers: { 'X-Request-Id': 'probe-1' } });
      expect(debug.find('request')).toEqual([expect.objectContaining({ level: 'debug', route: '/healthz', request_id: 'probe-1' })]);
    } finally {
      await verbose.close();
    }
  });

  it('leaves the query string out of the logged path', async () => {
    await service.api('/v1/products?store=de&per_page=7', merchant.key, { headers: { 'X-Request-Id': 'trace-query' } });
    const [line] = logs.find('request').filter((l) => l.request_id === 'trace-query');
    expect(line).toMatchObject({ path: '/v1/products', route: '/v1/products' });
    expect(JSON.stringify(line)).not.toContain('per_page');
  });
});

describe('log configuration', () => {
  it('CPS_ACCESS_LOG=false writes no request lines, and CPS_LOG_LEVEL=warn none below warn', async () => {
    for (const env of [{ CPS_ACCESS_LOG: 'false' }, { CPS_LOG_LEVEL: 'warn' }]) {
      // The logger as `serve` makes it: from the configuration read from the environment.
      const { operations } = loadConfig(env);
      const raw: string[] = [];
      const logger = createLogger(operations, {
        write: (line: string) => {
          raw.push(line);
        },
      });
      const service = await startTestService({ logger, config: { operations } });
      try {
        expect((await service.fetch(`${service.url}/healthz`)).status).toBe(200);
        expect((await fetch(`${service.url}/no/such/route`)).status).toBe(404);
        expect(raw).toEqual([]);
        logger.warn('a warning');
        expect(raw).toHaveLength(1);
      } finally {
        await service.close();
      }
    }
  });

  it('reads CPS_LOG_LEVEL and rejects an unknown level', () => {
    expect(loadConfig({ CPS_LOG_LEVEL: 'debug' }).operations.logLevel).toBe('debug');
    expect(loadConfig({}).operations.logLevel).toBe('info');
    expect(() => loadConfig({ CPS_LOG_LEVEL: 'verbose' })).toThrow(/CPS_LOG_LEVEL must be one of/);
  });

  it('redacts secrets logged by mistake under the usual names', () => {
    const lines: string[] = [];
    const logger = createLogger(
      { logLevel: 'info' },
      {
        write: (line: string) => {
          lines.push(line);
        },
      },
    );
    logger.info(
      {
        secret: 'whsec_leak',
        pending_secret: 'whsec_pending',
        endpoint: { secret: 'whsec_nested', pending_secret: 'whsec_rotated' },
        headers: { authorization: 'Bearer cps_leak' },
        token: 't0k',
      },
      'oops',
    );
    const line = JSON.parse(lines[0]!);
    expect(line).toMatchObject({
      secret: '[redacted]',
      pending_secret: '[redacted]',
      endpoint: { secret: '[redacted]', pending_secret: '[redacted]' },
      headers: { authorization: '[redacted]' },
      token: '[redacted]',
    });
    expect(lines[0]).not.toMatch(/whsec_|cps_leak|t0k/);
  });
});

describe('image mirror logs', () => {
  it('log an image source by origin and path only: a pre-signed query never reaches the log', () => {
    expect(loggableUrl('https://cdn.example.test/p/1.jpg?X-Amz-Signature=abc&token=t0k')).toBe('https://cdn.example.test/p/1.jpg');
    expect(loggableUrl('not a url')).toBe('(unparsable URL)');
  });
});

describe('webhook dispatcher logs', () => {
  it('logs a failed attempt and a pause with ids and the error, never the URL or the secret', async () => {
    const logs = new LogCapture('debug');
    const world = await startWebhookWorld({
      stores: ['de'],
      logger: logs.logger,
      webhooks: { pauseAfterFailures: 2, pauseMinStreakMinutes: 0, backoffSeconds: [1, 1, 1] },
    });
    try {
      const receiver = await world.receiver({ behaviour: { status: 503 } });
      const endpoint = await world.register(receiver, { events: ['content'] });
      await world.putProduct('L1');
      await world.after(3000);
      await world.after(2000);
      const failures = logs.find('webhook delivery failed');
      expect(failures.length).toBeGreaterThanOrEqual(2);
      expect(failures[0]).toMatchObject({
        level: 'warn',
        component: 'webhook-dispatcher',
        endpoint_id: endpoint.id,
        merchant_id: world.merchant.id,
        event: 'content',
        attempt: 1,
        outcome: 'failed',
        status_code: 503,
      });
      expect(failures[0]!.error).toEqual(expect.any(String));
      expect(logs.find('webhook endpoint paused')).toEqual([
        expect.objectContaining({ level: 'warn', endpoint_id: endpoint.id, from: 'active', to: 'paused', consecutive_failures: 2 }),
      ]);
      expect(logs.text).not.toContain(receiver.url);
      expect(logs.text).not.toContain(endpoint.secret);
    } finally {
      await world.close();
    }
  });
});
