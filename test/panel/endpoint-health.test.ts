// Truthful health in a real browser: an endpoint whose last attempts failed is
// shown failing, in amber, with how many failures since when and the last success, on the endpoint
// list, its page and the overview's tiles; the owners' notifications link to their endpoint and say
// when their condition ended; the endpoint's page charts the last 24 hours and 7 days of attempts
// by outcome with their latency, as SVG styled by the stylesheet alone (the CSP allows no style
// attribute), with a caption and a table that say the same, without JavaScript and at phone width.
// A real service on a fake clock, a real receiver, the dispatcher driven by hand. Screenshots:
// artifacts/panel/endpoint-health-*.png.
import type { Locator, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import path from 'node:path';
import { ARTIFACTS_DIR, launchBrowser, type TestBrowser } from '../support/browser.js';
import { fakeClock, MINUTE } from '../support/clock.js';
import { Receiver } from '../support/receiver.js';
import { startTestService, type TestService } from '../support/service.js';
import { signInAsOperator } from './sign-in.js';

const clock = fakeClock('2025-03-12T10:00:00.000Z');
const FIRST_SUCCESS = '2025-03-12T10:00:00.000Z';
const FAILING_SINCE = '2025-03-14T09:00:00.000Z';
const AMBER = 'rgb(138, 83, 0)';
let service: TestService;
let browser: TestBrowser;
let receiver: Receiver;
let merchantId: number;
let endpointId: number;
let page: Page;
/** Content Security Policy violations the browser reported on any page of the file. */
const violations: string[] = [];

/** Queues `n` test deliveries and sends everything due. */
async function deliver(n: number): Promise<void> {
  for (let i = 0; i < n; i++) await service.service.endpoints.sendTest(merchantId, endpointId);
  while ((await service.service.dispatcher.sendDue()) > 0);
}

const base = () => `${service.url}/panel/merchants/${merchantId}`;

async function watchedPage(options: Parameters<TestBrowser['browser']['newContext']>[0] = {}): Promise<Page> {
  const context = await browser.browser.newContext(options);
  const opened = await context.newPage();
  opened.on('console', (message) => {
    if (/Content Security Policy/i.test(message.text())) violations.push(message.text());
  });
  return opened;
}

beforeAll(async () => {
  service = await startTestService({
    now: clock.now,
    // Retries an hour apart: only the attempts the tests make happen.
    config: { webhooks: { allowHosts: ['127.0.0.1'], backoffSeconds: [3600, 3600, 3600] } },
  });
  receiver = await Receiver.start({ now: clock.now, behaviour: { status: 204 } });
  merchantId = (await service.admin.createMerchant({ name: 'Alpine Outfitters', owner_emails: ['owner@example.com'] })).id;
  const created = await service.service.endpoints.create(merchantId, { url: receiver.url });
  endpointId = created.id;
  receiver.secret = created.secret;
  // One success two days ago; then six failures in a row this morning (owners notified at the 5th).
  await deliver(1);
  clock.advance(Date.parse(FAILING_SINCE) - clock.ms);
  receiver.answer({ status: 500, body: 'Internal Server Error' });
  await deliver(6);
  browser = await launchBrowser();
  page = await watchedPage({ viewport: { width: 1100, height: 900 } });
  await signInAsOperator(page, service.url);
});

afterAll(async () => {
  await browser?.close();
  await receiver?.close();
  await service?.close();
});

/** The health shown says how many failures since when, and when the last success was (times as <time>, shown in local time). */
async function expectFailingSince(health: Locator): Promise<void> {
  const count = health.locator('.health-count');
  expect(await count.textContent()).toMatch(/^6 consecutive failures since /);
  expect(await count.locator('time').getAttribute('datetime')).toBe(FAILING_SINCE);
  const lastSuccess = health.locator('div', { hasText: 'last success' });
  expect(await lastSuccess.locator('time').getAttribute('datetime')).toBe(FIRST_SUCCESS);
}

describe('an endpoint whose last attempts failed', () => {
  it('is failing in amber, with the failures since when and the last success, on the endpoint list and its page', async () => {
    await page.goto(`${base()}/endpoints`);
    const cell = page.locator('tbody tr').first().locator('td').nth(3);
    const badge = cell.locator('.health');
    expect(await badge.textContent()).toBe('failing');
    expect(await badge.evaluate((element) => getComputedStyle(element).color)).toBe(AMBER);
    await expectFailingSince(cell);
    await browser.screenshot(page, 'endpoint-health-list-failing');

    await page.goto(`${base()}/endpoints/${endpointId}`);
    const health = page.locator('#endpoint-health');
    expect(await health.locator('.health').textContent()).toBe('failing');
    await expectFailingSince(health);
  });

  it('counts as failing on the overview, whose notification links to the endpoint and says the condition lasts', async () => {
    await page.goto(base());
    const tiles = page.getByLabel('Endpoints by health');
    expect(await tiles.textContent()).toMatch(/Healthy\s*0\s*Failing\s*1\s*Paused\s*0\s*Disabled\s*0/);
    const failingTile = tiles.locator('div', { hasText: 'Failing' });
    expect(await failingTile.getAttribute('class')).toBe('tile-failing');
    expect(await failingTile.locator('dd').evaluate((element) => getComputedStyle(element).color)).toBe(AMBER);
    const notification = page.locator('ul.notifications li').first();
    expect(await notification.textContent()).toContain('ongoing');
    await browser.screenshot(page, 'endpoint-health-overview-failing');
    await notification.getByRole('link', { name: `Webhook deliveries to ${receiver.url} are failing` }).click();
    await page.waitForURL(`${base()}/endpoints/${endpointId}`);
  });

  it('charts the last 24 hours and 7 days of attempts by outcome and latency, as SVG styled by classes, with a caption and a table', async () => {
    await page.goto(`${base()}/endpoints/${endpointId}`);
    const day = page.locator('#chart-day');
    const week = page.locator('#chart-week');
    expect(await day.locator('figcaption').textContent()).toMatch(
      /^Last 24 hours: 6 attempts, 0 % succeeded \(0 succeeded, 6 failed, 0 no response\); latency \d+ ms on average, \d+ ms at most\.$/,
    );
    expect(await week.locator('figcaption').textContent()).toMatch(
      /^Last 7 days: 7 attempts, 14\.3 % succeeded \(1 succeeded, 6 failed, 0 no response\)/,
    );
    // The drawing is an image named by its summary; every bucket is drawn, each with a tooltip.
    expect(await page.getByRole('img', { name: /^Last 24 hours: 6 attempts, 0 % succeeded/ }).count()).toBe(1);
    expect(await day.locator('g.chart-bucket').count()).toBe(24);
    expect(await week.locator('g.chart-bucket').count()).toBe(28);
    const thisHour = day.locator(`g.chart-bucket[data-from="${FAILING_SINCE}"]`);
    expect(await thisHour.locator('title').textContent()).toMatch(/^2025-03-14 09:00–10:00 UTC: 6 attempts, 0 % succeeded/);
    expect(await thisHour.locator('rect[data-outcome]').evaluateAll((rects) => rects.map((r) => r.getAttribute('data-outcome')))).toEqual([
      'failed',
    ]);
    expect(await week.locator('rect[data-outcome="succeeded"]').count()).toBe(1);
    expect(await week.locator('rect[data-outcome="failed"]').count()).toBe(1);
    // Colours come from the stylesheet's classes: nothing has a style attribute, and the CSP refused nothing.
    const fill = (selector: string) =>
      page
        .locator(selector)
        .first()
        .evaluate((element) => getComputedStyle(element).fill);
    expect(await fill('#chart-week rect.bar-succeeded')).toBe('rgb(29, 122, 58)');
    expect(await fill('#chart-week rect.bar-failed')).toBe('rgb(227, 160, 8)');
    expect(await page.locator('[style]').count()).toBe(0);
    expect(violations).toEqual([]);
    // docs/panel.md's picture (docs/panel/endpoint-health.png): the page from its title to the charts.
    await page.evaluate(() => window.scrollTo(0, 0));
    const top = (await page.locator('h1').boundingBox())!;
    const charts = (await page.locator('section[aria-labelledby="success-rate"]').boundingBox())!;
    await page.screenshot({
      path: path.join(ARTIFACTS_DIR, 'endpoint-health-top.png'),
      clip: { x: 0, y: top.y - 16, width: 1100, height: charts.y + charts.height - top.y + 24 },
      fullPage: true,
    });
    // The numbers, as a table behind a summary (no script needed to open it).
    await day.getByText('The numbers per hour').click();
    const rows = day.locator('table tbody tr');
    expect(await rows.count()).toBe(1);
    const cells = await rows.first().locator('td').allTextContents();
    expect(cells.slice(0, 6)).toEqual(['2025-03-14 09:00–10:00 UTC', '6', '0', '6', '0', '0 %']);
    expect(cells.slice(6)).toEqual([expect.stringMatching(/^\d+ ms$/), expect.stringMatching(/^\d+ ms$/)]);
    await browser.screenshot(page, 'endpoint-health-charts');
  });
});

describe('after one successful attempt', () => {
  it("is healthy again, and the notification says when the failures ended, on the overview and the endpoint's page", async () => {
    clock.advance(5 * MINUTE);
    receiver.answer({ status: 204 });
    await deliver(1);
    const ended = clock.iso;

    await page.goto(`${base()}/endpoints/${endpointId}`);
    expect(await page.locator('#endpoint-health .health').textContent()).toBe('healthy');
    expect(await page.locator('#endpoint-health .health').evaluate((element) => getComputedStyle(element).color)).toBe('rgb(29, 122, 58)');
    expect(await page.locator('#endpoint-health').textContent()).toContain('0 consecutive failures');
    const ending = page.locator('section[aria-labelledby="notifications"] tr[data-notification]').first().locator('.notification-ended');
    expect(await ending.textContent()).toMatch(/^ended /);
    expect(await ending.locator('time').getAttribute('datetime')).toBe(ended);
    expect(await page.locator('#chart-day figcaption').textContent()).toMatch(
      /^Last 24 hours: 7 attempts, 14\.3 % succeeded \(1 succeeded, 6 failed, 0 no response\)/,
    );

    await page.goto(base());
    expect(await page.getByLabel('Endpoints by health').textContent()).toMatch(/Healthy\s*1\s*Failing\s*0\s*Paused\s*0\s*Disabled\s*0/);
    expect(await page.locator('ul.notifications li').first().locator('.notification-ended time').getAttribute('datetime')).toBe(ended);
    expect(violations).toEqual([]);
  });

  it('reads the same without JavaScript at phone width: nothing wider than the screen, the table opens', async () => {
    const phone = await watchedPage({ javaScriptEnabled: false, viewport: { width: 375, height: 740 } });
    await signInAsOperator(phone, service.url);
    await phone.goto(`${base()}/endpoints/${endpointId}`);
    expect(await phone.evaluate(() => document.documentElement.scrollWidth - window.innerWidth)).toBeLessThanOrEqual(0);
    const chart = phone.locator('#chart-week svg');
    expect((await chart.boundingBox())!.width).toBeLessThanOrEqual(375);
    expect((await chart.boundingBox())!.height).toBeGreaterThan(100);
    await phone.locator('#chart-week').getByText('The numbers per 6 hours').click();
    const rows = phone.locator('#chart-week table tbody tr');
    expect(await rows.count()).toBe(2);
    expect(await rows.first().isVisible()).toBe(true);
    // At phone width each cell keeps its column's name.
    expect(
      await rows
        .first()
        .locator('td[data-label="Success rate"]')
        .evaluate((cell) => getComputedStyle(cell, '::before').content),
    ).toBe('"Success rate: "');
    await browser.screenshot(phone, 'endpoint-health-phone');
    expect(violations).toEqual([]);
  });
});
