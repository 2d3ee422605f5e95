// A page in a real Chromium follows the change feed without its key in a URL, on either engine:
// EventSource cannot send Authorization (a key in the query string answers 401), so the client
// package's streamChanges reads the stream with fetch and the header, across origins (CORS: the key
// lists the page's origin), and reconnects after the stream's `retry:` with `Last-Event-ID` when the
// connection is cut. The page is served from its own origin (a port of its own); the API is reached
// through a TCP relay the test can cut. The client is bundled for the browser as a page would.
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { adminOk, buildOutdoorCatalog, type OutdoorCatalog } from '../support/admin-http.js';
import { launchBrowser, type TestBrowser } from '../support/browser.js';
import { startTestService, type TestService } from '../support/service.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

let service: TestService;
let catalog: OutdoorCatalog;
let browser: TestBrowser;
let key: string;
/** The page's origin (allowed by the key) and another one (not allowed). */
let pageOrigin: string;
let strangerOrigin: string;
const servers: http.Server[] = [];
/** The API as the page reaches it: a relay whose connections the test can cut, and the requests it saw. */
let api: string;
const relayed = { sockets: new Set<net.Socket>(), requests: [] as string[] };
let relay: net.Server;

/** A page server on its own port: a page that loads the client bundle (as `window.catalogClient`), and the bundle. */
async function pageServer(bundle: string): Promise<string> {
  const server = http.createServer((request, response) => {
    if (request.url === '/client.js') response.writeHead(200, { 'Content-Type': 'text/javascript' }).end(bundle);
    else
      response
        .writeHead(200, { 'Content-Type': 'text/html' })
        .end(
          `<!doctype html><title>shop</title><script type="module">import * as client from '/client.js'; window.catalogClient = client;</script>`,
        );
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
}

let productNumber = 0;
/** A new product in stock in `de`: one change in its feed. */
async function newProduct(): Promise<number> {
  productNumber++;
  const product = await adminOk(service, 'PUT', `${catalog.merchant.base}/products/NEW-${productNumber}`, {
    content: { de: { title: `Neu ${productNumber}`, description: null } },
    own_stock: { quantity: 1, cost: '10.00', currency: 'EUR' },
  });
  return product.id as number;
}

beforeAll(async () => {
  service = await startTestService({ config: { changes: { streamRetryMs: 300, heartbeatSeconds: 1 } } });
  catalog = await buildOutdoorCatalog(service);
  const apiPort = new URL(service.url).port;
  relay = net.createServer((client) => {
    const upstream = net.connect(Number(apiPort), '127.0.0.1');
    relayed.sockets.add(client);
    client.once('data', (first) => relayed.requests.push(first.toString('latin1')));
    client.pipe(upstream).pipe(client);
    const close = () => {
      relayed.sockets.delete(client);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', close).on('close', close);
    upstream.on('error', close).on('close', close);
  });
  await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
  api = `http://127.0.0.1:${(relay.address() as net.AddressInfo).port}`;
  const bundled = await build({
    entryPoints: [path.join(ROOT, 'src/client/index.ts')],
    bundle: true,
    format: 'esm',
    platform: 'browser',
    write: false,
    logLevel: 'error',
  });
  const bundle = bundled.outputFiles[0]!.text;
  pageOrigin = await pageServer(bundle);
  strangerOrigin = await pageServer(bundle);
  key = (await adminOk(service, 'POST', `${catalog.merchant.base}/api-keys`, { name: 'shop pages', allowed_origins: [pageOrigin] }, 201))
    .key;
  browser = await launchBrowser();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  for (const socket of relayed.sockets) socket.destroy();
  relay?.close();
  for (const server of servers) server.close();
  await service?.close();
});

async function openPage(origin: string): Promise<Page> {
  const page = await browser.newPage();
  await page.goto(`${origin}/`);
  await page.waitForFunction(() => 'catalogClient' in window);
  return page;
}

describe('a page in Chromium', () => {
  it('cannot follow the feed with EventSource: it sends no Authorization, and a key in the URL answers 401 (the key stays out of URLs)', async () => {
    const page = await openPage(pageOrigin);
    const outcome = await page.evaluate(
      ({ api, key }) =>
        new Promise<{ state: number; status: number }>((resolve) => {
          const source = new EventSource(`${api}/v1/changes?store=de&api_key=${key}`);
          source.onerror = async () => {
            const state = source.readyState;
            source.close();
            // What the server answered to that URL, read with fetch (the key's origin may read its errors).
            const status = (await fetch(`${api}/v1/changes?store=de&api_key=${key}`)).status;
            resolve({ state, status });
          };
        }),
      { api, key },
    );
    // CLOSED: a browser does not retry a stream refused with an error status.
    expect(outcome).toEqual({ state: 2, status: 401 });
  });

  it("reads the API across origins with the key in the header when the key lists the page's origin, and not from another origin", async () => {
    const read = (page: Page) =>
      page.evaluate(
        async ({ api, key }) => {
          try {
            const response = await fetch(`${api}/v1/stores`, { headers: { Authorization: `Bearer ${key}` } });
            return { status: response.status, date: response.headers.get('Date') !== null, body: (await response.json()) as unknown };
          } catch (error) {
            return { failed: String(error) };
          }
        },
        { api, key },
      );
    const allowed = await read(await openPage(pageOrigin));
    expect(allowed).toMatchObject({ status: 200, date: true, body: { data: expect.any(Array) } });
    // The preflight finds the origin allowed by no key: the browser never sends the request.
    expect(await read(await openPage(strangerOrigin))).toEqual({ failed: 'TypeError: Failed to fetch' });
  });

  it('follows the feed with streamChanges: every window once, a new change as it is recorded, and resumes with Last-Event-ID after the connection is cut', async () => {
    const page = await openPage(pageOrigin);
    await page.evaluate(
      async ({ api, key }) => {
        const { createCatalogClient, streamChanges } = (window as unknown as { catalogClient: typeof import('../../src/client/index.js') })
          .catalogClient;
        const client = createCatalogClient({ baseUrl: api, apiKey: key });
        const seen: { products: number[]; cursor: string }[] = [];
        const state = { seen, error: '' };
        (globalThis as unknown as { feed: typeof state }).feed = state;
        void (async () => {
          try {
            for await (const window of streamChanges(client, { store: 'de' })) {
              seen.push({ products: window.changes.map((c) => c.product_id), cursor: `${window.cursor.since}/${window.cursor.since_id}` });
            }
          } catch (error) {
            state.error = String(error);
          }
        })();
      },
      { api, key },
    );
    const products = () =>
      page.evaluate(() => (globalThis as unknown as { feed: { seen: { products: number[] }[] } }).feed.seen.flatMap((w) => w.products));
    const initial = [catalog.products.backpack.id, catalog.products.lamp.id] as number[];
    await expect.poll(products, { timeout: 10_000 }).toEqual(expect.arrayContaining(initial));

    const first = await newProduct();
    await expect.poll(products, { timeout: 10_000 }).toContain(first);
    const streamsBefore = relayed.requests.filter((r) => r.startsWith('GET /v1/changes')).length;

    // The connection is cut (a proxy, a network change): the page reconnects after retry: (300 ms here) from the last window.
    for (const socket of relayed.sockets) socket.destroy();
    const second = await newProduct();
    await expect.poll(products, { timeout: 10_000 }).toContain(second);
    const streams = relayed.requests.filter((r) => r.startsWith('GET /v1/changes'));
    expect(streams.length).toBeGreaterThan(streamsBefore);
    const lastCursor = await page.evaluate(() => {
      const { seen } = (globalThis as unknown as { feed: { seen: { cursor: string }[] } }).feed;
      return seen[seen.length - 2]!.cursor;
    });
    expect(streams.at(-1)!.toLowerCase()).toContain(`last-event-id: ${lastCursor.toLowerCase()}`);
    expect(streams.at(-1)!.toLowerCase()).not.toContain('api_key');

    // Each product once: nothing missed, nothing repeated across the reconnect.
    const all = await products();
    expect(new Set(all).size).toBe(all.length);
    expect(await page.evaluate(() => (globalThis as unknown as { feed: { error: string } }).feed.error)).toBe('');
  });
});
