// Which storage engine the tests run on, chosen in one place: CPS_TEST_ENGINE, set per vitest
// project (vitest.config.ts: `sqlite` runs everything, `postgres` the HTTP, feed, webhook, image,
// fault and storage suites). Every test world opens its database here.
//
// Tests that only make sense on one engine say so in their name and skip on the other:
//   sqliteOnly.it('SQLite only: ...')    file paths, WAL, backups of the file, another process's lock
//   severalConnections.it('...')         needs several PostgreSQL connections (skipped on pglite)
import path from 'node:path';
import fs from 'node:fs';
import os from 'node:os';
import { afterEach, beforeEach, describe, it } from 'vitest';
import type { CatalogStorage } from '../../src/storage/port.js';
import Database from 'better-sqlite3';
import { openSqliteStorage } from '../../src/storage/sqlite/index.js';
import { freshDatabase, testPostgres } from './postgres.js';
import { PglitePool } from './pglite.js';

export type TestEngine = 'sqlite' | 'postgres';

export const TEST_ENGINE: TestEngine = process.env.CPS_TEST_ENGINE === 'postgres' ? 'postgres' : 'sqlite';

/** On the postgres project without server binaries: the embedded, single-connection pglite. */
export const onPglite = (): boolean => TEST_ENGINE === 'postgres' && testPostgres().kind === 'pglite';

/** Tests that only make sense on SQLite (its file, WAL, backup API, process locks): skipped on PostgreSQL. */
export const sqliteOnly: { it: ReturnType<typeof it.skipIf>; describe: ReturnType<typeof describe.skipIf> } = {
  it: it.skipIf(TEST_ENGINE !== 'sqlite'),
  describe: describe.skipIf(TEST_ENGINE !== 'sqlite'),
};

/** Tests that only make sense on PostgreSQL. */
export const postgresOnly: { it: ReturnType<typeof it.skipIf>; describe: ReturnType<typeof describe.skipIf> } = {
  it: it.skipIf(TEST_ENGINE !== 'postgres'),
  describe: describe.skipIf(TEST_ENGINE !== 'postgres'),
};

const skippedOnPglite: string[] = [];

/**
 * Tests that need several connections at once (concurrent writers, another process): skipped on
 * pglite, listed by name in a summary line when the file ends.
 */
export const severalConnections = {
  it: (name: string, fn: () => Promise<void>, timeout?: number) => {
    if (TEST_ENGINE === 'postgres' && testPostgres().kind === 'pglite') {
      skippedOnPglite.push(name);
      return it.skip(`${name} [skipped: needs several PostgreSQL connections, pglite has one]`, fn, timeout);
    }
    return it(name, fn, timeout);
  },
};

/** The names of the tests skipped on pglite so far in this file. */
export const pgliteSkips = (): readonly string[] => skippedOnPglite;

export interface TestDatabase {
  engine: TestEngine;
  /** Opens the storage on this database (each call a new one: another process's view). */
  open(): Promise<CatalogStorage>;
  /** The environment a child process (`serve`, the CLI) needs to use this database. */
  env: Record<string, string>;
  /** SQLite: the file; PostgreSQL: the URL. */
  location: string;
  /** Deletes the database (PostgreSQL; SQLite files go with their folder). */
  drop(): Promise<void>;
}

let pgliteBase: Promise<PglitePool> | undefined;

let sqliteTemplate: Promise<string> | undefined;

/**
 * SQLite: an empty database migrated once per process (a vitest fork) and copied for each test,
 * as the PostgreSQL server's template database is: migrating a new file took ~30 ms of CPU and ~0.2 s
 * of the fork's time in fsync (docs/testing.md#how-long). The copy is what opening the new file makes.
 */
async function copyMigratedSqlite(file: string): Promise<void> {
  sqliteTemplate ??= (async () => {
    // Beside the run's built tree, whose folder the global setup removes at the end (vitest ends its
    // forks without their exit handlers); elsewhere (no build) in a folder removed on exit.
    const built = process.env.CPS_TEST_BUILD;
    const dir = fs.mkdtempSync(path.join(built ? path.dirname(built) : os.tmpdir(), 'cps-sqlite-template-'));
    if (!built) process.once('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
    const template = path.join(dir, 'template.db');
    await openSqliteStorage(template).close();
    // Everything in the main file, no write-ahead log beside it: the file alone is the database.
    const db = new Database(template);
    db.pragma('wal_checkpoint(TRUNCATE)');
    db.close();
    return template;
  })();
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.copyFileSync(await sqliteTemplate, file, fs.constants.COPYFILE_EXCL);
}

/** A new, empty, migrated database on the engine (default: the project's). */
export async function createTestDatabase(dir: string, engine: TestEngine = TEST_ENGINE): Promise<TestDatabase> {
  if (engine === 'sqlite') {
    const file = path.join(dir, 'catalog.db');
    if (!fs.existsSync(file)) await copyMigratedSqlite(file);
    return {
      engine,
      location: file,
      env: { CPS_DB_PATH: file },
      open: async () => openSqliteStorage(file),
      drop: async () => {},
    };
  }
  const { openPostgresStorage } = await import('../../src/storage/postgres/index.js');
  const postgres = testPostgres();
  if (postgres.kind === 'pglite') {
    // One migrated pglite per test file (cold start), cloned per database.
    pgliteBase ??= (async () => {
      const pool = await PglitePool.create();
      const storage = openPostgresStorage('pglite://embedded', { pool });
      await storage.ready;
      return pool;
    })();
    const pool = await (await pgliteBase).clone();
    let opened = false;
    return {
      engine,
      location: 'pglite://embedded',
      env: {},
      async open() {
        if (opened) throw new Error('pglite has one connection: a second storage (another process) needs a PostgreSQL server');
        opened = true;
        const storage = openPostgresStorage('pglite://embedded', { pool });
        await storage.ready;
        return storage;
      },
      drop: async () => {},
    };
  }
  const database = await freshDatabase();
  return {
    engine,
    location: database.url,
    env: { CPS_DATABASE_URL: database.url },
    async open() {
      const storage = openPostgresStorage(database.url);
      await storage.ready;
      return storage;
    },
    drop: () => database.drop(),
  };
}

/**
 * A fresh database of the project's engine for every test of the file, opened once: `opened` hands
 * the test file its storage and database before each test; both are closed and dropped after it.
 */
export function storagePerTest(name: string, opened: (fresh: { storage: CatalogStorage; database: TestDatabase }) => void): void {
  let dir: string;
  let fresh: { storage: CatalogStorage; database: TestDatabase };
  beforeEach(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), `cps-${name}-`));
    const database = await createTestDatabase(dir);
    fresh = { storage: await database.open(), database };
    opened(fresh);
  });
  afterEach(async () => {
    await fresh.storage.close();
    await fresh.database.drop();
    fs.rmSync(dir, { recursive: true, force: true });
  });
}
