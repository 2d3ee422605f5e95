// The panel's catalog pages in a real browser (docs/panel.md#pages, "Import", "Images", "Catalog"): the
// operator uploads NDJSON files, finds a product's payload beside its sources (by id, ref, SKU or
// EAN), pages through a store's products and its excluded ones, and retries dead images. The test service's image mirror is not started, so imported images stay pending.
// Screenshots: artifacts/panel/.
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { indentJson } from '../../src/panel/pages/catalog.js';
import { launchBrowser, type TestBrowser } from '../support/browser.js';
import { signInAsOperator } from './sign-in.js';
import { ADMIN_TOKEN, startTestService, type TestService } from '../support/service.js';

let service: TestService;
let browser: TestBrowser;
let merchantId: number;

const IMAGE_A = 'http://127.0.0.1:9/images/bp-40-front.jpg';
const IMAGE_B = 'http://127.0.0.1:9/images/bp-40-back.jpg';

const BACKPACK = {
  op: 'upsert_product',
  product: {
    ref: 'BP-40-GRN',
    eans: ['4006381333931'],
    manufacturer: 'Bergfex',
    content: { de: { title: 'Trekkingrucksack 40 l' } },
    images: [{ url: IMAGE_A }, { url: IMAGE_B }],
    offers: [{ supplier_ref: 'nordwind', quantity: 14, cost: '41.90', currency: 'EUR' }],
    overrides: { color: 'grün' },
  },
};
const TENT = {
  op: 'upsert_product',
  product: {
    ref: 'TENT-2P',
    content: { de: { title: 'Zelt für 2 Personen' } },
    own_stock: { quantity: 5, cost: '120.00', currency: 'EUR' },
  },
};
const ndjson = (...lines: (object | string)[]) =>
  Buffer.from(`${lines.map((l) => (typeof l === 'string' ? l : JSON.stringify(l))).join('\n')}\n`);

beforeAll(async () => {
  service = await startTestService();
  merchantId = (await service.admin.createMerchant({ name: 'Alpine Outfitters' })).id;
  await service.admin.upsertStore(merchantId, 'de', {
    name: 'Deutschland',
    locale: 'de-DE',
    currency: 'EUR',
    is_default: true,
    active: true,
    exclude_out_of_stock: false,
  });
  await service.admin.upsertSupplier(merchantId, 'nordwind', 'Nordwind');
  await service.admin.createCustomerGroup(merchantId, 'Retail');
  browser = await launchBrowser();
});

afterAll(async () => {
  await browser?.close();
  await service?.close();
});

/**
 * Uploads a file on the import page, which answers with a redirect to the import's own page; waits
 * there (the page reloads itself while the import runs) until the import has ended.
 */
async function upload(page: Page, name: string, buffer: Buffer): Promise<{ status: number; state: string }> {
  await page.goto(`${service.url}/panel/merchants/${merchantId}/import`);
  await page.getByLabel('NDJSON file').setInputFiles({ name, mimeType: 'application/x-ndjson', buffer });
  const [response] = await Promise.all([
    page.waitForResponse((r) => r.request().method() === 'POST' && r.url().endsWith('/import')),
    page.getByRole('button', { name: 'Import' }).click(),
  ]);
  await page.waitForURL(new RegExp(`/panel/merchants/${merchantId}/import/jobs/\\d+$`));
  await page.locator('#import-state', { hasText: /^(succeeded|failed)$/ }).waitFor();
  return { status: response.status(), state: (await page.locator('#import-state').textContent())! };
}

describe('catalog pages in the browser', () => {
  let page: Page;

  it("lists the line numbers and reasons of a file with bad lines on the import's page, and applies nothing", async () => {
    page = await browser.newPage();
    await signInAsOperator(page, service.url);
    const outcome = await upload(
      page,
      'bad.ndjson',
      ndjson(BACKPACK, '{"op":"upsert_product","product":', {
        op: 'upsert_product',
        product: { ref: 'X-1', offers: [{ supplier_ref: 'nobody', quantity: 1, cost: '1.00', currency: 'EUR' }] },
      }),
    );
    expect(outcome).toEqual({ status: 303, state: 'failed' });
    const problems = page.getByRole('table', { name: 'Invalid lines' });
    expect(await problems.locator('tbody tr').count()).toBe(2);
    expect(await problems.locator('tbody tr').nth(0).textContent()).toMatch(/^line 2\s*not valid JSON/);
    expect(await problems.locator('tbody tr').nth(1).textContent()).toMatch(/^line 3.*nobody|^line 3.*supplier/);
    expect(await page.getByRole('alert').textContent()).toContain('nothing was applied');
    expect(await page.locator('#lines-read').textContent()).toBe('3');
    await browser.screenshot(page, 'import-bad-lines');
    await expect(service.admin.product(merchantId, 'BP-40-GRN')).rejects.toMatchObject({ status: 404 });
  });

  it('imports a good file and shows its counts, and the import page lists both imports with their outcome', async () => {
    const outcome = await upload(page, 'good.ndjson', ndjson(BACKPACK, TENT, { op: 'delete_product', ref: 'BP-30-RED' }));
    expect(outcome).toEqual({ status: 303, state: 'succeeded' });
    const cells = await page.getByRole('table', { name: 'Import result' }).locator('tbody td').allTextContents();
    expect(cells).toEqual(['3', '2', '0']);
    expect(await page.locator('#products-applied').textContent()).toMatch(/^3 of 3/);
    // Done: the page no longer reloads itself.
    expect(await page.locator('meta[http-equiv="refresh"]').count()).toBe(0);
    await browser.screenshot(page, 'import');
    expect((await service.admin.product(merchantId, 'BP-40-GRN')).source.offers).toHaveLength(1);
    const audit = await service.service.accounts.auditLog({ kind: 'operator' }, merchantId, 10);
    expect(audit.filter((a) => a.action === 'import.start')).toHaveLength(2);

    await page.getByRole('link', { name: 'Import another file' }).click();
    const rows = page.getByRole('table', { name: 'Recent imports' }).locator('tbody tr');
    expect(await rows.count()).toBe(2);
    expect(await rows.nth(0).locator('td').allTextContents()).toEqual([
      expect.any(String),
      'good.ndjson',
      'operator',
      expect.any(String),
      'succeeded',
      '3 of 3 applied',
    ]);
    expect(await rows.nth(1).locator('td').allTextContents()).toEqual([
      expect.any(String),
      'bad.ndjson',
      'operator',
      expect.any(String),
      'failed',
      '2 bad lines',
    ]);
    await browser.screenshot(page, 'import-recent');
  });

  it("shows the imported product's payload exactly as stored, beside its sources and applied rule", async () => {
    const product = await service.admin.product(merchantId, 'BP-40-GRN');
    const stored = new TextDecoder().decode(await service.service.reads.product(merchantId, 'de', product.id));
    for (const query of ['BP-40-GRN', String(product.id)]) {
      await page.goto(`${service.url}/panel/merchants/${merchantId}/catalog`);
      await page.getByRole('combobox', { name: /^Store/ }).selectOption('de');
      await page.getByLabel('Product id, ref, SKU or EAN').fill(query);
      await page.getByRole('button', { name: 'Find' }).click();
      await page.waitForURL(/q=/);
      const shown = await page.getByLabel('Payload', { exact: true }).textContent();
      expect(shown).toBe(indentJson(stored));
      expect(JSON.parse(shown!)).toEqual(JSON.parse(stored));
      // The bytes, not a re-serialization: the price keeps its trailing zero.
      expect(shown).toContain('"base_cost": 41.90');
      const offers = await page.getByRole('table', { name: 'Offers' }).locator('tbody td').allTextContents();
      expect(offers).toEqual(['nordwind', '14', '41.90 EUR']);
      expect(await page.getByRole('table', { name: 'Overrides' }).textContent()).toContain('grün');
      expect(await page.locator('dl.facts').textContent()).toContain('(catch-all)');
    }
    await browser.screenshot(page, 'catalog');
    await page.getByLabel('Product id, ref, SKU or EAN').fill('NO-SUCH-REF');
    const [miss] = await Promise.all([
      page.waitForResponse((r) => r.url().includes('q=NO-SUCH-REF')),
      page.getByRole('button', { name: 'Find' }).click(),
    ]);
    expect(miss.status()).toBe(404);
  });

  it('shows the chosen supplier and the applied pricing rule per store, beside an unchanged payload', async () => {
    const { admin } = service;
    await admin.upsertStore(merchantId, 'at', {
      name: 'Österreich',
      locale: 'de-AT',
      currency: 'EUR',
      is_default: false,
      active: true,
      exclude_out_of_stock: false,
    });
    await admin.upsertSupplier(merchantId, 'sued', 'Südhandel');
    const at = (await service.storage.listStores(merchantId)).find((s) => s.slug === 'at')!;
    const atRule = await admin.createPricingRule(merchantId, {
      priority: 10,
      customer_group_id: null,
      store_id: at.id,
      manufacturer: null,
      min_cost: null,
      max_cost: null,
      markup_percent: '10',
      markup_amount: '0',
      price_ending: null,
    });
    // The cheaper offer has no stock: the supplier in stock is chosen.
    const stove = await admin.upsertProduct(merchantId, 'STOVE-1', {
      content: { de: { title: 'Gaskocher' } },
      offers: [
        { supplier_ref: 'sued', quantity: 0, cost: '20.00', currency: 'EUR' },
        { supplier_ref: 'nordwind', quantity: 5, cost: '30.00', currency: 'EUR' },
      ],
    });
    const payloadBefore = new TextDecoder().decode(await service.service.reads.product(merchantId, 'at', stove.id));

    await page.goto(`${service.url}/panel/merchants/${merchantId}/catalog?store=at&q=STOVE-1`);
    expect(await page.getByLabel('Payload', { exact: true }).textContent()).toBe(indentJson(payloadBefore));
    const resolution = page.getByLabel('Resolution in store at');
    expect(await resolution.locator('#chosen-supplier').textContent()).toMatch(
      /^Nordwind \(nordwind\): 5 at 30\.00 EUR — the lowest cost among the offers in stock/,
    );
    expect(await resolution.getByRole('list', { name: 'Offers ranked' }).locator('li').allTextContents()).toEqual([
      'sued: 0 at 20.00 EUR',
      'nordwind: 5 at 30.00 EUR',
    ]);
    expect(await resolution.locator('#applied-rules').textContent()).toBe(`Retail: rule ${atRule.id} (priority 10): +10% +0 → 33.00 EUR`);

    const perStore = page.getByRole('table', { name: 'Resolution per store' });
    const row = async (slug: string) => perStore.locator(`tr[data-store="${slug}"] td`).allTextContents();
    const catchAll = (await admin.listPricingRules(merchantId)).find((r) => r.is_catch_all)!;
    expect(await row('de')).toEqual([
      'Deutschland (de)',
      'nordwind at 30.00 EUR',
      '30.00 EUR',
      '5',
      `Retail: rule ${catchAll.id} (catch-all)`,
    ]);
    expect(await row('at')).toEqual(['Österreich (at)', 'nordwind at 30.00 EUR', '30.00 EUR', '5', `Retail: rule ${atRule.id}`]);
    await browser.screenshot(page, 'catalog-resolution');
    // Explaining reads; the published payload is what it was.
    expect(new TextDecoder().decode(await service.service.reads.product(merchantId, 'at', stove.id))).toBe(payloadBefore);
    expect(JSON.parse(payloadBefore).prices[0]).toMatchObject({ applied_rule_id: atRule.id, computed_price: 33 });
  });

  it('shows the images per state and a dead image with its error, and retrying sets it back to pending', async () => {
    await page.goto(`${service.url}/panel/merchants/${merchantId}/images`);
    const counts = () => page.getByRole('table', { name: 'Images per state' }).locator('tbody td').allTextContents();
    expect(await counts()).toEqual(['2', '0', '0']);
    expect(await page.textContent('main')).toContain('No dead images');

    const at = new Date().toISOString();
    await service.storage.updateImageMirror(merchantId, IMAGE_B, {
      state: 'dead',
      last_error: 'HTTP 404 from the image source',
      first_failure_at: at,
      updated_at: at,
    });
    await page.reload();
    expect(await counts()).toEqual(['1', '0', '1']);
    const dead = await page.getByRole('table', { name: 'Dead images' }).locator('tbody td').allTextContents();
    expect(dead.slice(0, 2)).toEqual([IMAGE_B, 'HTTP 404 from the image source']);
    await browser.screenshot(page, 'images-dead');

    await page.getByRole('button', { name: 'Retry dead images' }).click();
    await page.waitForURL(/retried=1/);
    expect(await page.getByRole('status').textContent()).toContain('1 dead image goes back to pending');
    expect(await counts()).toEqual(['2', '0', '0']);
    expect((await service.admin.imageMirroring(merchantId)).dead_images).toEqual([]);
    await browser.screenshot(page, 'images');
    const audit = await service.service.accounts.auditLog({ kind: 'operator' }, merchantId, 10);
    expect(audit.map((a) => a.action)).toContain('image.retry_dead');
  });

  it("lists the merchant's image origins with their state: a down one with its failures, down since, next probe, last error and waiting images", async () => {
    const origin = new URL(IMAGE_A).origin;
    await page.goto(`${service.url}/panel/merchants/${merchantId}/images`);
    const rows = () => page.getByRole('table', { name: 'Image origins' }).locator('tbody tr');
    const cells = async () => (await rows().first().locator('td').allTextContents()).map((text) => text.trim());
    expect(await cells()).toEqual([origin, 'up', '0', '—', '—', '—', '2']);

    const downSince = new Date();
    const nextProbe = new Date(downSince.getTime() + 60_000);
    await service.storage.putImageOrigin(merchantId, {
      origin,
      failures: 20,
      down_since: downSince.toISOString(),
      next_probe_at: nextProbe.toISOString(),
      probe_ms: 60_000,
      last_error: 'connection_refused',
    });
    try {
      await page.reload();
      expect(await rows().count()).toBe(1);
      const shown = await cells();
      expect([...shown.slice(0, 3), ...shown.slice(5)]).toEqual([origin, 'down', '20', 'connection_refused', '2']);
      // The two moments, as the panel writes times (each in a <time> with its instant).
      const times = rows().first().locator('time');
      expect(await times.evaluateAll((nodes) => nodes.map((n) => n.getAttribute('datetime')))).toEqual([
        downSince.toISOString(),
        nextProbe.toISOString(),
      ]);
      expect(await page.textContent('main')).toContain('A down origin failed 20 fetches in a row');
      await browser.screenshot(page, 'images-origin-down');
    } finally {
      await service.storage.clearImageOrigin(merchantId, origin, new Date().toISOString());
    }
  });
});

describe('import upload limit', () => {
  it('refuses a file larger than the import body limit with 413 and applies nothing', async () => {
    const small = await startTestService({ config: { limits: { importBodyBytes: 4096 } } });
    try {
      const merchant = (await small.admin.createMerchant({ name: 'Tiny' })).id;
      const signIn = await fetch(`${small.url}/panel/login/operator`, {
        method: 'POST',
        redirect: 'manual',
        headers: { Origin: small.url, 'Content-Type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ admin_token: ADMIN_TOKEN }),
      });
      const cookie = signIn.headers.get('set-cookie')!.split(';')[0]!;
      const html = await (await fetch(`${small.url}/panel/merchants/${merchant}/import`, { headers: { Cookie: cookie } })).text();
      const form = new FormData();
      form.set('_csrf', /name="_csrf" value="([^"]+)"/.exec(html)![1]!);
      const line = JSON.stringify({ op: 'upsert_product', product: { ref: 'BIG', content: { de: { title: 'x'.repeat(8000) } } } });
      form.set('file', new File([line], 'big.ndjson', { type: 'application/x-ndjson' }));
      const response = await fetch(`${small.url}/panel/merchants/${merchant}/import`, {
        method: 'POST',
        headers: { Cookie: cookie, Origin: small.url },
        body: form,
      });
      expect(response.status).toBe(413);
      expect(await response.text()).toContain('larger than 4096 bytes');
      await expect(small.admin.product(merchant, 'BIG')).rejects.toMatchObject({ status: 404 });
    } finally {
      await small.close();
    }
  });
});

describe('catalog search by SKU and EAN, and the product list, in the browser', () => {
  const FILLERS = 52;
  let shop: number;
  let page: Page;
  const ids: Record<string, number> = {};

  beforeAll(async () => {
    const { admin } = service;
    shop = (await admin.createMerchant({ name: 'Summit Supply', sku_pattern: 'SU-{ref}' })).id;
    await admin.upsertStore(shop, 'de', {
      name: 'Deutschland',
      locale: 'de-DE',
      currency: 'EUR',
      is_default: true,
      active: true,
      exclude_out_of_stock: false,
    });
    await admin.upsertSupplier(shop, 'nordwind', 'Nordwind');
    const offers = [{ supplier_ref: 'nordwind', quantity: 4, cost: '19.90', currency: 'EUR' }];
    ids.pack = (
      await admin.upsertProduct(shop, 'PACK-30', { eans: ['4006381333931'], content: { de: { title: 'Tagesrucksack 30 l' } }, offers })
    ).id;
    ids.stoveA = (
      await admin.upsertProduct(shop, 'STOVE-A', { eans: ['4012345678901'], content: { de: { title: 'Kocher A' } }, offers })
    ).id;
    ids.stoveB = (
      await admin.upsertProduct(shop, 'STOVE-B', { eans: ['4012345678901'], content: { de: { title: 'Kocher B' } }, offers })
    ).id;
    ids.bag = (await admin.upsertProduct(shop, 'BAG-NO-OFFERS', { content: { de: { title: 'Schlafsack' } } })).id;
    for (let i = 1; i <= FILLERS; i++) {
      await admin.upsertProduct(shop, `SOCK-${String(i).padStart(2, '0')}`, {
        content: { de: { title: `Socke ${i}` } },
        own_stock: { quantity: 3, cost: '4.00', currency: 'EUR' },
      });
    }
    page = await browser.newPage();
    await signInAsOperator(page, service.url);
  });

  async function find(query: string): Promise<number> {
    await page.goto(`${service.url}/panel/merchants/${shop}/catalog`);
    await page.getByLabel('Product id, ref, SKU or EAN').fill(query);
    const [response] = await Promise.all([
      page.waitForResponse((r) => r.url().includes(`q=${encodeURIComponent(query)}`)),
      page.getByRole('button', { name: 'Find' }).click(),
    ]);
    await page.waitForLoadState();
    return response.status();
  }

  it('finds a product by its exported SKU and shows its payload', async () => {
    expect(await find('SU-PACK-30')).toBe(200);
    expect(await page.locator('main h2').first().textContent()).toBe(`Product ${ids.pack} ref PACK-30`);
    expect(await page.textContent('main')).toContain('Found by its SKU.');
    expect(JSON.parse((await page.getByLabel('Payload', { exact: true }).textContent())!)).toMatchObject({
      id: ids.pack,
      sku: 'SU-PACK-30',
      ean: '4006381333931',
    });
    await browser.screenshot(page, 'catalog-by-sku');
  });

  it('finds a product by its EAN', async () => {
    expect(await find('4006381333931')).toBe(200);
    expect(await page.locator('main h2').first().textContent()).toBe(`Product ${ids.pack} ref PACK-30`);
    expect(await page.textContent('main')).toContain('Found by its EAN.');
  });

  it('lists the products sharing an EAN as links, each leading to its payload', async () => {
    expect(await find('4012345678901')).toBe(200);
    const links = page.getByRole('list', { name: 'Matching products' }).getByRole('link');
    expect(await links.allTextContents()).toEqual([`Product ${ids.stoveA}`, `Product ${ids.stoveB}`]);
    await browser.screenshot(page, 'catalog-several-matches');
    await links.nth(1).click();
    await page.waitForURL(new RegExp(`q=${ids.stoveB}`));
    expect(JSON.parse((await page.getByLabel('Payload', { exact: true }).textContent())!)).toMatchObject({
      id: ids.stoveB,
      sku: 'SU-STOVE-B',
    });
  });

  it('answers 404 when neither an id, a ref, a SKU nor an EAN matches', async () => {
    expect(await find('SU-NOTHING')).toBe(404);
    expect(await page.getByRole('alert').textContent()).toContain('nor the SKU or EAN "SU-NOTHING" in store de');
  });

  it("pages through the store's products by id, 50 a page", async () => {
    await page.goto(`${service.url}/panel/merchants/${shop}/catalog`);
    const rows = page.getByRole('table', { name: 'Products' }).locator('tbody tr');
    const total = 4 + FILLERS;
    expect(await page.textContent('main')).toContain(
      `${total} published, the excluded ones included: ${total - 1} in the store's export, 1 excluded from it (no_offers 1).`,
    );
    expect(await rows.count()).toBe(50);
    const firstPage = (await rows.locator('td:first-child').allTextContents()).map(Number);
    expect(firstPage.slice(0, 4)).toEqual([ids.pack, ids.stoveA, ids.stoveB, ids.bag]);
    expect(firstPage).toEqual([...firstPage].sort((a, b) => a - b));
    expect(await rows.nth(0).locator('td').allTextContents()).toEqual([
      String(ids.pack),
      'Tagesrucksack 30 l',
      'SU-PACK-30',
      '4006381333931',
      'no',
    ]);
    await browser.screenshot(page, 'catalog-products');
    await page.getByRole('link', { name: 'Next 50 products' }).click();
    await page.waitForURL(new RegExp(`after_id=${firstPage[49]}`));
    const secondPage = (await rows.locator('td:first-child').allTextContents()).map(Number);
    expect(secondPage).toHaveLength(total - 50);
    expect(secondPage[0]).toBeGreaterThan(firstPage[49]!);
    expect(await page.getByRole('link', { name: 'Next 50 products' }).count()).toBe(0);
    await page.getByRole('link', { name: 'First page' }).click();
    await page.waitForURL((url) => !url.search.includes('after_id'));
    expect(await rows.count()).toBe(50);
  });

  it('lists the excluded products only, with their reasons', async () => {
    await page.goto(`${service.url}/panel/merchants/${shop}/catalog`);
    await page.getByLabel('Excluded only').check();
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForURL(/excluded=1/);
    expect(await page.getByRole('heading', { name: 'Excluded products in store de' }).count()).toBe(1);
    const cells = await page.getByRole('table', { name: 'Products' }).locator('tbody tr').locator('td').allTextContents();
    expect(cells).toEqual([String(ids.bag), 'Schlafsack', 'SU-BAG-NO-OFFERS', '', 'no_offers']);
    await browser.screenshot(page, 'catalog-excluded');
  });

  it('refuses an after_id that is not a non-negative integer with 400', async () => {
    const response = await page.goto(`${service.url}/panel/merchants/${shop}/catalog?after_id=abc`);
    expect(response!.status()).toBe(400);
  });
});
