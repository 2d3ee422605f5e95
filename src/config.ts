// One typed configuration object, read once at start (no process.env reads elsewhere: docs/architecture.md#the-layout).
// Each setting is declared once in config/settings.ts (variable, default, bounds, description);
// here its value takes its place in `Config`, whose type is what this placement makes of them.
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import type { z } from 'zod';
import { fromEnvironment, SETTINGS } from './config/settings.js';

export { ConfigError, LOG_LEVELS, MAX_FEED_WAIT_SECONDS, type LogLevel } from './config/settings.js';

type Env = Record<string, string | undefined>;

/** Where each setting goes in `Config`, and the values derived from them. */
function placed(s: z.output<typeof SETTINGS>) {
  return {
    port: s.CPS_PORT,
    host: s.CPS_HOST,
    /** The SQLite file; the media store sits beside it unless CPS_MEDIA_DIR says otherwise. */
    databasePath: path.resolve(s.CPS_DB_PATH),
    /** When set, the database is PostgreSQL, not the SQLite file. */
    databaseUrl: s.CPS_DATABASE_URL,
    adminToken: s.CPS_ADMIN_TOKEN ?? `adm_${randomBytes(24).toString('base64url')}`,
    /** True when adminToken came from the environment rather than being generated. */
    adminTokenConfigured: s.CPS_ADMIN_TOKEN !== null,
    publicBaseUrl: (s.CPS_PUBLIC_BASE_URL ?? `http://${s.CPS_HOST}:${s.CPS_PORT}`).replace(/\/+$/, ''),
    /** True when publicBaseUrl came from CPS_PUBLIC_BASE_URL: the panel then accepts forms from that origin only. */
    publicBaseUrlConfigured: s.CPS_PUBLIC_BASE_URL !== null,
    /** Matched per request by http/client-address.ts. */
    trustedProxies: s.CPS_TRUSTED_PROXIES,
    demoOnEmpty: s.CPS_DEMO_ON_EMPTY,
    demoProducts: s.CPS_DEMO_PRODUCTS,
    /** Request sizes, and (ProductLimits, catalog/product-limits.ts) the bounds of one product's source. */
    limits: {
      // per_page's default (50) and range (1..200) are the spec's contract (spec 8), not configuration.
      adminBodyBytes: s.CPS_ADMIN_BODY_BYTES,
      importBodyBytes: s.CPS_IMPORT_BODY_BYTES,
      maxJsonDepth: s.CPS_ADMIN_MAX_JSON_DEPTH,
      publishChunk: s.CPS_PUBLISH_CHUNK,
      publishRunLeaseMs: s.CPS_PUBLISH_RUN_LEASE_MS,
      productListScan: s.CPS_PRODUCT_LIST_SCAN,
      importStalledMs: s.CPS_IMPORT_STALLED_SECONDS * 1000,
      maxProductBytes: s.CPS_MAX_PRODUCT_BYTES,
      maxProductOverrides: s.CPS_MAX_PRODUCT_OVERRIDES,
      maxProductSupplierAttributes: s.CPS_MAX_PRODUCT_SUPPLIER_ATTRIBUTES,
      maxProductImages: s.CPS_MAX_PRODUCT_IMAGES,
      maxProductOffers: s.CPS_MAX_PRODUCT_OFFERS,
      maxProductLocales: s.CPS_MAX_PRODUCT_LOCALES,
    },
    storage: {
      writeSliceMs: s.CPS_WRITE_SLICE_MS,
      lockTimeoutMs: s.CPS_DB_LOCK_TIMEOUT_MS,
      checkpointIntervalMs: s.CPS_WAL_CHECKPOINT_INTERVAL_MS,
      poolSize: s.CPS_DB_POOL_SIZE,
      poolIdleMs: s.CPS_DB_POOL_IDLE_MS,
    },
    webhooks: {
      allowHosts: s.CPS_WEBHOOK_ALLOW_HOSTS,
      timeoutMs: s.CPS_WEBHOOK_TIMEOUT_MS,
      coalesceMs: s.CPS_WEBHOOK_COALESCE_MS,
      batchSize: s.CPS_WEBHOOK_BATCH_SIZE,
      fullPayloadBytes: s.CPS_WEBHOOK_FULL_PAYLOAD_BYTES,
      perEndpointConcurrency: s.CPS_WEBHOOK_ENDPOINT_CONCURRENCY,
      overallConcurrency: s.CPS_WEBHOOK_CONCURRENCY,
      perMerchantConcurrency: s.CPS_WEBHOOK_MERCHANT_CONCURRENCY,
      backoffSeconds: s.CPS_WEBHOOK_BACKOFF_SECONDS,
      notifyAfterFailures: s.CPS_WEBHOOK_NOTIFY_AFTER_FAILURES,
      renotifyHours: s.CPS_WEBHOOK_RENOTIFY_HOURS,
      pauseAfterFailures: s.CPS_WEBHOOK_PAUSE_AFTER_FAILURES,
      pauseMinStreakMinutes: s.CPS_WEBHOOK_PAUSE_MIN_STREAK_MINUTES,
      cooldownMinutes: s.CPS_WEBHOOK_COOLDOWN_MINUTES,
      pollIntervalMs: s.CPS_WEBHOOK_POLL_INTERVAL_MS,
      idlePollMaxMs: s.CPS_WEBHOOK_IDLE_POLL_MAX_MS,
      leaseMarginMs: s.CPS_WEBHOOK_LEASE_MARGIN_MS,
      secretGraceHours: s.CPS_WEBHOOK_SECRET_GRACE_HOURS,
    },
    webhookDispatcher: s.CPS_WEBHOOK_DISPATCHER,
    workers: s.CPS_WORKERS,
    workerNice: s.CPS_WORKER_NICE,
    images: {
      mirrorInServe: s.CPS_IMAGE_MIRRORING,
      // Beside the database unless configured (resolved in loadConfig, after overrides of databasePath).
      mediaDir: s.CPS_MEDIA_DIR === null ? '' : path.resolve(s.CPS_MEDIA_DIR),
      timeoutMs: s.CPS_IMAGE_TIMEOUT_MS,
      maxBytes: s.CPS_IMAGE_MAX_BYTES,
      concurrency: s.CPS_IMAGE_CONCURRENCY,
      merchantConcurrency: s.CPS_IMAGE_MERCHANT_CONCURRENCY,
      originConcurrency: s.CPS_IMAGE_ORIGIN_CONCURRENCY,
      commitsAtOnce: s.CPS_IMAGE_COMMITS_AT_ONCE,
      originFailures: s.CPS_IMAGE_ORIGIN_FAILURES,
      originProbeMs: s.CPS_IMAGE_ORIGIN_PROBE_MS,
      originProbeMaxMs: s.CPS_IMAGE_ORIGIN_PROBE_MAX_MS,
      retrySeconds: s.CPS_IMAGE_RETRY_SECONDS,
      deadAfterHours: s.CPS_IMAGE_DEAD_AFTER_HOURS,
      pollIntervalMs: s.CPS_IMAGE_POLL_INTERVAL_MS,
      idlePollMaxMs: s.CPS_IMAGE_IDLE_POLL_MAX_MS,
    },
    smtp: { url: s.CPS_SMTP_URL, from: s.CPS_SMTP_FROM },
    /** Per-API-key token bucket on /v1 (docs/decisions.md#rate-limits). */
    rateLimit: { burst: s.CPS_RATE_LIMIT_BURST, perSecond: s.CPS_RATE_LIMIT_PER_SECOND },
    /** Per-credential token bucket on /admin/v1 (http/rate-limit.ts). */
    adminRateLimit: { burst: s.CPS_ADMIN_RATE_BURST, perSecond: s.CPS_ADMIN_RATE_PER_SECOND },
    /** Wrong admin tokens and keys per client address (http/auth-failures.ts). */
    adminAuthFailures: { max: s.CPS_ADMIN_AUTH_MAX_FAILURES, windowMinutes: s.CPS_ADMIN_AUTH_WINDOW_MINUTES },
    apiKeysPerMerchant: s.CPS_API_KEYS_PER_MERCHANT,
    apiKeyCacheMs: s.CPS_API_KEY_CACHE_MS,
    /** A client that does not read: its connection is closed once this many bytes wait for it (http/unsent-bytes.ts). */
    unsentBytesMax: s.CPS_UNSENT_BYTES_MAX,
    apiKeyLastUsedSeconds: s.CPS_API_KEY_LAST_USED_SECONDS,
    compressionMinBytes: s.CPS_COMPRESSION_MIN_BYTES,
    compressionCacheBytes: s.CPS_COMPRESSION_CACHE_BYTES,
    /** The published bytes read (catalog/read-cache.ts). */
    readCacheBytes: s.CPS_READ_CACHE_BYTES,
    operations: {
      logLevel: s.CPS_LOG_LEVEL,
      accessLog: s.CPS_ACCESS_LOG,
      metricsToken: s.CPS_METRICS_TOKEN,
      slowStatementMs: s.CPS_SLOW_STATEMENT_MS,
      metricsCountMax: s.CPS_METRICS_COUNT_MAX,
      workerOpsPort: s.CPS_OPS_PORT,
      maxConnections: s.CPS_MAX_CONNECTIONS,
      descriptorReserve: s.CPS_DESCRIPTOR_RESERVE,
      shutdownDelayMs: s.CPS_SHUTDOWN_DELAY_MS,
      shutdownGraceMs: s.CPS_SHUTDOWN_GRACE_MS,
    },
    panel: {
      invitationHours: s.CPS_PANEL_INVITATION_HOURS,
      sessionIdleMinutes: s.CPS_PANEL_SESSION_IDLE_MINUTES,
      sessionAbsoluteHours: s.CPS_PANEL_SESSION_HOURS,
      signInMaxFailures: s.CPS_PANEL_SIGN_IN_MAX_FAILURES,
      signInAddressMaxFailures: s.CPS_PANEL_SIGN_IN_ADDRESS_MAX_FAILURES,
      signInWindowMinutes: s.CPS_PANEL_SIGN_IN_WINDOW_MINUTES,
      signInDelaySeconds: s.CPS_PANEL_SIGN_IN_DELAY_SECONDS,
      shownOnceMinutes: s.CPS_PANEL_SHOWN_ONCE_MINUTES,
      passwordHashes: { atOnce: s.CPS_PANEL_PASSWORD_HASHES_AT_ONCE, queue: s.CPS_PANEL_PASSWORD_HASH_QUEUE },
    },
    /** Snapshot exports of a store (`GET /v1/products/export`, catalog/snapshot-export.ts). */
    exports: {
      stepRows: s.CPS_EXPORT_STEP_ROWS,
      memoryBytes: s.CPS_EXPORT_MEMORY_BYTES,
      spoolDir: path.resolve(s.CPS_EXPORT_SPOOL_DIR),
      concurrency: s.CPS_EXPORT_CONCURRENCY,
      concurrencyPerMerchant: s.CPS_EXPORT_CONCURRENCY_PER_MERCHANT,
      perKey: s.CPS_EXPORTS_PER_KEY,
      perMerchant: s.CPS_EXPORTS_PER_MERCHANT,
      perProcess: s.CPS_EXPORTS_PER_PROCESS,
      spoolBytesPerMerchant: s.CPS_EXPORT_SPOOL_BYTES_PER_MERCHANT,
      spoolBytesPerProcess: s.CPS_EXPORT_SPOOL_BYTES_PER_PROCESS,
      stallTimeoutMs: s.CPS_EXPORT_STALL_TIMEOUT_MS,
    },
    changes: {
      feedWindow: s.CPS_FEED_WINDOW,
      retentionDays: s.CPS_CHANGE_RETENTION_DAYS,
      pruneIntervalSeconds: s.CPS_CHANGE_PRUNE_INTERVAL_SECONDS,
      pruneBatch: s.CPS_CHANGE_PRUNE_BATCH,
      /** Admin API idempotency keys are kept this long (admin/idempotency-keys.ts), pruned with the changes. */
      idempotencyHours: s.CPS_IDEMPOTENCY_HOURS,
      maxWaitSeconds: s.CPS_FEED_MAX_WAIT_SECONDS,
      heartbeatSeconds: s.CPS_FEED_HEARTBEAT_SECONDS,
      livePerKey: s.CPS_FEED_LIVE_PER_KEY,
      streamStallTimeoutMs: s.CPS_FEED_STALL_TIMEOUT_MS,
      streamRetryMs: s.CPS_FEED_STREAM_RETRY_MS,
      livePerMerchant: s.CPS_FEED_LIVE_PER_MERCHANT,
      livePerProcess: s.CPS_FEED_LIVE_PER_PROCESS,
      livePollIntervalMs: s.CPS_FEED_LIVE_POLL_MS,
      windowCache: s.CPS_FEED_WINDOW_CACHE,
      turnMs: s.CPS_FEED_TURN_MS,
    },
  };
}

/** The settings placed: parsing the environment with it yields the typed `Config`. */
const CONFIG = SETTINGS.transform(placed);

/** The configuration; what each value means is its setting's description (config/settings.ts, docs/configuration.md). */
export type Config = z.output<typeof CONFIG>;

/** Which database the configuration names, for logs and messages: a PostgreSQL URL without its password. */
export function databaseLabel(config: Pick<Config, 'databasePath' | 'databaseUrl'>): string {
  if (!config.databaseUrl) return config.databasePath;
  try {
    const url = new URL(config.databaseUrl);
    if (url.password) url.password = '***';
    return url.toString();
  } catch {
    return 'postgres://(unparsable URL)';
  }
}

/** Overrides for tests and embedding: any top-level value, or some fields of a group. */
export type ConfigOverrides = {
  [K in keyof Config]?: Config[K] extends unknown[] ? Config[K] : Config[K] extends object ? Partial<Config[K]> : Config[K];
};

/**
 * Reads the configuration from environment variables (docs/configuration.md lists them with their defaults);
 * a bad value throws a ConfigError naming each bad variable, its value and its bounds.
 */
export function loadConfig(env: Env = process.env, overrides: ConfigOverrides = {}): Config {
  const config = fromEnvironment(CONFIG, env);
  const merged: Config = {
    ...config,
    ...overrides,
    limits: { ...config.limits, ...overrides.limits },
    storage: { ...config.storage, ...overrides.storage },
    panel: { ...config.panel, ...overrides.panel },
    changes: { ...config.changes, ...overrides.changes },
    exports: { ...config.exports, ...overrides.exports },
    webhooks: { ...config.webhooks, ...overrides.webhooks },
    smtp: { ...config.smtp, ...overrides.smtp },
    images: { ...config.images, ...overrides.images },
    rateLimit: { ...config.rateLimit, ...overrides.rateLimit },
    adminRateLimit: { ...config.adminRateLimit, ...overrides.adminRateLimit },
    adminAuthFailures: { ...config.adminAuthFailures, ...overrides.adminAuthFailures },
    operations: { ...config.operations, ...overrides.operations },
  };
  if (!merged.images.mediaDir) merged.images = { ...merged.images, mediaDir: path.join(path.dirname(merged.databasePath), 'media') };
  return merged;
}
