// `npm run build:docs`: the HTML docs (Redoc, via `redocly build-docs`) of each authored document of
// redocly.yaml, one page per API, each with a bar linking the others (scripts/generate/docs-template.hbs).
// The server serves them at /docs, /admin/docs and /operations/docs (src/http/app.ts).
// Usage: tsx scripts/generate/build-docs.ts [outDir]   (default dist/docs, where the server looks: src/server.ts)
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { DOCS_PAGES } from '../../src/http/docs.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const redocly = path.join(root, 'node_modules', '.bin', 'redocly');
const template = path.join(root, 'scripts', 'generate', 'docs-template.hbs');

/** Redoc's "API docs by Redocly" logo, as text drawn by the page itself. */
const ATTRIBUTION_SVG = (width: number, text: string) =>
  `data:image/svg+xml,${encodeURIComponent(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="16" viewBox="0 0 ${width} 16">` +
      `<text x="0" y="13" font-family="system-ui,sans-serif" font-size="13" font-weight="600" fill="#0044d4">${text}</text></svg>`,
  )}`;

/**
 * What the built pages would fetch from a CDN, and what they use instead (the docs work
 * offline). The scripts are inlined by --inlineBundle and telemetry is off in redocly.yaml; Redoc
 * still loads its sidebar logo from cdn.redoc.ly, whatever the options. A Redoc upgrade that
 * changes these URLs fails the build here, so that test/docs.test.ts is not the first to notice.
 */
export const OFFLINE_REPLACEMENTS: readonly { cdn: string; local: string }[] = [
  { cdn: 'https://cdn.redoc.ly/redoc/logo-mini-full.svg', local: ATTRIBUTION_SVG(56, 'Redocly') },
  { cdn: 'https://cdn.redoc.ly/redoc/logo-mini.svg', local: ATTRIBUTION_SVG(16, 'R') },
];

/** The page without its CDN assets; throws when one of them is not where it was expected. */
export function withoutCdnAssets(html: string, file: string): string {
  let offline = html;
  for (const { cdn, local } of OFFLINE_REPLACEMENTS) {
    if (!offline.includes(cdn))
      throw new Error(`${file}: Redoc no longer loads ${cdn}; check what it loads now and update OFFLINE_REPLACEMENTS.`);
    offline = offline.replaceAll(cdn, local);
  }
  return offline;
}

export async function buildDocs(outDir: string): Promise<void> {
  fs.mkdirSync(outDir, { recursive: true });
  // The scripts are inlined, so the pages work without the Redocly CDN.
  await Promise.all(
    DOCS_PAGES.map(async ({ api, file }) => {
      const out = path.join(outDir, file);
      await promisify(execFile)(
        redocly,
        ['build-docs', api, '--inlineBundle', '-t', template, `--templateOptions.${api}=true`, '-o', out],
        { cwd: root },
      );
      fs.writeFileSync(out, withoutCdnAssets(fs.readFileSync(out, 'utf8'), file));
    }),
  );
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const outDir = path.resolve(process.argv[2] ?? path.join(root, 'dist', 'docs'));
  await buildDocs(outDir);
  console.log(`Docs of ${DOCS_PAGES.map((p) => p.api).join(', ')} written to ${path.relative(process.cwd(), outDir) || '.'}`);
}
