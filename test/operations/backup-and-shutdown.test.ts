// Operations: an online backup that restores to the same catalog, and a graceful SIGTERM of
// `serve` (and of `worker`) that stops accepting, lets the work in flight finish and closes the
// database cleanly.
import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../faults/harness.js';
import { nodeArguments } from '../support/node-command.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const run = promisify(execFile);
let dir: string;

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-ops-'));
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const cli = (...args: string[]) =>
  run(process.execPath, nodeArguments('src/cli.ts', args), {
    cwd: ROOT,
    env: { ...process.env, CPS_DB_PATH: path.join(dir, 'unused.db') },
  });

function count(file: string, sql: string): number {
  const db = new Database(file, { readonly: true });
  try {
    return db.prepare(sql).pluck().get() as number;
  } finally {
    db.close();
  }
}

describe('backup', () => {
  it('takes an online backup that holds the same catalog, and refuses to overwrite a file', async () => {
    const source = path.join(dir, 'source.db');
    await cli('demo', '--db', source, '--products', '30', '--json');
    const backup = path.join(dir, 'backups', 'copy.db');
    const { stdout } = await cli('backup', '--db', source, '--to', backup);
    expect(stdout).toContain('backed up');
    for (const table of ['products', 'published_products', 'changes', 'api_keys']) {
      expect(count(backup, `SELECT count(*) FROM ${table}`)).toBe(count(source, `SELECT count(*) FROM ${table}`));
    }
    expect(count(backup, 'SELECT count(*) FROM products')).toBe(30);
    await expect(cli('backup', '--db', source, '--to', backup)).rejects.toMatchObject({ code: 2 });
  });
});

/** The JSON log lines among a process's output (the start banner is plain text). */
function jsonLines(output: string): Record<string, unknown>[] {
  return output
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line));
}

async function waitFor(read: () => string, text: string, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!read().includes(text) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  expect(read()).toContain(text);
}

describe('graceful shutdown', () => {
  it('on SIGTERM answers /readyz 503 for CPS_SHUTDOWN_DELAY_MS while still serving, then exits 0 leaving a sound database, logging each step as JSON', async () => {
    const db = path.join(dir, 'serve.db');
    const port = await freePort();
    const child = spawn(process.execPath, nodeArguments('src/cli.ts', ['serve']), {
      cwd: ROOT,
      env: {
        ...process.env,
        CPS_DB_PATH: db,
        CPS_PORT: String(port),
        CPS_DEMO_PRODUCTS: '20',
        CPS_ADMIN_TOKEN: 'adm_ops_test',
        CPS_SHUTDOWN_DELAY_MS: '3000',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    await waitFor(() => output, '"msg":"listening"');
    const response = await fetch(`http://127.0.0.1:${port}/openapi.json`);
    expect(response.status).toBe(200);
    expect((await fetch(`http://127.0.0.1:${port}/readyz`)).status).toBe(200);
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    child.kill('SIGTERM');
    await waitFor(() => output, '"msg":"shutting down"');
    // Not ready, but still answering (and still serving the API) during the delay.
    const draining = await fetch(`http://127.0.0.1:${port}/readyz`);
    expect(draining.status).toBe(503);
    expect((await draining.json()).checks.shutdown).toBe('shutting down');
    expect((await fetch(`http://127.0.0.1:${port}/openapi.json`)).status).toBe(200);
    expect(await exited).toBe(0);
    const messages = jsonLines(output).map((line) => line.msg);
    expect(messages).toEqual(expect.arrayContaining(['listening', 'request', 'shutting down', 'stopped cleanly']));
    expect(messages.indexOf('shutting down')).toBeLessThan(messages.indexOf('stopped cleanly'));
    // A configured admin token is not printed, in the banner or the logs.
    expect(output).not.toContain('adm_ops_test');
    const check = new Database(db, { readonly: true });
    try {
      expect(check.pragma('integrity_check', { simple: true })).toBe('ok');
      expect(check.prepare('SELECT count(*) FROM products').pluck().get()).toBe(20);
    } finally {
      check.close();
    }
  }, 60_000);

  it('worker answers the probes and /metrics on CPS_OPS_PORT, and stops on SIGTERM with exit code 0', async () => {
    const db = path.join(dir, 'worker.db');
    await cli('demo', '--db', db, '--products', '5', '--json');
    const port = await freePort();
    const child = spawn(process.execPath, nodeArguments('src/cli.ts', ['worker']), {
      cwd: ROOT,
      env: { ...process.env, CPS_DB_PATH: db, CPS_OPS_PORT: String(port) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    await waitFor(() => output, 'webhook dispatcher and image mirroring running');
    const base = `http://127.0.0.1:${port}`;
    expect(await (await fetch(`${base}/healthz`)).json()).toEqual({ status: 'ok' });
    expect((await fetch(`${base}/readyz`)).status).toBe(200);
    const metrics = await (await fetch(`${base}/metrics`)).text();
    expect(metrics).toContain('cps_webhook_deliveries_total{outcome="succeeded"} 0');
    expect(metrics).toMatch(/cps_images\{state="pending"\} \d+/);
    // The worker's own event loop and statements (its dispatcher and mirror, the probes' reads).
    expect(metrics).toMatch(/^cps_event_loop_delay_max_seconds \d/m);
    expect(metrics).toMatch(/^cps_db_statement_duration_seconds_count\{engine="sqlite",statement="storage\.probe"\} [1-9]/m);
    expect((await fetch(`${base}/v1/stores`)).status).toBe(404);
    if (process.platform === 'linux') {
      // Every thread of the worker runs CPS_WORKER_NICE (10 by default) below the priority it started
      // with: on a machine shared with serve, the threads answering requests get a core first (nice
      // is field 19 of /proc/PID/task/TID/stat, the 17th after the command name).
      const niceness = fs
        .readdirSync(`/proc/${child.pid}/task`)
        .map((tid) => fs.readFileSync(`/proc/${child.pid}/task/${tid}/stat`, 'utf8'))
        .map((stat) => Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]));
      expect(niceness.length).toBeGreaterThan(1);
      expect(new Set(niceness)).toEqual(new Set([Math.min(19, os.getPriority() + 10)]));
    }
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(jsonLines(output).map((line) => line.msg)).toEqual(expect.arrayContaining(['shutting down', 'stopped cleanly']));
  }, 60_000);

  it('worker exits 1 with a JSON fatal line, before taking any work, when CPS_OPS_PORT is in use', async () => {
    const db = path.join(dir, 'worker-busy.db');
    await cli('demo', '--db', db, '--products', '3', '--json');
    const busy = net.createServer();
    await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
    try {
      const port = (busy.address() as net.AddressInfo).port;
      const result = await run(process.execPath, nodeArguments('src/cli.ts', ['worker']), {
        cwd: ROOT,
        env: { ...process.env, CPS_DB_PATH: db, CPS_OPS_PORT: String(port) },
      }).then(
        () => ({ code: 0, stdout: '' }),
        (error: { code: number; stdout: string }) => error,
      );
      expect(result.code).toBe(1);
      const fatal = jsonLines(result.stdout).find((line) => line.level === 'fatal');
      expect(fatal).toMatchObject({ msg: 'failed to start: the operations port cannot be listened on', port });
      expect(result.stdout).not.toContain('webhook dispatcher and image mirroring running');
    } finally {
      busy.close();
    }
  }, 60_000);
});
