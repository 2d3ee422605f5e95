// `npm run build:docs`: the HTML docs (Redoc, via `redocly build-docs`) of each authored document of
// redocly.yaml, one page per API, each with a bar linking the others (scripts/docs-template.hbs).
// The server serves them at /docs, /admin/docs and /operations/docs (src/http/app.ts).
// Usage: tsx scripts/build-docs.ts [outDir]   (default dist/docs, where the server looks: src/server.ts)
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { DOCS_PAGES } from '../src/http/docs.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const redocly = path.join(root, 'node_modules', '.bin', 'redocly');
const template = path.join(root, 'scripts', 'docs-template.hbs');

export async function buildDocs(outDir: string): Promise<void> {
  fs.mkdirSync(outDir, { recursive: true });
  // The scripts are inlined, so the pages work without the Redocly CDN.
  await Promise.all(DOCS_PAGES.map(({ api, file }) => promisify(execFile)(redocly, [
    'build-docs', api, '--inlineBundle', '-t', template, `--templateOptions.${api}=true`, '-o', path.join(outDir, file),
  ], { cwd: root })));
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const outDir = path.resolve(process.argv[2] ?? path.join(root, 'dist', 'docs'));
  await buildDocs(outDir);
  console.log(`Docs of ${DOCS_PAGES.map((p) => p.api).join(', ')} written to ${path.relative(process.cwd(), outDir) || '.'}`);
}
