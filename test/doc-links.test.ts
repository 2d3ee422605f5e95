// The documentation holds together inside the repository: every relative link of README.md,
// SECURITY.md and docs/ (the benchmarks' log included) leads to a file of the repository (and a
// `#fragment` into a Markdown page to one of its headings, as GitHub names them), every
// `docs/….md#…` a comment or a description cites exists, no page and no file under src/, scripts/,
// openapi/, test/ or arazzo/ cites an issue number, and no such file cites a path outside the
// repository: they cite the spec's sections ("spec 4.4") or a page of docs/
// (docs/testing.md#the-documentation).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** Every file under `dir` (relative to the root) whose name passes `keep`. */
function filesUnder(dir: string, keep: (name: string) => boolean): string[] {
  const found: string[] = [];
  const walk = (relative: string) => {
    for (const entry of fs.readdirSync(path.join(ROOT, relative), { withFileTypes: true })) {
      const child = path.join(relative, entry.name);
      if (entry.isDirectory()) walk(child);
      else if (keep(entry.name)) found.push(child);
    }
  };
  walk(dir);
  return found;
}

const PAGES = ['README.md', 'SECURITY.md', ...filesUnder('docs', (name) => name.endsWith('.md'))];

/** A page's text without its fenced code blocks and inline code, where a link is only text. */
function prose(markdown: string): string {
  return markdown.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '').replace(/`[^`\n]*`/g, '');
}

/** GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces as hyphens, repeats numbered. */
function headingAnchors(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  const withoutFences = markdown.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '');
  for (const [, heading] of withoutFences.matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const text = heading!.replace(/\[([^\]]*)\]\([^)]*\)/g, '$1').replace(/<[^>]+>/g, '');
    const slug = text
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    anchors.add(count ? `${slug}-${count}` : slug);
  }
  return anchors;
}

/** The relative link targets of a Markdown page: `[text](target)` and `<img src="target">`. */
function relativeTargets(markdown: string): string[] {
  const text = prose(markdown);
  const targets = [
    ...[...text.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)].map((match) => match[1]!),
    ...[...text.matchAll(/<img[^>]*\ssrc="([^"]+)"/g)].map((match) => match[1]!),
  ];
  return targets.filter((target) => !/^[a-z][a-z0-9+.-]*:/i.test(target));
}

/** Why `target`, linked from `from` (relative to the root), leads nowhere; null when it leads somewhere. */
function brokenLink(from: string, target: string): string | null {
  const [file, fragment] = target.split('#', 2) as [string, string | undefined];
  const resolved = file ? path.normalize(path.join(path.dirname(from), decodeURI(file))) : from;
  if (resolved.startsWith('..')) return `${target}: outside the repository`;
  if (!fs.existsSync(path.join(ROOT, resolved))) return `${target}: no such file (${resolved})`;
  if (fragment === undefined || !resolved.endsWith('.md')) return null;
  const anchors = headingAnchors(fs.readFileSync(path.join(ROOT, resolved), 'utf8'));
  return anchors.has(fragment) ? null : `${target}: ${resolved} has no heading #${fragment}`;
}

/** The files whose comments and descriptions must cite only what the repository holds. */
const CODE = ['src', 'scripts', 'openapi', 'test', 'arazzo']
  .flatMap((dir) => filesUnder(dir, (name) => /\.(ts|tsx|js|css|ya?ml|json|sql)$/.test(name)))
  .filter((file) => file !== path.join('test', 'doc-links.test.ts')); // it names what it looks for

// Built from parts, so that this file does not cite what it looks for.
const OUTSIDE = new RegExp(
  ['\\.\\./shared/', 'shared/spec/', 'product-decisions\\.md', 'catalog-publishing-service\\.md', 'style\\.md'].join('|'),
);
const ISSUE = new RegExp(['\\b[Ii]ssues? #?\\d', '\\(#\\d+\\)'].join('|'));
/** `docs/page.md#anchor` as comments cite it (an `import … from '../shared/…'` is code, not a citation). */
const DOCS_CITATION = /\bdocs\/([\w/-]+\.md)(?:#([\w-]+))?/g;

/** `file`'s lines that match `pattern`, as `file:line: text`, leaving out imports of src/shared/. */
function linesMatching(file: string, pattern: RegExp): string[] {
  return fs
    .readFileSync(path.join(ROOT, file), 'utf8')
    .split('\n')
    .flatMap((line, index) => {
      const withoutImports = line.replace(/(from|import)\s+'(\.\.\/)+shared\/[\w./-]+'/g, '');
      return pattern.test(withoutImports) ? [`${file}:${index + 1}: ${line.trim().slice(0, 160)}`] : [];
    });
}

describe('the documentation', () => {
  it('links, from every page, only to files of the repository and headings that exist', () => {
    const broken = PAGES.flatMap((page) =>
      relativeTargets(fs.readFileSync(path.join(ROOT, page), 'utf8'))
        .map((target) => brokenLink(page, target))
        .filter((why) => why !== null)
        .map((why) => `${page}: ${why}`),
    );
    expect(broken).toEqual([]);
  });

  it('is linked from the README, every page of docs/', () => {
    const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
    const linked = new Set(relativeTargets(readme).map((target) => path.normalize(target.split('#')[0]!)));
    const pages = PAGES.filter((page) => page.startsWith(`docs${path.sep}`));
    expect(pages.length).toBeGreaterThan(5);
    expect(pages.filter((page) => !linked.has(page))).toEqual([]);
    expect(linked.has('SECURITY.md')).toBe(true);
  });

  it('never cites an issue number: a page says what the goal is, not where it was filed', () => {
    expect(PAGES.flatMap((page) => linesMatching(page, ISSUE))).toEqual([]);
  });

  it('keeps the README short: a map, not the manual', () => {
    expect(fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8').split('\n').length).toBeLessThanOrEqual(150);
  });

  it('names headings as GitHub does', () => {
    const anchors = headingAnchors(
      '# Snapshot, then feed: `GET /v1/products/export`\n## Rate limits\n## Rate limits\n```\n# not a heading\n```\n',
    );
    expect([...anchors]).toEqual(['snapshot-then-feed-get-v1productsexport', 'rate-limits', 'rate-limits-1']);
  });
});

describe('citations in code, documents and tests', () => {
  it('never cite a path outside the repository', () => {
    expect(CODE.length).toBeGreaterThan(100);
    expect(CODE.flatMap((file) => linesMatching(file, OUTSIDE))).toEqual([]);
  });

  it('never cite an issue number', () => {
    expect(CODE.flatMap((file) => linesMatching(file, ISSUE))).toEqual([]);
  });

  it('cite docs/ pages and headings that exist', () => {
    const anchors = new Map<string, Set<string>>();
    const broken = CODE.flatMap((file) =>
      [...fs.readFileSync(path.join(ROOT, file), 'utf8').matchAll(DOCS_CITATION)].flatMap(([cited, page, anchor]) => {
        const target = path.join(ROOT, 'docs', page!);
        if (!fs.existsSync(target)) return [`${file}: ${cited}: no such page`];
        if (!anchor) return [];
        if (!anchors.has(page!)) anchors.set(page!, headingAnchors(fs.readFileSync(target, 'utf8')));
        return anchors.get(page!)!.has(anchor) ? [] : [`${file}: ${cited}: no such heading`];
      }),
    );
    expect(broken).toEqual([]);
  });
});
