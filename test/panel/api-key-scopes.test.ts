// The API keys page in a real browser: a merchant's owner issues keys choosing their scopes and
// stores, the list shows both, a key the service would refuse (stores with catalog:write) is
// refused beside the form with nothing issued, a member is not offered the form, and what the key
// then writes is shown in the audit log as the key.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { launchBrowser, type TestBrowser } from '../support/browser.js';
import { startTestService, type TestService } from '../support/service.js';

let service: TestService;
let browser: TestBrowser;
let merchantId: number;
const OPERATOR = { kind: 'operator' } as const;

async function user(email: string, role: 'owner' | 'member'): Promise<void> {
  const { token } = await service.service.accounts.invite(OPERATOR, merchantId, { email, role });
  await service.service.accounts.acceptInvitation(token, 'correct horse battery');
}

async function signInAs(page: Page, email: string): Promise<void> {
  await page.goto(`${service.url}/panel/login`);
  await page.getByLabel('E-mail').fill(email);
  await page.getByLabel('Password').fill('correct horse battery');
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
  await page.waitForURL(`${service.url}/panel`);
}

beforeAll(async () => {
  service = await startTestService();
  merchantId = (await service.admin.createMerchant({ name: 'Alpine Outfitters' })).id;
  for (const [slug, name, is_default] of [
    ['de', 'Germany', true],
    ['pl', 'Poland', false],
  ] as const) {
    await service.admin.upsertStore(merchantId, slug, {
      name,
      locale: 'de-DE',
      currency: 'EUR',
      is_default,
      active: true,
      exclude_out_of_stock: false,
    });
  }
  await user('owner@alpine.example', 'owner');
  await user('member@alpine.example', 'member');
  browser = await launchBrowser();
});

afterAll(async () => {
  await browser?.close();
  await service?.close();
});

describe('API keys page: scopes and stores', () => {
  it("lets an owner issue keys with the scopes and stores ticked, lists them, and shows the key's writes in the audit log as the key", async () => {
    const page = await browser.newPage();
    await signInAs(page, 'owner@alpine.example');
    const keysPage = `${service.url}/panel/merchants/${merchantId}/keys`;
    await page.goto(keysPage);
    // catalog:read is ticked by default; no store ticked means every store.
    expect(await page.locator('input[name="scopes"][value="catalog:read"]').isChecked()).toBe(true);
    expect(await page.locator('input[name="stores"]').count()).toBe(2);

    await page.getByLabel('Name (the integration that uses it)').fill('ERP sync');
    await page.locator('input[name="scopes"][value="catalog:read"]').uncheck();
    await page.locator('input[name="scopes"][value="catalog:write"]').check();
    await page.locator('input[name="scopes"][value="webhooks:write"]').check();
    await page.getByRole('button', { name: 'Create key' }).click();
    const erpKey = (await page.locator('#secret').textContent())!.trim();
    expect(erpKey).toMatch(/^cps_/);

    await page.goto(keysPage);
    await page.getByLabel('Name (the integration that uses it)').fill('Shop DE');
    await page.locator('input[name="stores"][value="de"]').check();
    await page.getByRole('button', { name: 'Create key' }).click();
    const shopKey = (await page.locator('#secret').textContent())!.trim();

    const keys = await service.admin.listApiKeys(merchantId);
    const erp = keys.find((k) => k.name === 'ERP sync')!;
    const shop = keys.find((k) => k.name === 'Shop DE')!;
    expect(erp).toMatchObject({ scopes: ['catalog:write', 'webhooks:write'], stores: null });
    expect(shop).toMatchObject({ scopes: ['catalog:read'], stores: ['de'] });

    await page.goto(keysPage);
    const cell = (id: number, column: string) => page.locator(`tr[data-key="${id}"] td.key-${column}`).textContent();
    expect(await cell(erp.id, 'scopes')).toBe('catalog:write, webhooks:write');
    expect(await cell(erp.id, 'stores')).toBe('all');
    expect(await cell(shop.id, 'scopes')).toBe('catalog:read');
    expect(await cell(shop.id, 'stores')).toBe('de');
    await browser.screenshot(page, 'api-keys-scopes');

    // The key restricted to de reads only de.
    const stores = await service.api('/v1/stores', shopKey);
    expect(stores.body.data.map((s: { slug: string }) => s.slug)).toEqual(['de']);

    // What the ERP key writes is the key's in the audit log.
    const written = await service.adminApi(
      'PUT',
      `/admin/v1/merchants/${merchantId}/suppliers/alpine`,
      { name: 'Alpine AG' },
      {
        headers: { Authorization: `Bearer ${erpKey}` },
      },
    );
    expect(written.status, written.text).toBe(200);
    await page.goto(`${service.url}/panel/merchants/${merchantId}/users`);
    const row = page.locator(`tr[data-credential="key"][data-api-key="${erp.id}"]`).first();
    expect(await row.locator('td').nth(1).textContent()).toBe(`key "ERP sync" (${erp.prefix}…)`);
    expect(await row.locator('td').nth(2).textContent()).toBe('supplier.create');
  });

  it('refuses a store-restricted key with catalog:write beside the form, the choices kept, and issues nothing', async () => {
    const page = await browser.newPage();
    await signInAs(page, 'owner@alpine.example');
    const before = (await service.admin.listApiKeys(merchantId)).length;
    await page.goto(`${service.url}/panel/merchants/${merchantId}/keys`);
    await page.getByLabel('Name (the integration that uses it)').fill('Too wide');
    await page.locator('input[name="scopes"][value="catalog:write"]').check();
    await page.locator('input[name="stores"][value="pl"]').check();
    await page.getByRole('button', { name: 'Create key' }).click();
    await page.waitForURL(/\/keys/);
    expect(await page.textContent('main')).toContain('catalog:write');
    expect(await page.locator('input[name="scopes"][value="catalog:write"]').isChecked()).toBe(true);
    expect(await page.locator('input[name="stores"][value="pl"]').isChecked()).toBe(true);
    expect(await page.getByLabel('Name (the integration that uses it)').inputValue()).toBe('Too wide');
    expect((await service.admin.listApiKeys(merchantId)).length).toBe(before);
  });

  it('offers a member no key form, and refuses a member who posts one', async () => {
    const page = await browser.newPage();
    await signInAs(page, 'member@alpine.example');
    await page.goto(`${service.url}/panel/merchants/${merchantId}/keys`);
    expect(await page.getByRole('button', { name: 'Create key' }).count()).toBe(0);
    expect(await page.textContent('main')).toContain("Keys are issued by the merchant's owners and the operator.");
    const before = (await service.admin.listApiKeys(merchantId)).length;
    const status = await page.evaluate(async (merchant) => {
      const csrf = document.querySelector<HTMLInputElement>('input[name="_csrf"]')?.value ?? '';
      const response = await fetch(`/panel/merchants/${merchant}/keys`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ _csrf: csrf, name: 'sneaky', scopes: 'catalog:write' }),
      });
      return response.status;
    }, merchantId);
    expect(status).toBe(403);
    expect((await service.admin.listApiKeys(merchantId)).length).toBe(before);
  });
});

describe('API keys page: expiry, last use and rolling', () => {
  it('lets an owner issue a key that expires, lists its expiry and last use, and roll it: a new key shown once, the old one working until the time chosen', async () => {
    const page = await browser.newPage();
    await signInAs(page, 'owner@alpine.example');
    const keysPage = `${service.url}/panel/merchants/${merchantId}/keys`;
    await page.goto(keysPage);
    await page.getByLabel('Name (the integration that uses it)').fill('PIM import');
    await page.getByLabel('Expires').selectOption({ label: 'in 30 days' });
    await page.getByRole('button', { name: 'Create key' }).click();
    const oldKey = (await page.locator('#secret').textContent())!.trim();
    expect((await service.api('/v1/stores', oldKey)).status).toBe(200);
    const old = (await service.admin.listApiKeys(merchantId)).find((k) => k.name === 'PIM import')!;
    // 30 days from the form's answer; the key's created_at is the storage's own moment of the insert, a few ms apart.
    expect(Math.abs(Date.parse(old.expires_at!) - Date.parse(old.created_at) - 30 * 24 * 3600_000)).toBeLessThan(1000);

    await page.goto(keysPage);
    const cell = (id: number, column: string) => page.locator(`tr[data-key="${id}"] td.key-${column}`);
    expect(await cell(old.id, 'expires').locator('time').getAttribute('datetime')).toBe(old.expires_at);
    expect(await cell(old.id, 'scopes').textContent()).toBe('catalog:read');
    expect(await cell(old.id, 'stores').textContent()).toBe('all');
    await expect.poll(async () => (await service.admin.listApiKeys(merchantId)).find((k) => k.id === old.id)!.last_used_at).not.toBeNull();
    await page.goto(keysPage);
    expect(await cell(old.id, 'last-used').locator('time').count()).toBe(1);

    await page.locator(`tr[data-key="${old.id}"]`).getByRole('link', { name: 'Roll…' }).click();
    await page.getByLabel('The old key stops working').selectOption({ label: 'in 24 hours' });
    await page.getByRole('button', { name: 'Roll the key' }).click();
    const newKey = (await page.locator('#secret').textContent())!.trim();
    expect(newKey).toMatch(/^cps_/);
    expect(newKey).not.toBe(oldKey);

    const keys = await service.admin.listApiKeys(merchantId);
    const rolled = keys.find((k) => k.rolled_from === old.id)!;
    expect(rolled).toMatchObject({ name: 'PIM import', scopes: ['catalog:read'], stores: null, expires_at: null });
    const oldNow = keys.find((k) => k.id === old.id)!;
    expect(Date.parse(oldNow.expires_at!) - Date.now()).toBeGreaterThan(23 * 3600_000);
    expect(Date.parse(oldNow.expires_at!) - Date.now()).toBeLessThanOrEqual(24 * 3600_000);
    // Both work until the old one's time.
    expect((await service.api('/v1/stores', oldKey)).status).toBe(200);
    expect((await service.api('/v1/stores', newKey)).status).toBe(200);

    await page.goto(keysPage);
    expect(await cell(rolled.id, 'expires').textContent()).toContain(`never rolled from key ${old.id}`);
    expect(await cell(old.id, 'expires').locator('time').getAttribute('datetime')).toBe(oldNow.expires_at);
    await browser.screenshot(page, 'api-keys-rolled');
  });

  it('rolls a key to stop now: the old key is refused at once', async () => {
    const page = await browser.newPage();
    await signInAs(page, 'owner@alpine.example');
    const created = await service.admin.createApiKey(merchantId, 'Old frontend');
    await page.goto(`${service.url}/panel/merchants/${merchantId}/keys/${created.id}/roll`);
    await page.getByRole('button', { name: 'Roll the key' }).click();
    const newKey = (await page.locator('#secret').textContent())!.trim();
    expect((await service.api('/v1/stores', created.key)).status).toBe(401);
    expect((await service.api('/v1/stores', newKey)).status).toBe(200);
    await page.goto(`${service.url}/panel/merchants/${merchantId}/keys`);
    expect(await page.locator(`tr[data-key="${created.id}"]`).getByRole('link', { name: 'Roll…' }).count()).toBe(0);
    expect(await page.locator(`tr[data-key="${created.id}"] td.key-expires`).textContent()).toContain('(expired)');
  });

  it('offers a member no roll', async () => {
    const page = await browser.newPage();
    await signInAs(page, 'member@alpine.example');
    await page.goto(`${service.url}/panel/merchants/${merchantId}/keys`);
    expect(await page.getByRole('link', { name: 'Roll…' }).count()).toBe(0);
  });
});
