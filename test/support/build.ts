// The repository's TypeScript built once per `vitest run`, for the child processes tests start (the
// CLI, `serve`, `worker`, a fault hook): `node <tree>/src/cli.js` instead of `node --import tsx
// src/cli.ts`. Through tsx, each start resolved and looked up ~300 modules through its loader, about
// 1 s of CPU more than the built file (docs/testing.md#how-long); a run starts a few hundred of them.
//
// The globalSetup of both projects: esbuild transpiles each file of src/, scripts/ and test/ on its
// own (no bundle: `import.meta.url`, worker threads and assets stay where the code expects them) into
// a temporary tree beside copies of their other files and links to the repository's other folders,
// and hands its path to the tests in CPS_TEST_BUILD; test/support/node-command.ts reads it. Without
// it (a script run through tsx, such as `npm run fault`), children run through tsx as before.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
/** The folders whose modules run in the children; everything else is linked as it is. */
const CODE = ['src', 'scripts', 'test'];

function filesUnder(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const file = path.join(dir, entry.name);
    return entry.isDirectory() ? filesUnder(file) : [file];
  });
}

/** Builds the tree in a new folder under `parent` and returns its path (`<tree>/src/cli.js`). */
export async function buildTree(parent: string): Promise<string> {
  // One level below the folder: src/server.ts looks for `../../dist/docs`, which stays inside it.
  const tree = path.join(parent, 'tree');
  fs.mkdirSync(tree, { recursive: true });
  for (const entry of fs.readdirSync(ROOT)) {
    if (CODE.includes(entry) || entry === '.git') continue;
    fs.symlinkSync(fs.realpathSync(path.join(ROOT, entry)), path.join(tree, entry));
  }
  const files = CODE.flatMap((dir) => filesUnder(path.join(ROOT, dir)));
  const code = files.filter((file) => /\.tsx?$/.test(file) && !file.endsWith('.d.ts'));
  // Copied, not linked: Node would load a linked module from its real path, beside the sources.
  for (const file of files.filter((file) => !code.includes(file))) {
    const copy = path.join(tree, path.relative(ROOT, file));
    fs.mkdirSync(path.dirname(copy), { recursive: true });
    fs.copyFileSync(file, copy);
  }
  await build({
    entryPoints: code,
    outdir: tree,
    outbase: ROOT,
    format: 'esm',
    platform: 'node',
    target: `node${process.versions.node}`,
    tsconfig: path.join(ROOT, 'tsconfig.json'),
    logLevel: 'error',
  });
  return tree;
}

let folder: string | undefined;

function remove(): void {
  if (folder) fs.rmSync(folder, { recursive: true, force: true });
  folder = undefined;
}

// Both projects name this setup, which vitest may load once for each: the first builds, for both.
const BUILT = Symbol.for('cps.test.build');
type WithBuild = typeof globalThis & { [BUILT]?: Promise<string> };

export async function setup(): Promise<void> {
  const global = globalThis as WithBuild;
  global[BUILT] ??= (async () => {
    folder = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-test-build-'));
    process.once('exit', remove);
    return buildTree(folder);
  })();
  process.env.CPS_TEST_BUILD = await global[BUILT];
}

export function teardown(): void {
  remove();
  delete (globalThis as WithBuild)[BUILT];
}
