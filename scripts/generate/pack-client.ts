// `npm run pack:client`: the typed clients and receiver kit (src/client) as a package of its own,
// `catalog-publishing-client`, packed by `npm pack` into a tarball integrators install. It holds
// only the clients' compiled modules (and the types of the public and admin documents), and depends only on
// what they import at run time (openapi-fetch), at the ranges this repository's package.json
// pins: installing it pulls in none of the server's dependencies (SQLite, PostgreSQL, Hono).
// Usage: tsx scripts/generate/pack-client.ts [outDir]   (default dist/, prints the tarball's path)
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import { builtinModules } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

export const CLIENT_PACKAGE = 'catalog-publishing-client';
/** The package's README, as npm shows it: install, every helper with an example, the cursor, errors. */
export const CLIENT_README = 'src/client/README.md';
/** The package's entry points: the read client, the admin client for merchants' systems, and the receiver kit (Node: node:crypto). */
const ENTRY_POINTS = { '.': 'src/client/index', './admin': 'src/client/admin', './webhooks': 'src/client/webhooks' } as const;

/** The bare specifiers a compiled module imports (`import … from 'x'`, `export … from 'x'`, `import('x')`). */
function bareImports(js: string): string[] {
  const code = js.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, ''); // not the examples in comments
  const specifiers = [...code.matchAll(/(?:from|import)\s*\(?\s*['"]([^'"]+)['"]/g)].map((m) => m[1]!);
  return specifiers
    .filter((s) => !s.startsWith('.') && !s.startsWith('node:') && !builtinModules.includes(s))
    .map((s) => (s.startsWith('@') ? s.split('/').slice(0, 2).join('/') : s.split('/')[0]!));
}

/** Builds the client into a staging folder, writes its manifest and packs it; returns the tarball's path. */
export async function packClient(outDir: string): Promise<string> {
  const manifest = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
  const staging = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-client-package-'));
  try {
    // The repository's compiler options; only the entry points and what they import.
    fs.writeFileSync(
      path.join(staging, 'tsconfig.json'),
      JSON.stringify({
        extends: path.join(root, 'tsconfig.json'),
        compilerOptions: {
          noEmit: false,
          sourceMap: false,
          declaration: true,
          rootDir: root,
          outDir: path.join(staging, 'package', 'dist'),
          typeRoots: [path.join(root, 'node_modules', '@types')],
        },
        files: Object.values(ENTRY_POINTS).map((entry) => path.join(root, `${entry}.ts`)),
        include: [],
      }),
    );
    await run(process.execPath, [path.join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', path.join(staging, 'tsconfig.json')]);

    const packageDir = path.join(staging, 'package');
    const emitted = fs.readdirSync(path.join(packageDir, 'dist'), { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.js'));
    const imported = new Set(emitted.flatMap((file) => bareImports(fs.readFileSync(path.join(packageDir, 'dist', file), 'utf8'))));
    const dependencies: Record<string, string> = {};
    for (const name of [...imported].sort()) {
      const range = manifest.dependencies?.[name];
      if (!range) throw new Error(`the client imports ${name}, which is not a dependency in package.json`);
      dependencies[name] = range;
    }
    fs.writeFileSync(
      path.join(packageDir, 'package.json'),
      `${JSON.stringify(
        {
          name: CLIENT_PACKAGE,
          version: manifest.version,
          description:
            "Typed clients (public API, admin API for merchants' systems) and webhook receiver kit for the Catalog Publishing Service.",
          type: 'module',
          license: manifest.license,
          engines: manifest.engines,
          exports: Object.fromEntries(
            Object.entries(ENTRY_POINTS).map(([subpath, entry]) => [
              subpath,
              {
                types: `./dist/${entry}.d.ts`,
                import: `./dist/${entry}.js`,
              },
            ]),
          ),
          files: ['dist'],
          dependencies,
        },
        null,
        2,
      )}\n`,
    );
    // What npm shows for the package: written by hand beside the client's code (test/client/package.test.ts holds it to the exports).
    fs.copyFileSync(path.join(root, CLIENT_README), path.join(packageDir, 'README.md'));

    fs.mkdirSync(outDir, { recursive: true });
    const { stdout } = await run('npm', ['pack', '--pack-destination', path.resolve(outDir), '--json'], { cwd: packageDir });
    const [packed] = JSON.parse(stdout) as { filename: string }[];
    return path.join(path.resolve(outDir), packed!.filename);
  } finally {
    fs.rmSync(staging, { recursive: true, force: true });
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  console.log(await packClient(process.argv[2] ?? path.join(root, 'dist')));
}
