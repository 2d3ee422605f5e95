// The panel, readable, in a real Chromium: times in the viewer's own time zone with how
// long ago, UTC on hover and without JavaScript, never broken mid-string; every table's cells keep
// their column's heading at phone width, on every page; a failed action's error beside it, in plain
// words; the current page marked in the navigation; empty states that say what to do; "Published"
// counts that say they include the excluded products. One service on a fake clock, one browser.
// Screenshots: artifacts/panel/readable-*.png.
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchBrowser, type TestBrowser } from '../support/browser.js';
import { fakeClock } from '../support/clock.js';
import { Receiver } from '../support/receiver.js';
import { startTestService, type TestService } from '../support/service.js';
import { signInAsOperator } from './sign-in.js';

const clock = fakeClock('2025-03-14T09:00:00.000Z');
let service: TestService;
let browser: TestBrowser;
let receiver: Receiver;
let merchantId: number;
let emptyMerchantId: number;
let endpointId: number;
let deliveryId: number;
let succeededImport: number;
let failedImport: number;
let base: string;

beforeAll(async () => {
  service = await startTestService({ now: clock.now, config: { webhooks: { allowHosts: ['127.0.0.1'] } } });
  receiver = await Receiver.start({ now: clock.now, behaviour: { status: 204 } });
  const { admin, storage } = service;
  const operator = { kind: 'operator' } as const;
  merchantId = (await admin.createMerchant({ name: 'Alpine Outfitters', owner_emails: ['owner@alpine.test'] })).id;
  emptyMerchantId = (await admin.createMerchant({ name: 'Empty Outfitters' })).id;
  base = `/panel/merchants/${merchantId}`;

  await admin.upsertStore(merchantId, 'de', {
    name: 'Deutschland',
    locale: 'de-DE',
    currency: 'EUR',
    is_default: true,
    active: true,
    exclude_out_of_stock: false,
  });
  await admin.upsertSupplier(merchantId, 'nordwind', 'Nordwind');
  const image = 'http://127.0.0.1:9/images/pack.jpg';
  await admin.upsertProduct(merchantId, 'PACK-30', {
    content: { de: { title: 'Tagesrucksack 30 l' } },
    images: [{ url: image }],
    overrides: { color: 'grün' },
    offers: [{ supplier_ref: 'nordwind', quantity: 4, cost: '21.00', currency: 'EUR' }],
  });
  await admin.upsertProduct(merchantId, 'BAG-1', { content: { de: { title: 'Schlafsack' } } }); // no offers: excluded
  await storage.updateImageMirror(merchantId, image, {
    state: 'dead',
    last_error: 'HTTP 404 from the image source',
    first_failure_at: clock.iso,
    updated_at: clock.iso,
  });

  // An endpoint with a delivered test, an owners' notification about it, a key, a user, audit entries and two imports.
  const endpoint = await service.service.endpoints.create(merchantId, { url: receiver.url });
  endpointId = endpoint.id;
  receiver.secret = endpoint.secret;
  deliveryId = (await service.service.endpoints.sendTest(merchantId, endpointId)).id;
  await service.service.dispatcher.tick();
  await storage.insertNotification({
    merchant_id: merchantId,
    endpoint_id: endpointId,
    kind: 'failing',
    subject: `Webhook deliveries to ${receiver.url} are failing`,
    body: 'The last 5 delivery attempts failed.',
    created_at: clock.iso,
  });
  await admin.createApiKey(merchantId, 'Shop sync');
  const invitation = await service.service.accounts.invite(operator, merchantId, { email: 'member@alpine.test', role: 'member' });
  await service.service.accounts.acceptInvitation(invitation.token, 'a long enough password');
  await service.service.accounts.record(operator, merchantId, 'user.invite', 'member@alpine.test as member');
  const job = {
    merchant_id: merchantId,
    started_by: 'owner@alpine.test',
    file_name: 'products.ndjson',
    started_at: clock.iso,
    updated_at: clock.iso,
    finished_at: clock.iso,
    lines_read: 2,
    operations: 2,
    products_applied: 2,
    upserted: 2,
    deleted: 0,
    error: null,
    error_code: null,
    problems: [],
  };
  succeededImport = (await storage.insertImportJob({ ...job, state: 'succeeded' })).id;
  failedImport = (
    await storage.insertImportJob({
      ...job,
      state: 'failed',
      operations: null,
      products_applied: 0,
      upserted: 0,
      error: '1 line is invalid: nothing was applied.',
      error_code: 'invalid_body',
      problems: [{ name: 'line 2', reason: 'is not JSON' }],
    })
  ).id;

  browser = await launchBrowser();
});

afterAll(async () => {
  await browser?.close();
  await receiver?.close();
  await service?.close();
});

/** Every body cell of every table on the page whose column has a heading, and the label it shows before itself. */
function cellLabels(page: Page): Promise<{ table: string; heading: string; shown: string }[]> {
  return page.locator('main table').evaluateAll((tables) =>
    tables.flatMap((table) => {
      const headings = [...table.querySelectorAll('thead th')].map((th) => th.textContent.trim());
      return [...table.querySelectorAll('tbody tr')].flatMap((row) =>
        [...row.children].flatMap((cell, column) =>
          headings[column]
            ? [
                {
                  table: table.getAttribute('aria-label') ?? headings.join('|'),
                  heading: headings[column],
                  shown: getComputedStyle(cell, '::before').content,
                },
              ]
            : [],
        ),
      );
    }),
  );
}

describe('every page at phone width', () => {
  const pages = () => [
    '/panel',
    base,
    `${base}/endpoints`,
    `${base}/endpoints/${endpointId}`,
    `${base}/endpoints/${endpointId}/deliveries/${deliveryId}`,
    `${base}/keys`,
    `${base}/users`,
    `${base}/import`,
    `${base}/import/jobs/${succeededImport}`,
    `${base}/import/jobs/${failedImport}`,
    `${base}/images`,
    `${base}/catalog?store=de`,
    `${base}/catalog?store=de&q=PACK-30`,
  ];

  it('labels every table cell with its column heading, fits the screen, and keeps every time on one line', async () => {
    const page = await browser.newPage({ viewport: { width: 375, height: 740 } });
    await signInAsOperator(page, service.url);
    for (const path of pages()) {
      const response = await page.goto(`${service.url}${path}`);
      expect(response!.status(), path).toBe(200);
      const labels = await cellLabels(page);
      expect(labels.length, `${path}: cells under a heading`).toBeGreaterThan(0);
      for (const { table, heading, shown } of labels) expect(shown, `${path}, table ${table}, column ${heading}`).toBe(`"${heading}: "`);
      expect(
        await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth),
        `${path}: wider than the screen`,
      ).toBeLessThanOrEqual(0);
      const times = await page
        .locator('main time')
        .evaluateAll((all) => all.map((time) => ({ text: time.textContent, lines: time.getClientRects().length })));
      for (const time of times) expect(time, path).toMatchObject({ lines: 1 });
    }
    await page.goto(`${service.url}${base}/endpoints/${endpointId}`);
    await browser.screenshot(page, 'readable-endpoint-detail-phone');
  });
});

describe('times', () => {
  it("shows a time in the viewer's time zone with how long ago it was, and the UTC on hover", async () => {
    const page = await browser.newPage({ timezoneId: 'Asia/Tokyo', locale: 'en-US' });
    await page.clock.setFixedTime(new Date('2025-03-14T09:05:00.000Z'));
    await signInAsOperator(page, service.url);
    await page.goto(`${service.url}${base}/keys`);
    const created = page.locator('tbody tr', { hasText: 'Shop sync' }).locator('time');
    expect(await created.textContent()).toBe('Mar 14, 2025, 6:00:00 PM'); // 09:00 UTC is 18:00 in Tokyo
    expect(await created.getAttribute('title')).toBe('2025-03-14 09:00:00 UTC');
    expect(await created.getAttribute('datetime')).toBe('2025-03-14T09:00:00.000Z');
    expect(await created.locator('xpath=following-sibling::span[1]').textContent()).toBe('(5 minutes ago)');
    await browser.screenshot(page, 'readable-keys-local-time');
  });

  it('shows the UTC time, readable, without JavaScript', async () => {
    const page = await browser.newPage({ javaScriptEnabled: false, timezoneId: 'Asia/Tokyo' });
    await signInAsOperator(page, service.url);
    await page.goto(`${service.url}${base}/keys`);
    const created = page.locator('tbody tr', { hasText: 'Shop sync' }).locator('time');
    expect(await created.textContent()).toBe('2025-03-14 09:00:00 UTC');
    expect(await page.locator('.ago').count()).toBe(0);
  });
});

describe('navigation', () => {
  it('marks the current page, and the section of a page under it', async () => {
    const page = await browser.newPage();
    await signInAsOperator(page, service.url);
    const current = async () =>
      page
        .locator('nav[aria-label="Merchant"] a[aria-current]')
        .evaluateAll((links) => links.map((a) => `${a.textContent} ${a.getAttribute('aria-current')}`));
    await page.goto(`${service.url}${base}`);
    expect(await current()).toEqual(['Overview page']);
    await page.goto(`${service.url}${base}/endpoints`);
    expect(await current()).toEqual(['Webhook endpoints page']);
    await page.goto(`${service.url}${base}/endpoints/${endpointId}/deliveries/${deliveryId}`);
    expect(await current()).toEqual(['Webhook endpoints true']);
    await page.goto(`${service.url}${base}/catalog?store=de&q=PACK-30`);
    expect(await current()).toEqual(['Catalog page']);
  });
});

describe('errors', () => {
  it('shows why "Send test" failed in the row of its endpoint, in plain words', async () => {
    const page = await browser.newPage();
    await signInAsOperator(page, service.url);
    await service.service.endpoints.update(merchantId, endpointId, { status: 'paused' });
    try {
      await page.goto(`${service.url}${base}/endpoints`);
      const row = page.locator('tbody tr', { hasText: receiver.url });
      const [response] = await Promise.all([
        page.waitForResponse((r) => r.request().method() === 'POST'),
        row.getByRole('button', { name: 'Send test' }).click(),
      ]);
      // Refused (409), shown after a redirect (a reload sends nothing).
      expect(response.status()).toBe(303);
      await page.waitForURL(/\/endpoints\?refused=\d+$/);
      expect(await page.getByRole('alert').count()).toBe(1);
      expect(await row.getByRole('alert').textContent()).toBe(`Webhook endpoint ${endpointId} is paused: enable it again first.`);
      await browser.screenshot(page, 'readable-send-test-refused');
    } finally {
      await service.service.endpoints.update(merchantId, endpointId, { status: 'active' });
    }
  });

  it('names an invalid field by its label above the form that was sent, not by a JSON Pointer', async () => {
    const page = await browser.newPage();
    await signInAsOperator(page, service.url);
    await page.goto(`${service.url}${base}/endpoints`);
    await page.getByLabel('Receiver URL').fill(`${receiver.url}/other`);
    for (const box of await page.getByRole('checkbox').all()) await box.uncheck();
    await page.getByRole('button', { name: 'Register' }).click();
    const alert = page.getByRole('alert');
    expect(await alert.textContent()).toBe('Events needs at least one choice.');
    // Right above the registration form.
    expect(await page.locator('form[action$="/endpoints"]').evaluate((form) => form.previousElementSibling?.getAttribute('role'))).toBe(
      'alert',
    );
  });

  it("shows a failed operator sign-in above the operator's form", async () => {
    const page = await browser.newPage();
    await page.goto(`${service.url}/panel/login`);
    await page.getByLabel('Admin token').fill('not the token');
    await page.getByRole('button', { name: 'Sign in as operator' }).click();
    await page.getByRole('alert').waitFor();
    expect(await page.locator('h2', { hasText: 'Operator' }).evaluate((h2) => h2.nextElementSibling?.getAttribute('role'))).toBe('alert');
    expect(await page.locator('h2', { hasText: 'Merchant user' }).evaluate((h2) => h2.nextElementSibling?.tagName)).toBe('FORM');
  });
});

describe('empty states and counts', () => {
  it('says what to do on the pages of a merchant that has nothing yet', async () => {
    const page = await browser.newPage();
    await signInAsOperator(page, service.url);
    const empty = `/panel/merchants/${emptyMerchantId}`;
    for (const [path, says] of [
      [empty, 'No stores yet: the operator creates them'],
      [`${empty}/endpoints`, "No endpoints yet: register your receiver's URL below"],
      [`${empty}/keys`, 'No API keys yet: create one below'],
      [`${empty}/users`, "No users yet: invite the merchant's people below"],
      [`${empty}/import`, 'No imports yet: upload a file above'],
      [`${empty}/images`, 'No images yet: the images of the products you import are mirrored here'],
      [`${empty}/catalog`, 'No active stores yet: the operator creates them'],
    ] as const) {
      await page.goto(`${service.url}${path}`);
      expect(await page.textContent('main'), path).toContain(says);
    }
  });

  it('says that the Published counts include the excluded products', async () => {
    const page = await browser.newPage();
    await signInAsOperator(page, service.url);
    await page.goto(`${service.url}${base}`);
    expect(await page.locator('thead th').nth(1).textContent()).toBe('Published (incl. excluded)');
    expect(await page.locator('tr[data-store="de"] td[data-count="total"]').textContent()).toBe('2');
    expect(await page.locator('#published-note').textContent()).toContain('the excluded ones included');
    await page.goto(`${service.url}${base}/catalog?store=de`);
    expect(await page.locator('#published-counts').textContent()).toMatch(
      /^\s*2 published, the excluded ones included: 1 in the store's export,\s+1 excluded from it \(no_offers 1\)\.\s*$/,
    );
  });
});
