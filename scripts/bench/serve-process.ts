// The real `serve` of this working tree in a child process, as `npm start` runs it (worker threads,
// access log), for the benchmarks that measure the process itself (bench:live, bench:exhaust): its
// database (an SQLite file, or a database on a throwaway PostgreSQL server from the installed
// binaries), its start and stop, and plain requests to it with node:http.
import { spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { inheritedEnv, keepOutput, moduleArguments, stopChild, track } from './baseline.js';
import { freePort, startPostgresServer, type PostgresServer } from '../dev/postgres-server.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

export type Engine = 'sqlite' | 'postgres';

export interface Serve {
  base: string;
  child: ChildProcess;
  output: () => string;
  stop: () => Promise<void>;
}

const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
/** Kept apart from the clients' agent: /metrics and admin calls never queue behind them. */
export const adminAgent = new http.Agent({ keepAlive: true });

export interface RequestOptions {
  method?: string;
  headers?: Record<string, string>;
  body?: string;
  agent?: http.Agent | false;
}

/**
 * One request; sent again on a new connection when a kept-alive one turns out closed by the server
 * before any answer (its keep-alive time-out between two rounds).
 */
export async function request(base: string, pathAndQuery: string, options: RequestOptions = {}): Promise<{ status: number; body: string }> {
  try {
    return await requestOnce(base, pathAndQuery, options);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ECONNRESET' || options.agent === false) throw error;
    return requestOnce(base, pathAndQuery, { ...options, agent: false });
  }
}

function requestOnce(base: string, pathAndQuery: string, options: RequestOptions): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    let answered = false;
    const req = http.request(
      `${base}${pathAndQuery}`,
      { method: options.method ?? 'GET', headers: options.headers, agent: options.agent ?? agent },
      (res) => {
        answered = true;
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          body += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode!, body }));
        res.on('error', reject);
      },
    );
    req.on('error', (error: NodeJS.ErrnoException) =>
      reject(answered && error.code === 'ECONNRESET' ? new Error('reset after answering') : error),
    );
    req.end(options.body);
  });
}

export interface ServeOptions {
  adminToken: string;
  /** CPS_* settings of this run (the bench's own CPS_* environment is never passed on). */
  env: Record<string, string>;
  /** The soft limit of open descriptors serve starts with (`ulimit -n`); unset: this process's. */
  nofile?: number;
}

/** `serve` on 127.0.0.1, a free port; resolves once /readyz answers 200. */
export async function startServe({ adminToken, env, nofile }: ServeOptions): Promise<Serve> {
  const port = await freePort();
  const node = [
    process.execPath,
    ...(process.env.BENCH_SERVE_NODE_ARGS?.split(' ').filter(Boolean) ?? []),
    ...moduleArguments(root, 'src/cli.ts'),
    'serve',
  ];
  // `exec` keeps serve's pid the child's (the benches read its /proc).
  const [command, args] =
    nofile === undefined ? [node[0]!, node.slice(1)] : ['sh', ['-c', `ulimit -n ${nofile} && exec "$@"`, 'sh', ...node]];
  const child = track(
    spawn(command, args, {
      cwd: root,
      stdio: ['ignore', 'ignore', 'pipe'],
      env: {
        ...inheritedEnv(),
        CPS_DEMO_ON_EMPTY: 'false',
        // The demo's image hosts do not exist: no mirroring noise (unless the run's settings turn it on: bench:cost).
        CPS_IMAGE_MIRRORING: 'false',
        ...env,
        CPS_PORT: String(port),
        CPS_HOST: '127.0.0.1',
        CPS_ADMIN_TOKEN: adminToken,
      },
    }),
  );
  const output = keepOutput(child);
  if (process.env.BENCH_SERVE_STDERR) child.stderr?.on('data', (d) => process.stderr.write(d));
  const base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`serve exited (${child.exitCode}):\n${output()}`);
    const ready = await request(base, '/readyz').catch(() => undefined);
    if (ready?.status === 200) return { base, child, output, stop: () => stopChild(child) };
    if (Date.now() > deadline) throw new Error(`serve did not get ready:\n${output()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** One sample of /metrics: the value of `name{labels}` (0 when absent). */
export async function metric(serve: Serve, name: string, labels = ''): Promise<number> {
  const { body } = await request(serve.base, '/metrics', { agent: adminAgent });
  const line = body.split('\n').find((l) => l.startsWith(`${name}${labels} `) || (labels === '' && l.startsWith(`${name} `)));
  return line ? Number(line.split(' ').at(-1)) : 0;
}

/** The database of a run: `dir`/`name`.db, or database `name` on a throwaway PostgreSQL server in `dir`/postgres (stop it with `postgres.stop`). */
export async function benchDatabase(
  engine: Engine,
  dir: string,
  name: string,
): Promise<{ database: string; settings: Record<string, string>; postgres?: PostgresServer }> {
  if (engine === 'sqlite') {
    const database = path.join(dir, `${name}.db`);
    return { database, settings: { CPS_DB_PATH: database } };
  }
  const postgres = await startPostgresServer({ dir: path.join(dir, 'postgres'), durable: false });
  const client = new pg.Client({ connectionString: postgres.url });
  await client.connect();
  await client.query(`CREATE DATABASE ${name}`);
  await client.end();
  const database = postgres.urlOf(name);
  return { database, settings: { CPS_DATABASE_URL: database }, postgres };
}
