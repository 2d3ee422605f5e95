// The HTML docs of the three documents (built by `npm run build:docs`: scripts/generate/build-docs.ts), served
// beside the documents themselves: /docs (public), /admin/docs and /operations/docs. Public, like the
// documents: they describe the APIs, they hold no data.
import fs from 'node:fs';
import path from 'node:path';
import { Hono } from 'hono';

/** One page per API of redocly.yaml: where it is served, the file build:docs writes, its document. */
export const DOCS_PAGES = [
  { api: 'public', route: '/docs', file: 'public.html', document: '/openapi.json' },
  { api: 'admin', route: '/admin/docs', file: 'admin.html', document: '/admin/openapi.json' },
  { api: 'operations', route: '/operations/docs', file: 'operations.html', document: '/operations/openapi.json' },
] as const;

/** Serves the built pages of docsDir; a page not built answers 404 and says how to build it. */
export function docsPages(docsDir: string | undefined) {
  const app = new Hono();
  for (const { route, file, document } of DOCS_PAGES) {
    app.get(route, (c) => {
      const page = docsDir ? path.join(docsDir, file) : undefined;
      if (!page || !fs.existsSync(page)) {
        return c.text(`The HTML docs are not built: run \`npm run build:docs\`. The document itself is at ${document}.`, 404);
      }
      return c.html(fs.readFileSync(page, 'utf8'));
    });
  }
  return app;
}
