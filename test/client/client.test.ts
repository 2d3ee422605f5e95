import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDemoCatalog } from '../../src/admin/demo.js';
import {
  CatalogApiError,
  createCatalogClient,
  getProduct,
  iterateProducts,
  listProducts,
  listStores,
  unwrap,
  type CatalogClient,
  type Product,
} from '../../src/client/index.js';
import { ADMIN_TOKEN, startTestService, type TestService } from '../support/service.js';

const run = promisify(execFile);
const repo = path.resolve(import.meta.dirname, '../..');

let service: TestService;
let key: string;
let emptyStoreKey: string;

beforeAll(async () => {
  service = await startTestService();
  key = (await buildDemoCatalog(service.admin, 450)).api_key;
  // A second merchant with one store and no products (every product of a merchant is in every store).
  const empty = await service.admin.createMerchant({ name: 'Empty Shelf Ltd' });
  await service.admin.upsertStore(empty.id, 'main', {
    name: 'Empty Shelf',
    locale: 'en-GB',
    currency: 'GBP',
    is_default: true,
    active: true,
    exclude_out_of_stock: false,
  });
  emptyStoreKey = await service.keyFor(empty.id);
});
afterAll(() => service.close());

/** A client whose requests all pass the contract harness, and a log of every request it sent. */
function recordingClient(apiKey = key): { client: CatalogClient; requests: Request[] } {
  const requests: Request[] = [];
  const client = createCatalogClient({
    baseUrl: service.url,
    apiKey,
    fetch: (request) => {
      requests.push(request.clone());
      return service.fetch(request);
    },
  });
  return { client, requests };
}

async function caught(promise: Promise<unknown>): Promise<CatalogApiError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(CatalogApiError);
  return error as CatalogApiError;
}

describe('createCatalogClient', () => {
  it('lists the stores, default store first, sending the API key as a bearer token', async () => {
    const { client, requests } = recordingClient();
    const stores = await listStores(client);
    expect(stores.map((s) => s.slug)).toEqual(['de', 'pl', 'uk']);
    expect(stores[0]).toMatchObject({ is_default: true, locale: 'de-DE', currency: 'EUR' });
    expect(requests.map((r) => r.headers.get('authorization'))).toEqual([`Bearer ${key}`]);
  });

  it('is the plain openapi-fetch client, so every operation of the document can be called on it', async () => {
    const { client } = recordingClient();
    const { data, error, response } = await client.GET('/v1/products', { params: { query: { store: 'uk', per_page: 5 } } });
    expect(error).toBeUndefined();
    expect(response.status).toBe(200);
    expect(data?.store).toBe('uk');
    expect(data?.meta).toEqual({ current_page: 1, per_page: 5, last_page: 90, total: 450 });
    const one = await unwrap(client.GET('/v1/products/{id}', { params: { path: { id: 3 }, query: { store: 'uk' } } }));
    expect(one.data).toEqual(data?.data[2]);
  });

  it('reads one product resolved for the requested store', async () => {
    const { client, requests } = recordingClient();
    const product = await getProduct(client, 42, { store: 'pl' });
    expect(product).toMatchObject({ id: 42, store: 'pl', sku: 'DEMO-42' });
    expect(product.prices.every((p) => p.currency === 'PLN')).toBe(true);
    expect(new URL(requests[0]!.url).search).toBe('?store=pl');
    expect((await getProduct(client, 42)).store).toBe('de');
  });

  it('turns a 404 into a CatalogApiError carrying the problem, code not_found', async () => {
    const { client } = recordingClient();
    const error = await caught(getProduct(client, 999_999, { store: 'de' }));
    expect(error.status).toBe(404);
    expect(error.problem).toMatchObject({ status: 404, code: 'not_found', type: 'urn:problem:catalog:not_found' });
    expect(error.message).toContain('not_found');
  });

  it('turns a bad API key into a CatalogApiError with status 401 and code unauthorized', async () => {
    const { client } = recordingClient('cps_not-a-key-this-service-ever-issued');
    const error = await caught(listStores(client));
    expect(error.status).toBe(401);
    expect(error.problem.code).toBe('unauthorized');
  });
});

describe('iterateProducts', () => {
  it('yields every product of a 450-product store once, in id order, in exactly 3 requests of 200', async () => {
    const { client, requests } = recordingClient();
    const products: Product[] = [];
    for await (const product of iterateProducts(client, { store: 'pl', perPage: 200, paging: 'page' })) products.push(product);

    const ids = products.map((p) => p.id);
    expect(ids).toHaveLength(450);
    expect(new Set(ids).size).toBe(450);
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    expect(products.every((p) => p.store === 'pl')).toBe(true);
    expect(requests.map((r) => Object.fromEntries(new URL(r.url).searchParams))).toEqual([
      { store: 'pl', page: '1', per_page: '200' },
      { store: 'pl', page: '2', per_page: '200' },
      { store: 'pl', page: '3', per_page: '200' },
    ]);
    const { meta } = await listProducts(client, { store: 'pl', perPage: 1 });
    expect(meta.total).toBe(450);
  });

  it('pages with after_id by default: 3 requests, each continuing after the last id read', async () => {
    const { client, requests } = recordingClient();
    const ids: number[] = [];
    for await (const product of iterateProducts(client, { store: 'pl' })) ids.push(product.id);
    expect(ids).toHaveLength(450);
    expect(new Set(ids).size).toBe(450);
    expect(requests.map((r) => Object.fromEntries(new URL(r.url).searchParams))).toEqual([
      { store: 'pl', after_id: '0', per_page: '200' },
      { store: 'pl', after_id: String(ids[199]), per_page: '200' },
      { store: 'pl', after_id: String(ids[399]), per_page: '200' },
    ]);
  });

  it('misses no product when another is deleted while paging with after_id', async () => {
    const merchant = await service.admin.createMerchant({ name: 'Deletes while paging' });
    await service.admin.upsertStore(merchant.id, 'x', {
      name: 'X',
      locale: 'en-GB',
      currency: 'EUR',
      is_default: true,
      active: true,
      exclude_out_of_stock: false,
    });
    for (let n = 1; n <= 30; n++) await service.admin.upsertProduct(merchant.id, `P${n}`, { content: { en: { title: `P${n}` } } });
    const own = createCatalogClient({ baseUrl: service.url, apiKey: await service.keyFor(merchant.id), fetch: service.fetch });
    const all = (await listProducts(own, { perPage: 200 })).data.map((p) => p.id);
    const seen: number[] = [];
    for await (const product of iterateProducts(own, { perPage: 10 })) {
      seen.push(product.id);
      // After the first page, the first product leaves the catalog: page numbers would shift.
      if (seen.length === 10) await service.admin.deleteProduct(merchant.id, 'P1');
    }
    expect(seen).toEqual(all);
  });

  it('reads the default store when no store is given, and stays on it for the later pages', async () => {
    const { client, requests } = recordingClient();
    let count = 0;
    for await (const product of iterateProducts(client)) {
      expect(product.store).toBe('de');
      count++;
    }
    expect(count).toBe(450);
    expect(requests.map((r) => new URL(r.url).searchParams.get('store'))).toEqual([null, 'de', 'de']);
  });

  it('yields nothing for a store without products, after one request', async () => {
    const { client, requests } = recordingClient(emptyStoreKey);
    const products: Product[] = [];
    for await (const product of iterateProducts(client, { store: 'main' })) products.push(product);
    expect(products).toEqual([]);
    expect(requests).toHaveLength(1);
  });

  it('throws CatalogApiError when a page answers with an error', async () => {
    const { client } = recordingClient();
    const error = await caught(iterateProducts(client, { store: 'xx' }).next());
    expect(error.status).toBe(404);
    expect(error.problem.code).toBe('store_not_found');
  });
});

describe('the built client', () => {
  it('installs as catalog-publishing-service/client (and /client/admin) and runs from plain JavaScript', async () => {
    // A stand-in for an installed package: the client alone, compiled with the repo's compiler
    // options, under node_modules/catalog-publishing-service with the real package.json exports.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-client-'));
    try {
      const modules = path.join(dir, 'node_modules');
      const installed = path.join(modules, 'catalog-publishing-service');
      fs.mkdirSync(installed, { recursive: true });
      fs.symlinkSync(path.join(repo, 'node_modules/openapi-fetch'), path.join(modules, 'openapi-fetch'), 'dir');
      const manifest = JSON.parse(fs.readFileSync(path.join(repo, 'package.json'), 'utf8'));
      fs.writeFileSync(
        path.join(installed, 'package.json'),
        JSON.stringify({
          name: manifest.name,
          version: manifest.version,
          type: manifest.type,
          exports: manifest.exports,
          dependencies: { 'openapi-fetch': manifest.dependencies['openapi-fetch'] },
        }),
      );
      fs.writeFileSync(
        path.join(dir, 'tsconfig.json'),
        JSON.stringify({
          extends: path.join(repo, 'tsconfig.json'),
          compilerOptions: { noEmit: false, sourceMap: false, types: [], rootDir: repo, outDir: path.join(installed, 'dist') },
          files: [path.join(repo, 'src/client/index.ts'), path.join(repo, 'src/client/admin.ts')],
          include: [],
        }),
      );
      await run(process.execPath, [path.join(repo, 'node_modules/typescript/bin/tsc'), '-p', path.join(dir, 'tsconfig.json')]);

      // The clients pull in no server code: their own modules, the (type-only) generated documents, the
      // generated limits, webhooks registry and admin route facts (standalone, no imports) and src/shared/time.ts.
      const emitted = fs
        .readdirSync(path.join(installed, 'dist'), { recursive: true, encoding: 'utf8' })
        .filter((f) => f.endsWith('.js'))
        .map((f) => f.split(path.sep).join('/'))
        .sort();
      expect(emitted).toEqual([
        'src/client/admin-client.js',
        'src/client/admin-imports.js',
        'src/client/admin-types.js',
        'src/client/admin.js',
        'src/client/catalog-client.js',
        'src/client/change-stream.js',
        'src/client/changes.js',
        'src/client/errors.js',
        'src/client/export.js',
        'src/client/index.js',
        'src/client/reads.js',
        'src/client/retry-after.js',
        'src/client/types.js',
        'src/generated/admin-api.js',
        'src/generated/admin-route-facts.js',
        'src/generated/public-api.js',
        'src/generated/public-limits.js',
        'src/generated/public-webhooks.js',
        'src/shared/time.js',
      ]);
      expect(fs.existsSync(path.join(installed, 'dist/src/client/index.d.ts'))).toBe(true);

      fs.writeFileSync(
        path.join(dir, 'consumer.mjs'),
        `
        import {
          createCatalogClient, fetchProductsByIds, iterateProducts, listStores, mapReplica, pollChanges, syncStore, CatalogApiError,
        } from 'catalog-publishing-service/client';
        import { createAdminClient, unwrap, CatalogApiError as AdminError } from 'catalog-publishing-service/client/admin';
        const client = createCatalogClient({ baseUrl: process.env.BASE_URL, apiKey: process.env.API_KEY });
        const admin = createAdminClient({ baseUrl: process.env.BASE_URL, key: process.env.ADMIN_TOKEN });
        const merchants = await unwrap(admin.GET('/admin/v1/merchants'));
        const stores = await listStores(client);
        const raw = await client.GET('/v1/stores');
        let first;
        for await (const product of iterateProducts(client, { store: 'uk', perPage: 2 })) { first = product; break; }
        const bad = createCatalogClient({ baseUrl: process.env.BASE_URL, apiKey: 'cps_nope' });
        const failure = await listStores(bad).catch((e) => e);
        const byIds = await fetchProductsByIds(client, [3, 1, 3], { store: 'uk' });
        const window = (await pollChanges(client, { store: 'uk' }).next()).value;
        const replica = mapReplica();
        const cursor = await syncStore(client, { store: 'uk', replica });
        console.log(JSON.stringify({
          slugs: stores.map((s) => s.slug), status: raw.response.status, first: first.id,
          failure: failure instanceof CatalogApiError ? failure.problem.code : String(failure),
          byIds: byIds.map((p) => p.id), windowStore: window.store, replicaSize: replica.products.size,
          cursor: typeof cursor.since === 'string' && Number.isInteger(cursor.since_id),
          listsMerchants: merchants.data.some((m) => m.name === 'Empty Shelf Ltd'), oneErrorType: AdminError === CatalogApiError,
        }));
      `,
      );
      const { stdout } = await run(process.execPath, ['consumer.mjs'], {
        cwd: dir,
        env: { ...process.env, BASE_URL: service.url, API_KEY: key, ADMIN_TOKEN },
      });
      expect(JSON.parse(stdout)).toEqual({
        slugs: ['de', 'pl', 'uk'],
        status: 200,
        first: 1,
        failure: 'unauthorized',
        byIds: [1, 3],
        windowStore: 'uk',
        replicaSize: 450,
        cursor: true,
        listsMerchants: true,
        oneErrorType: true,
      });
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
