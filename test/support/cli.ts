// The command line as tests run it: `src/cli.ts` in a child process of its own, from the repository.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { nodeArguments } from './node-command.js';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs the CLI with `args`, `env` over this process's environment; resolves with its exit code and
 * output, never rejects on a non-zero exit. One Node process on the run's built tree
 * (test/support/node-command.ts), not `npx tsx` (npm's, tsx's launcher, then Node with the loader):
 * on a loaded machine each start of those costs seconds.
 */
export async function runCli(args: string[], env: Record<string, string> = {}): Promise<CliResult> {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, nodeArguments('src/cli.ts', args), {
      cwd: ROOT,
      env: { ...process.env, ...env },
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof failed.code === 'number' ? failed.code : -1, stdout: failed.stdout ?? '', stderr: failed.stderr ?? '' };
  }
}
