// The API keys page in a real browser: a merchant's owner issues a key with the browser origins
// whose pages may read with it, sees them in the list, changes them on the key's own page (an
// origin the browser would never send is refused beside the form, as typed, and nothing changes),
// and the public API then answers a page of that origin (CORS) and no longer the one removed.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { launchBrowser, type TestBrowser } from '../support/browser.js';
import { startTestService, type TestService } from '../support/service.js';

let service: TestService;
let browser: TestBrowser;
let merchantId: number;
const OPERATOR = { kind: 'operator' } as const;

async function signInAs(page: Page, email: string): Promise<void> {
  await page.goto(`${service.url}/panel/login`);
  await page.getByLabel('E-mail').fill(email);
  await page.getByLabel('Password').fill('correct horse battery');
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
  await page.waitForURL(`${service.url}/panel`);
}

/** Whether the public API lets a page of `origin` read with the key (the answer's Access-Control-Allow-Origin). */
async function allows(key: string, origin: string): Promise<boolean> {
  const answer = await fetch(`${service.url}/v1/stores`, { headers: { Authorization: `Bearer ${key}`, Origin: origin } });
  return answer.headers.get('access-control-allow-origin') === origin;
}

beforeAll(async () => {
  service = await startTestService();
  merchantId = (await service.admin.createMerchant({ name: 'Alpine Outfitters' })).id;
  await service.admin.upsertStore(merchantId, 'de', {
    name: 'Germany',
    locale: 'de-DE',
    currency: 'EUR',
    is_default: true,
    active: true,
    exclude_out_of_stock: false,
  });
  const { token } = await service.service.accounts.invite(OPERATOR, merchantId, { email: 'owner@alpine.example', role: 'owner' });
  await service.service.accounts.acceptInvitation(token, 'correct horse battery');
  browser = await launchBrowser();
});

afterAll(async () => {
  await browser?.close();
  await service?.close();
});

describe('API keys page: allowed origins', () => {
  it("issues a key with browser origins, lists them, and changes them on the key's page; a bad origin is refused as typed", async () => {
    const page = await browser.newPage();
    await signInAs(page, 'owner@alpine.example');
    const keysPage = `${service.url}/panel/merchants/${merchantId}/keys`;
    await page.goto(keysPage);
    await page.getByLabel('Name (the integration that uses it)').fill('Shop pages');
    await page.locator('textarea[name="origins"]').fill('https://shop.example.com\nhttp://localhost:5173');
    await page.getByRole('button', { name: 'Create key' }).click();
    const key = (await page.locator('#secret').textContent())!.trim();
    const created = (await service.admin.listApiKeys(merchantId)).find((k) => k.name === 'Shop pages')!;
    expect(created.allowed_origins).toEqual(['https://shop.example.com', 'http://localhost:5173']);
    expect(await allows(key, 'https://shop.example.com')).toBe(true);

    await page.goto(keysPage);
    const row = page.locator(`tr[data-key="${created.id}"]`);
    expect(await row.locator('.key-origins').textContent()).toContain('https://shop.example.com, http://localhost:5173');
    await browser.screenshot(page, 'api-key-origins-list');

    await row.getByRole('link', { name: 'Change…' }).click();
    const textarea = page.locator('textarea[name="origins"]');
    expect(await textarea.inputValue()).toBe('https://shop.example.com\nhttp://localhost:5173');
    await textarea.fill('https://shop.example.com/');
    await page.getByRole('button', { name: 'Save the origins' }).click();
    expect(await page.getByRole('alert').textContent()).toContain('Allowed origins');
    expect(await page.locator('textarea[name="origins"]').inputValue()).toBe('https://shop.example.com/');
    expect((await service.admin.listApiKeys(merchantId)).find((k) => k.id === created.id)!.allowed_origins).toHaveLength(2);

    await page.locator('textarea[name="origins"]').fill('https://www.example.com');
    await page.getByRole('button', { name: 'Save the origins' }).click();
    await page.waitForURL(`${keysPage}?done=origins`);
    expect(await page.getByRole('status').textContent()).toContain('allowed origins are saved');
    expect(await allows(key, 'https://www.example.com')).toBe(true);
    expect(await allows(key, 'https://shop.example.com')).toBe(false);
    const log = await service.storage.listAuditEntries(merchantId, 10);
    expect(JSON.stringify(log)).toContain(`origins https://www.example.com`);
  });
});
