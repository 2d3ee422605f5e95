// The API keys page in a real browser: each key shows when it was last used ("never"
// until then), and the page says how often a use is written (CPS_API_KEY_LAST_USED_SECONDS).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchBrowser, type TestBrowser } from '../support/browser.js';
import { fakeClock, MINUTE } from '../support/clock.js';
import { startTestService, type TestService } from '../support/service.js';
import { signInAsOperator } from './sign-in.js';

const clock = fakeClock('2025-03-14T09:00:00.000Z');
let service: TestService;
let browser: TestBrowser;
let merchantId: number;

beforeAll(async () => {
  service = await startTestService({ now: clock.now });
  merchantId = (await service.admin.createMerchant({ name: 'Alpine Outfitters' })).id;
  await service.admin.upsertStore(merchantId, 'de', {
    name: 'Germany',
    locale: 'de-DE',
    currency: 'EUR',
    is_default: true,
    active: true,
    exclude_out_of_stock: false,
  });
  browser = await launchBrowser();
});

afterAll(async () => {
  await browser?.close();
  await service?.close();
});

describe('API keys page', () => {
  it('shows "never" for an unused key and the time of its last use once it is used, and how often a use is written', async () => {
    const used = await service.service.admin.createApiKey(merchantId, 'ERP sync');
    const unused = await service.service.admin.createApiKey(merchantId, 'Shop frontend');
    const page = await browser.newPage();
    await signInAsOperator(page, service.url);
    const lastUsed = (keyId: number) => page.locator(`tr[data-key="${keyId}"] td.key-last-used`).textContent();

    await page.goto(`${service.url}/panel/merchants/${merchantId}/keys`);
    expect(await page.getByRole('columnheader', { name: 'Last used' }).count()).toBe(1);
    expect(await lastUsed(used.id)).toBe('never');

    clock.advance(2 * MINUTE);
    expect((await service.api('/v1/stores', used.key)).status).toBe(200);
    await service.service.apiKeyUses.flush();
    await page.reload();
    // A <time>, shown in the viewer's local time (time.tsx).
    expect(await page.locator(`tr[data-key="${used.id}"] td.key-last-used time`).getAttribute('datetime')).toBe('2025-03-14T09:02:00.000Z');
    expect(await lastUsed(unused.id)).toBe('never');
    expect(await page.textContent('main')).toContain('written at most once every 60 s');
    await browser.screenshot(page, 'api-keys-last-used');
  });
});
