// A throwaway PostgreSQL server for the engine's own tests: initdb and pg_ctl from the local
// binaries (Debian's postgresql package) in a temporary folder, on a free loopback port, run as the
// `postgres` user when the tests run as root (PostgreSQL refuses root). The shared harness
// (test/support/postgres.ts) may replace this.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export const POSTGRES_BIN = process.env.CPS_PG_BIN ?? ['/usr/lib/postgresql/17/bin', '/usr/lib/postgresql/16/bin', '/usr/lib/postgresql/15/bin']
  .find((dir) => fs.existsSync(path.join(dir, 'pg_ctl')));

export interface TestPostgres {
  url: string;
  /** A URL for a new, empty database on this server. */
  createDatabase(name: string): Promise<string>;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

export async function startTestPostgres(): Promise<TestPostgres> {
  if (!POSTGRES_BIN) throw new Error('no PostgreSQL server binaries under /usr/lib/postgresql/<version>/bin');
  const root = process.getuid?.() === 0;
  const asServer = (tool: string, args: string[]) =>
    root ? run('runuser', ['-u', 'postgres', '--', path.join(POSTGRES_BIN!, tool), ...args]) : run(path.join(POSTGRES_BIN!, tool), args);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-pg-'));
  fs.chmodSync(dir, 0o755);
  if (root) await run('chown', ['postgres', dir]);
  const data = path.join(dir, 'data');
  // UTF8 with the C locale: payload bytes round-trip, and text sorts by bytes (as on SQLite).
  await asServer('initdb', ['-D', data, '-A', 'trust', '-U', 'postgres', '-E', 'UTF8', '--locale=C', '--no-sync']);
  const port = await freePort();
  await asServer('pg_ctl', ['-D', data, '-l', path.join(dir, 'log'), '-w', '-o',
    `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off`, 'start']);
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  return {
    url,
    async createDatabase(name) {
      const { default: pg } = await import('pg');
      const client = new pg.Client(url);
      await client.connect();
      try {
        await client.query(`CREATE DATABASE "${name}"`);
      } finally {
        await client.end();
      }
      return `postgres://postgres@127.0.0.1:${port}/${name}`;
    },
    async stop() {
      await asServer('pg_ctl', ['-D', data, '-m', 'fast', '-w', 'stop']);
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
