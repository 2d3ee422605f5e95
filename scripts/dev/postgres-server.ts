// A PostgreSQL server from the binaries installed on this machine (Debian's `postgresql` package
// puts initdb, pg_ctl and postgres under /usr/lib/postgresql/<version>/bin): found, initialised in
// a folder, started on 127.0.0.1 and stopped again. Shared by the test setup
// (test/support/postgres.ts: one throwaway server per `vitest run`) and `npm run pg:local`
// (scripts/dev/pg-local.ts: a server to try the service on). PostgreSQL refuses to run as root, so
// when this process is root every command runs as the `postgres` user (runuser).
import { execFile, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** The folder holding initdb, pg_ctl and postgres, or undefined when this machine has none. */
export function findPostgresBinaries(): string | undefined {
  const candidates: string[] = [];
  // Debian/Ubuntu: one folder per major version; the highest first.
  const debian = '/usr/lib/postgresql';
  if (fs.existsSync(debian)) {
    const versions = fs
      .readdirSync(debian)
      .filter((name) => /^\d+(\.\d+)?$/.test(name))
      .sort((a, b) => Number(b) - Number(a));
    for (const version of versions) candidates.push(path.join(debian, version, 'bin'));
  }
  try {
    candidates.push(execFileSync('pg_config', ['--bindir'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim());
  } catch {
    // no pg_config on PATH
  }
  candidates.push(...(process.env.PATH ?? '').split(path.delimiter).filter(Boolean));
  return candidates.find((dir) => ['initdb', 'pg_ctl', 'postgres'].every((tool) => isExecutable(path.join(dir, tool))));
}

function isExecutable(file: string): boolean {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

/** A port nobody listens on right now on 127.0.0.1. */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

const isRoot = () => typeof process.getuid === 'function' && process.getuid() === 0;

/** The command line that runs a server binary: as `postgres` when we are root. */
function asServerUser(binary: string, args: string[]): [string, string[]] {
  return isRoot() ? ['runuser', ['-u', 'postgres', '--', binary, ...args]] : [binary, args];
}

export interface PostgresServerOptions {
  /** Folder of the binaries (default: findPostgresBinaries()). */
  bindir?: string;
  /** The server's folder: `data` (the cluster), `socket` and `log` go inside; created when missing. */
  dir: string;
  /** Port on 127.0.0.1 (default: a free one, retried when another process takes it first). */
  port?: number;
  /** Throwaway servers (tests): no fsync, no full-page writes, commits not waited for. */
  durable?: boolean;
  maxConnections?: number;
  /** More server settings, each `name=value` (passed as `-c name=value`). */
  settings?: string[];
}

export interface PostgresServer {
  bindir: string;
  dir: string;
  port: number;
  /** postgres://postgres@127.0.0.1:<port>/postgres (trust authentication on loopback). */
  url: string;
  /** The URL of another database on this server. */
  urlOf(database: string): string;
  stop(mode?: 'fast' | 'immediate'): Promise<void>;
  /** stop() for an exit handler: synchronous, never throws. */
  stopSync(mode?: 'fast' | 'immediate'): void;
}

export const dataDirOf = (dir: string) => path.join(dir, 'data');

/** Initialises the cluster in `dir/data` unless one is there; returns whether it did. */
export async function initCluster(bindir: string, dir: string): Promise<boolean> {
  fs.mkdirSync(dir, { recursive: true });
  if (isRoot()) chownToServerUser(dir);
  const data = dataDirOf(dir);
  if (fs.existsSync(path.join(data, 'PG_VERSION'))) return false;
  const [command, args] = asServerUser(path.join(bindir, 'initdb'), [
    '-D',
    data,
    '-A',
    'trust',
    '-U',
    'postgres',
    '-E',
    'UTF8',
    '--locale=C',
    '--no-sync',
    '--no-instructions',
  ]);
  await run(command, args, { cwd: dir });
  return true;
}

function chownToServerUser(dir: string): void {
  const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
  const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
  fs.chownSync(dir, uid, gid);
}

/** Initialises (when needed) and starts a server in options.dir; resolves once it accepts connections. */
export async function startPostgresServer(options: PostgresServerOptions): Promise<PostgresServer> {
  const bindir = options.bindir ?? findPostgresBinaries();
  if (!bindir) throw new Error('No PostgreSQL server binaries found (looked in /usr/lib/postgresql/*/bin, pg_config --bindir and PATH)');
  const dir = path.resolve(options.dir);
  await initCluster(bindir, dir);
  const socket = path.join(dir, 'socket');
  fs.mkdirSync(socket, { recursive: true });
  if (isRoot()) chownToServerUser(socket);
  const settings = [
    '-c listen_addresses=127.0.0.1',
    `-k ${socket}`,
    `-c max_connections=${options.maxConnections ?? 200}`,
    ...(options.durable === false ? ['-c fsync=off', '-c synchronous_commit=off', '-c full_page_writes=off'] : []),
    ...(options.settings ?? []).map((setting) => `-c ${setting}`),
  ];
  for (let attempt = 1; ; attempt++) {
    const port = options.port ?? (await freePort());
    const [command, args] = asServerUser(path.join(bindir, 'pg_ctl'), [
      '-D',
      dataDirOf(dir),
      '-l',
      path.join(dir, 'log'),
      '-w',
      '-t',
      '60',
      '-o',
      `-p ${port} ${settings.join(' ')}`,
      'start',
    ]);
    try {
      await run(command, args, { cwd: dir });
      return serverAt(bindir, dir, port);
    } catch (error) {
      // Another process may have taken the free port between our check and the server's bind.
      if (options.port !== undefined || attempt >= 3) {
        throw new Error(`pg_ctl start failed: ${(error as Error).message}\n${tail(path.join(dir, 'log'))}`, { cause: error });
      }
    }
  }
}

function serverAt(bindir: string, dir: string, port: number): PostgresServer {
  const urlOf = (database: string) => `postgres://postgres@127.0.0.1:${port}/${database}`;
  const stopArgs = (mode: string) => asServerUser(path.join(bindir, 'pg_ctl'), ['-D', dataDirOf(dir), '-m', mode, '-w', 'stop']);
  return {
    bindir,
    dir,
    port,
    url: urlOf('postgres'),
    urlOf,
    async stop(mode = 'fast') {
      const [command, args] = stopArgs(mode);
      await run(command, args, { cwd: dir });
    },
    stopSync(mode = 'immediate') {
      const [command, args] = stopArgs(mode);
      try {
        execFileSync(command, args, { cwd: dir, stdio: 'ignore' });
      } catch {
        // already stopped
      }
    },
  };
}

/** The server running in `dir` (postmaster.pid's port), or undefined when none is. */
export function runningServer(dir: string, bindir = findPostgresBinaries()): PostgresServer | undefined {
  const pidFile = path.join(dataDirOf(path.resolve(dir)), 'postmaster.pid');
  if (!bindir || !fs.existsSync(pidFile)) return undefined;
  // postmaster.pid: pid, data dir, start time, port, socket dir, listen address, ...
  const lines = fs.readFileSync(pidFile, 'utf8').split('\n');
  const pid = Number(lines[0]);
  try {
    process.kill(pid, 0);
  } catch {
    return undefined;
  }
  return serverAt(bindir, path.resolve(dir), Number(lines[3]));
}

function tail(file: string): string {
  try {
    return fs.readFileSync(file, 'utf8').split('\n').slice(-20).join('\n');
  } catch {
    return '';
  }
}
