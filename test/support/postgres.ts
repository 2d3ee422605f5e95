// PostgreSQL for the test suite: the `postgres` project's globalSetup starts ONE real server per
// `vitest run` from the binaries installed here (scripts/dev/postgres-server.ts: initdb -A trust
// --no-sync, fsync off, 127.0.0.1 on a free port, a temporary folder owned by `postgres`), builds
// one migrated template database, and stops and deletes everything at the end (also on Ctrl-C).
// Each test then gets a fresh database in ~20 ms: CREATE DATABASE … TEMPLATE (freshDatabase()).
//
// Without server binaries (or with CPS_TEST_PG_BINARIES=none), tests run on the embedded
// PostgreSQL of @electric-sql/pglite (test/support/pglite.ts: one connection), and the tests that
// need several connections are skipped by name; CPS_TEST_REQUIRE_POSTGRES=1 (CI) makes missing
// binaries a failure instead.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { inject } from 'vitest';
import type { TestProject } from 'vitest/node';
import { findPostgresBinaries, startPostgresServer, type PostgresServer } from '../../scripts/dev/postgres-server.js';

/** What the setup hands the tests (serializable). */
export type TestPostgres = { kind: 'server'; url: string; template: string; version: string } | { kind: 'pglite'; reason: string };

declare module 'vitest' {
  export interface ProvidedContext {
    postgres: TestPostgres;
  }
}

const TEMPLATE = 'cps_template';

// ---- globalSetup (runs in vitest's main process) ----

let server: PostgresServer | undefined;
let folder: string | undefined;

function removeEverything(): void {
  server?.stopSync('immediate');
  server = undefined;
  if (folder) fs.rmSync(folder, { recursive: true, force: true });
  folder = undefined;
}

function onSignal(signal: NodeJS.Signals): void {
  removeEverything();
  process.kill(process.pid, signal);
}

export async function setup(project: TestProject): Promise<void> {
  const bindir = process.env.CPS_TEST_PG_BINARIES === 'none' ? undefined : findPostgresBinaries();
  if (!bindir) {
    const reason =
      process.env.CPS_TEST_PG_BINARIES === 'none'
        ? 'CPS_TEST_PG_BINARIES=none'
        : 'no PostgreSQL server binaries (initdb, pg_ctl, postgres) under /usr/lib/postgresql/*/bin, pg_config --bindir or PATH';
    if (process.env.CPS_TEST_REQUIRE_POSTGRES === '1') {
      throw new Error(`CPS_TEST_REQUIRE_POSTGRES=1 but ${reason}: install PostgreSQL's server package (Debian: postgresql)`);
    }
    console.warn(
      `[postgres] ${reason}: the postgres project runs on the embedded @electric-sql/pglite (one connection); multi-connection tests are skipped`,
    );
    project.provide('postgres', { kind: 'pglite', reason });
    return;
  }
  const started = Date.now();
  folder = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-pg-test-'));
  process.once('exit', removeEverything);
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  server = await startPostgresServer({ bindir, dir: folder, durable: false, maxConnections: 400 });
  const admin = new pg.Client(server.url);
  await admin.connect();
  let version: string;
  try {
    version = (await admin.query<{ server_version: string }>('SHOW server_version')).rows[0]!.server_version;
    await admin.query(`CREATE DATABASE ${TEMPLATE}`);
  } finally {
    await admin.end();
  }
  // The schema once: every test's database is a file copy of it.
  const { openPostgresStorage } = await import('../../src/storage/postgres/index.js');
  const storage = openPostgresStorage(server.urlOf(TEMPLATE), { poolSize: 1 });
  try {
    await storage.ready;
  } finally {
    await storage.close();
  }
  console.log(`[postgres] PostgreSQL ${version} on ${server.url} (${bindir}), migrated template in ${Date.now() - started} ms`);
  project.provide('postgres', { kind: 'server', url: server.url, template: TEMPLATE, version });
}

export async function teardown(): Promise<void> {
  if (server) await server.stop('immediate').catch(() => undefined);
  server = undefined;
  removeEverything();
  process.off('exit', removeEverything);
  process.off('SIGINT', onSignal);
  process.off('SIGTERM', onSignal);
}

// ---- in the tests ----

/** The PostgreSQL the setup provided. */
export const testPostgres = (): TestPostgres => inject('postgres');

let created = 0;

export interface FreshDatabase {
  name: string;
  url: string;
  drop(): Promise<void>;
}

/** A new database with every migration applied (a copy of the template), on the test server. */
export async function freshDatabase(): Promise<FreshDatabase> {
  const postgres = testPostgres();
  if (postgres.kind !== 'server') throw new Error(`freshDatabase needs a PostgreSQL server (${postgres.reason})`);
  const name = `cps_${process.pid}_${++created}`;
  await onServer(postgres.url, `CREATE DATABASE ${name} TEMPLATE ${postgres.template} STRATEGY FILE_COPY`);
  const url = postgres.url.replace(/\/[^/]*$/, `/${name}`);
  return { name, url, drop: () => onServer(postgres.url, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) };
}

async function onServer(url: string, sql: string): Promise<void> {
  const client = new pg.Client(url);
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}
