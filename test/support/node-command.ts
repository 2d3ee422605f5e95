// How tests start a module of the repository in a child process: from the tree test/support/build.ts
// built for this run (CPS_TEST_BUILD), else through tsx (a script run outside vitest, such as
// `npm run fault`). Either way one Node process whose pid is the child's.
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

/** The built file of a module given as a path in the repository (relative to it, or absolute under it). */
function built(tree: string, module: string): string {
  const relative = path.isAbsolute(module) ? path.relative(ROOT, module) : module;
  return path.join(tree, relative.replace(/\.tsx?$/, '.js'));
}

/**
 * The arguments after `process.execPath` that run `module` (say `src/cli.ts`) with `args`, loading
 * each of `preload` first (`--import`): a test's fault hooks, run in the same process before it.
 */
export function nodeArguments(module: string, args: readonly string[] = [], preload: readonly string[] = []): string[] {
  const tree = process.env.CPS_TEST_BUILD;
  if (!tree) return ['--import', 'tsx', ...preload.flatMap((hook) => ['--import', hook]), module, ...args];
  return [...preload.flatMap((hook) => ['--import', built(tree, hook)]), built(tree, module), ...args];
}
