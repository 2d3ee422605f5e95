// Host names reserved for tests and documentation (RFC 2606, RFC 6761) never resolve publicly: a
// receiver URL naming one is refused when an endpoint is registered or its URL edited, with the
// 400 other URL refusals get, by the admin API, the panel and the CLI alike (one check, in the
// domain), and nothing is stored. A name the operator allowlists exactly
// (CPS_WEBHOOK_ALLOW_HOSTS) is accepted, as every other address rule is lifted for it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminOk, createMerchant, type MerchantHandle } from '../support/admin-http.js';
import { runCli, type CliResult } from '../support/cli.js';
import { startTestService, type TestService } from '../support/service.js';
import { operatorCookie } from '../panel/sign-in.js';

const RESERVED = [
  'https://hooks.test/catalog',
  'https://hooks.example/catalog',
  'https://shop.invalid/catalog',
  'https://example.com/hooks',
  'https://hooks.example.com/catalog',
  'https://hooks.example.net/catalog',
  'https://EXAMPLE.ORG./hooks',
  'https://Hooks.Test./catalog',
];
/** Public-looking names that merely contain a reserved word stay accepted. */
const NOT_RESERVED = [
  'https://example.com.outfitters-shop.net/hooks',
  'https://hooks.testing-shop.com/catalog',
  'https://myexample.com/hooks',
];

let service: TestService;
let merchant: MerchantHandle;
let endpointId: number;
const PUBLIC_URL = 'https://hooks.outfitters-shop.com/catalog';

beforeAll(async () => {
  service = await startTestService();
  merchant = await createMerchant(service, 'Reserved Outfitters');
  endpointId = (await adminOk(service, 'POST', `${merchant.base}/webhook-endpoints`, { url: PUBLIC_URL }, 201)).id;
});
afterAll(() => service?.close());

const endpointUrls = async () =>
  ((await adminOk(service, 'GET', `${merchant.base}/webhook-endpoints`)).data as { url: string }[]).map((e) => e.url);

describe('the admin API refuses reserved names', () => {
  it.each(RESERVED)('refuses registering %s with 400 naming /url, nothing stored', async (url) => {
    const response = await service.adminApi('POST', `${merchant.base}/webhook-endpoints`, { url });
    expect(response.status, response.text).toBe(400);
    expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(response.body).toMatchObject({
      code: 'invalid_body',
      invalid_params: [{ name: '/url', in: 'body', reason: expect.stringMatching(/reserved for tests and documentation/) }],
    });
    expect(await endpointUrls()).toEqual([PUBLIC_URL]);
  });

  it.each(RESERVED)('refuses changing a URL to %s, the endpoint unchanged', async (url) => {
    const response = await service.adminApi('PATCH', `${merchant.base}/webhook-endpoints/${endpointId}`, { url });
    expect(response.status, response.text).toBe(400);
    expect(response.body).toMatchObject({ code: 'invalid_body', invalid_params: [{ name: '/url', in: 'body' }] });
    expect(await endpointUrls()).toEqual([PUBLIC_URL]);
  });

  it('still accepts names that only contain a reserved word', async () => {
    for (const url of NOT_RESERVED) {
      const created = await adminOk(service, 'POST', `${merchant.base}/webhook-endpoints`, { url }, 201);
      await adminOk(service, 'DELETE', `${merchant.base}/webhook-endpoints/${created.id}`);
    }
  });
});

describe('the panel refuses reserved names', () => {
  let cookie: string;
  let csrf: string;
  beforeAll(async () => {
    cookie = await operatorCookie(service.url);
    const html = await (await fetch(`${service.url}/panel/merchants/${merchant.id}/endpoints`, { headers: { Cookie: cookie } })).text();
    csrf = /name="_csrf" value="([^"]+)"/.exec(html)![1]!;
  });

  /** Posts a form; returns the page its refusal redirects to. */
  async function refusedPage(pathname: string, url: string): Promise<string> {
    const response = await fetch(`${service.url}${pathname}`, {
      method: 'POST',
      redirect: 'manual',
      body: new URLSearchParams({ _csrf: csrf, url, store: '', events: 'price' }),
      headers: { Cookie: cookie, Origin: service.url, 'Content-Type': 'application/x-www-form-urlencoded' },
    });
    expect(response.status).toBe(303);
    const location = response.headers.get('location')!;
    expect(location).toMatch(/\?refused=[0-9]+$/);
    return (await fetch(`${service.url}${location}`, { headers: { Cookie: cookie } })).text();
  }

  it('refuses registering and editing with a reserved name, showing why, nothing stored', async () => {
    const endpoints = `/panel/merchants/${merchant.id}/endpoints`;
    expect(await refusedPage(endpoints, 'https://hooks.test/catalog')).toContain('reserved for tests and documentation');
    expect(await refusedPage(`${endpoints}/${endpointId}/edit`, 'https://hooks.example.com/catalog')).toContain(
      'reserved for tests and documentation',
    );
    expect(await endpointUrls()).toEqual([PUBLIC_URL]);
  });
});

describe('the CLI refuses reserved names', () => {
  /** Runs the CLI on the service's database; never rejects on a non-zero exit. */
  function cli(args: string[]): Promise<CliResult> {
    return runCli(args, { ...service.database.env, CPS_DEMO_ON_EMPTY: 'false' });
  }

  it('webhooks create and webhooks update fail naming the reason, nothing stored', async () => {
    const created = await cli(['webhooks', 'create', '--merchant', String(merchant.id), '--url', 'https://shop.invalid/hooks']);
    expect(created.code).not.toBe(0);
    expect(created.stderr).toMatch(/reserved for tests and documentation/);
    const updated = await cli([
      'webhooks',
      'update',
      '--merchant',
      String(merchant.id),
      '--endpoint',
      String(endpointId),
      '--url',
      'https://hooks.example/x',
    ]);
    expect(updated.code).not.toBe(0);
    expect(updated.stderr).toMatch(/reserved for tests and documentation/);
    expect(await endpointUrls()).toEqual([PUBLIC_URL]);
  }, 120_000);
});

describe('an operator allowlist lifts the rule for the names it lists exactly', () => {
  it('accepts hooks.test when CPS_WEBHOOK_ALLOW_HOSTS lists it, and still refuses a name under it', async () => {
    const allowing = await startTestService({ config: { webhooks: { ...service.config.webhooks, allowHosts: ['hooks.test'] } } });
    try {
      const own = await createMerchant(allowing, 'Allowlisted Outfitters');
      await adminOk(allowing, 'POST', `${own.base}/webhook-endpoints`, { url: 'https://hooks.test/catalog' }, 201);
      const under = await allowing.adminApi('POST', `${own.base}/webhook-endpoints`, { url: 'https://a.hooks.test/catalog' });
      expect(under.status).toBe(400);
    } finally {
      await allowing.close();
    }
  });
});
