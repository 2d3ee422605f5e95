// Inspectable deliveries in a real browser: the delivery log's store and product links,
// tests and resends marked, a delivery's page with the exact request each attempt sent (compared
// with the header lines a real receiver got), and a resend that says which delivery it replaces and whether
// the receiver gets the payload once or twice. A real service on a fake clock, the dispatcher
// driven by hand, Chromium driven by playwright-core. Screenshots: artifacts/panel/.
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchBrowser, type TestBrowser } from '../support/browser.js';
import { fakeClock, MINUTE } from '../support/clock.js';
import { Receiver } from '../support/receiver.js';
import { startTestService, type TestService } from '../support/service.js';
import { signInAsOperator } from './sign-in.js';

const clock = fakeClock('2025-03-14T09:00:00.000Z');
let service: TestService;
let browser: TestBrowser;
let receiver: Receiver;
let page: Page;
let merchantId: number;
let endpointId: number;
let productId: number;
let detailUrl: string;

const STORE = { locale: 'pl-PL', currency: 'PLN', is_default: false, active: true, exclude_out_of_stock: false };

beforeAll(async () => {
  service = await startTestService({
    now: clock.now,
    config: { webhooks: { allowHosts: ['127.0.0.1'], backoffSeconds: [60, 600, 3600] } },
  });
  receiver = await Receiver.start({ now: clock.now, behaviour: { status: 204 } });
  const { admin } = service;
  merchantId = (await admin.createMerchant({ name: 'Alpine Outfitters' })).id;
  await admin.upsertStore(merchantId, 'de', { ...STORE, name: 'Deutschland', locale: 'de-DE', currency: 'EUR', is_default: true });
  await admin.upsertStore(merchantId, 'pl', { ...STORE, name: 'Polska' });
  await admin.upsertExchangeRate(merchantId, { base: 'EUR', quote: 'PLN', rate: '4.3' });
  await admin.upsertSupplier(merchantId, 'nordwind', 'Nordwind');
  // The endpoint receives the store `pl` only: its deliveries name that store.
  const endpoint = await service.service.endpoints.create(merchantId, { url: `${receiver.url}?token=abc`, store: 'pl', events: ['price'] });
  endpointId = endpoint.id;
  receiver.secret = endpoint.secret;
  detailUrl = `${service.url}/panel/merchants/${merchantId}/endpoints/${endpointId}`;
  browser = await launchBrowser();
  page = await browser.newPage();
  await signInAsOperator(page, service.url);
});

afterAll(async () => {
  await browser?.close();
  await receiver?.close();
  await service?.close();
});

const deliveries = () => service.service.endpoints.deliveries(merchantId, endpointId, { limit: 50 });
const row = (deliveryId: number) => page.locator(`tr[data-delivery="${deliveryId}"]`);

/** A price change of the product, batched and sent once (the coalescing window is 2 s). */
async function changePrice(cost: string): Promise<void> {
  productId = (
    await service.admin.upsertProduct(merchantId, 'BP-40', {
      content: { de: { title: 'Rucksack' }, pl: { title: 'Plecak' } },
      offers: [{ supplier_ref: 'nordwind', quantity: 4, cost, currency: 'EUR' }],
    })
  ).id;
  clock.advance(2_000);
  await service.service.dispatcher.tick();
}

describe('inspecting deliveries in the browser', () => {
  it("lists each delivery's store by slug, its products as links to the catalog page, and marks a test", async () => {
    receiver.answer({ status: 500, body: 'down for maintenance' });
    await changePrice('10.00');
    const [failed] = await deliveries();
    expect(failed).toMatchObject({ status: 'failed', store_id: expect.any(Number), product_ids: [productId] });
    await service.service.endpoints.sendTest(merchantId, endpointId);

    await page.goto(detailUrl);
    const [test] = await deliveries();
    expect(await row(test!.id).locator('.tag-test').textContent()).toBe('test');
    expect(await row(failed!.id).locator('.tag-test').count()).toBe(0);
    expect(await row(failed!.id).locator('td.delivery-store').textContent()).toBe('pl');
    expect(await page.locator('thead th').allTextContents()).toContain('Store');
    await browser.screenshot(page, 'delivery-log');

    const link = row(failed!.id).getByRole('link', { name: String(productId), exact: true });
    expect(await link.getAttribute('href')).toBe(`/panel/merchants/${merchantId}/catalog?store=pl&q=${productId}`);
    await link.click();
    await page.waitForURL(/\/catalog\?/);
    expect(await page.locator('main h2').first().textContent()).toContain(`Product ${productId}`);
    expect(await page.locator('#payload').textContent()).toContain('store pl');
  });

  it('finds the delivery a receiver names by its webhook-id, and shows that id in the log', async () => {
    const [test, failed] = await deliveries();
    await page.goto(detailUrl);
    expect(await row(failed!.id).locator('code.webhook-id').textContent()).toBe(receiver.requests[0]!.headers['webhook-id']);
    await page.locator('input[name="webhook_id"]').fill(failed!.webhook_id);
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForURL(/webhook_id=dlv_/);
    expect(await page.locator('tr[data-delivery]').count()).toBe(1);
    expect(await row(failed!.id).count()).toBe(1);
    expect(await row(test!.id).count()).toBe(0);
  });

  it('shows the exact request each attempt sent, as the receiver got it, and each answer', async () => {
    const failed = (await deliveries()).find((d) => !d.test)!;
    await page.goto(`${detailUrl}/deliveries/${failed.id}`);
    const got = receiver.requests[0]!;
    expect(await page.locator('#request-body').textContent()).toBe(got.rawBody.toString('utf8'));
    const facts = await page.locator('#delivery-facts').textContent();
    expect(facts).toContain(`${failed.id} (webhook-id: ${failed.webhook_id}, the same in each retry`);
    // The request line and the headers the service set, as recorded; then, labelled apart, the
    // ones the HTTP client added. Every line is compared with what the receiver received.
    const attemptRow = page.locator('tr.attempt').first();
    const [requestLine, ...recorded] = (await attemptRow.locator('pre.request').textContent())!.split('\n');
    expect(requestLine).toBe(`${got.method} ${got.path} HTTP/1.1`);
    const clientLabel = (await attemptRow.locator('.client-headers').textContent())!;
    expect(clientLabel).toMatch(/^Added by the HTTP client, not recorded: /);
    const added = await attemptRow.locator('.client-headers code').allTextContents();
    const received = new Map<string, string>();
    for (let i = 0; i < got.rawHeaders.length; i += 2) received.set(got.rawHeaders[i]!.toLowerCase(), got.rawHeaders[i + 1]!);
    const shown = [...recorded, ...added].map((line) => /^([^:]+): (.*)$/.exec(line)!.slice(1) as [string, string]);
    // Each line the page shows is a header the receiver got, with that value; none it got is left out.
    expect(new Map(shown.map(([name, value]) => [name.toLowerCase(), value]))).toEqual(received);
    expect(shown).toHaveLength(received.size);
    // Which are which: the service's own (recorded, in their case), then the client's.
    expect(recorded).toEqual([
      `Content-Type: ${got.headers['content-type']}`,
      `X-Service-Timestamp: ${got.timestamp}`,
      `X-Service-Signature: ${got.signature}`,
      `webhook-id: ${failed.webhook_id}`,
    ]);
    expect(added).toEqual([`host: ${got.headers.host}`, `connection: ${got.headers.connection}`, `content-length: ${got.rawBody.length}`]);
    const attempt = await page.locator('tr.attempt').first().textContent();
    expect(attempt).toContain('500');
    expect(attempt).toContain('down for maintenance');
    await browser.screenshot(page, 'delivery-request');

    // Readable without JavaScript, and at phone width without scrolling sideways.
    const bare = await (await browser.browser.newContext({ javaScriptEnabled: false, viewport: { width: 390, height: 844 } })).newPage();
    await signInAsOperator(bare, service.url);
    await bare.goto(`${detailUrl}/deliveries/${failed.id}`);
    expect(await bare.locator('#request-body').textContent()).toBe(got.rawBody.toString('utf8'));
    expect(await bare.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    await browser.screenshot(bare, 'delivery-request-phone');
    await bare.context().close();
  });

  it('resends a delivery waiting for a retry: the resend names it, and it makes no further attempt', async () => {
    receiver.answer({ status: 200 });
    const failed = (await deliveries()).find((d) => !d.test && d.status === 'failed')!;
    await page.goto(detailUrl);
    await page.getByRole('button', { name: `Resend delivery ${failed.id}` }).click();
    await page.waitForURL(/\/deliveries\/\d+\?done=resent$/);
    const resentId = Number(/\/deliveries\/(\d+)\?/.exec(page.url())![1]);
    expect(await page.getByRole('status').textContent()).toContain(`it re-sends #${failed.id}`);
    expect(await page.locator('#delivery-replaces').textContent()).toBe(
      `Re-sends #${failed.id}. #${failed.id} makes no further attempt: the receiver gets this payload from this delivery alone. ` +
        `(X-Service-Replaces: ${failed.webhook_id})`,
    );
    await browser.screenshot(page, 'delivery-resent');

    await service.service.dispatcher.sendDue();
    // Past the original's next retry (60 s; less than the panel session's idle time).
    clock.advance(2 * MINUTE);
    await service.service.dispatcher.tick();
    // The failed attempt, then the resend; the original's retries never came.
    expect(receiver.requests.filter((r) => r.payload.event === 'price').length).toBe(2);

    await page.goto(`${detailUrl}/deliveries/${failed.id}`);
    expect(await page.locator('#delivery-replaced-by').textContent()).toBe(
      `#${resentId}. Re-sent as #${resentId}: this one makes no further attempt.`,
    );
    await page.goto(detailUrl);
    expect(await row(failed.id).textContent()).toContain(`re-sent as #${resentId}`);
    expect(await row(failed.id).textContent()).toContain('dropped');
    expect(await row(resentId).textContent()).toContain(`resend of #${failed.id}`);
    expect(await row(resentId).textContent()).toContain('succeeded');
  });

  it('says so when a resent delivery had been delivered: the receiver gets the payload twice', async () => {
    const delivered = (await deliveries()).find((d) => d.status === 'succeeded' && !d.test)!;
    await page.goto(`${detailUrl}/deliveries/${delivered.id}`);
    await page.getByRole('button', { name: 'Resend' }).click();
    await page.waitForURL(/\?done=resent$/);
    expect(await page.locator('#delivery-replaces').textContent()).toContain(
      `#${delivered.id} was delivered too: the receiver gets this payload twice`,
    );
    clock.advance(MINUTE);
  });

  it('marks a test delivery on its page', async () => {
    const test = (await deliveries()).find((d) => d.test)!;
    await page.goto(`${detailUrl}/deliveries/${test.id}`);
    expect(await page.locator('#delivery-test').textContent()).toContain('its product is a sample');
  });
});
