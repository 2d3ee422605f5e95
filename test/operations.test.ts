// Operations: an online backup that restores to the same catalog, and a graceful SIGTERM of
// `serve` that stops accepting, lets the work in flight finish and closes the database cleanly.
import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const run = promisify(execFile);
let dir: string;

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-ops-'));
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const cli = (...args: string[]) => run('npx', ['tsx', 'src/cli.ts', ...args], { cwd: ROOT, env: { ...process.env, CPS_DB_PATH: path.join(dir, 'unused.db') } });

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

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

describe('graceful shutdown', () => {
  it('stops on SIGTERM with exit code 0 and leaves a sound database', async () => {
    const db = path.join(dir, 'serve.db');
    const port = await freePort();
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli.ts', 'serve'], {
      cwd: ROOT,
      env: { ...process.env, CPS_DB_PATH: db, CPS_PORT: String(port), CPS_DEMO_PRODUCTS: '20', CPS_ADMIN_TOKEN: 'adm_ops_test' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => { output += chunk.toString(); });
    const deadline = Date.now() + 30_000;
    while (!output.includes('listening on') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(output).toContain('listening on');
    const response = await fetch(`http://127.0.0.1:${port}/openapi.json`);
    expect(response.status).toBe(200);
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    const check = new Database(db, { readonly: true });
    try {
      expect(check.pragma('integrity_check', { simple: true })).toBe('ok');
      expect(check.prepare('SELECT count(*) FROM products').pluck().get()).toBe(20);
    } finally {
      check.close();
    }
  }, 60_000);
});
