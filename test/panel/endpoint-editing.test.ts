// Editing a webhook endpoint in a real browser, as a merchant's owner: the form shows
// each event's summary, meaning and a sample payload exactly as the public document's `webhooks:`
// section states them; the URL, store and events change through the domain (the secret and health
// stay), refused input shows beside the form, the next delivery goes to the new URL, and the
// audit log names the user. Screenshots: artifacts/panel/.
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import publicDocument from '../../src/generated/public-openapi.json' with { type: 'json' };
import { launchBrowser, type TestBrowser } from '../support/browser.js';
import { fakeClock } from '../support/clock.js';
import { Receiver } from '../support/receiver.js';
import { startTestService, type TestService } from '../support/service.js';

const OWNER = 'owner@alpine.example';
const PASSWORD = 'a long enough password';
const clock = fakeClock('2025-03-14T09:00:00.000Z');
let service: TestService;
let browser: TestBrowser;
let page: Page;
let before: Receiver;
let after: Receiver;
let merchantId: number;
let otherMerchantId: number;
let endpointsUrl: string;

/** What the document says of an event: its summary, its description's first paragraph, its first example's value. */
function documented(event: 'price' | 'content' | 'removed') {
  const doc = publicDocument as unknown as Record<string, any>;
  const operation = doc.webhooks[event].post;
  const [example] = Object.values<{ $ref: string }>(operation.requestBody.content['application/json'].examples);
  const lead = (operation.description as string).split('\n\n')[0]!.replaceAll('`', '').split('\n').join(' ');
  return { summary: operation.summary as string, lead, sample: doc.components.examples[example!.$ref.split('/').pop()!].value };
}

beforeAll(async () => {
  service = await startTestService({ now: clock.now, config: { webhooks: { allowHosts: ['127.0.0.1'] } } });
  before = await Receiver.start({ now: clock.now, behaviour: { status: 204 } });
  after = await Receiver.start({ now: clock.now, behaviour: { status: 204 } });
  const { admin } = service;
  merchantId = (await admin.createMerchant({ name: 'Alpine Outfitters' })).id;
  otherMerchantId = (await admin.createMerchant({ name: 'Harbour Supplies' })).id;
  const store = { locale: 'de-DE', currency: 'EUR', active: true, exclude_out_of_stock: false };
  await admin.upsertStore(merchantId, 'de', { ...store, name: 'Deutschland', is_default: true });
  await admin.upsertStore(merchantId, 'at', { ...store, name: 'Österreich', is_default: false });
  await admin.upsertSupplier(merchantId, 'nordwind', 'Nordwind');
  endpointsUrl = `${service.url}/panel/merchants/${merchantId}/endpoints`;
  browser = await launchBrowser();
  page = await browser.newPage();
  // A merchant's owner, signed in with the password set through the invitation.
  const invitation = await service.service.accounts.invite({ kind: 'operator' }, merchantId, { email: OWNER, role: 'owner' });
  await service.service.accounts.acceptInvitation(invitation.token, PASSWORD);
  await page.goto(`${service.url}/panel/login`);
  await page.getByLabel('E-mail').fill(OWNER);
  await page.getByLabel('Password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
  await page.waitForURL(`${service.url}/panel`);
});

afterAll(async () => {
  await browser?.close();
  await before?.close();
  await after?.close();
  await service?.close();
});

const endpoints = () => service.service.endpoints.list(merchantId);

describe('registering and editing an endpoint in the browser', () => {
  it("shows each event with its summary, meaning and sample payload from the document's webhooks: section", async () => {
    await page.goto(endpointsUrl);
    for (const event of ['price', 'content', 'removed'] as const) {
      const { summary, lead, sample } = documented(event);
      const block = page.locator(`#event-${event}`);
      expect((await block.locator('label').textContent())!.trim()).toBe(`${event}: ${summary}`);
      expect(await block.locator('p').textContent()).toBe(lead);
      expect(JSON.parse((await block.locator('details pre').textContent())!)).toEqual(sample);
      expect(await block.locator('details').getAttribute('open')).toBeNull();
    }
    await page.locator('#event-removed summary').click();
    expect(await page.locator('#event-removed details pre').isVisible()).toBe(true);
    await browser.screenshot(page, 'endpoint-register-events');
    // At phone width the form does not scroll sideways.
    await page.setViewportSize({ width: 390, height: 844 });
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    await browser.screenshot(page, 'endpoint-register-events-phone');
    await page.setViewportSize({ width: 1280, height: 800 });
  });

  it('changes the URL, store and events; the secret and health stay, and the audit log names the owner', async () => {
    await page.goto(endpointsUrl);
    await page.getByLabel('Receiver URL').fill(before.url);
    await page.locator('select[name="store"]').selectOption('at');
    await page.locator('#event-content input').uncheck();
    await page.locator('#event-removed input').uncheck();
    await page.getByRole('button', { name: 'Register' }).click();
    // The receivers verify every delivery with the secret shown once here (an edit keeps it).
    const secret = (await page.locator('#secret').textContent())!.trim();
    before.secret = secret;
    after.secret = secret;
    const [registered] = await endpoints();
    expect(registered).toMatchObject({ url: before.url, store: 'at', events: ['price'] });

    await page.goto(endpointsUrl);
    await page.getByRole('link', { name: 'Edit…' }).click();
    await page.waitForURL(`${endpointsUrl}/${registered!.id}/edit`);
    expect(await page.getByLabel('Receiver URL').inputValue()).toBe(before.url);
    expect(await page.locator('select[name="store"]').inputValue()).toBe('at');
    expect(
      await page.locator('input[name="events"]:checked').evaluateAll((boxes) => boxes.map((b) => (b as HTMLInputElement).value)),
    ).toEqual(['price']);
    await browser.screenshot(page, 'endpoint-edit');

    await page.getByLabel('Receiver URL').fill(after.url);
    await page.locator('select[name="store"]').selectOption('');
    await page.locator('#event-removed input').check();
    await page.getByRole('button', { name: 'Save' }).click();
    await page.waitForURL(`${endpointsUrl}/${registered!.id}?done=updated`);
    expect(await page.getByRole('status').textContent()).toBe('The endpoint is saved.');
    const [edited] = await endpoints();
    expect(edited).toEqual({ ...registered, url: after.url, store: null, events: ['price', 'removed'] });

    const audit = await service.service.accounts.auditLog({ kind: 'operator' }, merchantId, 10);
    expect(audit.filter((a) => a.action.startsWith('endpoint.')).map(({ actor, action, detail }) => ({ actor, action, detail }))).toEqual([
      {
        actor: OWNER,
        action: 'endpoint.update',
        detail: `endpoint ${registered!.id} URL ${after.url}; store all stores; events price, removed`,
      },
      { actor: OWNER, action: 'endpoint.create', detail: `endpoint ${registered!.id} ${before.url} (at: price)` },
    ]);
  });

  it('sends the next change to the new URL', async () => {
    await service.admin.upsertProduct(merchantId, 'BP-40', {
      content: { de: { title: 'Rucksack' } },
      offers: [{ supplier_ref: 'nordwind', quantity: 4, cost: '10.00', currency: 'EUR' }],
    });
    clock.advance(2_000);
    await service.service.dispatcher.tick();
    expect(after.count).toBeGreaterThan(0);
    expect(before.count).toBe(0);
  });

  it('chooses the Standard Webhooks headers and a rate in the form: the endpoint page shows them and the next delivery is signed both ways', async () => {
    const [endpoint] = await endpoints();
    const edit = `${endpointsUrl}/${endpoint!.id}/edit`;
    await page.goto(edit);
    const standard = page.getByLabel('Also send the Standard Webhooks headers');
    const rate = page.getByLabel('Deliveries a second at most');
    expect(await standard.isChecked()).toBe(false);
    expect(await rate.inputValue()).toBe('');
    await standard.check();
    await rate.fill('5');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.waitForURL(`${endpointsUrl}/${endpoint!.id}?done=updated`);
    expect(await page.locator('#endpoint-rate').textContent()).toBe('At most 5 deliveries a second');
    expect(await page.locator('#endpoint-headers').textContent()).toContain('Standard Webhooks');
    expect(await endpoints()).toEqual([{ ...endpoint, standard_webhooks: true, max_per_second: 5 }]);
    // A new product (a `price` change in each store); the receiver checks webhook-signature too when it is sent.
    await service.admin.upsertProduct(merchantId, 'TENT-2', {
      content: { de: { title: 'Zelt' } },
      offers: [{ supplier_ref: 'nordwind', quantity: 4, cost: '11.00', currency: 'EUR' }],
    });
    const received = after.count;
    clock.advance(2_000);
    await service.service.dispatcher.tick();
    expect(after.count).toBe(received + 2);
    expect(after.requests.at(-1)!.headers['webhook-signature']).toMatch(/^v1,/);
    const [delivered] = await endpoints();
    // And back: the form shows what is set; emptied and unchecked, no limit and the spec's headers only.
    await page.goto(edit);
    expect(await standard.isChecked()).toBe(true);
    expect(await rate.inputValue()).toBe('5');
    await standard.uncheck();
    await rate.fill('');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.waitForURL(`${endpointsUrl}/${endpoint!.id}?done=updated`);
    expect(await page.locator('#endpoint-rate').textContent()).toBe('No limit');
    expect(await endpoints()).toEqual([{ ...delivered, standard_webhooks: false, max_per_second: null }]);
    // A rate outside 1 to 1000 is refused in plain words, naming the field; nothing changes.
    await page.goto(edit);
    await rate.evaluate((input) => {
      (input as HTMLInputElement).removeAttribute('min');
    });
    await rate.fill('0');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.waitForLoadState();
    expect(await page.getByRole('alert').textContent()).toMatch(/^Deliveries a second at most /);
    expect(await endpoints()).toEqual([{ ...delivered, standard_webhooks: false, max_per_second: null }]);
  });

  it('chooses full payloads in the form: the endpoint page says so and the next delivery carries the products', async () => {
    const [endpoint] = await endpoints();
    const edit = `${endpointsUrl}/${endpoint!.id}/edit`;
    await page.goto(edit);
    const full = page.getByLabel('Deliveries carry the changed products');
    expect(await full.isChecked()).toBe(false);
    expect(await page.locator('#full-payload-help').textContent()).toContain('products_omitted');
    await full.check();
    await page.getByRole('button', { name: 'Save' }).click();
    await page.waitForURL(`${endpointsUrl}/${endpoint!.id}?done=updated`);
    expect(await page.locator('#endpoint-payload').textContent()).toMatch(/^Full: /);
    expect(await endpoints()).toEqual([{ ...endpoint, payload: 'full' }]);
    const product = await service.admin.upsertProduct(merchantId, 'STOVE-1', {
      content: { de: { title: 'Kocher' } },
      offers: [{ supplier_ref: 'nordwind', quantity: 4, cost: '12.00', currency: 'EUR' }],
    });
    const received = after.count;
    clock.advance(2_000);
    await service.service.dispatcher.tick();
    expect(after.count).toBeGreaterThan(received);
    const payload = after.payloads.at(-1) as { product_ids: number[]; products?: { id: number }[] };
    expect(payload.products?.map((p) => p.id)).toEqual(payload.product_ids);
    expect(payload.product_ids).toContain(product.id);
    // And back to thin: the spec's payload alone.
    await page.goto(edit);
    expect(await full.isChecked()).toBe(true);
    await full.uncheck();
    await page.getByRole('button', { name: 'Save' }).click();
    await page.waitForURL(`${endpointsUrl}/${endpoint!.id}?done=updated`);
    expect(await page.locator('#endpoint-payload').textContent()).toMatch(/^Thin: /);
    expect((await endpoints())[0]!.payload).toBe('thin');
  });

  it('shows refused input beside the form, as typed, and changes nothing', async () => {
    const [endpoint] = await endpoints();
    await page.goto(`${endpointsUrl}/${endpoint!.id}/edit`);
    await page.getByLabel('Receiver URL').fill('https://10.0.0.7/hooks');
    await page.locator('input[name="events"]').evaluateAll((boxes) =>
      boxes.forEach((b) => {
        (b as HTMLInputElement).checked = false;
      }),
    );
    const [response] = await Promise.all([
      page.waitForResponse((r) => r.request().method() === 'POST'),
      page.getByRole('button', { name: 'Save' }).click(),
    ]);
    // Refused (400): the edit page again after a redirect, with the fields as typed.
    expect(response.status()).toBe(303);
    await page.waitForURL(/\/edit\?refused=\d+$/);
    expect(await page.getByRole('alert').textContent()).toBe('Events needs at least one choice.');
    expect(await page.getByLabel('Receiver URL').inputValue()).toBe('https://10.0.0.7/hooks');
    await page.locator('#event-price input').check();
    await page.getByRole('button', { name: 'Save' }).click();
    await page.waitForLoadState();
    expect(await page.getByRole('alert').textContent()).toMatch(/^Receiver URL must point at a globally routable address/);
    await browser.screenshot(page, 'endpoint-edit-refused');
    expect(await endpoints()).toEqual([endpoint]);
  });

  it("answers 404 for another merchant's endpoint, and changes nothing", async () => {
    const other = await service.service.endpoints.create(otherMerchantId, { url: `${after.url}/other` });
    const base = `${service.url}/panel/merchants/${otherMerchantId}/endpoints/${other.id}/edit`;
    expect((await page.goto(base))!.status()).toBe(404);
    const ownBase = `${endpointsUrl}/${other.id}/edit`;
    expect((await page.goto(ownBase))!.status()).toBe(404);
    const csrf = (await page.locator('input[name="_csrf"]').first().getAttribute('value'))!;
    const response = await page.request.post(ownBase, {
      form: { _csrf: csrf, url: `${after.url}/taken`, store: '', events: 'price' },
      headers: { Origin: service.url },
      maxRedirects: 0,
    });
    expect(response.status()).toBe(404);
    expect((await service.service.endpoints.endpoint(otherMerchantId, other.id)).url).toBe(other.url);
  });
});
