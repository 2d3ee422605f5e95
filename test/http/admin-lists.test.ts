// The admin API lists a merchant's products (paged by ref, filtered by ref prefix, time
// of the last write and exclusion from a store, each page looking at a bounded number of products)
// and its imports with their progress; an import may answer as soon as its file is checked and
// staged (`Prefer: respond-async`), its progress then followed at its Location. Over real HTTP,
// every response checked against the admin document, on the project's engine.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { adminOk, createMerchant, importNdjson, simpleProduct, type MerchantHandle } from '../support/admin-http.js';
import { startTestService, type TestService } from '../support/service.js';

/** Products one page looks at, at most (CPS_PRODUCT_LIST_SCAN, its floor). */
const SCAN = 200;

let service: TestService;
let merchant: MerchantHandle;

beforeAll(async () => {
  service = await startTestService({ config: { limits: { ...loadConfig({}).limits, productListScan: SCAN } } });
  merchant = await createMerchant(service, 'Listing Outfitters');
  await adminOk(service, 'PUT', `${merchant.base}/stores/de`, { name: 'DE', locale: 'de-DE', currency: 'EUR' });
  await adminOk(service, 'PUT', `${merchant.base}/suppliers/alpine`, { name: 'Alpine' });
  const refs = [
    ...Array.from({ length: 300 }, (_, i) => `A-${String(i).padStart(3, '0')}`),
    ...Array.from({ length: 150 }, (_, i) => `B-${String(i).padStart(3, '0')}`),
  ];
  // Shuffled: the list is in ref order whatever order the products were written in.
  const shuffled = refs
    .map((ref, i) => ({ ref, key: (i * 7919) % refs.length }))
    .sort((a, b) => a.key - b.key)
    .map((r) => r.ref);
  const imported = await importNdjson(service, merchant.id, [
    ...shuffled.map((ref) => simpleProduct(ref)),
    // No offer, no own stock: excluded from `de` (no_offers).
    ...['C-1', 'C-2', 'C-3'].map((ref) => ({ op: 'upsert_product', product: { ref, content: { de: { title: ref } } } })),
  ]);
  expect(imported.status, imported.text).toBe(200);
});
afterAll(() => service?.close());

type Page = { data: { id: number; ref: string; updated_at: string }[]; next_after: string | null };

/** Every page of the list with these filters, in order. */
async function allPages(query: string): Promise<Page[]> {
  const pages: Page[] = [];
  let after: string | null = null;
  do {
    const page: Page = await adminOk(service, 'GET', `${merchant.base}/products?${query}${after ? `&after=${after}` : ''}`);
    pages.push(page);
    after = page.next_after;
    if (pages.length > 50) throw new Error('the list never ends');
  } while (after !== null);
  return pages;
}

describe('the admin product list', () => {
  it('pages through every product in ref order, limit at a time, each with its id and last write', async () => {
    const pages = await allPages('limit=200');
    expect(pages.map((p) => p.data.length)).toEqual([200, 200, 53]);
    const refs = pages.flatMap((p) => p.data.map((d) => d.ref));
    expect(refs).toEqual([...refs].sort());
    expect(refs.slice(0, 2)).toEqual(['A-000', 'A-001']);
    expect(refs.at(-1)).toBe('C-3');
    expect(new Set(refs).size).toBe(453);
    const source = await adminOk(service, 'GET', `${merchant.base}/products/B-042`);
    expect(pages.flatMap((p) => p.data).find((d) => d.ref === 'B-042')).toEqual({
      id: source.id,
      ref: 'B-042',
      updated_at: expect.any(String),
    });
  });

  it("filters by ref prefix through the index: the prefix's products only", async () => {
    const pages = await allPages('ref_prefix=B-&limit=100');
    const refs = pages.flatMap((p) => p.data.map((d) => d.ref));
    expect(refs).toHaveLength(150);
    expect(refs.every((ref) => ref.startsWith('B-'))).toBe(true);
  });

  it('filters by the time of the last write, looking at no more than CPS_PRODUCT_LIST_SCAN products a page', async () => {
    const since = new Date(Date.now() + 5).toISOString();
    await new Promise((resolve) => setTimeout(resolve, 10));
    const { ref: _ref, ...document } = simpleProduct('B-007', '12.00').product;
    await adminOk(service, 'PUT', `${merchant.base}/products/B-007`, document);
    const pages = await allPages(`updated_since=${since}&limit=50`);
    // 453 products, SCAN looked at per page: the pages before B-007's are empty but say where to go on.
    expect(pages.length).toBe(Math.ceil(453 / SCAN));
    expect(pages[0]).toEqual({ data: [], next_after: 'A-199' });
    expect(pages.flatMap((p) => p.data.map((d) => d.ref))).toEqual(['B-007']);
    expect(pages.flatMap((p) => p.data)[0]!.updated_at >= since).toBe(true);
  });

  it('filters the products excluded from a store, and answers 404 for an unknown store', async () => {
    const pages = await allPages('excluded_from=de');
    expect(pages.flatMap((p) => p.data.map((d) => d.ref))).toEqual(['C-1', 'C-2', 'C-3']);
    const unknown = await service.adminApi('GET', `${merchant.base}/products?excluded_from=nowhere`);
    expect(unknown.status).toBe(404);
    expect(unknown.body.code).toBe('not_found');
  });

  it('answers 400 naming a malformed parameter, and 404 for an unknown merchant', async () => {
    for (const [query, name] of [
      ['after=has%20space', 'after'],
      ['limit=0', 'limit'],
      ['updated_since=yesterday', 'updated_since'],
      ['ref_prefix=%2F', 'ref_prefix'],
    ]) {
      const response = await service.adminApi('GET', `${merchant.base}/products?${query}`);
      expect(response.status, query).toBe(400);
      expect(response.body.invalid_params.map((p: { name: string }) => p.name)).toContain(name);
    }
    expect((await service.adminApi('GET', '/admin/v1/merchants/999999/products')).status).toBe(404);
  });
});

describe('the admin import jobs', () => {
  it("lists the merchant's imports newest first with their outcome, pages back with before_id, and shows one", async () => {
    const second = await importNdjson(service, merchant.id, [simpleProduct('D-1')]);
    expect(second.status).toBe(200);
    const { data } = await adminOk(service, 'GET', `${merchant.base}/imports?limit=2`);
    expect(data).toHaveLength(2);
    expect(data[0]).toMatchObject({
      started_by: 'admin API',
      state: 'succeeded',
      lines_read: 1,
      operations: 1,
      products_applied: 1,
      upserted: 1,
      error_code: null,
    });
    expect(data[1]).toMatchObject({ state: 'succeeded', operations: 453, upserted: 453 });
    expect(data[0].id).toBeGreaterThan(data[1].id);
    const older = await adminOk(service, 'GET', `${merchant.base}/imports?before_id=${data[0].id}`);
    expect(older.data.map((j: { id: number }) => j.id)).toEqual([data[1].id]);
    expect(await adminOk(service, 'GET', `${merchant.base}/imports/${data[0].id}`)).toEqual(data[0]);
    // Another merchant's import answers as one that does not exist.
    const other = await createMerchant(service, 'Other Outfitters');
    expect((await service.adminApi('GET', `${other.base}/imports/${data[0].id}`)).status).toBe(404);
  });

  it('answers 202 with the job and its Location once the file is checked and staged, when asked to respond asynchronously', async () => {
    const lines = Array.from({ length: 60 }, (_, i) => simpleProduct(`E-${i}`));
    const response = await service.adminApi('POST', `${merchant.base}/imports`, `${lines.map((l) => JSON.stringify(l)).join('\n')}\n`, {
      headers: { 'Content-Type': 'application/x-ndjson', Prefer: 'respond-async' },
    });
    expect(response.status, response.text).toBe(202);
    expect(response.headers.get('preference-applied')).toBe('respond-async');
    const location = response.headers.get('location')!;
    expect(location).toBe(`${merchant.base}/imports/${response.body.id}`);
    expect(response.body).toMatchObject({ started_by: 'admin API', lines_read: 60, operations: 60 });
    let job = response.body;
    for (let turn = 0; job.state === 'running'; turn++) {
      if (turn > 500) throw new Error(`the import never ended: ${JSON.stringify(job)}`);
      await new Promise((resolve) => setTimeout(resolve, 10));
      job = await adminOk(service, 'GET', location);
    }
    expect(job).toMatchObject({ state: 'succeeded', products_applied: 60, upserted: 60, finished_at: expect.any(String) });
    expect((await adminOk(service, 'GET', `${merchant.base}/products/E-59`)).ref).toBe('E-59');
  });

  it('still answers 400 at once for bad lines when asked to respond asynchronously, with nothing applied', async () => {
    const response = await service.adminApi('POST', `${merchant.base}/imports`, `${JSON.stringify(simpleProduct('F-1'))}\n{"op":\n`, {
      headers: { 'Content-Type': 'application/x-ndjson', Prefer: 'respond-async' },
    });
    expect(response.status).toBe(400);
    expect(response.body.invalid_params.map((p: { name: string }) => p.name)).toEqual(['line 2']);
    expect((await service.adminApi('GET', `${merchant.base}/products/F-1`)).status).toBe(404);
    const { data } = await adminOk(service, 'GET', `${merchant.base}/imports?limit=1`);
    expect(data[0]).toMatchObject({
      state: 'failed',
      error_code: 'invalid_body',
      problems: [{ name: 'line 2', reason: expect.any(String) }],
    });
  });
});
