// Partial updates over real HTTP: PATCH with a JSON merge patch (RFC 7396) on products, stores,
// pricing rules and webhook endpoints, checked as a PUT of the merged document would be; and the
// document GET returns is accepted by PUT (or the endpoint's PATCH) as it is.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminOk, buildOutdoorCatalog, type OutdoorCatalog } from '../support/admin-http.js';
import { startTestService, type TestResponse, type TestService } from '../support/service.js';

let service: TestService;
let catalog: OutdoorCatalog;

beforeAll(async () => {
  service = await startTestService();
  catalog = await buildOutdoorCatalog(service);
});
afterAll(() => service.close());

const MERGE_PATCH = { 'Content-Type': 'application/merge-patch+json' };

function patch(path: string, body: unknown, contentType = MERGE_PATCH['Content-Type']): Promise<TestResponse> {
  return service.adminApi('PATCH', path, typeof body === 'string' ? body : JSON.stringify(body), {
    headers: { 'Content-Type': contentType },
  });
}

const product = (ref: string) => `${catalog.merchant.base}/products/${ref}`;

/** The store's feed cursor now: what a later read from it returns was recorded after this call. */
async function cursor(store: string): Promise<string> {
  let query = `/v1/changes?store=${store}`;
  for (;;) {
    const page = await service.api(query, catalog.merchant.key);
    expect(page.status, page.text).toBe(200);
    query = `/v1/changes?store=${store}&since=${encodeURIComponent(page.body.next_since)}&since_id=${page.body.next_id}`;
    if (page.body.changes.length === 0) return query;
  }
}

async function changesSince(query: string): Promise<{ product_id: number; change_type: string }[]> {
  const page = await service.api(query, catalog.merchant.key);
  expect(page.status, page.text).toBe(200);
  return page.body.changes.map(({ product_id, change_type }: { product_id: number; change_type: string }) => ({ product_id, change_type }));
}

describe('PATCH a product with a merge patch', () => {
  it('changes one offer cost, keeps every other member, and publishes the price change', async () => {
    const before = await adminOk(service, 'GET', product('BP-40'));
    const feed = await cursor('de');
    const offers = before.offers.map((offer: { supplier_ref: string }) =>
      offer.supplier_ref === 'baltic' ? { ...offer, cost: '19.00' } : offer,
    );

    const patched = await patch(product('BP-40'), { offers });

    expect(patched.status, patched.text).toBe(200);
    expect(patched.body.offers).toEqual([
      { supplier_ref: 'alpine', quantity: 5, cost: '20.00', currency: 'EUR' },
      { supplier_ref: 'baltic', quantity: 3, cost: '19.00', currency: 'EUR' },
    ]);
    expect({ ...patched.body, offers: before.offers }).toEqual(before);
    expect(await adminOk(service, 'GET', product('BP-40'))).toEqual(patched.body);
    expect(await changesSince(feed)).toEqual([{ product_id: before.id, change_type: 'price' }]);
    const published = await service.api(`/v1/products/${before.id}?store=de`, catalog.merchant.key);
    expect(published.body.data.prices.map((p: { base_cost: number }) => p.base_cost)).toEqual([19, 19]);
  });

  it("changes one locale's title and keeps its description and the other locales", async () => {
    const before = await adminOk(service, 'GET', product('BP-40'));
    const feed = await cursor('pl');

    const patched = await patch(product('BP-40'), { content: { pl: { title: 'Plecak 40 l' } } });

    expect(patched.status, patched.text).toBe(200);
    expect(patched.body.content).toEqual({
      de: before.content.de,
      pl: { title: 'Plecak 40 l', description: before.content.pl.description },
    });
    expect(await changesSince(feed)).toEqual([{ product_id: before.id, change_type: 'content' }]);
    const published = await service.api(`/v1/products/${before.id}?store=pl`, catalog.merchant.key);
    expect(published.body.data.title).toBe('Plecak 40 l');
  });

  it('removes an optional member given null, which takes its PUT default', async () => {
    const patched = await patch(product('BP-40'), { manufacturer: null, overrides: { color: null }, own_stock: null });

    expect(patched.status, patched.text).toBe(200);
    expect(patched.body).toMatchObject({ manufacturer: null, overrides: {}, own_stock: null });
    expect(patched.body.offers).toHaveLength(2);
  });

  it('refuses a merged document a PUT would refuse, naming the member, and changes nothing', async () => {
    const before = await adminOk(service, 'GET', product('BP-40'));
    const feed = await cursor('de');

    const badCost = await patch(product('BP-40'), { offers: [{ supplier_ref: 'alpine', quantity: 1, cost: 'cheap', currency: 'EUR' }] });
    const unknownSupplier = await patch(product('BP-40'), {
      offers: [{ supplier_ref: 'nobody', quantity: 1, cost: '1.00', currency: 'EUR' }],
    });
    const unknownMember = await patch(product('BP-40'), { content: { de: { subtitle: 'x' } } });
    const requiredRemoved = await patch(product('BP-40'), {
      offers: [{ supplier_ref: 'alpine', quantity: 1, cost: null, currency: 'EUR' }],
    });

    for (const [response, name] of [
      [badCost, '/offers/0/cost'],
      [unknownSupplier, '/offers/0/supplier_ref'],
      [unknownMember, '/content/de/subtitle'],
      [requiredRemoved, '/offers/0/cost'],
    ] as const) {
      expect(response.status, response.text).toBe(400);
      expect(response.headers.get('content-type')).toBe('application/problem+json');
      expect(response.body.code).toBe('invalid_body');
      expect(response.body.invalid_params.map((p: { name: string }) => p.name)).toContain(name);
    }
    expect(await adminOk(service, 'GET', product('BP-40'))).toEqual(before);
    expect(await changesSince(feed)).toEqual([]);
  });

  it('answers 415 with Accept-Patch for a patch of another media type, and changes nothing', async () => {
    const before = await adminOk(service, 'GET', product('TENT-2'));

    for (const contentType of ['application/json', 'text/plain', 'application/json-patch+json']) {
      const response = await patch(product('TENT-2'), { manufacturer: 'Other' }, contentType);
      expect(response.status, `${contentType}: ${response.text}`).toBe(415);
      expect(response.headers.get('accept-patch')).toBe('application/merge-patch+json');
      expect(response.body).toMatchObject({ code: 'unsupported_media_type', status: 415 });
    }
    expect(await adminOk(service, 'GET', product('TENT-2'))).toEqual(before);
  });

  it('answers 404 for a product that does not exist, creating nothing', async () => {
    const response = await patch(product('NOPE-1'), { manufacturer: 'X' });
    expect(response.status).toBe(404);
    expect((await service.adminApi('GET', product('NOPE-1'))).status).toBe(404);
  });

  it("keeps both of two concurrent patches' changes", async () => {
    const [title, manufacturer] = await Promise.all([
      patch(product('TENT-2'), { content: { de: { title: 'Zelt für zwei Personen' } } }),
      patch(product('TENT-2'), { manufacturer: 'Bergwerk' }),
    ]);
    expect([title.status, manufacturer.status]).toEqual([200, 200]);
    const after = await adminOk(service, 'GET', product('TENT-2'));
    expect(after).toMatchObject({ manufacturer: 'Bergwerk', content: { de: { title: 'Zelt für zwei Personen' } } });
  });
});

describe('PATCH a store and a pricing rule with a merge patch', () => {
  it('changes one member of a store and keeps the others', async () => {
    const stores = (await adminOk(service, 'GET', `${catalog.merchant.base}/stores`)).data;
    const before = stores.find((s: { slug: string }) => s.slug === 'pl');

    const patched = await patch(`${catalog.merchant.base}/stores/pl`, { exclude_out_of_stock: true });

    expect(patched.status, patched.text).toBe(200);
    expect(patched.body).toEqual({ ...before, exclude_out_of_stock: true });
  });

  it('refuses a store patch that removes a required member, and changes nothing', async () => {
    const before = (await adminOk(service, 'GET', `${catalog.merchant.base}/stores`)).data;
    const response = await patch(`${catalog.merchant.base}/stores/pl`, { name: null });
    expect(response.status).toBe(400);
    expect(response.body.invalid_params.map((p: { name: string }) => p.name)).toEqual(['/name']);
    expect((await adminOk(service, 'GET', `${catalog.merchant.base}/stores`)).data).toEqual(before);
  });

  it('answers 404 for a store that does not exist', async () => {
    expect((await patch(`${catalog.merchant.base}/stores/nowhere`, { name: 'X' })).status).toBe(404);
  });

  it("changes a rule's markup and keeps its conditions", async () => {
    const { retail } = catalog.rules;

    const patched = await patch(`${catalog.merchant.base}/pricing-rules/${retail.id}`, { markup_percent: '45' });

    expect(patched.status, patched.text).toBe(200);
    expect(patched.body).toEqual({ ...retail, markup_percent: '45' });
  });

  it('refuses a catch-all rule patch that adds a condition (409), and changes nothing', async () => {
    const { catchAll } = catalog.rules;
    const response = await patch(`${catalog.merchant.base}/pricing-rules/${catchAll.id}`, { manufacturer: 'Alpenwerk' });
    expect(response.status).toBe(409);
    const rules = (await adminOk(service, 'GET', `${catalog.merchant.base}/pricing-rules`)).data;
    expect(rules.find((r: { id: number }) => r.id === catchAll.id)).toEqual(catchAll);
  });
});

describe('GET, then PUT the document unchanged', () => {
  it('accepts a product source as GET returns it (id, ref, image states) and records no change', async () => {
    const document = await adminOk(service, 'GET', product('BP-40'));
    expect(document.images[0]).toHaveProperty('state');
    const feed = await cursor('de');

    const put = await adminOk(service, 'PUT', product('BP-40'), document);

    expect(put).toEqual(document);
    expect(await changesSince(feed)).toEqual([]);
  });

  it('accepts every store as the list shows it', async () => {
    const stores = (await adminOk(service, 'GET', `${catalog.merchant.base}/stores`)).data;
    for (const store of stores) {
      expect(await adminOk(service, 'PUT', `${catalog.merchant.base}/stores/${store.slug}`, store)).toEqual(store);
    }
  });

  it('accepts every pricing rule as the list shows it, the catch-all rule included', async () => {
    const rules = (await adminOk(service, 'GET', `${catalog.merchant.base}/pricing-rules`)).data;
    expect(rules.some((r: { is_catch_all: boolean }) => r.is_catch_all)).toBe(true);
    for (const rule of rules) {
      expect(await adminOk(service, 'PUT', `${catalog.merchant.base}/pricing-rules/${rule.id}`, rule)).toEqual(rule);
    }
  });

  it('accepts a webhook endpoint as GET returns it, as a merge patch and as JSON, changing nothing', async () => {
    const created = await adminOk(
      service,
      'POST',
      `${catalog.merchant.base}/webhook-endpoints`,
      { url: 'https://hooks.outfitters-shop.com/catalog', store: 'de' },
      201,
    );
    const path = `${catalog.merchant.base}/webhook-endpoints/${created.id}`;
    const document = await adminOk(service, 'GET', path);

    const merged = await patch(path, document);
    expect(merged.status, merged.text).toBe(200);
    expect(merged.body).toEqual(document);
    expect(await adminOk(service, 'PATCH', path, document)).toEqual(document);

    // A pause by hand, sent back as GET shows it, stays as it is.
    const paused = await adminOk(service, 'PATCH', path, { status: 'paused' });
    expect(paused.status).toBe('paused');
    const again = await patch(path, paused);
    expect(again.body).toEqual(paused);
    const disabled = await patch(path, { status: 'disabled' });
    expect(disabled.status).toBe(400);
    expect(disabled.body.invalid_params.map((p: { name: string }) => p.name)).toEqual(['/status']);
  });

  it("clears an endpoint's store with null in a merge patch", async () => {
    const created = await adminOk(
      service,
      'POST',
      `${catalog.merchant.base}/webhook-endpoints`,
      { url: 'https://hooks.outfitters-shop.com/second', store: 'pl', max_per_second: 5 },
      201,
    );
    const patched = await patch(`${catalog.merchant.base}/webhook-endpoints/${created.id}`, { store: null, max_per_second: null });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.body).toMatchObject({ store: null, max_per_second: null, url: created.url, events: created.events });
  });
});
