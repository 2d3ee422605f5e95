// The HTML docs of every document: `npm run build:docs` builds one page per API
// (scripts/generate/build-docs.ts), the server serves them at /docs, /admin/docs and /operations/docs, each
// page links the others, and the panel links all three. They work offline: in a real
// Chromium that may reach 127.0.0.1 only, nothing is fetched from anywhere else, and the documents
// name no placeholder contact or server.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDocs, withoutCdnAssets } from '../scripts/generate/build-docs.js';
import adminDocument from '../src/generated/admin-openapi.json' with { type: 'json' };
import operationsDocument from '../src/generated/operations-openapi.json' with { type: 'json' };
import publicDocument from '../src/generated/public-openapi.json' with { type: 'json' };
import { launchBrowser, type TestBrowser } from './support/browser.js';
import { startTestService, type TestService } from './support/service.js';

const PAGES = [
  { route: '/docs', document: publicDocument },
  { route: '/admin/docs', document: adminDocument },
  { route: '/operations/docs', document: operationsDocument },
];

/** Every operationId of a document: the docs show each operation's. */
function operationIds(document: { paths: Record<string, Record<string, any>> }): string[] {
  return Object.values(document.paths).flatMap((item) =>
    Object.values(item)
      .map((operation) => operation?.operationId)
      .filter(Boolean),
  );
}

/** The summary of a document's first operation: its docs page lists it in the sidebar. */
function firstSummary(document: { paths: Record<string, Record<string, any>> }): string {
  return Object.values(document.paths)
    .flatMap((item) => Object.values(item))
    .find((operation) => operation?.summary).summary;
}

describe('the built docs', () => {
  let docsDir: string;
  let service: TestService;
  let browser: TestBrowser;
  beforeAll(async () => {
    docsDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-docs-'));
    await buildDocs(docsDir); // what `npm run build:docs` runs, into a temporary folder
    service = await startTestService({ docsDir });
    browser = await launchBrowser();
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await service?.close();
    fs.rmSync(docsDir, { recursive: true, force: true });
  });

  for (const { route, document } of PAGES) {
    it(`serves the Redocly docs of "${document.info.title}" at ${route}, with every operation`, async () => {
      const response = await fetch(`${service.url}${route}`);
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toMatch(/^text\/html/);
      const html = await response.text();
      expect(html).toContain(`<title>${document.info.title}</title>`);
      for (const operationId of operationIds(document)) expect(html).toContain(operationId);
    });

    it(`renders ${route} offline: every request goes to the service itself, every image is drawn`, async () => {
      const page = await browser.newPage();
      const elsewhere: string[] = [];
      // Whatever leaves 127.0.0.1 is recorded and refused, as it would fail on a machine without internet.
      await page.route(
        (url) => url.hostname !== '127.0.0.1',
        (request) => {
          elsewhere.push(`${request.request().resourceType()} ${request.request().url()}`);
          return request.abort('internetdisconnected');
        },
      );
      await page.goto(`${service.url}${route}`);
      // Hydrated (Redoc adds its logo's <img> only in the browser), with the operations listed.
      await page.locator('img[alt="redocly logo"]').waitFor({ state: 'attached' });
      await page.waitForLoadState('networkidle');
      expect(await page.textContent('body')).toContain(firstSummary(document));
      expect(elsewhere).toEqual([]);
      const images = await page
        .locator('img')
        .evaluateAll((all) =>
          all.map((img) => ({ src: (img as HTMLImageElement).src.slice(0, 40), drawn: (img as HTMLImageElement).naturalWidth > 0 })),
        );
      expect(images.length).toBeGreaterThan(0);
      for (const image of images) expect(image).toMatchObject({ drawn: true });
    });

    it(`links ${route} to the docs of the other documents and to the panel`, async () => {
      const html = await (await fetch(`${service.url}${route}`)).text();
      const bar = html.match(/<nav class="api-docs"[\s\S]*?<\/nav>/)?.[0] ?? '';
      expect(bar).toContain(`<a href="${route}" aria-current="page">`);
      for (const other of PAGES.filter((p) => p.route !== route)) expect(bar).toContain(`<a href="${other.route}">`);
      expect(bar).toContain('<a href="/panel">');
    });
  }
});

describe('the documents the docs show', () => {
  for (const { route, document } of PAGES) {
    it(`${route}: the server is the deployment that serves it, and no contact or licence is a placeholder`, () => {
      const servers = (document as { servers?: { url: string; variables?: object }[] }).servers ?? [];
      expect(servers.map((s) => s.url)).toEqual(['/']);
      for (const server of servers) expect(server.variables).toBeUndefined();
      const info = document.info as { contact?: Record<string, string>; license?: Record<string, string> };
      for (const value of [...Object.values(info.contact ?? {}), ...Object.values(info.license ?? {})])
        expect(value).not.toMatch(/example\.(com|org|net)|\{/);
      expect(info.contact?.name).toBeTruthy();
    });
  }

  it('the build refuses a Redoc that loads its logo from somewhere it does not expect', () => {
    expect(() => withoutCdnAssets('<img src="https://cdn.example.net/logo.svg">', 'public.html')).toThrow(
      /no longer loads https:\/\/cdn\.redoc\.ly/,
    );
  });
});

describe('docs not built', () => {
  let service: TestService;
  beforeAll(async () => {
    service = await startTestService();
  });
  afterAll(() => service.close());

  it('answers 404 at each docs page and says how to build it and where the document is', async () => {
    for (const [route, document] of [
      ['/docs', '/openapi.json'],
      ['/admin/docs', '/admin/openapi.json'],
      ['/operations/docs', '/operations/openapi.json'],
    ]) {
      const response = await fetch(`${service.url}${route}`);
      expect(response.status).toBe(404);
      const text = await response.text();
      expect(text).toContain('npm run build:docs');
      expect(text).toContain(document);
    }
  });

  it('the panel links the docs of all three documents from every page', async () => {
    const html = await (await fetch(`${service.url}/panel/login`)).text();
    const footer = html.match(/<footer>[\s\S]*?<\/footer>/)?.[0] ?? '';
    for (const { route } of PAGES) expect(footer).toContain(`href="${route}"`);
  });
});
