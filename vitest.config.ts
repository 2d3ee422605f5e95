import { defineConfig } from 'vitest/config';
import { findPostgresBinaries } from './scripts/postgres-server.js';

// Two projects, one per storage engine (test/support/engine.ts reads CPS_TEST_ENGINE):
// - sqlite: every suite, on SQLite files (the embedded default);
// - postgres: the suites that run on either engine (HTTP, feed, webhooks, images, faults, storage),
//   on one PostgreSQL server the globalSetup starts from the installed binaries
//   (test/support/postgres.ts), or on the embedded pglite when there are none.
// `npx vitest run --project sqlite` runs one of them.
// The fault scenarios run `serve` in a child process on the project's database (on PostgreSQL they
// need a server: skipped on pglite); test/faults/postgres-scale-out.test.ts is PostgreSQL's own.
const ON_EITHER_ENGINE = ['http', 'changes', 'webhooks', 'images', 'storage', 'faults'].map((suite) => `test/${suite}/**/*.test.ts`);
// The PostgreSQL engine's own tests (several connections, LISTEN/NOTIFY, migrations under a lock):
// only on the postgres project, and only with a real server.
const NEEDS_POSTGRES_SERVER = ['test/**/postgres*.test.ts'];
const serverBinaries = process.env.CPS_TEST_PG_BINARIES !== 'none' && findPostgresBinaries() !== undefined;
if (!serverBinaries && process.env.CPS_TEST_REQUIRE_POSTGRES !== '1' && !process.env.CPS_TEST_PGLITE_NOTED) {
  process.env.CPS_TEST_PGLITE_NOTED = '1'; // the config is read more than once per run
  console.warn(`[pglite] no PostgreSQL server binaries: skipped, they need a server: ${NEEDS_POSTGRES_SERVER.join(', ')}`);
}

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    projects: [
      {
        extends: true,
        test: { name: 'sqlite', include: ['test/**/*.test.ts'], exclude: NEEDS_POSTGRES_SERVER, env: { CPS_TEST_ENGINE: 'sqlite' } },
      },
      {
        extends: true,
        test: {
          name: 'postgres',
          include: ON_EITHER_ENGINE,
          // Only about the SQLite engine itself (its file, WAL checkpoints, process locks).
          exclude: ['test/storage/sqlite.test.ts', ...(serverBinaries ? [] : NEEDS_POSTGRES_SERVER)],
          env: { CPS_TEST_ENGINE: 'postgres' },
          globalSetup: ['test/support/postgres.ts'],
          setupFiles: ['test/support/engine-setup.ts'],
        },
      },
    ],
  },
});
