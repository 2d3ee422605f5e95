// `worker` below the serves between sessions: with the kernel's autogroups a thread's nice counts
// only inside its session, so a worker leading a session of its own (as a service unit runs it)
// lowers the session's autogroup by CPS_WORKER_NICE, and one sharing a session leaves it alone.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { autogroupNice } from '../../src/operations/thread-priority.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const haveAutogroups = process.platform === 'linux' && autogroupNice() !== null;
let dir: string;

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-autogroup-'));
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

/** `worker` on a SQLite file of its own, in a session of its own or the test's; its autogroup's nice once it runs its workers. */
async function workerAutogroupNice(
  ownSession: boolean,
  env: Record<string, string> = {},
): Promise<{ nice: number | null; output: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli.ts', 'worker'], {
    cwd: ROOT,
    env: { ...process.env, CPS_DB_PATH: path.join(dir, `worker-${ownSession}-${Date.now()}.db`), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: ownSession,
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  try {
    const deadline = Date.now() + 60_000;
    while (!output.includes('webhook dispatcher and image mirroring running')) {
      if (Date.now() > deadline || child.exitCode !== null) throw new Error(`the worker did not start:\n${output}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    return { nice: autogroupNice(child.pid ?? -1), output };
  } finally {
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
  }
}

describe.runIf(haveAutogroups)("the worker's session below the serves' (autogroups)", () => {
  it('lowers its autogroup by CPS_WORKER_NICE when it leads a session of its own, as a service unit runs it', async () => {
    const { nice, output } = await workerAutogroupNice(true);
    // A new session's autogroup starts at nice 0.
    expect(nice).toBe(10);
    expect(output).toContain("the worker's session (its autogroup) lowered");
  }, 90_000);

  it("leaves a shared session's autogroup alone: lowering it would lower every process of the session", async () => {
    const before = autogroupNice();
    const { nice, output } = await workerAutogroupNice(false);
    expect(nice).toBe(before);
    expect(autogroupNice()).toBe(before);
    expect(output).toContain("the worker shares its session: its autogroup's priority left alone");
  }, 90_000);

  it('leaves it alone with CPS_WORKER_NICE=0', async () => {
    const { nice } = await workerAutogroupNice(true, { CPS_WORKER_NICE: '0' });
    expect(nice).toBe(0);
  }, 90_000);
});
