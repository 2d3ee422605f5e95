// The panel's overview in a real browser (docs/panel.md#pages, "Overview"): a merchant with two stores, products
// excluded for known reasons, an endpoint with changes waiting and a notification; the operator and
// the merchant's user see the same counts, another merchant's user gets 404, and the page holds at
// phone width. Screenshots: artifacts/panel/overview-*.png.
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchBrowser, type TestBrowser } from '../support/browser.js';
import { signInAsOperator } from './sign-in.js';
import { startTestService, type TestService } from '../support/service.js';

let service: TestService;
let browser: TestBrowser;
let merchantId: number;
let otherMerchantId: number;

beforeAll(async () => {
  service = await startTestService({ config: { webhooks: { allowHosts: ['127.0.0.1'] } } });
  const { admin } = service;
  merchantId = (await admin.createMerchant({ name: 'Alpine Outfitters' })).id;
  otherMerchantId = (await admin.createMerchant({ name: 'Harbour Supplies' })).id;
  await admin.upsertStore(merchantId, 'de', {
    name: 'Germany',
    locale: 'de-DE',
    currency: 'EUR',
    is_default: true,
    active: true,
    exclude_out_of_stock: false,
  });
  await admin.upsertStore(merchantId, 'at', {
    name: 'Austria',
    locale: 'de-AT',
    currency: 'EUR',
    is_default: false,
    active: true,
    exclude_out_of_stock: true,
  });
  await admin.upsertSupplier(merchantId, 'alpine', 'Alpine');
  // Registered before the products, so their changes wait in its outbox (no dispatcher runs): feed lag.
  await service.service.endpoints.create(merchantId, { url: 'http://127.0.0.1:9/hooks' });
  const offer = (quantity: number) => [{ supplier_ref: 'alpine', quantity, cost: '10.00', currency: 'EUR' }];
  await admin.upsertProduct(merchantId, 'pack', { content: { de: { title: 'Rucksack' } }, offers: offer(3) });
  await admin.upsertProduct(merchantId, 'tent', { content: { de: { title: 'Zelt' } }, offers: offer(3), excluded_stores: ['at'] });
  await admin.upsertProduct(merchantId, 'bag', { content: { de: { title: 'Schlafsack' } } });
  await admin.upsertProduct(merchantId, 'lamp', { content: { de: { title: 'Stirnlampe' } }, offers: offer(0) });
  await service.storage.insertNotification({
    merchant_id: merchantId,
    endpoint_id: null,
    kind: 'failing',
    subject: 'Webhook endpoint http://127.0.0.1:9/hooks is failing',
    body: 'Deliveries have failed for an hour.',
    created_at: new Date().toISOString(),
  });
  browser = await launchBrowser();
});

afterAll(async () => {
  await browser?.close();
  await service?.close();
});

/** A user of the merchant, invited by the operator, with a password set through the invitation page. */
async function signInAsUser(page: Page, forMerchant: number, email: string): Promise<void> {
  const invitation = await service.service.accounts.invite({ kind: 'operator' }, forMerchant, { email, role: 'member' });
  await page.goto(`${service.url}/panel/invitations/${invitation.token}`);
  await page.getByLabel('New password').fill('a long enough password');
  await page.getByRole('button', { name: 'Set password' }).click();
  await page.waitForURL(/\/panel\/login\?welcome=1/);
  await page.getByLabel('E-mail').fill(email);
  await page.getByLabel('Password').fill('a long enough password');
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
  await page.waitForURL(`${service.url}/panel`);
}

/** The counts of a store's row, by column (data-count). */
async function storeCounts(page: Page, slug: string): Promise<Record<string, number>> {
  const cells = page.locator(`tr[data-store="${slug}"] td[data-count]`);
  const counts: Record<string, number> = {};
  for (const cell of await cells.all()) counts[(await cell.getAttribute('data-count'))!] = Number(await cell.textContent());
  return counts;
}

async function expectOverviewCounts(page: Page): Promise<void> {
  expect(await page.textContent('h1')).toBe('Alpine Outfitters');
  expect(await storeCounts(page, 'de')).toEqual({ total: 4, manual: 0, missing_title: 0, no_offers: 1, out_of_stock: 0 });
  expect(await storeCounts(page, 'at')).toEqual({ total: 4, manual: 1, missing_title: 0, no_offers: 1, out_of_stock: 1 });
  const endpoints = page.getByLabel('Endpoints by health');
  expect(await endpoints.textContent()).toMatch(/Healthy\s*1\s*Failing\s*0\s*Paused\s*0\s*Disabled\s*0/);
  expect(await page.getByRole('link', { name: '1 endpoint' }).getAttribute('href')).toBe(`/panel/merchants/${merchantId}/endpoints`);
  expect(await page.locator('#feed-lag').textContent()).toMatch(/^\d+ (s|min)$/);
  expect(await page.getByLabel('Images by mirroring state').textContent()).toMatch(/Pending\s*0\s*Mirrored\s*0\s*Dead\s*0/);
  expect(await page.textContent('main')).toContain('Webhook endpoint http://127.0.0.1:9/hooks is failing');
}

describe('merchant overview', () => {
  it("the operator opens a merchant from the list and sees its stores' products and exclusions, endpoints, feed lag and notifications", async () => {
    const page = await browser.newPage();
    await page.setViewportSize({ width: 1000, height: 700 });
    await signInAsOperator(page, service.url);
    await page.getByRole('link', { name: 'Alpine Outfitters' }).click();
    await page.waitForURL(`${service.url}/panel/merchants/${merchantId}`);
    await expectOverviewCounts(page);
    // The doctype is markup, not text: the page renders in standards mode.
    expect(await page.evaluate(() => document.compatMode)).toBe('CSS1Compat');
    await browser.screenshot(page, 'overview-merchant');
  });

  it('a merchant user sees the same overview at /panel, and another merchant answers 404', async () => {
    const page = await browser.newPage();
    await page.setViewportSize({ width: 1000, height: 700 });
    await signInAsUser(page, merchantId, 'member@alpine.example');
    await expectOverviewCounts(page);
    const response = await page.goto(`${service.url}/panel/merchants/${otherMerchantId}`);
    expect(response!.status()).toBe(404);
    expect(await page.textContent('main')).not.toContain('Harbour Supplies');
  });

  it('holds at phone width: nothing wider than the screen, every count keeps its label', async () => {
    const page = await browser.newPage();
    await page.setViewportSize({ width: 375, height: 740 });
    await signInAsOperator(page, service.url);
    await page.goto(`${service.url}/panel/merchants/${merchantId}`);
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    expect(overflow).toBeLessThanOrEqual(0);
    const label = await page
      .locator('tr[data-store="at"] td[data-count="manual"]')
      .evaluate((cell) => getComputedStyle(cell, '::before').content);
    expect(label).toBe('"Excluded manually: "');
    await browser.screenshot(page, 'overview-phone');
  });
});
