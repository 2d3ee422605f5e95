// Sparse fieldsets (openapi FieldsParam) over real HTTP on the test's engine: `fields=` on pages, on
// ?ids=/?sku=/?ean=, on single products and on the export, each answer checked against the contract;
// `id` always; an unknown name a 400 naming it; the ETag names the fields (304 per set of fields),
// also for pages the read cache holds and after a product changes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminOk, buildOutdoorCatalog, type OutdoorCatalog } from '../support/admin-http.js';
import { startTestService, type TestService } from '../support/service.js';

let service: TestService;
let catalog: OutdoorCatalog;
let key: string;

beforeAll(async () => {
  service = await startTestService();
  catalog = await buildOutdoorCatalog(service);
  key = catalog.merchant.key;
}, 60_000);
afterAll(() => service.close());

type Item = Record<string, unknown> & { id: number };
const pick = (product: Item, fields: string[]) =>
  Object.fromEntries(Object.entries(product).filter(([k]) => k === 'id' || fields.includes(k)));

describe('fields=', () => {
  it('cuts every product of a page down to id and the members asked for, in schema order, the rest of the page unchanged', async () => {
    const full = await service.api('/v1/products?per_page=2&page=2', key);
    const sparse = await service.api('/v1/products?per_page=2&page=2&fields=stock,sku', key);
    expect(sparse.status, sparse.text).toBe(200);
    expect(sparse.body.data.map((p: Item) => Object.keys(p))).toEqual(full.body.data.map(() => ['id', 'sku', 'stock']));
    expect(sparse.body.data).toEqual(full.body.data.map((p: Item) => pick(p, ['sku', 'stock'])));
    expect([sparse.body.store, sparse.body.meta]).toEqual([full.body.store, full.body.meta]);
    expect(sparse.text.length).toBeLessThan(full.text.length / 3);
  });

  it('applies to ?ids=, ?sku=, ?ean= and single products', async () => {
    const { backpack, tent } = catalog.products;
    const full = await service.api(`/v1/products?ids=${backpack.id},${tent.id}`, key);
    const expected = full.body.data.map((p: Item) => pick(p, ['title', 'prices']));
    for (const query of [`ids=${backpack.id},${tent.id}`, 'sku=AO-BP-40,AO-TENT-2']) {
      const sparse = await service.api(`/v1/products?${query}&fields=prices,title`, key);
      expect(sparse.body.data, query).toEqual(expected);
    }
    const byEan = await service.api('/v1/products?ean=4006381333931&fields=ean', key);
    expect(byEan.body.data).toEqual([{ id: backpack.id, ean: '4006381333931' }]);
    const single = await service.api(`/v1/products/${tent.id}?store=pl&fields=id,stock`, key);
    expect(single.body).toEqual({ data: { id: tent.id, stock: 0 } });
  });

  it('applies to the export, keeping the trailer whole', async () => {
    const full = await service.api('/v1/products/export?store=de', key);
    const sparse = await service.api('/v1/products/export?store=de&fields=sku', key);
    expect(sparse.status, sparse.text).toBe(200);
    const lines = (text: string) =>
      text
        .trimEnd()
        .split('\n')
        .map((line) => JSON.parse(line) as Item);
    const fullLines = lines(full.text);
    expect(lines(sparse.text)).toEqual([...fullLines.slice(0, -1).map((p) => pick(p, ['sku'])), fullLines.at(-1)]);
    expect(sparse.headers.get('etag')).not.toBe(full.headers.get('etag'));
    const again = await service.api('/v1/products/export?store=de&fields=sku', key, {
      headers: { 'If-None-Match': sparse.headers.get('etag')! },
    });
    expect(again.status).toBe(304);
    const other = await service.api('/v1/products/export?store=de&fields=title', key, {
      headers: { 'If-None-Match': sparse.headers.get('etag')! },
    });
    expect(other.status).toBe(200);
  });

  it('answers 400 naming an unknown member', async () => {
    const response = await service.api('/v1/products?fields=id,colour', key);
    expect(response.status).toBe(400);
    expect(response.headers.get('content-type')).toContain('application/problem+json');
    expect(response.body.code).toBe('invalid_parameter');
    expect(response.body.invalid_params).toEqual([
      { name: 'fields', in: 'query', reason: expect.stringContaining('"colour" is not one of id, sku') },
    ]);
    expect(response.body.detail).toContain('colour');
    for (const path of [
      `/v1/products/${catalog.products.tent.id}?fields=Title`,
      '/v1/products/export?fields=',
      '/v1/products?ids=1&fields=sku,,id',
    ]) {
      expect((await service.api(path, key)).status, path).toBe(400);
    }
  });

  it('gives each set of fields its own ETag (any order, one tag), 304 per set, also from the read cache, and a new tag once a product changes', async () => {
    const path = '/v1/products?per_page=3';
    const etags: Record<string, string> = {};
    // Read each form three times: pages the read cache keeps (from their second read) are answered from it.
    for (let round = 0; round < 3; round++) {
      for (const fields of ['', '&fields=sku,stock', '&fields=stock,sku,id', '&fields=title']) {
        const response = await service.api(`${path}${fields}`, key);
        expect(response.status).toBe(200);
        const etag = response.headers.get('etag')!;
        if (round === 0) etags[fields] = etag;
        else expect(etag, fields).toBe(etags[fields]);
        if (fields === '&fields=title') expect(Object.keys(response.body.data[0])).toEqual(['id', 'title']);
      }
    }
    expect(etags['&fields=sku,stock']).toBe(etags['&fields=stock,sku,id']);
    expect(new Set(Object.values(etags)).size).toBe(3);
    const conditional = (fields: string, etag: string) => service.api(`${path}${fields}`, key, { headers: { 'If-None-Match': etag } });
    expect((await conditional('&fields=sku,stock', etags['&fields=sku,stock']!)).status).toBe(304);
    expect((await conditional('', etags['&fields=sku,stock']!)).status).toBe(200);
    expect((await conditional('&fields=sku,stock', etags['']!)).status).toBe(200);
    const single = await service.api(`/v1/products/${catalog.products.backpack.id}?fields=sku`, key);
    const singleFull = await service.api(`/v1/products/${catalog.products.backpack.id}`, key);
    expect(single.headers.get('etag')).not.toBe(singleFull.headers.get('etag'));
    expect(
      (
        await service.api(`/v1/products/${catalog.products.backpack.id}?fields=sku`, key, {
          headers: { 'If-None-Match': single.headers.get('etag')! },
        })
      ).status,
    ).toBe(304);
    // A change to the first product's title: its title-only page changes, tag and bytes.
    const first = (await service.api(`${path}&fields=title`, key)).body.data[0].id as number;
    const ref = [catalog.products.backpack, catalog.products.tent, catalog.products.lamp].find((p) => p.id === first)!.ref as string;
    const source = await adminOk(service, 'GET', `${catalog.merchant.base}/products/${ref}`);
    await adminOk(service, 'PUT', `${catalog.merchant.base}/products/${ref}`, {
      ...source,
      content: { ...source.content, de: { title: 'Neu', description: null } },
    });
    const changed = await conditional('&fields=title', etags['&fields=title']!);
    expect(changed.status).toBe(200);
    expect(changed.body.data[0]).toEqual({ id: first, title: 'Neu' });
  });
});
