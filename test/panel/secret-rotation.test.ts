// Secret rotation in the panel, in a real browser: a merchant user rotates an
// endpoint's secret, sees the new secret once and the rotation pending (until when) on the
// endpoint's page and in the list, while a real receiver that knows only the old secret keeps
// verifying deliveries; "Sign with the new secret now" switches at once. A real service on a
// fake clock, the dispatcher driven by hand, Chromium driven by playwright-core.
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchBrowser, type TestBrowser } from '../support/browser.js';
import { fakeClock, HOUR } from '../support/clock.js';
import { Receiver } from '../support/receiver.js';
import { startTestService, type TestService } from '../support/service.js';

const clock = fakeClock('2025-03-14T09:00:00.000Z');
const MEMBER = { email: 'member@alpine.example', password: 'a long enough password' };
let service: TestService;
let browser: TestBrowser;
let receiver: Receiver;
let page: Page;
let merchantId: number;
let endpointId: number;
let oldSecret: string;
let listUrl: string;
let detailUrl: string;

beforeAll(async () => {
  service = await startTestService({
    now: clock.now,
    // The member's session outlasts the 24-hour grace period the fake clock crosses.
    config: { webhooks: { allowHosts: ['127.0.0.1'] }, panel: { sessionIdleMinutes: 48 * 60, sessionAbsoluteHours: 48 } },
  });
  receiver = await Receiver.start({ now: clock.now, behaviour: { status: 204 } });
  merchantId = (await service.admin.createMerchant({ name: 'Alpine Outfitters' })).id;
  const created = await service.service.endpoints.create(merchantId, { url: receiver.url, events: ['content'] });
  endpointId = created.id;
  oldSecret = created.secret;
  receiver.secret = oldSecret;
  listUrl = `${service.url}/panel/merchants/${merchantId}/endpoints`;
  detailUrl = `${listUrl}/${endpointId}`;
  const { accounts } = service.service;
  const invitation = await accounts.invite({ kind: 'operator' }, merchantId, { email: MEMBER.email, role: 'member' });
  await accounts.acceptInvitation(invitation.token, MEMBER.password);
  browser = await launchBrowser();
  page = await browser.newPage();
  await page.goto(`${service.url}/panel/login`);
  await page.getByLabel('E-mail').fill(MEMBER.email);
  await page.getByLabel('Password').fill(MEMBER.password);
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
  await page.waitForURL(`${service.url}/panel`);
});

afterAll(async () => {
  await browser?.close();
  await receiver?.close();
  await service?.close();
});

/** A test delivery, sent now; returns the secret the receiver verified it with. */
async function deliverTest(): Promise<string> {
  const before = receiver.count;
  await service.service.endpoints.sendTest(merchantId, endpointId);
  await service.service.dispatcher.tick();
  expect(receiver.count).toBe(before + 1);
  return receiver.requests.at(-1)!.verifiedWith;
}

const secretCell = () => page.locator('#endpoint-secret').textContent();
// "Sign with the new secret now…" leads to a confirmation page whose button does it.
const confirmButton = () => page.getByRole('link', { name: 'Sign with the new secret now…' });
const reallyConfirm = () => page.getByRole('button', { name: 'Sign with the new secret now' });

describe('rotating a secret in the panel', () => {
  let newSecret: string;
  let pendingUntil: string;

  it('shows the new secret once and says until when the old one signs; the endpoint page and the list show the rotation pending', async () => {
    await page.goto(detailUrl);
    expect(await confirmButton().count()).toBe(0);
    const rotatedAt = clock.ms;
    // A confirmation step first, then the secret on a page of its own.
    await page.getByRole('link', { name: 'Rotate secret…' }).click();
    await page.getByRole('button', { name: 'Rotate the secret' }).click();
    newSecret = (await page.locator('#secret').textContent())!.trim();
    expect(newSecret).toMatch(/^whsec_[A-Za-z0-9]{48}$/);
    expect(newSecret).not.toBe(oldSecret);
    pendingUntil = new Date(rotatedAt + 24 * HOUR).toISOString();
    const main = (await page.textContent('main'))!;
    // The times are <time datetime> elements, shown in the viewer's local time.
    const time = (scope: string) => page.locator(`${scope} time`).first().getAttribute('datetime');
    expect(main).toContain(`The old secret (${oldSecret.slice(0, 12)}…) of ${receiver.url} keeps signing deliveries until `);
    expect(await time('main')).toBe(pendingUntil);
    await browser.screenshot(page, 'endpoint-secret-rotated-pending');

    await page.goto(detailUrl);
    const cell = (await secretCell())!;
    expect(cell).toContain(`${oldSecret.slice(0, 12)}… signs`);
    expect(cell).toContain(`rotation pending: ${newSecret.slice(0, 12)}… signs from `);
    expect(cell).toContain(', or once confirmed');
    expect(await time('#endpoint-secret')).toBe(pendingUntil);
    expect(await page.content()).not.toContain(newSecret);
    expect(await confirmButton().count()).toBe(1);
    await browser.screenshot(page, 'endpoint-detail-rotation-pending');

    await page.goto(listUrl);
    expect(await page.locator('.secret-rotation').textContent()).toContain(`${newSecret.slice(0, 12)}… signs from `);
    expect(await time('.secret-rotation')).toBe(pendingUntil);
    expect(await confirmButton().count()).toBe(1);
  });

  it('keeps signing with the old secret meanwhile: a receiver that knows only the old one verifies the next delivery', async () => {
    clock.advance(23 * HOUR);
    expect(receiver.secrets).toEqual([oldSecret]);
    expect(await deliverTest()).toBe(oldSecret);
  });

  it('"Sign with the new secret now" switches at once: the page shows the new secret signing and no rotation, the next delivery is signed with it', async () => {
    receiver.secrets = [oldSecret, newSecret];
    await page.goto(detailUrl);
    await confirmButton().click();
    expect(await page.textContent('h1')).toBe('Sign with the new secret now?');
    // Asking changed nothing: the old secret still signs.
    expect((await service.service.endpoints.endpoint(merchantId, endpointId)).secret_rotation).not.toBeNull();
    await reallyConfirm().click();
    await page.waitForURL(/done=secret_confirmed/);
    expect(await page.getByRole('status').textContent()).toContain('The new secret signs every delivery from now on');
    const cell = (await secretCell())!;
    expect(cell).toContain(`${newSecret.slice(0, 12)}… signs`);
    expect(cell).not.toContain('rotation pending');
    expect(await confirmButton().count()).toBe(0);
    await browser.screenshot(page, 'endpoint-secret-confirmed');

    receiver.secret = newSecret;
    expect(await deliverTest()).toBe(newSecret);
  });

  it('records the rotation and the confirmation in the audit log, by the member', async () => {
    const audit = await service.service.accounts.auditLog({ kind: 'operator' }, merchantId, 20);
    expect(audit.filter((a) => a.action.endsWith('_secret')).map((a) => [a.action, a.actor])).toEqual([
      ['endpoint.confirm_secret', MEMBER.email],
      ['endpoint.rotate_secret', MEMBER.email],
    ]);
    expect(JSON.stringify(audit)).not.toContain(newSecret);
  });

  it("answers a confirmation from a stale page with the reason on the endpoint's page (a 409, after a redirect), changing nothing", async () => {
    const second = await service.service.endpoints.rotateSecret(merchantId, endpointId, 'operator');
    await page.goto(detailUrl);
    await confirmButton().click();
    // Confirmed elsewhere while the confirmation page was open.
    await service.service.endpoints.confirmSecret(merchantId, endpointId, 'operator');
    const [response] = await Promise.all([
      page.waitForResponse((r) => r.url().endsWith('/confirm-secret') && r.request().method() === 'POST'),
      reallyConfirm().click(),
    ]);
    expect(response.status()).toBe(303);
    await page.waitForURL(/\/endpoints\/\d+\?refused=\d+$/);
    expect(await page.getByRole('alert').textContent()).toContain(`Webhook endpoint ${endpointId} has no secret rotation pending`);
    expect(await secretCell()).toContain(`${second.secret.slice(0, 12)}… signs`);
    receiver.secret = second.secret;
    expect(await deliverTest()).toBe(second.secret);
  });
});
