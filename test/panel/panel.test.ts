// The administration panel in a real browser: a real service on 127.0.0.1, a real
// webhook receiver, and Chromium driven by playwright-core. Screenshots: artifacts/panel/.
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PANEL_CSP } from '../../src/panel/security-headers.js';
import { launchBrowser, type TestBrowser } from '../support/browser.js';
import { signInAsOperator } from './sign-in.js';
import { Receiver } from '../support/receiver.js';
import { ADMIN_TOKEN, startTestService, type TestService } from '../support/service.js';

let service: TestService;
let browser: TestBrowser;
let receiver: Receiver;
let merchantId: number;
let otherMerchantId: number;

beforeAll(async () => {
  service = await startTestService({ config: { webhooks: { allowHosts: ['127.0.0.1'] } } });
  receiver = await Receiver.start({ behaviour: { status: 204 } });
  merchantId = (await service.admin.createMerchant({ name: 'Alpine Outfitters' })).id;
  otherMerchantId = (await service.admin.createMerchant({ name: 'Harbour Supplies' })).id;
  browser = await launchBrowser();
});

afterAll(async () => {
  await browser?.close();
  await receiver?.close();
  await service?.close();
});

/** Signs the operator in over plain HTTP; returns the cookie and the CSRF token of a page. */
async function operatorCookie(): Promise<{ cookie: string; csrf: (path: string) => Promise<string> }> {
  const response = await fetch(`${service.url}/panel/login/operator`, {
    method: 'POST',
    redirect: 'manual',
    headers: { Origin: service.url, 'Content-Type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ admin_token: ADMIN_TOKEN }),
  });
  expect(response.status).toBe(303);
  const cookie = response.headers.get('set-cookie')!.split(';')[0]!;
  return {
    cookie,
    csrf: async (path) => {
      const html = await (await fetch(`${service.url}${path}`, { headers: { Cookie: cookie } })).text();
      return /name="_csrf" value="([^"]+)"/.exec(html)![1]!;
    },
  };
}

describe('panel security', () => {
  it('sends a CSP without inline script, nosniff and a same-origin referrer policy on its pages', async () => {
    for (const path of ['/panel/login', '/panel/no-such-page']) {
      const response = await fetch(`${service.url}${path}`);
      expect(response.headers.get('content-security-policy')).toBe(PANEL_CSP);
      expect(PANEL_CSP).toContain("script-src 'self'");
      expect(PANEL_CSP).toContain("frame-ancestors 'none'");
      expect(response.headers.get('x-content-type-options')).toBe('nosniff');
      expect(response.headers.get('referrer-policy')).toBe('same-origin');
      // A real doctype (standards mode), not escaped text on the page.
      expect((await response.text()).startsWith('<!doctype html><html lang="en">')).toBe(true);
    }
  });

  it('sets the session cookie HttpOnly and SameSite=Strict, without __Host- on plain http', async () => {
    const response = await fetch(`${service.url}/panel/login/operator`, {
      method: 'POST',
      redirect: 'manual',
      headers: { Origin: service.url, 'Content-Type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ admin_token: ADMIN_TOKEN }),
    });
    const setCookie = response.headers.get('set-cookie')!;
    expect(setCookie).toMatch(/^cps_panel=/);
    expect(setCookie).toMatch(/HttpOnly/);
    expect(setCookie).toMatch(/SameSite=Strict/);
    expect(setCookie).toMatch(/Path=\//);
  });

  it('refuses a cross-origin POST with 403 and changes nothing, even with a valid session and token', async () => {
    const { cookie, csrf } = await operatorCookie();
    const token = await csrf(`/panel/merchants/${merchantId}/keys`);
    const before = await service.admin.listApiKeys(merchantId);
    const crossSite = await fetch(`${service.url}/panel/merchants/${merchantId}/keys`, {
      method: 'POST',
      redirect: 'manual',
      headers: { Cookie: cookie, Origin: 'https://attacker.example', 'Content-Type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ _csrf: token, name: 'planted' }),
    });
    expect(crossSite.status).toBe(403);
    expect(crossSite.headers.get('content-type')).toMatch(/^text\/html/);
    // Same origin, but no token: refused as well.
    const tokenless = await fetch(`${service.url}/panel/merchants/${merchantId}/keys`, {
      method: 'POST',
      redirect: 'manual',
      headers: { Cookie: cookie, Origin: service.url, 'Content-Type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ name: 'planted' }),
    });
    expect(tokenless.status).toBe(403);
    expect(await service.admin.listApiKeys(merchantId)).toEqual(before);
  });

  it('refuses a form larger than the admin body limit with 413 before reading it', async () => {
    const response = await fetch(`${service.url}/panel/login/operator`, {
      method: 'POST',
      headers: { Origin: service.url, 'Content-Type': 'application/x-www-form-urlencoded' },
      body: `admin_token=${'x'.repeat(service.config.limits.adminBodyBytes + 1)}`,
    });
    expect(response.status).toBe(413);
  });

  it('sends a visitor without a session to the sign-in page', async () => {
    const response = await fetch(`${service.url}/panel/merchants/${merchantId}/endpoints`, { redirect: 'manual' });
    expect(response.status).toBe(303);
    expect(response.headers.get('location')).toBe('/panel/login');
  });
});

describe('operator in the browser', () => {
  it('signs in with the admin token and sees every merchant', async () => {
    const page = await browser.newPage();
    await page.goto(`${service.url}/panel`);
    expect(await page.getByRole('heading', { name: 'Sign in', level: 1 }).isVisible()).toBe(true);
    await browser.screenshot(page, 'login');
    await signInAsOperator(page, service.url);
    const body = await page.textContent('main');
    expect(body).toContain('Alpine Outfitters');
    expect(body).toContain('Harbour Supplies');
    await browser.screenshot(page, 'overview-operator');
  });

  it('registers an endpoint against a local receiver, sees its secret exactly once, and the test delivery verifies with it', async () => {
    const page = await browser.newPage();
    await signInAsOperator(page, service.url);
    await page.goto(`${service.url}/panel/merchants/${merchantId}/endpoints`);
    await page.getByLabel('Receiver URL').fill(`${receiver.url}/hooks`);
    await page.getByRole('button', { name: 'Register' }).click();
    const secret = (await page.locator('#secret').textContent())!.trim();
    expect(secret).toMatch(/^whsec_[A-Za-z0-9]{48}$/);
    expect(await page.getByRole('button', { name: 'Copy' }).isVisible()).toBe(true);
    await browser.screenshot(page, 'endpoint-created');

    await page.getByRole('link', { name: /back to the endpoints/ }).click();
    await page.reload();
    const listing = await page.content();
    expect(listing).toContain(`${receiver.url}/hooks`);
    expect(listing).toContain(secret.slice(0, 12));
    expect(listing).not.toContain(secret);
    await browser.screenshot(page, 'endpoints');

    // The secret shown is the one that signs: a test delivery verifies with it at the receiver.
    receiver.secret = secret;
    service.service.dispatcher.start();
    await page.getByRole('button', { name: 'Send test' }).click();
    await page.waitForURL(/done=test/);
    await receiver.waitFor(1);
    receiver.assertNoViolations();
    expect(receiver.requests[0]!.verifiedWith).toBe(secret);

    const audit = await service.service.accounts.auditLog({ kind: 'operator' }, merchantId, 10);
    expect(audit.map((a) => a.action)).toEqual(expect.arrayContaining(['endpoint.create', 'endpoint.send_test']));
  });

  it('pauses an endpoint by hand and enables it again, each recorded in the audit log', async () => {
    const created = await service.service.endpoints.create(otherMerchantId, { url: `${receiver.url}/pause-me` });
    const page = await browser.newPage();
    await signInAsOperator(page, service.url);
    await page.goto(`${service.url}/panel/merchants/${otherMerchantId}/endpoints`);
    await page.getByRole('button', { name: 'Pause' }).click();
    await page.waitForURL(/done=paused/);
    expect((await service.service.endpoints.endpoint(otherMerchantId, created.id)).status).toBe('paused');
    await page.getByRole('button', { name: 'Enable' }).click();
    await page.waitForURL(/done=enabled/);
    expect((await service.service.endpoints.endpoint(otherMerchantId, created.id)).status).toBe('active');
    const audit = await service.service.accounts.auditLog({ kind: 'operator' }, otherMerchantId, 10);
    expect(audit.slice(0, 2).map((a) => a.action)).toEqual(['endpoint.enable', 'endpoint.pause']);
  });

  it('shows a domain error on the form, after a redirect', async () => {
    const page = await browser.newPage();
    await signInAsOperator(page, service.url);
    await page.goto(`${service.url}/panel/merchants/${merchantId}/endpoints`);
    await page.getByLabel('Receiver URL').fill('http://10.0.0.1/hooks');
    const [response] = await Promise.all([
      page.waitForResponse((r) => r.request().method() === 'POST'),
      page.getByRole('button', { name: 'Register' }).click(),
    ]);
    // Refused (400), shown on the form's page after a redirect.
    expect(response.status()).toBe(303);
    expect(response.headers().location).toMatch(/\/endpoints\?refused=\d+$/);
    // In plain words, by the field's label.
    expect(await page.getByRole('alert').textContent()).toMatch(/^Receiver URL \S/);
    expect((await service.service.endpoints.list(merchantId)).some((e) => e.url.includes('10.0.0.1'))).toBe(false);
  });

  it('creates an API key shown once and revokes it after a confirmation', async () => {
    const page = await browser.newPage();
    await signInAsOperator(page, service.url);
    await page.goto(`${service.url}/panel/merchants/${merchantId}/keys`);
    await page.getByLabel(/Name/).fill('ERP sync');
    await page.getByRole('button', { name: 'Create key' }).click();
    const key = (await page.locator('#secret').textContent())!.trim();
    expect(key).toMatch(/^cps_/);
    expect((await service.api('/v1/stores', key)).status).not.toBe(401);
    await browser.screenshot(page, 'key-created');

    await page.getByRole('link', { name: /back to the keys/ }).click();
    expect(await page.content()).not.toContain(key);
    await page.getByRole('link', { name: 'Revoke…' }).click();
    await browser.screenshot(page, 'key-revoke-confirm');
    await page.getByRole('button', { name: 'Revoke the key' }).click();
    await page.waitForURL(/done=revoked/);
    expect(await page.textContent('main')).toContain('The key is revoked.');
    expect((await service.api('/v1/stores', key)).status).toBe(401);
  });

  it('answers 404 for a merchant that does not exist', async () => {
    const page = await browser.newPage();
    await signInAsOperator(page, service.url);
    const response = await page.goto(`${service.url}/panel/merchants/999999/endpoints`);
    expect(response!.status()).toBe(404);
  });
});

// These need the real accounts domain (src/admin/accounts.ts, service.accounts), written in
// parallel; the in-memory stand-in above covers the operator only. Enable them when it lands.
describe('merchant users (needs service.accounts)', () => {
  async function inviteAndAccept(page: Page, email: string, forMerchant: number, password: string): Promise<string> {
    await signInAsOperator(page, service.url);
    await page.goto(`${service.url}/panel/merchants/${forMerchant}/users`);
    await page.getByLabel('E-mail').fill(email);
    await page.getByLabel('Role').selectOption('owner');
    await page.getByRole('button', { name: 'Invite' }).click();
    const link = await page.locator('#invitation ~ .secret a, section[aria-labelledby="invitation"] a').first().getAttribute('href');
    expect(link).toMatch(/^\/panel\/invitations\//);
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL(/\/panel\/login/);
    await page.goto(`${service.url}${link}`);
    await page.getByLabel('New password').fill(password);
    await page.getByRole('button', { name: 'Set password' }).click();
    await page.waitForURL(/\/panel\/login\?welcome=1/);
    return link!;
  }

  async function signInAsUser(page: Page, email: string, password: string): Promise<void> {
    await page.goto(`${service.url}/panel/login`);
    await page.getByLabel('E-mail').fill(email);
    await page.getByLabel('Password').fill(password);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
  }

  it('the operator invites a user, who sets a password and signs in to their merchant', async () => {
    const page = await browser.newPage();
    const link = await inviteAndAccept(page, 'owner@alpine.example', merchantId, 'correct horse battery');
    await signInAsUser(page, 'owner@alpine.example', 'correct horse battery');
    await page.waitForURL(`${service.url}/panel`);
    expect(await page.textContent('h1')).toBe('Alpine Outfitters');
    await browser.screenshot(page, 'overview-user');
    // The link is single-use.
    expect((await fetch(`${service.url}${link}`)).status).toBe(404);
  });

  it("a merchant user's edited URLs answer 404 for another merchant and change nothing", async () => {
    const page = await browser.newPage();
    await inviteAndAccept(page, 'member@alpine.example', merchantId, 'another long password');
    await signInAsUser(page, 'member@alpine.example', 'another long password');
    await page.waitForURL(`${service.url}/panel`);
    for (const path of ['endpoints', 'keys', 'users']) {
      const response = await page.goto(`${service.url}/panel/merchants/${otherMerchantId}/${path}`);
      expect(response!.status()).toBe(404);
    }
    const before = await service.admin.listApiKeys(otherMerchantId);
    // The user's own session and valid form token (from a page of their merchant), sent to the
    // other merchant's URL over plain HTTP with the browser's cookie.
    const session = (await page.context().cookies()).find((c) => c.name === 'cps_panel')!;
    const cookie = `${session.name}=${session.value}`;
    const own = await (await fetch(`${service.url}/panel/merchants/${merchantId}/keys`, { headers: { Cookie: cookie } })).text();
    const csrf = /name="_csrf" value="([^"]+)"/.exec(own)![1]!;
    const status = (
      await fetch(`${service.url}/panel/merchants/${otherMerchantId}/keys`, {
        method: 'POST',
        redirect: 'manual',
        headers: { Cookie: cookie, Origin: service.url, 'Content-Type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ _csrf: csrf, name: 'planted' }),
      })
    ).status;
    expect(status).toBe(404);
    expect(await service.admin.listApiKeys(otherMerchantId)).toEqual(before);
  });

  it('throttles repeated failed sign-ins with 429 and Retry-After', async () => {
    let last: Response | undefined;
    for (let i = 0; i < 20; i += 1) {
      last = await fetch(`${service.url}/panel/login`, {
        method: 'POST',
        redirect: 'manual',
        headers: { Origin: service.url, 'Content-Type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ email: 'owner@alpine.example', password: 'wrong password!!' }),
      });
      if (last.status === 429) break;
      expect(last.status).toBe(401);
    }
    expect(last!.status).toBe(429);
    expect(Number(last!.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(await last!.text()).toContain('<form');
  });

  it('an unknown or used invitation link answers 404', async () => {
    const response = await fetch(`${service.url}/panel/invitations/not-a-real-token`);
    expect(response.status).toBe(404);
  });
});
