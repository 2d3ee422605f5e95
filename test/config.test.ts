// The configuration (src/config.ts, src/config/settings.ts): what `loadConfig` makes of an empty
// environment and of one that sets every variable (both written down from the loader before the
// settings became one schema, so they pin the defaults and where each variable lands),
// and every setting refusing what it does not accept in the same words.
import { execFile } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../src/config.js';
import { SETTING_DOCS, SETTINGS, type Accepts } from '../src/config/settings.js';
import { nodeArguments } from './support/node-command.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** Every variable at a valid value other than its default. */
const EVERY_VARIABLE = {
  CPS_PORT: '9090',
  CPS_HOST: '0.0.0.0',
  CPS_DB_PATH: 'other/catalog.db',
  CPS_DATABASE_URL: 'postgres://cps:secret@db.example:5432/cps',
  CPS_DB_POOL_SIZE: '7',
  CPS_DB_POOL_IDLE_MS: '5000',
  CPS_ADMIN_TOKEN: 'adm_configured',
  CPS_PUBLIC_BASE_URL: 'https://catalog.example.com//',
  CPS_TRUSTED_PROXIES: '10.0.0.0/8, 192.0.2.7',
  CPS_DEMO_ON_EMPTY: 'no',
  CPS_DEMO_PRODUCTS: '20',
  CPS_ADMIN_BODY_BYTES: '2048',
  CPS_ADMIN_MAX_JSON_DEPTH: '8',
  CPS_IMPORT_BODY_BYTES: '4096',
  CPS_MAX_PRODUCT_BYTES: '65536',
  CPS_MAX_PRODUCT_LOCALES: '11',
  CPS_MAX_PRODUCT_IMAGES: '12',
  CPS_MAX_PRODUCT_OFFERS: '13',
  CPS_MAX_PRODUCT_SUPPLIER_ATTRIBUTES: '14',
  CPS_MAX_PRODUCT_OVERRIDES: '15',
  CPS_PUBLISH_CHUNK: '16',
  CPS_PUBLISH_RUN_LEASE_MS: '17000',
  CPS_IMPORT_STALLED_SECONDS: '18',
  CPS_PRODUCT_LIST_SCAN: '1900',
  CPS_WRITE_SLICE_MS: '20',
  CPS_DB_LOCK_TIMEOUT_MS: '21000',
  CPS_WAL_CHECKPOINT_INTERVAL_MS: '2200',
  CPS_FEED_WINDOW: '23',
  CPS_CHANGE_RETENTION_DAYS: '45',
  CPS_CHANGE_PRUNE_INTERVAL_SECONDS: '25',
  CPS_CHANGE_PRUNE_BATCH: '26',
  CPS_IDEMPOTENCY_HOURS: '48',
  CPS_EXPORT_STEP_ROWS: '27',
  CPS_EXPORT_MEMORY_BYTES: '0',
  CPS_EXPORT_SPOOL_DIR: 'spool',
  CPS_EXPORT_CONCURRENCY: '3',
  CPS_EXPORT_CONCURRENCY_PER_MERCHANT: '2',
  CPS_EXPORTS_PER_KEY: '4',
  CPS_EXPORTS_PER_MERCHANT: '5',
  CPS_EXPORTS_PER_PROCESS: '11',
  CPS_EXPORT_SPOOL_BYTES_PER_MERCHANT: '3000',
  CPS_EXPORT_SPOOL_BYTES_PER_PROCESS: '9000',
  CPS_EXPORT_STALL_TIMEOUT_MS: '2800',
  CPS_FEED_MAX_WAIT_SECONDS: '0',
  CPS_FEED_HEARTBEAT_SECONDS: '300',
  CPS_FEED_LIVE_PER_KEY: '29',
  CPS_FEED_STALL_TIMEOUT_MS: '4500',
  CPS_FEED_STREAM_RETRY_MS: '2500',
  CPS_WEBHOOK_FULL_PAYLOAD_BYTES: '65536',
  CPS_FEED_LIVE_PER_MERCHANT: '31',
  CPS_FEED_LIVE_PER_PROCESS: '37',
  CPS_UNSENT_BYTES_MAX: '4096',
  CPS_FEED_LIVE_POLL_MS: '50',
  CPS_FEED_WINDOW_CACHE: '7',
  CPS_FEED_TURN_MS: '3',
  CPS_WEBHOOK_DISPATCHER: 'false',
  CPS_WORKERS: 'inline',
  CPS_WORKER_NICE: '0',
  CPS_WEBHOOK_ALLOW_HOSTS: '127.0.0.1, localhost',
  CPS_WEBHOOK_TIMEOUT_MS: '3100',
  CPS_WEBHOOK_COALESCE_MS: '0',
  CPS_WEBHOOK_BATCH_SIZE: '1',
  CPS_WEBHOOK_ENDPOINT_CONCURRENCY: '1',
  CPS_WEBHOOK_CONCURRENCY: '33',
  CPS_WEBHOOK_MERCHANT_CONCURRENCY: '9',
  CPS_WEBHOOK_BACKOFF_SECONDS: '1, 2,3',
  CPS_WEBHOOK_NOTIFY_AFTER_FAILURES: '6',
  CPS_WEBHOOK_RENOTIFY_HOURS: '0',
  CPS_WEBHOOK_PAUSE_AFTER_FAILURES: '21',
  CPS_WEBHOOK_PAUSE_MIN_STREAK_MINUTES: '0',
  CPS_WEBHOOK_COOLDOWN_MINUTES: '61',
  CPS_WEBHOOK_POLL_INTERVAL_MS: '10',
  CPS_WEBHOOK_IDLE_POLL_MAX_MS: '2000',
  CPS_WEBHOOK_LEASE_MARGIN_MS: '0',
  CPS_WEBHOOK_SECRET_GRACE_HOURS: '720',
  CPS_IMAGE_MIRRORING: 'FALSE',
  CPS_MEDIA_DIR: 'mirrored',
  CPS_IMAGE_TIMEOUT_MS: '1500',
  CPS_IMAGE_MAX_BYTES: '1024',
  CPS_IMAGE_CONCURRENCY: '5',
  CPS_IMAGE_MERCHANT_CONCURRENCY: '1',
  CPS_IMAGE_ORIGIN_CONCURRENCY: '1',
  CPS_IMAGE_COMMITS_AT_ONCE: '2',
  CPS_IMAGE_ORIGIN_FAILURES: '7',
  CPS_IMAGE_ORIGIN_PROBE_MS: '5000',
  CPS_IMAGE_ORIGIN_PROBE_MAX_MS: '60000',
  CPS_IMAGE_RETRY_SECONDS: '5,10',
  CPS_IMAGE_DEAD_AFTER_HOURS: '0',
  CPS_IMAGE_POLL_INTERVAL_MS: '10',
  CPS_IMAGE_IDLE_POLL_MAX_MS: '3000',
  CPS_SMTP_URL: 'smtp://mail.example:25',
  CPS_SMTP_FROM: 'catalog@example.com',
  CPS_RATE_LIMIT_BURST: '1',
  CPS_RATE_LIMIT_PER_SECOND: '1',
  CPS_ADMIN_RATE_BURST: '3',
  CPS_ADMIN_RATE_PER_SECOND: '2',
  CPS_ADMIN_AUTH_MAX_FAILURES: '4',
  CPS_ADMIN_AUTH_WINDOW_MINUTES: '5',
  CPS_API_KEYS_PER_MERCHANT: '7',
  CPS_API_KEY_CACHE_MS: '0',
  CPS_API_KEY_LAST_USED_SECONDS: '1',
  CPS_COMPRESSION_MIN_BYTES: '0',
  CPS_COMPRESSION_CACHE_BYTES: '0',
  CPS_READ_CACHE_BYTES: '0',
  CPS_PANEL_INVITATION_HOURS: '1',
  CPS_PANEL_SESSION_IDLE_MINUTES: '2',
  CPS_PANEL_SESSION_HOURS: '3',
  CPS_PANEL_SIGN_IN_MAX_FAILURES: '4',
  CPS_PANEL_SIGN_IN_WINDOW_MINUTES: '5',
  CPS_PANEL_SIGN_IN_DELAY_SECONDS: '6',
  CPS_PANEL_SIGN_IN_ADDRESS_MAX_FAILURES: '7',
  CPS_PANEL_SHOWN_ONCE_MINUTES: '8',
  CPS_PANEL_PASSWORD_HASHES_AT_ONCE: '3',
  CPS_PANEL_PASSWORD_HASH_QUEUE: '0',
  CPS_LOG_LEVEL: 'silent',
  CPS_ACCESS_LOG: '0',
  CPS_METRICS_TOKEN: 'metrics-token',
  CPS_SLOW_STATEMENT_MS: '0',
  CPS_METRICS_COUNT_MAX: '500',
  CPS_OPS_PORT: '9091',
  CPS_MAX_CONNECTIONS: '500',
  CPS_DESCRIPTOR_RESERVE: '200',
  CPS_SHUTDOWN_DELAY_MS: '500',
  CPS_SHUTDOWN_GRACE_MS: '0',
};

describe('configuration', () => {
  it("has the decisions' defaults (docs/decisions.md) when nothing is set", () => {
    const config = loadConfig({});
    expect(config.adminToken).toMatch(/^adm_[A-Za-z0-9_-]{32}$/);
    expect(config).toEqual({
      port: 8080,
      host: '127.0.0.1',
      databasePath: path.resolve('data/catalog.db'),
      databaseUrl: null,
      adminToken: config.adminToken,
      adminTokenConfigured: false,
      publicBaseUrl: 'http://127.0.0.1:8080',
      publicBaseUrlConfigured: false,
      trustedProxies: [],
      demoOnEmpty: true,
      demoProducts: 500,
      limits: {
        adminBodyBytes: 1048576,
        importBodyBytes: 67108864,
        maxJsonDepth: 32,
        publishChunk: 500,
        publishRunLeaseMs: 60000,
        productListScan: 5000,
        importStalledMs: 60000,
        maxProductBytes: 524288,
        maxProductOverrides: 1000,
        maxProductSupplierAttributes: 2000,
        maxProductImages: 100,
        maxProductOffers: 100,
        maxProductLocales: 100,
      },
      storage: { writeSliceMs: 5, lockTimeoutMs: 30000, checkpointIntervalMs: 1000, poolSize: 10, poolIdleMs: 60_000 },
      webhooks: {
        allowHosts: [],
        timeoutMs: 10000,
        coalesceMs: 2000,
        batchSize: 100,
        perEndpointConcurrency: 4,
        overallConcurrency: 32,
        perMerchantConcurrency: 8,
        backoffSeconds: [30, 120, 600, 3600, 21600],
        notifyAfterFailures: 5,
        renotifyHours: 24,
        pauseAfterFailures: 20,
        pauseMinStreakMinutes: 60,
        cooldownMinutes: 60,
        fullPayloadBytes: 262144,
        pollIntervalMs: 250,
        idlePollMaxMs: 5000,
        leaseMarginMs: 30000,
        secretGraceHours: 24,
      },
      webhookDispatcher: true,
      workers: 'thread',
      workerNice: 10,
      images: {
        mirrorInServe: true,
        mediaDir: path.resolve('data/media'),
        timeoutMs: 15000,
        maxBytes: 10485760,
        concurrency: 4,
        merchantConcurrency: 3,
        originConcurrency: 2,
        commitsAtOnce: 4,
        originFailures: 20,
        originProbeMs: 30_000,
        originProbeMaxMs: 900_000,
        retrySeconds: [60, 300, 1800, 7200, 21600, 43200],
        deadAfterHours: 72,
        pollIntervalMs: 1000,
        idlePollMaxMs: 5000,
      },
      smtp: { url: null, from: 'catalog-publishing@localhost' },
      rateLimit: { burst: 600, perSecond: 50 },
      adminRateLimit: { burst: 1000, perSecond: 100 },
      adminAuthFailures: { max: 20, windowMinutes: 15 },
      apiKeysPerMerchant: 100,
      apiKeyCacheMs: 1000,
      unsentBytesMax: 262144,
      apiKeyLastUsedSeconds: 60,
      compressionMinBytes: 1024,
      compressionCacheBytes: 67108864,
      readCacheBytes: 134217728,
      operations: {
        logLevel: 'info',
        accessLog: true,
        metricsToken: null,
        slowStatementMs: 100,
        metricsCountMax: 10_000,
        workerOpsPort: null,
        maxConnections: null,
        descriptorReserve: 128,
        shutdownDelayMs: 0,
        shutdownGraceMs: 10000,
      },
      panel: {
        invitationHours: 72,
        sessionIdleMinutes: 60,
        sessionAbsoluteHours: 12,
        signInMaxFailures: 5,
        signInAddressMaxFailures: 20,
        signInWindowMinutes: 15,
        signInDelaySeconds: 30,
        shownOnceMinutes: 10,
        passwordHashes: { atOnce: 1, queue: 16 },
      },
      exports: {
        stepRows: 100,
        memoryBytes: 8388608,
        spoolDir: path.resolve(os.tmpdir()),
        concurrency: 2,
        concurrencyPerMerchant: 1,
        perKey: 2,
        perMerchant: 4,
        perProcess: 16,
        spoolBytesPerMerchant: 134217728,
        spoolBytesPerProcess: 536870912,
        stallTimeoutMs: 60000,
      },
      changes: {
        feedWindow: 1000,
        retentionDays: 30,
        pruneIntervalSeconds: 3600,
        pruneBatch: 1000,
        idempotencyHours: 24,
        maxWaitSeconds: 30,
        heartbeatSeconds: 15,
        livePerKey: 20,
        streamStallTimeoutMs: 60000,
        streamRetryMs: 5000,
        livePerMerchant: 100,
        livePerProcess: 1000,
        livePollIntervalMs: 1000,
        windowCache: 32,
        turnMs: 2,
      },
    });
  });

  it('treats a variable set to the empty string as unset', () => {
    const empty = Object.fromEntries(Object.keys(EVERY_VARIABLE).map((name) => [name, '']));
    const { adminToken, ...config } = loadConfig(empty);
    const { adminToken: defaultToken, ...defaults } = loadConfig({});
    expect([adminToken, defaultToken]).toEqual([expect.stringMatching(/^adm_/), expect.stringMatching(/^adm_/)]);
    expect(config).toEqual(defaults);
  });

  it('reads every variable into its field', () => {
    expect(loadConfig(EVERY_VARIABLE)).toEqual({
      port: 9090,
      host: '0.0.0.0',
      databasePath: path.resolve('other/catalog.db'),
      databaseUrl: 'postgres://cps:secret@db.example:5432/cps',
      adminToken: 'adm_configured',
      adminTokenConfigured: true,
      publicBaseUrl: 'https://catalog.example.com',
      publicBaseUrlConfigured: true,
      trustedProxies: ['10.0.0.0/8', '192.0.2.7'],
      demoOnEmpty: false,
      demoProducts: 20,
      limits: {
        adminBodyBytes: 2048,
        importBodyBytes: 4096,
        maxJsonDepth: 8,
        publishChunk: 16,
        publishRunLeaseMs: 17000,
        productListScan: 1900,
        importStalledMs: 18000,
        maxProductBytes: 65536,
        maxProductOverrides: 15,
        maxProductSupplierAttributes: 14,
        maxProductImages: 12,
        maxProductOffers: 13,
        maxProductLocales: 11,
      },
      storage: { writeSliceMs: 20, lockTimeoutMs: 21000, checkpointIntervalMs: 2200, poolSize: 7, poolIdleMs: 5000 },
      webhooks: {
        allowHosts: ['127.0.0.1', 'localhost'],
        timeoutMs: 3100,
        coalesceMs: 0,
        batchSize: 1,
        perEndpointConcurrency: 1,
        overallConcurrency: 33,
        perMerchantConcurrency: 9,
        backoffSeconds: [1, 2, 3],
        notifyAfterFailures: 6,
        renotifyHours: 0,
        pauseAfterFailures: 21,
        pauseMinStreakMinutes: 0,
        cooldownMinutes: 61,
        fullPayloadBytes: 65536,
        pollIntervalMs: 10,
        idlePollMaxMs: 2000,
        leaseMarginMs: 0,
        secretGraceHours: 720,
      },
      webhookDispatcher: false,
      workers: 'inline',
      workerNice: 0,
      images: {
        mirrorInServe: false,
        mediaDir: path.resolve('mirrored'),
        timeoutMs: 1500,
        maxBytes: 1024,
        concurrency: 5,
        merchantConcurrency: 1,
        originConcurrency: 1,
        commitsAtOnce: 2,
        originFailures: 7,
        originProbeMs: 5000,
        originProbeMaxMs: 60_000,
        retrySeconds: [5, 10],
        deadAfterHours: 0,
        pollIntervalMs: 10,
        idlePollMaxMs: 3000,
      },
      smtp: { url: 'smtp://mail.example:25', from: 'catalog@example.com' },
      rateLimit: { burst: 1, perSecond: 1 },
      adminRateLimit: { burst: 3, perSecond: 2 },
      adminAuthFailures: { max: 4, windowMinutes: 5 },
      apiKeysPerMerchant: 7,
      apiKeyCacheMs: 0,
      unsentBytesMax: 4096,
      apiKeyLastUsedSeconds: 1,
      compressionMinBytes: 0,
      compressionCacheBytes: 0,
      readCacheBytes: 0,
      operations: {
        logLevel: 'silent',
        accessLog: false,
        metricsToken: 'metrics-token',
        slowStatementMs: 0,
        metricsCountMax: 500,
        workerOpsPort: 9091,
        maxConnections: 500,
        descriptorReserve: 200,
        shutdownDelayMs: 500,
        shutdownGraceMs: 0,
      },
      panel: {
        invitationHours: 1,
        sessionIdleMinutes: 2,
        sessionAbsoluteHours: 3,
        signInMaxFailures: 4,
        signInAddressMaxFailures: 7,
        signInWindowMinutes: 5,
        signInDelaySeconds: 6,
        shownOnceMinutes: 8,
        passwordHashes: { atOnce: 3, queue: 0 },
      },
      exports: {
        stepRows: 27,
        memoryBytes: 0,
        spoolDir: path.resolve('spool'),
        concurrency: 3,
        concurrencyPerMerchant: 2,
        perKey: 4,
        perMerchant: 5,
        perProcess: 11,
        spoolBytesPerMerchant: 3000,
        spoolBytesPerProcess: 9000,
        stallTimeoutMs: 2800,
      },
      changes: {
        feedWindow: 23,
        retentionDays: 45,
        pruneIntervalSeconds: 25,
        pruneBatch: 26,
        idempotencyHours: 48,
        maxWaitSeconds: 0,
        heartbeatSeconds: 300,
        livePerKey: 29,
        streamStallTimeoutMs: 4500,
        streamRetryMs: 2500,
        livePerMerchant: 31,
        livePerProcess: 37,
        livePollIntervalMs: 50,
        windowCache: 7,
        turnMs: 3,
      },
    });
  });

  it('lets tests and embedders override a top-level value or some fields of a group', () => {
    const config = loadConfig(
      { CPS_WEBHOOK_TIMEOUT_MS: '3000' },
      { port: 0, databasePath: '/srv/cps/catalog.db', webhooks: { pollIntervalMs: 5 } },
    );
    expect(config.port).toBe(0);
    expect(config.webhooks).toMatchObject({ pollIntervalMs: 5, timeoutMs: 3000, batchSize: 100 });
    // The media folder follows an overridden database path unless it is configured.
    expect(config.images.mediaDir).toBe(path.resolve('/srv/cps/media'));
  });
});

/** The ConfigError's lines for `env`, or [] when it is accepted. */
function refusals(env: Record<string, string>): string[] {
  try {
    loadConfig(env);
    return [];
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    return error.problems;
  }
}

const escaped = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

describe('every setting refuses what it does not accept, the same way', () => {
  const settings = Object.entries(SETTINGS.shape).map(([variable, schema]) => ({
    variable,
    accepts: SETTING_DOCS.get(schema)?.accepts as Accepts,
  }));

  it('declares what each of the 124 settings accepts', () => {
    expect(settings).toHaveLength(124);
    expect(settings.filter(({ accepts }) => !accepts)).toEqual([]);
  });

  it.each(settings.filter(({ accepts }) => accepts.kind === 'integer'))(
    '$variable: a whole number within its bounds, else a start-up error naming it, the value and the bounds',
    ({ variable, accepts }) => {
      const { min, max } = accepts as Extract<Accepts, { kind: 'integer' }>;
      expect(refusals({ [variable]: String(min) })).toEqual([]);
      if (max !== undefined) expect(refusals({ [variable]: String(max) })).toEqual([]);
      const bounds = max === undefined ? `at least ${min}` : min === 0 ? `at most ${max}` : `from ${min} to ${max}`;
      if (min > 0) expect(refusals({ [variable]: String(min - 1) })).toEqual([`${variable} must be ${bounds}, got ${min - 1}`]);
      if (max !== undefined) expect(refusals({ [variable]: String(max + 1) })).toEqual([`${variable} must be ${bounds}, got ${max + 1}`]);
      for (const bad of ['many', '-1', '1.5', '1e3', ' 7']) {
        const [problem, ...more] = refusals({ [variable]: bad });
        expect(more).toEqual([]);
        expect(problem).toMatch(new RegExp(`^${variable} must be (a non-negative integer|an integer)\\b.*, got "${escaped(bad)}"$`));
        if (min > 0) expect(problem).toContain(String(min));
        if (max !== undefined) expect(problem).toContain(String(max));
      }
    },
  );

  it.each(settings.filter(({ accepts }) => accepts.kind === 'flag'))(
    '$variable: true or false (1/0, yes/no), else refused naming it',
    ({ variable }) => {
      for (const good of ['true', 'FALSE', '1', '0', 'yes', 'No']) expect(refusals({ [variable]: good })).toEqual([]);
      expect(refusals({ [variable]: 'maybe' })).toEqual([`${variable} must be true or false, got "maybe"`]);
    },
  );

  it.each(settings.filter(({ accepts }) => accepts.kind === 'oneOf'))(
    '$variable: one of its values, else refused naming them',
    ({ variable, accepts }) => {
      const { values } = accepts as Extract<Accepts, { kind: 'oneOf' }>;
      for (const good of values) expect(refusals({ [variable]: good })).toEqual([]);
      expect(refusals({ [variable]: 'other' })).toEqual([`${variable} must be one of ${values.join(', ')}, got "other"`]);
    },
  );

  it('lists: each entry checked, a bad one named', () => {
    expect(refusals({ CPS_WEBHOOK_BACKOFF_SECONDS: '30,soon' })).toEqual([
      'CPS_WEBHOOK_BACKOFF_SECONDS must list whole seconds, got "soon"',
    ]);
    expect(refusals({ CPS_IMAGE_RETRY_SECONDS: '60,,300' })).toEqual(['CPS_IMAGE_RETRY_SECONDS must list whole seconds, got ""']);
    expect(refusals({ CPS_TRUSTED_PROXIES: '10.0.0.0/8,nowhere' })).toEqual([
      'CPS_TRUSTED_PROXIES must list IP addresses or CIDR ranges (10.0.0.0/8, 2001:db8::/32), got "nowhere"',
    ]);
    expect(refusals({ CPS_WEBHOOK_ALLOW_HOSTS: 'receiver.test,,localhost' })).toEqual([]);
  });

  it("a database URL that is not PostgreSQL's is refused showing its scheme, never its password", () => {
    expect(refusals({ CPS_DATABASE_URL: 'mysql://cps:hunter2@db/cps' })).toEqual([
      'CPS_DATABASE_URL must be a postgres:// or postgresql:// URL (unset it to use the SQLite file at CPS_DB_PATH), got "mysql:…"',
    ]);
  });

  it("names every bad variable at once, in the configuration table's order", () => {
    expect(refusals({ CPS_PANEL_SESSION_HOURS: '0', CPS_PORT: '70000', CPS_WORKERS: 'process' })).toEqual([
      'CPS_PORT must be at most 65535, got 70000',
      'CPS_WORKERS must be one of thread, inline, got "process"',
      'CPS_PANEL_SESSION_HOURS must be at least 1, got 0',
    ]);
  });

  it('a value that was raised into range before (a panel session of 0 hours) now refuses the start, naming it', async () => {
    const run = promisify(execFile);
    const failed = await run(process.execPath, nodeArguments('src/cli.ts', ['serve']), {
      cwd: ROOT,
      env: { ...process.env, CPS_PANEL_SESSION_HOURS: '0', CPS_DB_PATH: path.join(os.tmpdir(), 'cps-unused.db') },
    }).then(
      () => undefined,
      (error: { code: number; stderr: string }) => error,
    );
    expect(failed?.code).toBe(2);
    expect(failed?.stderr).toBe('refusing to start: the configuration has bad values\nCPS_PANEL_SESSION_HOURS must be at least 1, got 0\n');
  });
});
