// The endpoint detail page in a real browser (docs/panel.md#pages, "Endpoint detail"): a real service on a
// fake clock, a real receiver that is broken and fixed, the dispatcher driven by hand, Chromium
// driven by playwright-core. Screenshots: artifacts/panel/.
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchBrowser, type TestBrowser } from '../support/browser.js';
import { signInAsOperator } from './sign-in.js';
import { fakeClock, MINUTE } from '../support/clock.js';
import { Receiver } from '../support/receiver.js';
import { startTestService, type TestService } from '../support/service.js';

const clock = fakeClock('2025-03-14T09:00:00.000Z');
let service: TestService;
let browser: TestBrowser;
let receiver: Receiver;
let merchantId: number;
let otherMerchantId: number;
let page: Page;
let endpointId: number;
let detailUrl: string;
let secret: string;

// An HTML-looking answer: the page must show it as text, never as markup.
const BROKEN = { status: 500, body: '<b id="planted">boom</b> Internal Server Error' };

beforeAll(async () => {
  service = await startTestService({
    now: clock.now,
    // Small thresholds: the owners are notified after the second failed attempt; retries a minute apart.
    config: { webhooks: { allowHosts: ['127.0.0.1'], notifyAfterFailures: 2, backoffSeconds: [60, 60, 60, 60] } },
  });
  receiver = await Receiver.start({ now: clock.now, behaviour: { status: 204 } });
  merchantId = (await service.admin.createMerchant({ name: 'Alpine Outfitters', owner_emails: ['owner@example.com'] })).id;
  otherMerchantId = (await service.admin.createMerchant({ name: 'Harbour Supplies' })).id;
  browser = await launchBrowser();
  page = await browser.newPage();
});

afterAll(async () => {
  await browser?.close();
  await receiver?.close();
  await service?.close();
});

/** The endpoint's deliveries as the domain states them, newest first. */
const deliveries = () => service.service.endpoints.deliveries(merchantId, endpointId, { limit: 50 });

/** Queues a test delivery from the endpoints list, as an operator would. */
async function sendTestFromList(): Promise<void> {
  await page.goto(`${service.url}/panel/merchants/${merchantId}/endpoints`);
  await page.getByRole('button', { name: 'Send test' }).click();
  await page.waitForURL(/done=test/);
}

/** The text of the log row of one delivery. */
const row = (deliveryId: number) => page.locator(`tr[data-delivery="${deliveryId}"]`).textContent();

describe('endpoint detail in the browser', () => {
  it('is linked from the endpoints list and shows a successful delivery with its attempt', async () => {
    await signInAsOperator(page, service.url);
    await page.goto(`${service.url}/panel/merchants/${merchantId}/endpoints`);
    await page.getByLabel('Receiver URL').fill(receiver.url);
    await page.getByRole('button', { name: 'Register' }).click();
    secret = (await page.locator('#secret').textContent())!.trim();
    receiver.secret = secret;
    await page.getByRole('link', { name: /back to the endpoints/ }).click();
    await page.getByRole('link', { name: receiver.url }).click();
    await page.waitForURL(/\/endpoints\/\d+$/);
    detailUrl = page.url();
    endpointId = Number(/\/endpoints\/(\d+)$/.exec(detailUrl)![1]);
    expect(await page.textContent('main')).toContain('No deliveries');

    await sendTestFromList();
    await service.service.dispatcher.tick();
    expect(receiver.count).toBe(1);
    const [sent] = await deliveries();
    expect(sent!.status).toBe('succeeded');

    await page.goto(detailUrl);
    expect(await row(sent!.id)).toContain('succeeded');
    expect(await page.locator('#endpoint-health').textContent()).toContain('0 consecutive failures');
    await browser.screenshot(page, 'endpoint-detail');

    await page.getByRole('link', { name: `#${sent!.id}` }).click();
    await page.waitForURL(new RegExp(`/deliveries/${sent!.id}$`));
    const attempts = page.locator('tr.attempt');
    expect(await attempts.count()).toBe(1);
    expect(await attempts.first().textContent()).toContain('204');
    await browser.screenshot(page, 'endpoint-delivery-succeeded');
  });

  it("shows the failures, the failed attempts with their escaped response, and the owners' notification", async () => {
    receiver.answer(BROKEN);
    await sendTestFromList();
    await service.service.dispatcher.tick();
    clock.advance(2 * MINUTE);
    await service.service.dispatcher.sendDue();
    expect(receiver.count).toBe(3);
    const [failing] = await deliveries();
    expect(failing!.attempts).toBe(2);

    await page.goto(detailUrl);
    expect(await page.locator('#endpoint-health').textContent()).toContain('2 consecutive failures');
    expect(await row(failing!.id)).toContain(failing!.status);
    const notifications = await page.locator('section[aria-labelledby="notifications"]').textContent();
    expect(notifications).toContain('failing');
    expect(notifications).toContain(`Webhook deliveries to ${receiver.url} are failing`);
    await browser.screenshot(page, 'endpoint-detail-failing');

    // The log filtered by status shows only that status.
    await page.getByLabel('Status').selectOption(failing!.status);
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForURL(new RegExp(`status=${failing!.status}`));
    expect(await page.locator('tr[data-delivery]').count()).toBe(1);
    expect(await row(failing!.id)).toContain(failing!.status);

    await page.getByRole('link', { name: `#${failing!.id}` }).click();
    const attempts = page.locator('tr.attempt');
    expect(await attempts.count()).toBe(2);
    for (const text of await attempts.allTextContents()) {
      expect(text).toContain('500');
      expect(text).toContain('http_status');
    }
    // The receiver's answer is text on the page, not markup.
    expect(await page.locator('code.snippet').first().textContent()).toContain('<b id="planted">boom</b>');
    expect(await page.locator('#planted').count()).toBe(0);
    await browser.screenshot(page, 'endpoint-delivery-failed');
  });

  it('resends a failed delivery, which succeeds once the receiver is fixed, and records it in the audit log', async () => {
    receiver.answer({ status: 200 });
    const [failed] = await deliveries();
    await page.goto(detailUrl);
    await page.getByRole('button', { name: `Resend delivery ${failed!.id}` }).click();
    // The resend's own page, which names the delivery it replaces.
    await page.waitForURL(/\/deliveries\/\d+\?done=resent$/);
    expect(await page.getByRole('status').textContent()).toContain('queued again');

    await service.service.dispatcher.sendDue();
    const [resent] = await deliveries();
    expect(resent!.id).toBeGreaterThan(failed!.id);
    expect(resent!.status).toBe('succeeded');
    expect(receiver.requests.at(-1)!.payload.product_ids).toEqual(failed!.product_ids);

    await page.goto(detailUrl);
    expect(await row(resent!.id)).toContain('succeeded');
    expect(await page.locator('#endpoint-health').textContent()).toContain('0 consecutive failures');
    await browser.screenshot(page, 'endpoint-detail-resent');

    const audit = await service.service.accounts.auditLog({ kind: 'operator' }, merchantId, 20);
    expect(audit.map((a) => a.action)).toContain('endpoint.resend');
  });

  it('recovers the failed deliveries since a time, and says how many', async () => {
    // One more failed delivery (the one resent above makes no further attempt: nothing left to recover of it).
    receiver.answer(BROKEN);
    await sendTestFromList();
    await service.service.dispatcher.tick();
    expect((await deliveries())[0]!.status).toBe('failed');
    receiver.answer({ status: 200 });
    const before = (await deliveries()).length;
    await page.goto(detailUrl);
    await page.getByLabel('Recover failed deliveries since (UTC)').fill('2025-03-14T08:00:00');
    await page.getByRole('button', { name: 'Recover' }).click();
    await page.waitForURL(/done=recovered/);
    // The failed delivery is queued again as a new one (and makes no further attempt itself).
    expect(await page.getByRole('status').textContent()).toContain('1 failed deliveries are queued again.');
    expect((await deliveries()).length).toBe(before + 1);
    const audit = await service.service.accounts.auditLog({ kind: 'operator' }, merchantId, 20);
    expect(audit.map((a) => a.action)).toContain('endpoint.recover');
  });

  it('shows a new secret once when it is rotated from the detail page', async () => {
    await page.goto(detailUrl);
    // A confirmation step first, then the secret on a page of its own.
    await page.getByRole('link', { name: 'Rotate secret…' }).click();
    await page.getByRole('button', { name: 'Rotate the secret' }).click();
    const rotated = (await page.locator('#secret').textContent())!.trim();
    expect(rotated).toMatch(/^whsec_/);
    expect(rotated).not.toBe(secret);
    await browser.screenshot(page, 'endpoint-secret-rotated');
    await page.goto(detailUrl);
    const html = await page.content();
    expect(html).toContain(rotated.slice(0, 12));
    expect(html).not.toContain(rotated);
  });

  it('pages the log newest first with an "Older deliveries" link that keeps the status filter', async () => {
    for (let i = 0; i < 26; i++) await service.service.endpoints.sendTest(merchantId, endpointId);
    const pending = (await deliveries()).filter((d) => d.status === 'pending').map((d) => d.id);
    expect(pending.length).toBe(27);
    await page.goto(`${detailUrl}?status=pending`);
    const ids = async () =>
      await page.locator('tr[data-delivery]').evaluateAll((rows) => rows.map((r) => Number(r.getAttribute('data-delivery'))));
    expect(await ids()).toEqual(pending.slice(0, 25));
    await page.getByRole('link', { name: 'Older deliveries' }).click();
    await page.waitForURL(/before_id=/);
    expect(new URL(page.url()).searchParams.get('status')).toBe('pending');
    expect(await ids()).toEqual(pending.slice(25));
    expect(await page.getByRole('link', { name: 'Older deliveries' }).count()).toBe(0);
    await browser.screenshot(page, 'endpoint-detail-older');
  });

  it("answers 404 for another merchant's endpoint or delivery, and 400 for an unknown status filter", async () => {
    const other = await service.service.endpoints.create(otherMerchantId, { url: `${receiver.url}/other` });
    const [own] = await deliveries();
    const base = `${service.url}/panel/merchants/${merchantId}/endpoints`;
    for (const path of [`${base}/${other.id}`, `${base}/${other.id}/deliveries/${own!.id}`, `${base}/${endpointId}/deliveries/999999`]) {
      const response = await page.goto(path);
      expect(response!.status(), path).toBe(404);
    }
    expect((await page.goto(`${detailUrl}?status=bogus`))!.status()).toBe(400);

    // Edited form targets change nothing: resend and recover against the other merchant's endpoint.
    const otherDelivery = await service.service.endpoints.sendTest(otherMerchantId, other.id);
    await page.goto(detailUrl);
    const csrf = (await page.locator('input[name="_csrf"]').first().getAttribute('value'))!;
    for (const [path, form] of [
      [`${base}/${other.id}/deliveries/${otherDelivery.id}/resend`, { _csrf: csrf }],
      [`${base}/${other.id}/recover`, { _csrf: csrf, since: '2025-03-14T08:00:00' }],
    ] as const) {
      const response = await page.request.post(path, { form, headers: { Origin: service.url }, maxRedirects: 0 });
      expect(response.status(), path).toBe(404);
    }
    expect(await service.service.endpoints.deliveries(otherMerchantId, other.id, { limit: 10 })).toHaveLength(1);
  });
});
