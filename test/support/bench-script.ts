// A benchmark script of scripts/ run as `npm run bench:*` runs it (test/scale: CI-sized runs that
// check a benchmark's shape): `node --import tsx scripts/<script> ...args` from the repository's
// root, its whole stdout (the --json result) and the end of its stderr (its progress). The services it
// starts run from the tree built for this vitest run (moduleArguments of scripts/bench/baseline.ts).
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** Runs the script; SIGTERM after timeoutMs (the benches stop their services and remove their files on it). */
export function runBenchScript(
  script: string,
  args: string[],
  timeoutMs: number,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', `scripts/bench/${script}`, ...args], {
      cwd: ROOT,
      // The benches pass no CPS_* setting of this process on to their services anyway.
      env: process.env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk.toString()).slice(-20_000);
    });
    const timer = setTimeout(() => child.kill('SIGTERM'), timeoutMs);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}
