import { defineConfig } from 'vitest/config';
import { findPostgresBinaries } from './scripts/dev/postgres-server.js';
import { SlowFirstSequencer } from './test/support/slow-first.js';

// Two projects, one per storage engine (test/support/engine.ts reads CPS_TEST_ENGINE):
// - sqlite: every suite, on SQLite files (the embedded default);
// - postgres: the suites whose behaviour depends on the engine (HTTP, feed, webhooks, images,
//   faults, storage, less the files below that never reach it), on one PostgreSQL server the
//   globalSetup starts from the installed binaries (test/support/postgres.ts), or on the embedded
//   pglite when there are none.
// `npx vitest run --project sqlite` runs one of them; `npm run test:quick` the inner loop (below).
// The fault scenarios run `serve` in a child process on the project's database (on PostgreSQL they
// need a server: skipped on pglite); test/faults/postgres-scale-out.test.ts is PostgreSQL's own.
const ON_EITHER_ENGINE = ['http', 'changes', 'webhooks', 'images', 'storage', 'faults'].map((suite) => `test/${suite}/**/*.test.ts`);
// Files of those suites that run the same whatever the engine, so once (on the sqlite project):
const SAME_ON_EITHER_ENGINE = [
  // They open no database at all (pure functions, in-memory parts, a socket without a service):
  'test/changes/fair-turns.test.ts',
  'test/http/canonical-address.test.ts',
  'test/http/spool.test.ts',
  'test/http/spool-budget.test.ts',
  'test/http/unsent-bytes.test.ts',
  'test/images/commit-order.test.ts',
  'test/images/sniff.test.ts',
  'test/webhooks/receiver.test.ts',
  'test/webhooks/registry.test.ts',
  'test/webhooks/retry.test.ts',
  'test/webhooks/signing-keys.test.ts',
  'test/webhooks/valid-text.test.ts',
  // SQLite's own: its migrations and several better-sqlite3 connections on one file.
  'test/changes/sequencer.test.ts',
  'test/storage/sqlite.test.ts',
  // Decided in the HTTP layer before storage is asked, or after it answered: body size and depth,
  // byte order marks, form bytes, client aborts, coding and its cache, ETags, request ids, rate
  // limits and sign-in address throttling held in memory, the password hashing pool, who may call
  // which operation, reserved receiver names. Their storage calls run on PostgreSQL in the other files.
  'test/http/admin-rate-limits.test.ts',
  'test/http/api-key-scopes.test.ts',
  'test/http/body-limits.test.ts',
  'test/http/client-abort.test.ts',
  'test/http/compression-cache.test.ts',
  'test/http/features.test.ts',
  'test/http/json-bom.test.ts',
  'test/http/panel-form-utf8.test.ts',
  'test/http/password-hashing.test.ts',
  'test/http/reserved-webhook-names.test.ts',
];
// The PostgreSQL engine's own tests (several connections, LISTEN/NOTIFY, migrations under a lock):
// only on the postgres project, and only with a real server.
const NEEDS_POSTGRES_SERVER = ['test/**/postgres*.test.ts'];
// Left out of `npm run test:quick` (CPS_TEST_QUICK=1: SQLite only, under 2 minutes on 2 cores, the
// inner loop): files that start `serve`, the CLI or a browser in child processes, the CI-sized
// benchmark runs, and the files that take over ~5 s on 2 cores (long property runs, real waits).
const NOT_QUICK = [
  'test/cli.test.ts',
  'test/cli-arguments.test.ts',
  'test/client/package.test.ts',
  'test/config-table.test.ts',
  'test/docs.test.ts',
  'test/faults/**',
  'test/panel/**',
  'test/scale/**',
  'test/workflows.test.ts',
  'test/http/connection-cap.test.ts',
  // Chromium and an esbuild bundle of the client.
  'test/http/browser-feed.test.ts',
  'test/operations/backup-and-shutdown.test.ts',
  'test/operations/worker-thread.test.ts',
  'test/operations/worker-autogroup.test.ts',
  'test/webhooks/crash.test.ts',
  'test/webhooks/secret-rotation-cli.test.ts',
  'test/admin/accounts.test.ts',
  'test/changes/cursor-bounds.test.ts',
  'test/changes/detection.test.ts',
  'test/changes/feed.test.ts',
  'test/changes/live-serve.test.ts',
  'test/changes/live.test.ts',
  'test/changes/sequencer.test.ts',
  'test/changes/snapshot-export.test.ts',
  'test/changes/snapshot-handoff.test.ts',
  'test/client/client.test.ts',
  'test/client/sync.test.ts',
  'test/config.test.ts',
  'test/http/admin-api.test.ts',
  'test/http/adversarial-input.test.ts',
  'test/http/api-key-lifecycle.test.ts',
  'test/http/audit-log.test.ts',
  'test/http/bad-input.test.ts',
  'test/http/features.test.ts',
  'test/http/merchant-caps.test.ts',
  'test/http/nul-text.test.ts',
  'test/http/panel-users-api.test.ts',
  'test/http/password-hashing.test.ts',
  'test/http/read-cache.test.ts',
  'test/http/reserved-webhook-names.test.ts',
  'test/http/sign-in-throttle-concurrency.test.ts',
  'test/http/writes-and-reads.test.ts',
  'test/images/concurrent-transitions.test.ts',
  'test/images/failures.test.ts',
  'test/images/fairness.test.ts',
  'test/images/idle-poll.test.ts',
  'test/images/mirroring.test.ts',
  'test/images/operator-tools.test.ts',
  'test/images/origins.test.ts',
  'test/images/ssrf.test.ts',
  'test/operations/logging.test.ts',
  'test/operations/probes-and-metrics.test.ts',
  'test/storage/bounded-statements.test.ts',
  'test/storage/metrics-counts-thread.test.ts',
  'test/storage/sqlite.test.ts',
  'test/storage/statement-metrics.test.ts',
  'test/webhooks/delivery.test.ts',
  'test/webhooks/endpoints.test.ts',
  'test/webhooks/fairness.test.ts',
  'test/webhooks/health.test.ts',
  'test/webhooks/idle-poll.test.ts',
  'test/webhooks/inactive-stores.test.ts',
  'test/webhooks/operator-tools.test.ts',
  'test/webhooks/rate-limit.test.ts',
  'test/webhooks/receiver-answers.test.ts',
  'test/webhooks/secret-rotation.test.ts',
  'test/webhooks/standard-webhooks.test.ts',
  'test/webhooks/truthful-health.test.ts',
];
const quick = process.env.CPS_TEST_QUICK === '1';
const serverBinaries = process.env.CPS_TEST_PG_BINARIES !== 'none' && findPostgresBinaries() !== undefined;
if (!serverBinaries && !quick && process.env.CPS_TEST_REQUIRE_POSTGRES !== '1' && !process.env.CPS_TEST_PGLITE_NOTED) {
  process.env.CPS_TEST_PGLITE_NOTED = '1'; // the config is read more than once per run
  console.warn(`[pglite] no PostgreSQL server binaries: skipped, they need a server: ${NEEDS_POSTGRES_SERVER.join(', ')}`);
}

export default defineConfig({
  test: {
    // Guards against a hung test or hook, not bounds on their time: several files at once on 2 shared
    // cores can make a 10 s property run, or a 20,000-product beforeAll, take several times that.
    testTimeout: 120_000,
    hookTimeout: 300_000,
    pool: 'forks',
    // Most files mostly wait (child processes, HTTP, PostgreSQL): vitest's default on 2 cores is one
    // fork (cpus - 1). Two keep both cores busy; at 4, tests still bound by the wall clock (a wake-up
    // within ~1 s, a CLI's progress lines) failed under load (docs/testing.md#how-long).
    maxWorkers: 2,
    // A fork runs one file after another of its project, its modules imported once, not once per
    // file (the service and its schemas took ~0.8 s of CPU a file; test/http: 148 -> 65 s of CPU).
    // Files leave nothing behind that the next would see: each opens its own database and service.
    isolate: false,
    // The longest files first when vitest has no timings of an earlier run (a clean clone).
    sequence: { sequencer: SlowFirstSequencer },
    // The child processes tests start (the CLI, `serve`, `worker`) run a tree built once per run,
    // not each through tsx's loader (test/support/build.ts).
    globalSetup: ['test/support/build.ts'],
    projects: [
      {
        extends: true,
        test: {
          name: 'sqlite',
          include: ['test/**/*.test.ts'],
          exclude: [...NEEDS_POSTGRES_SERVER, ...(quick ? NOT_QUICK : [])],
          env: { CPS_TEST_ENGINE: 'sqlite' },
        },
      },
      ...(quick
        ? []
        : [
            {
              extends: true as const,
              test: {
                name: 'postgres',
                include: ON_EITHER_ENGINE,
                exclude: [...SAME_ON_EITHER_ENGINE, ...(serverBinaries ? [] : NEEDS_POSTGRES_SERVER)],
                env: { CPS_TEST_ENGINE: 'postgres' },
                globalSetup: ['test/support/build.ts', 'test/support/postgres.ts'],
                setupFiles: ['test/support/engine-setup.ts'],
              },
            },
          ]),
    ],
  },
});
