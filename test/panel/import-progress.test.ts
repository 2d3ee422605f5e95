// An import's page in a real browser (docs/panel.md#pages, "import"): while the import
// runs, the page reloads itself (a meta refresh, no inline script) and shows the progress as the
// database has it, whichever process writes it; when the import ends it shows the outcome and stops
// reloading. An import whose progress stopped long ago is shown as stalled. The job records are
// written straight to storage here, as another process running the import would.
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ImportJobRecord } from '../../src/admin/model.js';
import { launchBrowser, type TestBrowser } from '../support/browser.js';
import { signInAsOperator } from './sign-in.js';
import { startTestService, type TestService } from '../support/service.js';

let service: TestService;
let browser: TestBrowser;
let merchantId: number;
let page: Page;

beforeAll(async () => {
  service = await startTestService();
  merchantId = (await service.admin.createMerchant({ name: 'Progress Outfitters' })).id;
  browser = await launchBrowser();
  page = await browser.newPage();
  await signInAsOperator(page, service.url);
});
afterAll(async () => {
  await browser?.close();
  await service?.close();
});

function runningJob(startedAgoMs: number, overrides: Partial<ImportJobRecord> = {}): Omit<ImportJobRecord, 'id'> {
  const at = new Date(Date.now() - startedAgoMs).toISOString();
  return {
    merchant_id: merchantId,
    started_by: 'owner@progress.test',
    file_name: 'big.ndjson',
    state: 'running',
    started_at: at,
    updated_at: at,
    finished_at: null,
    lines_read: 0,
    operations: null,
    products_applied: 0,
    upserted: 0,
    deleted: 0,
    error: null,
    error_code: null,
    problems: [],
    ...overrides,
  };
}

const text = (selector: string) => page.locator(selector).textContent();

describe("an import's page while it runs", () => {
  it('shows the lines read, then the products applied, then the counts, reloading itself until the import ends', async () => {
    const job = await service.storage.insertImportJob(runningJob(0, { lines_read: 1200 }));
    await page.goto(`${service.url}/panel/merchants/${merchantId}/import/jobs/${job.id}`);
    expect(await text('#import-state')).toBe('running');
    expect(await text('#lines-read')).toBe('1200');
    expect(await text('#products-applied')).toBe('none yet: the lines are checked first');
    expect(await page.locator('meta[http-equiv="refresh"]').getAttribute('content')).toBe('1');
    expect(await page.getByRole('status').textContent()).toContain('reloads itself');

    // The test never reloads: the page does, and picks up what the import wrote meanwhile.
    const now = () => new Date().toISOString();
    await service.storage.updateImportJob(job.id, { lines_read: 5000, operations: 5000, products_applied: 2000, updated_at: now() });
    await page.locator('#products-applied', { hasText: '2000 of 5000' }).waitFor({ timeout: 5000 });
    expect(await page.locator('#products-applied progress').getAttribute('value')).toBe('2000');
    await browser.screenshot(page, 'import-running');

    await service.storage.updateImportJob(job.id, {
      state: 'succeeded',
      products_applied: 5000,
      upserted: 4990,
      deleted: 10,
      finished_at: now(),
      updated_at: now(),
    });
    await page.locator('#import-state', { hasText: 'succeeded' }).waitFor({ timeout: 5000 });
    expect(await page.getByRole('table', { name: 'Import result' }).locator('tbody td').allTextContents()).toEqual(['5000', '4990', '10']);
    expect(await page.locator('meta[http-equiv="refresh"]').count()).toBe(0);
  });

  it('shows an import whose file checking stopped long ago as stalled, and does not reload', async () => {
    // Still checking its file (nothing staged, nothing applied) and no progress since: its process is gone.
    const job = await service.storage.insertImportJob(runningJob(20 * 60_000, { lines_read: 800 }));
    await page.goto(`${service.url}/panel/merchants/${merchantId}/import/jobs/${job.id}`);
    expect(await text('#import-state')).toBe('stalled');
    expect(await page.getByRole('alert').textContent()).toContain(
      'the process checking this file has stopped, and nothing of it was applied',
    );
    expect(await page.locator('meta[http-equiv="refresh"]').count()).toBe(0);
    await page.goto(`${service.url}/panel/merchants/${merchantId}/import`);
    expect(await page.locator(`tr[data-job="${job.id}"] td[data-label="State"]`).textContent()).toBe('stalled');
  });

  it('answers 404 for an import that does not exist', async () => {
    const response = await page.goto(`${service.url}/panel/merchants/${merchantId}/import/jobs/999999`);
    expect(response!.status()).toBe(404);
  });
});
