// The panel's safety in a real browser: a reload or "back" never repeats a change
// (every POST answers with a redirect, a refused one too; a secret is shown once from a one-time message of the
// session), removals and rotations ask first and the last owner stays, pending links are listed,
// revoked by a new invitation, by hand and by the user's removal, and no owner can take another's
// account over (an invitation never resets one; an owner's reset goes to the account's own e-mail;
// setting a password ends the account's other sessions and tells it). One service with a real SMTP
// server on 127.0.0.1, one Chromium (playwright-core), a context per person.
import type { Page, Request } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { launchBrowser, type TestBrowser } from '../support/browser.js';
import { startTestService, type TestService } from '../support/service.js';
import { startSmtpCapture, type SmtpCapture } from '../support/smtp.js';
import { signInAsOperator } from './sign-in.js';

const BOSS = { email: 'boss@alpine.example', password: 'the boss password' };
const COLLEAGUE = { email: 'colleague@alpine.example', password: 'the colleague password' };
let service: TestService;
let smtp: SmtpCapture;
let browser: TestBrowser;
let operator: Page;
let merchantId: number;
let endpointId: number;
let base: string;

beforeAll(async () => {
  smtp = await startSmtpCapture();
  service = await startTestService({
    config: { webhooks: { allowHosts: ['127.0.0.1'] }, smtp: { url: smtp.url, from: 'panel@catalog.test' } },
  });
  merchantId = (await service.admin.createMerchant({ name: 'Alpine Outfitters' })).id;
  endpointId = (await service.service.endpoints.create(merchantId, { url: 'https://127.0.0.1/hooks' })).id;
  base = `${service.url}/panel/merchants/${merchantId}`;
  browser = await launchBrowser();
  operator = await browser.newPage();
  await signInAsOperator(operator, service.url);
});

afterAll(async () => {
  await browser?.close();
  await service?.close();
  await smtp?.close();
});

const accounts = () => service.service.accounts;
const audit = async () => accounts().auditLog({ kind: 'operator' }, merchantId, 200);

async function signIn(page: Page, person: { email: string; password: string }): Promise<void> {
  await page.goto(`${service.url}/panel/login`);
  await page.getByLabel('E-mail').fill(person.email);
  await page.getByLabel('Password', { exact: true }).fill(person.password);
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
  await page.waitForURL(`${service.url}/panel`);
}

/** The page's status after a reload. */
async function reload(page: Page): Promise<number> {
  return (await page.reload())!.status();
}

/** Invites in the panel; the link of the page that shows it once. */
async function invite(page: Page, email: string, role: 'owner' | 'member'): Promise<string> {
  await page.goto(`${base}/users`);
  await page.getByLabel('E-mail').fill(email);
  await page.getByLabel('Role').selectOption(role);
  await page.getByRole('button', { name: 'Invite' }).click();
  await page.waitForURL(/\/users\/shown\/\d+$/);
  return (await page.locator('#secret a').getAttribute('href'))!;
}

async function setPassword(page: Page, link: string, password: string): Promise<void> {
  await page.goto(`${service.url}${link}`);
  await page.getByLabel('New password').fill(password);
  await page.getByRole('button', { name: 'Set password' }).click();
  await page.waitForURL(/\/panel\/login\?(welcome|reset)=1/);
}

/** Whether the page's session still works: a panel page, or the sign-in page it is sent to. */
async function signedIn(page: Page): Promise<boolean> {
  await page.goto(`${service.url}/panel`);
  return !page.url().endsWith('/panel/login');
}

describe('a reload or "back" never repeats a change', () => {
  it('shows a new API key once after a redirect; a reload shows it no more (410) and creates no second key; back is the form', async () => {
    const before = (await service.admin.listApiKeys(merchantId)).length;
    await operator.goto(`${base}/keys`);
    await operator.getByLabel(/Name/).fill('ERP sync');
    await operator.getByRole('button', { name: 'Create key' }).click();
    await operator.waitForURL(/\/keys\/shown\/\d+$/);
    const key = (await operator.locator('#secret').textContent())!.trim();
    expect(key).toMatch(/^cps_/);
    expect((await service.api('/v1/stores', key)).status).not.toBe(401);

    expect(await reload(operator)).toBe(410);
    expect(await operator.textContent('h1')).toBe('Shown once already');
    expect(await operator.content()).not.toContain(key);
    await browser.screenshot(operator, 'shown-once-reloaded');
    await operator.goBack();
    expect(operator.url()).toBe(`${base}/keys`);
    await operator.reload();
    expect((await service.admin.listApiKeys(merchantId)).length).toBe(before + 1);
  });

  it('asks before rotating a secret, shows the new one once, and a reload rotates nothing (one rotate_secret in the audit log)', async () => {
    await operator.goto(`${base}/endpoints`);
    await operator.getByRole('link', { name: 'Rotate secret…' }).click();
    expect(await operator.textContent('h1')).toBe('Rotate the signing secret?');
    // Asking changed nothing.
    expect((await service.service.endpoints.endpoint(merchantId, endpointId)).secret_rotation).toBeNull();
    await browser.screenshot(operator, 'rotate-confirm');
    await operator.getByRole('button', { name: 'Rotate the secret' }).click();
    await operator.waitForURL(/\/endpoints\/shown\/\d+$/);
    const secret = (await operator.locator('#secret').textContent())!.trim();
    const pending = (await service.service.endpoints.endpoint(merchantId, endpointId)).secret_rotation!;
    expect(pending.new_secret_prefix).toBe(secret.slice(0, pending.new_secret_prefix.length));

    expect(await reload(operator)).toBe(410);
    expect(await reload(operator)).toBe(410);
    expect(await operator.content()).not.toContain(secret);
    expect((await service.service.endpoints.endpoint(merchantId, endpointId)).secret_rotation!.new_secret_prefix).toBe(
      pending.new_secret_prefix,
    );
    expect((await audit()).filter((a) => a.action === 'endpoint.rotate_secret')).toHaveLength(1);
  });

  it('registers an endpoint and invites a user once however often their pages are reloaded', async () => {
    const endpoints = (await service.service.endpoints.list(merchantId)).length;
    await operator.goto(`${base}/endpoints`);
    await operator.getByLabel('Receiver URL').fill('https://127.0.0.1/second');
    await operator.getByRole('button', { name: 'Register' }).click();
    await operator.waitForURL(/\/endpoints\/shown\/\d+$/);
    expect(await operator.locator('#secret').textContent()).toMatch(/whsec_/);
    expect(await reload(operator)).toBe(410);
    expect((await service.service.endpoints.list(merchantId)).length).toBe(endpoints + 1);

    await invite(operator, 'reloaded@alpine.example', 'member');
    expect(await reload(operator)).toBe(410);
    const links = (await accounts().listPendingLinks({ kind: 'operator' }, merchantId)).filter(
      (l) => l.email === 'reloaded@alpine.example',
    );
    expect(links).toHaveLength(1);
    expect((await audit()).filter((a) => a.action === 'user.invite' && a.detail.startsWith('reloaded@'))).toHaveLength(1);
  });
});

describe('a refused form answers with a redirect too', () => {
  it('shows the error once beside its action after a 303; a reload is a GET that posts nothing, so a refused "Send test" is never sent later', async () => {
    const tests = async () =>
      (await service.service.endpoints.deliveries(merchantId, endpointId, { limit: 50 })).filter((d) => d.test).length;
    const before = await tests();
    const posts: string[] = [];
    const recordPost = (request: Request) => {
      if (request.method() === 'POST') posts.push(request.url());
    };
    operator.on('request', recordPost);
    await service.service.endpoints.update(merchantId, endpointId, { status: 'paused' });
    try {
      await operator.goto(`${base}/endpoints`);
      const row = operator.locator('tbody tr', { hasText: 'https://127.0.0.1/hooks' });
      const [response] = await Promise.all([
        operator.waitForResponse((r) => r.request().method() === 'POST'),
        row.getByRole('button', { name: 'Send test' }).click(),
      ]);
      expect(response.status()).toBe(303);
      expect(response.headers().location).toMatch(new RegExp(`^/panel/merchants/${merchantId}/endpoints\\?refused=\\d+$`));
      await operator.waitForURL(/\/endpoints\?refused=\d+$/);
      expect(await operator.getByRole('alert').count()).toBe(1);
      expect(await row.getByRole('alert').textContent()).toBe(`Webhook endpoint ${endpointId} is paused: enable it again first.`);
      await browser.screenshot(operator, 'refused-send-test');

      // Enabled meanwhile: a reload of the refusal's page is a GET, posts nothing, sends no test, and
      // does not show the refusal again (it was a one-time message).
      await service.service.endpoints.update(merchantId, endpointId, { status: 'active' });
      posts.length = 0;
      const reloaded = (await operator.reload())!;
      expect(reloaded.request().method()).toBe('GET');
      expect(reloaded.status()).toBe(200);
      expect(posts).toEqual([]);
      expect(await operator.getByRole('alert').count()).toBe(0);
      expect(await tests()).toBe(before);
      // "Back" to it neither.
      await operator.goto(`${base}/keys`);
      await operator.goBack();
      expect(operator.url()).toMatch(/\/endpoints\?refused=\d+$/);
      expect(posts).toEqual([]);
      expect(await tests()).toBe(before);
    } finally {
      operator.off('request', recordPost);
      await service.service.endpoints.update(merchantId, endpointId, { status: 'active' });
    }
  });

  it('keeps what was typed, but never a password: a refused password change comes back with empty fields, and its reload counts no second failure', async () => {
    const page = await browser.newPage();
    await setPassword(page, await invite(operator, 'typist@alpine.example', 'member'), 'the typist password');
    await signIn(page, { email: 'typist@alpine.example', password: 'the typist password' });
    await page.goto(`${service.url}/panel/account`);
    await page.getByLabel('Current password').fill('not the typist password');
    await page.getByLabel('New password').fill('the typist new password');
    const [response] = await Promise.all([
      page.waitForResponse((r) => r.request().method() === 'POST'),
      page.getByRole('button', { name: 'Change password' }).click(),
    ]);
    expect(response.status()).toBe(303);
    await page.waitForURL(/\/panel\/account\?refused=\d+$/);
    expect(await page.getByRole('alert').textContent()).toBe('Current password is not your current password.');
    expect(await page.getByLabel('Current password').inputValue()).toBe('');
    expect(await page.getByLabel('New password').inputValue()).toBe('');
    expect(await page.content()).not.toContain('the typist new password');
    // A wrong current password counts as a failed sign-in: once, however often the page is reloaded.
    const pair = 'account+address:user:typist@alpine.example 127.0.0.1';
    const failures = async () => (await service.storage.countSignInFailures([pair], '1970-01-01T00:00:00.000Z')).get(pair)?.count;
    expect(await failures()).toBe(1);
    expect((await page.reload())!.request().method()).toBe('GET');
    expect(await page.getByRole('alert').count()).toBe(0);
    expect(await failures()).toBe(1);
    // The old password still works: nothing was changed.
    const other = await browser.newPage();
    await signIn(other, { email: 'typist@alpine.example', password: 'the typist password' });
    await other.context().close();
    await page.context().close();
  });
});

describe('removals ask first, and the last owner stays', () => {
  it("a sole owner's removal of herself is a confirmation, then refused with the reason; she is still an owner", async () => {
    await setPassword(await browser.newPage(), await invite(operator, BOSS.email, 'owner'), BOSS.password);
    const boss = await browser.newPage();
    await signIn(boss, BOSS);
    await boss.goto(`${base}/users`);
    await boss.locator('tr', { hasText: BOSS.email }).getByRole('link', { name: 'Remove…' }).click();
    expect(await boss.textContent('h1')).toBe('Remove the user?');
    expect(await boss.textContent('main')).toContain('You are signed out.');
    await browser.screenshot(boss, 'remove-self-confirm');
    const [response] = await Promise.all([
      boss.waitForResponse((r) => r.request().method() === 'POST'),
      boss.getByRole('button', { name: 'Remove the user' }).click(),
    ]);
    // Refused (409), shown on the users page after a redirect.
    expect(response.status()).toBe(303);
    expect(await boss.getByRole('alert').textContent()).toContain(`${BOSS.email} is the merchant's only owner and cannot be removed`);
    expect(boss.url()).toMatch(/\/users\?refused=\d+$/);
    expect((await accounts().listUsers({ kind: 'operator' }, merchantId)).map((u) => [u.email, u.role])).toContainEqual([
      BOSS.email,
      'owner',
    ]);
    expect(await signedIn(boss)).toBe(true);
  });

  it('asks before deleting an endpoint; the deletion redirects to the list without it, and a reload of that page deletes nothing more', async () => {
    const doomed = await service.service.endpoints.create(merchantId, { url: 'https://127.0.0.1/doomed' });
    const others = (await service.service.endpoints.list(merchantId)).filter((e) => e.id !== doomed.id).map((e) => e.id);
    const deletions = async () => (await audit()).filter((a) => a.action === 'endpoint.delete');
    expect(await deletions()).toEqual([]);
    const posts: string[] = [];
    const recordPost = (request: Request) => {
      if (request.method() === 'POST') posts.push(request.url());
    };
    operator.on('request', recordPost);

    await operator.goto(`${base}/endpoints`);
    await operator.locator('tr', { hasText: 'https://127.0.0.1/doomed' }).getByRole('link', { name: 'Delete…' }).click();
    expect(operator.url()).toBe(`${base}/endpoints/${doomed.id}/delete`);
    expect(await operator.textContent('h1')).toBe('Delete the endpoint?');
    expect(await operator.textContent('main')).toContain('https://127.0.0.1/doomed will receive no more deliveries.');
    // Asking changed nothing.
    expect(posts).toEqual([]);
    expect((await service.service.endpoints.endpoint(merchantId, doomed.id)).status).toBe('active');
    expect(await deletions()).toEqual([]);
    await browser.screenshot(operator, 'endpoint-delete-confirm');

    const [response] = await Promise.all([
      operator.waitForResponse((r) => r.request().method() === 'POST'),
      operator.getByRole('button', { name: 'Delete the endpoint' }).click(),
    ]);
    expect(response.status()).toBe(303);
    expect(response.headers().location).toBe(`/panel/merchants/${merchantId}/endpoints?done=deleted`);
    await operator.waitForURL(`${base}/endpoints?done=deleted`);
    expect(await operator.getByRole('status').textContent()).toBe('The endpoint is deleted.');
    expect(await operator.locator('tr', { hasText: 'https://127.0.0.1/doomed' }).count()).toBe(0);
    await expect(service.service.endpoints.endpoint(merchantId, doomed.id)).rejects.toMatchObject({ status: 404 });
    expect(await deletions()).toHaveLength(1);
    expect((await operator.goto(`${base}/endpoints/${doomed.id}/delete`))!.status()).toBe(404);

    // The result page is a GET: reloading it posts nothing and deletes nothing.
    await operator.goto(`${base}/endpoints?done=deleted`);
    posts.length = 0;
    expect(await reload(operator)).toBe(200);
    expect(await reload(operator)).toBe(200);
    expect(posts).toEqual([]);
    expect(await deletions()).toHaveLength(1);
    expect((await service.service.endpoints.list(merchantId)).map((e) => e.id)).toEqual(others);
    operator.off('request', recordPost);
  });
});

describe('pending links', () => {
  it('a second invitation revokes the first link; the pending one is listed and revoked by hand', async () => {
    const first = await invite(operator, 'twice@alpine.example', 'owner');
    const second = await invite(operator, 'twice@alpine.example', 'owner');
    expect((await fetch(`${service.url}${first}`)).status).toBe(404);
    await operator.goto(`${base}/users`);
    const row = operator.locator('tr[data-link]', { hasText: 'twice@alpine.example' });
    expect(await row.count()).toBe(1);
    expect(await row.textContent()).toContain('invitation as owner');
    await browser.screenshot(operator, 'users-pending-links');
    await row.getByRole('link', { name: 'Revoke…' }).click();
    await operator.getByRole('button', { name: 'Revoke the link' }).click();
    await operator.waitForURL(/done=revoked/);
    expect(await operator.locator('tr[data-link]', { hasText: 'twice@alpine.example' }).count()).toBe(0);
    expect((await fetch(`${service.url}${second}`)).status).toBe(404);
  });

  it('removing a user revokes their pending links: a reset link made before the removal does not bring them back as owner', async () => {
    const page = await browser.newPage();
    await setPassword(page, await invite(operator, 'leaver@alpine.example', 'owner'), 'the leaver password');
    await operator.goto(`${base}/users`);
    await operator.locator('tr', { hasText: 'leaver@alpine.example' }).getByRole('link', { name: 'Reset password…' }).click();
    await operator.getByRole('button', { name: 'Make a reset link' }).click();
    await operator.waitForURL(/\/users\/shown\/\d+$/);
    const reset = (await operator.locator('#secret a').getAttribute('href'))!;
    await operator.goto(`${base}/users`);
    await operator.locator('tr', { hasText: 'leaver@alpine.example' }).getByRole('link', { name: 'Remove…' }).click();
    await operator.getByRole('button', { name: 'Remove the user' }).click();
    await operator.waitForURL(/done=removed/);
    expect(await operator.locator('tr[data-link]', { hasText: 'leaver@alpine.example' }).count()).toBe(0);
    const redeemed = await page.goto(`${service.url}${reset}`);
    expect(redeemed!.status()).toBe(404);
    expect((await accounts().listUsers({ kind: 'operator' }, merchantId)).map((u) => u.email)).not.toContain('leaver@alpine.example');
  });
});

describe('no owner can take over another account', () => {
  let boss: Page;
  let colleagueHere: Page;
  let colleagueThere: Page;

  beforeAll(async () => {
    await setPassword(await browser.newPage(), await invite(operator, COLLEAGUE.email, 'owner'), COLLEAGUE.password);
    boss = await browser.newPage();
    await signIn(boss, BOSS);
    colleagueHere = await browser.newPage();
    colleagueThere = await browser.newPage();
    await signIn(colleagueHere, COLLEAGUE);
    await signIn(colleagueThere, COLLEAGUE);
  });

  it("an owner inviting another owner's e-mail is refused, and no link is shown", async () => {
    await boss.goto(`${base}/users`);
    await boss.getByLabel('E-mail').fill(COLLEAGUE.email);
    await boss.getByLabel('Role').selectOption('owner');
    const [response] = await Promise.all([
      boss.waitForResponse((r) => r.request().method() === 'POST'),
      boss.getByRole('button', { name: 'Invite' }).click(),
    ]);
    // Refused (409), beside the invitation form after a redirect, as typed.
    expect(response.status()).toBe(303);
    expect(await boss.getByRole('alert').textContent()).toContain(
      `${COLLEAGUE.email} already has an account, and an invitation does not reset it`,
    );
    expect(await boss.getByLabel('E-mail').inputValue()).toBe(COLLEAGUE.email);
    expect(await boss.getByLabel('Role').inputValue()).toBe('owner');
    expect(await boss.content()).not.toContain('/panel/invitations/');
    expect((await accounts().listPendingLinks({ kind: 'operator' }, merchantId)).filter((l) => l.email === COLLEAGUE.email)).toEqual([]);
  });

  it("an owner's reset is e-mailed to the account itself; setting it ends every session of the account and tells it", async () => {
    const mails = smtp.mails.length;
    await boss.goto(`${base}/users`);
    await boss.locator('tr', { hasText: COLLEAGUE.email }).getByRole('link', { name: 'Reset password…' }).click();
    expect(await boss.textContent('main')).toContain(`e-mailed to ${COLLEAGUE.email} itself`);
    await boss.getByRole('button', { name: 'E-mail a reset link' }).click();
    await boss.waitForURL(/done=reset_sent/);
    expect(await boss.getByRole('status').textContent()).toContain("e-mailed to the account's own address");
    expect(await boss.content()).not.toContain('/panel/invitations/');

    await vi.waitFor(() => expect(smtp.mails.length).toBe(mails + 1), { timeout: 10_000, interval: 20 });
    const mail = smtp.mails[mails]!;
    expect(mail.to).toEqual([COLLEAGUE.email]);
    const link = /\/panel\/invitations\/[A-Za-z0-9_-]{43}/.exec(mail.data.replace(/=\r?\n/g, ''))![0];
    // The current password works until the link is used.
    expect(await signedIn(colleagueHere)).toBe(true);

    const reader = await browser.newPage();
    await reader.goto(`${service.url}${link}`);
    expect(await reader.textContent('h1')).toBe('Set a new password');
    await setPassword(reader, link, 'the colleague reset password');
    expect(await reader.getByRole('status').textContent()).toContain('every session of the account is signed out');
    expect(await signedIn(colleagueHere)).toBe(false);
    expect(await signedIn(colleagueThere)).toBe(false);
    await vi.waitFor(() => expect(smtp.mails.length).toBe(mails + 2), { timeout: 10_000, interval: 20 });
    expect(smtp.mails[mails + 1]!.to).toEqual([COLLEAGUE.email]);
    expect(smtp.mails[mails + 1]!.data).toContain('Subject: Your catalog panel password was changed');
    COLLEAGUE.password = 'the colleague reset password';
  });

  it('changing a password in "Your account" ends every other session of the account; this one stays, and the account is told by e-mail', async () => {
    await signIn(colleagueHere, COLLEAGUE);
    const mails = smtp.mails.length;
    await signIn(colleagueThere, COLLEAGUE);
    await colleagueHere.getByRole('link', { name: 'Your account' }).click();
    await colleagueHere.getByLabel('Current password').fill(COLLEAGUE.password);
    await colleagueHere.getByLabel('New password').fill('the colleague third password');
    await colleagueHere.getByRole('button', { name: 'Change password' }).click();
    await colleagueHere.waitForURL(/\/panel\/account\?ended=1$/);
    expect(await colleagueHere.getByRole('status').textContent()).toContain('1 other session(s) of your account signed out');
    await browser.screenshot(colleagueHere, 'account-password-changed');
    expect(await signedIn(colleagueThere)).toBe(false);
    expect(await signedIn(colleagueHere)).toBe(true);
    expect((await audit())[0]).toMatchObject({ actor: COLLEAGUE.email, action: 'user.change_password' });
    // The account is told, at its own address.
    await vi.waitFor(() => expect(smtp.mails.length).toBe(mails + 1), { timeout: 10_000, interval: 20 });
    const told = smtp.mails[mails]!;
    expect(told.to).toEqual([COLLEAGUE.email]);
    expect(told.data).toContain('Subject: Your catalog panel password was changed');
    expect(told.data.replace(/=\r?\n/g, '')).toContain(
      `The password of your account ${COLLEAGUE.email} of the catalog publishing panel was changed in the panel`,
    );
  });
});
