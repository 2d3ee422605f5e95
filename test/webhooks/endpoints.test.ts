// Webhook endpoints over the admin API (openapi/admin.yaml, tag "Webhook endpoints"; spec 5,
// webhook authenticity): registration with a secret shown once, the SSRF rules for receiver URLs,
// deletion and re-enabling (secret rotation: secret-rotation.test.ts). Every admin response is
// checked against the contract.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { adminOk, createMerchant, type MerchantHandle } from '../support/admin-http.js';
import { answers } from '../support/receiver.js';
import { startTestService, type TestService } from '../support/service.js';
import { SECOND, startWebhookWorld, type WebhookWorld } from './harness.js';

let world: WebhookWorld | undefined;
afterEach(async () => {
  await world?.close();
  world = undefined;
});

const SECRET = /^whsec_[A-Za-z0-9]{48}$/;

async function worldWithReceiver(options: Parameters<typeof startWebhookWorld>[0] = {}) {
  const w = await startWebhookWorld({ stores: ['de', 'pl'], ...options });
  world = w;
  return { world: w, receiver: await w.receiver() };
}

describe('registering an endpoint', () => {
  it('answers 201 with the whsec_ signing secret shown once; reads show only its secret_prefix', async () => {
    const { world: w, receiver } = await worldWithReceiver();
    const base = `${w.merchant.base}/webhook-endpoints`;
    const created = await w.register(receiver);
    expect(created.secret).toMatch(SECRET);
    expect(created).toMatchObject({
      url: receiver.url,
      store: null,
      events: ['price', 'content', 'removed'],
      status: 'active',
      consecutive_failures: 0,
      paused_until: null,
      disabled_reason: null,
      last_success_at: null,
      last_failure_at: null,
      secret_prefix: created.secret.slice(0, 12),
      created_at: w.clock.now().toISOString(),
    });

    const list = await w.service.adminApi('GET', base);
    const one = await w.service.adminApi('GET', `${base}/${created.id}`);
    for (const response of [list, one]) {
      expect(response.status).toBe(200);
      expect(response.text).not.toContain(created.secret);
      expect(response.text).not.toContain('"secret"');
    }
    const { secret: _, ...shown } = created;
    expect(list.body.data).toEqual([shown]);
    expect(one.body).toEqual(shown);

    const second = await adminOk(w.service, 'POST', base, { url: receiver.url }, 201);
    expect(second.secret).toMatch(SECRET);
    expect(second.secret).not.toBe(created.secret);
  });

  it('keeps one store and the chosen events, listed in the order price, content, removed', async () => {
    const { world: w, receiver } = await worldWithReceiver();
    const created = await w.register(receiver, { store: 'pl', events: ['removed', 'price'] });
    expect(created).toMatchObject({ store: 'pl', events: ['price', 'removed'] });
  });

  it('answers 400 naming /store for a store the merchant does not have', async () => {
    const { world: w, receiver } = await worldWithReceiver();
    const response = await w.service.adminApi('POST', `${w.merchant.base}/webhook-endpoints`, { url: receiver.url, store: 'fr' });
    expect(response.status).toBe(400);
    expect(response.body).toMatchObject({ code: 'invalid_body', invalid_params: [{ name: '/store', in: 'body' }] });
  });

  it('answers 400 naming /events for an event listed twice', async () => {
    const { world: w, receiver } = await worldWithReceiver();
    const response = await w.service.adminApi('POST', `${w.merchant.base}/webhook-endpoints`, {
      url: receiver.url,
      events: ['price', 'content', 'price'],
    });
    expect(response.status).toBe(400);
    expect(response.body.code).toBe('invalid_body');
    expect(response.body.invalid_params.map((p: { name: string }) => p.name)).toEqual(['/events/2']);
    expect((await adminOk(w.service, 'GET', `${w.merchant.base}/webhook-endpoints`)).data).toEqual([]);
  });

  it('answers 400 for an event kind the spec does not have and 404 for an unknown merchant', async () => {
    const { world: w, receiver } = await worldWithReceiver();
    const bad = await w.service.adminApi('POST', `${w.merchant.base}/webhook-endpoints`, { url: receiver.url, events: ['test'] });
    expect(bad.status).toBe(400);
    expect(bad.body.invalid_params[0].name).toMatch(/^\/events/);
    const unknown = await w.service.adminApi('POST', '/admin/v1/merchants/999/webhook-endpoints', { url: receiver.url });
    expect(unknown.status).toBe(404);
  });
});

describe('receiver URLs are guarded against SSRF (no operator allowlist)', () => {
  let service: TestService;
  let merchant: MerchantHandle;
  beforeAll(async () => {
    service = await startTestService();
    merchant = await createMerchant(service, 'Guarded');
  });
  afterAll(() => service.close());

  it.each([
    ['plain http://', 'http://hooks.outfitters-shop.com/catalog'],
    ['a private address', 'https://10.0.0.1/hooks'],
    ['a private address (192.168/16)', 'https://192.168.1.20/hooks'],
    ['the loopback address', 'https://127.0.0.1/hooks'],
    ['loopback written as one number', 'https://2130706433/hooks'],
    ['the link-local metadata address', 'https://169.254.169.254/latest/meta-data'],
    ['CGNAT', 'https://100.64.0.1/hooks'],
    ['the unspecified address', 'https://0.0.0.0/hooks'],
    ['IPv6 loopback', 'https://[::1]/hooks'],
    ['IPv6 unique-local', 'https://[fd12:3456::1]/hooks'],
    ['IPv6 link-local', 'https://[fe80::1]/hooks'],
    ['IPv4-mapped loopback', 'https://[::ffff:127.0.0.1]/hooks'],
    ['IPv4-compatible loopback (deprecated form)', 'https://[::127.0.0.1]/hooks'],
    ['IPv4-mapped private', 'https://[::ffff:10.0.0.1]/hooks'],
    // Special-purpose IPv6 ranges, and IPv4 addresses carried inside IPv6 ones.
    ['IPv4-translated loopback', 'https://[::ffff:0:7f00:1]/hooks'],
    ['NAT64 (well-known prefix) of the metadata address', 'https://[64:ff9b::a9fe:a9fe]/hooks'],
    ['local-use NAT64', 'https://[64:ff9b:1::808:808]/hooks'],
    ['IPv6 site-local (deprecated)', 'https://[fec0::1]/hooks'],
    ['6to4 of 127.0.0.1', 'https://[2002:7f00:1::]/hooks'],
    ['Teredo', 'https://[2001::1]/hooks'],
    ['the IPv6 discard prefix', 'https://[100::1]/hooks'],
    ['IPv6 documentation', 'https://[2001:db8::1]/hooks'],
    ['the 6to4 relay anycast', 'https://192.88.99.1/hooks'],
    ['the limited broadcast address', 'https://255.255.255.255/hooks'],
    ['localhost', 'https://localhost/hooks'],
    ['localhost with a trailing dot', 'https://localhost./hooks'],
    ['a name under .localhost', 'https://shop.localhost/hooks'],
    ['credentials in the URL', 'https://user:pass@hooks.outfitters-shop.com/catalog'],
  ])('refuses %s with 400 naming /url', async (_, url) => {
    const response = await service.adminApi('POST', `${merchant.base}/webhook-endpoints`, { url });
    expect(response.status, response.text).toBe(400);
    expect(response.body).toMatchObject({ code: 'invalid_body', invalid_params: [{ name: '/url', in: 'body' }] });
  });

  it("refuses the same addresses when an endpoint's URL is changed", async () => {
    const created = await adminOk(
      service,
      'POST',
      `${merchant.base}/webhook-endpoints`,
      { url: 'https://hooks.outfitters-shop.com/catalog' },
      201,
    );
    const response = await service.adminApi('PATCH', `${merchant.base}/webhook-endpoints/${created.id}`, { url: 'https://[::1]/hooks' });
    expect(response.status).toBe(400);
    expect(response.body.invalid_params[0].name).toBe('/url');
    expect((await adminOk(service, 'GET', `${merchant.base}/webhook-endpoints/${created.id}`)).url).toBe(
      'https://hooks.outfitters-shop.com/catalog',
    );
  });

  it('accepts a public https:// URL', async () => {
    const created = await adminOk(
      service,
      'POST',
      `${merchant.base}/webhook-endpoints`,
      { url: 'https://hooks.outfitters-shop.com/catalog' },
      201,
    );
    expect(created.url).toBe('https://hooks.outfitters-shop.com/catalog');
  });
});

describe('deleting an endpoint', () => {
  it('answers 204, then 404; nothing more is sent, queued changes included; notifications about it stay with endpoint_id null', async () => {
    const { world: w, receiver } = await worldWithReceiver({ stores: ['de'] });
    const created = await w.register(receiver, { events: ['price'] });
    const path = `${w.merchant.base}/webhook-endpoints/${created.id}`;
    receiver.answer(answers.gone);
    await w.putProduct('A');
    await w.after(2 * SECOND);
    expect((await w.notifications()).map((n) => [n.kind, n.endpoint_id])).toEqual([['disabled', created.id]]);
    await adminOk(w.service, 'PATCH', path, { status: 'active' });
    receiver.answer(answers.ok);

    // A change waits in the outbox when the endpoint is deleted.
    await w.putProduct('A', { cost: '11.00' });
    const sent = receiver.count;
    expect((await w.service.adminApi('DELETE', path)).status).toBe(204);
    expect((await w.service.adminApi('GET', path)).status).toBe(404);
    expect((await w.service.adminApi('DELETE', path)).status).toBe(404);
    expect((await w.service.adminApi('GET', `${path}/deliveries`)).status).toBe(404);
    expect((await adminOk(w.service, 'GET', `${w.merchant.base}/webhook-endpoints`)).data).toEqual([]);
    await w.after(2 * SECOND);
    await w.putProduct('A', { cost: '12.00' });
    await w.after(2 * SECOND);
    expect(receiver.count).toBe(sent);
    expect((await w.notifications()).map((n) => [n.kind, n.endpoint_id])).toEqual([['disabled', null]]);
  });
});

describe('updating an endpoint', () => {
  it('re-enables a disabled endpoint with status=active: health cleared, the next change is delivered', async () => {
    const { world: w, receiver } = await worldWithReceiver({ stores: ['de'] });
    const created = await w.register(receiver, { events: ['price'] });
    receiver.answer(answers.gone);
    await w.putProduct('A');
    await w.after(2 * SECOND);
    expect(await w.endpoint(created.id)).toMatchObject({ status: 'disabled', disabled_reason: 'gone', consecutive_failures: 1 });

    // Changing only the URL does not re-enable it.
    const other = await w.receiver();
    other.secret = created.secret;
    const moved = await adminOk(w.service, 'PATCH', `${w.merchant.base}/webhook-endpoints/${created.id}`, { url: other.url });
    expect(moved).toMatchObject({ url: other.url, status: 'disabled' });

    const enabled = await adminOk(w.service, 'PATCH', `${w.merchant.base}/webhook-endpoints/${created.id}`, { status: 'active' });
    expect(enabled).toMatchObject({ status: 'active', consecutive_failures: 0, disabled_reason: null, paused_until: null, url: other.url });
    await w.putProduct('A', { cost: '11.00' });
    await w.after(2 * SECOND);
    expect(other.payloads.map((p) => p.event)).toEqual(['price']);
    expect(await w.endpoint(created.id)).toMatchObject({
      status: 'active',
      consecutive_failures: 0,
      last_success_at: w.clock.now().toISOString(),
    });
  });

  it('resumes a paused endpoint at once with status=active (thresholds are configuration)', async () => {
    const { world: w, receiver } = await worldWithReceiver({
      stores: ['de'],
      webhooks: { pauseAfterFailures: 2, pauseMinStreakMinutes: 0 },
    });
    const created = await w.register(receiver, { events: ['price'] });
    receiver.answer(answers.serverError);
    await w.putProduct('A');
    await w.after(2 * SECOND);
    await w.after(30 * SECOND);
    const paused = await w.endpoint(created.id);
    expect(paused).toMatchObject({ status: 'paused', consecutive_failures: 2 });
    expect(paused.paused_until).toBe(new Date(w.clock.ms + 3600 * SECOND).toISOString());

    receiver.answer(answers.ok);
    const resumed = await adminOk(w.service, 'PATCH', `${w.merchant.base}/webhook-endpoints/${created.id}`, { status: 'active' });
    expect(resumed).toMatchObject({ status: 'active', consecutive_failures: 0, paused_until: null });
    await w.putProduct('A', { cost: '11.00' });
    await w.after(2 * SECOND);
    expect(receiver.count).toBe(3);
  });

  it('changes store and events for later changes, and refuses them like at creation', async () => {
    const { world: w, receiver } = await worldWithReceiver();
    const created = await w.register(receiver);
    const path = `${w.merchant.base}/webhook-endpoints/${created.id}`;
    for (const [body, name] of [
      [{ store: 'fr' }, '/store'],
      [{ events: ['price', 'price'] }, '/events/1'],
      [{ url: 'ftp://127.0.0.1/x' }, '/url'],
    ] as const) {
      const response = await w.service.adminApi('PATCH', path, body);
      expect(response.status).toBe(400);
      expect(response.body.invalid_params[0].name).toBe(name);
    }
    const updated = await adminOk(w.service, 'PATCH', path, { store: 'pl', events: ['content'] });
    expect(updated).toMatchObject({ store: 'pl', events: ['content'], url: receiver.url, secret_prefix: created.secret_prefix });
    const id = await w.putProduct('A');
    await w.after(2 * SECOND);
    expect(receiver.payloads.map(({ event, store_id, product_ids }) => ({ event, store_id, product_ids }))).toEqual([
      { event: 'content', store_id: w.stores.pl!.id, product_ids: [id] },
    ]);
    const all = await adminOk(w.service, 'PATCH', path, { store: null });
    expect(all.store).toBeNull();
  });
});
