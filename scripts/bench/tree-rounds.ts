// What the benchmarks that compare source trees side by side on one database share
// (bench-reprice.ts, bench-import-phases.ts): a child process per tree running the script with that
// tree's own src/, each engine's database in a temporary folder, and rounds that alternate the
// trees' order so that neither always runs at the machine's quieter moment.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { dataDirOf, startPostgresServer, type PostgresServer } from '../dev/postgres-server.js';

/** Runs `node [nodeArgs] --import tsx script args` in `tree`; resolves with its standard output. */
export function runInTree(
  tree: string,
  script: string,
  args: string[],
  options: { nodeArgs?: string[]; env?: Record<string, string> } = {},
): Promise<string> {
  const proc = spawn(process.execPath, [...(options.nodeArgs ?? []), '--import', 'tsx', script, ...args], {
    cwd: tree,
    env: { ...process.env, ...options.env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  proc.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
  return new Promise((resolve, reject) =>
    proc.on('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`${tree}: exited ${code}`)))),
  );
}

export const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!;

/** The database of one engine: a SQLite file, or a throwaway PostgreSQL server's URL and data folder. */
export interface EngineDatabase {
  engine: string;
  database: string;
  /** PostgreSQL's data folder, whose processes' CPU is the database's share (process-sampler.ts). */
  dataDir?: string;
}

/** Calls `body` with each engine's fresh database, in a temporary folder removed at the end. */
export async function onEachEngine(engines: string[], prefix: string, body: (db: EngineDatabase) => Promise<void>): Promise<void> {
  const temp = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  // The server runs as the postgres user: it must reach its folder inside.
  fs.chmodSync(temp, 0o711);
  let server: PostgresServer | undefined;
  try {
    for (const engine of engines) {
      if (engine === 'postgres') {
        server = await startPostgresServer({ dir: path.join(temp, 'pg'), durable: false });
        await body({ engine, database: server.url, dataDir: dataDirOf(server.dir) });
        await server.stop();
        server = undefined;
      } else {
        await body({ engine, database: path.join(temp, 'catalog.db') });
      }
    }
  } finally {
    await server?.stop();
    fs.rmSync(temp, { recursive: true, force: true });
  }
}

/** Each round runs every tree once, in order on even rounds and reversed on odd ones. */
export async function inAlternatingRounds(
  trees: string[],
  rounds: number,
  run: (tree: string, round: number) => Promise<void>,
): Promise<void> {
  for (let round = 0; round < rounds; round++) {
    for (const tree of round % 2 === 0 ? trees : [...trees].reverse()) await run(tree, round);
  }
}

/**
 * The service of `tree`'s own src/ on `database`, opened in a child as CPS_WORKERS=inline would
 * (this process drives the work), with its configuration.
 */
export async function serviceOfTree(tree: string, database: string, adminToken: string) {
  const env: Record<string, string> = {
    ...(database.startsWith('postgres') ? { CPS_DATABASE_URL: database } : { CPS_DB_PATH: database }),
    CPS_ADMIN_TOKEN: adminToken,
    CPS_DEMO_ON_EMPTY: 'false',
    CPS_WEBHOOK_ALLOW_HOSTS: '127.0.0.1',
  };
  const { loadConfig } = (await import(path.join(tree, 'src/config.ts'))) as typeof import('../../src/config.js');
  const { createService } = (await import(path.join(tree, 'src/service.ts'))) as typeof import('../../src/service.js');
  const { silentLogger } = (await import(path.join(tree, 'src/operations/log.ts'))) as typeof import('../../src/operations/log.js');
  const config = loadConfig({ ...process.env, ...env });
  return { config, service: createService(config, { logger: silentLogger }) };
}
