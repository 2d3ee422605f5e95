// One typed configuration object, read once at start (style: no process.env reads elsewhere).
// Every default is the product decision's value (../shared/spec/product-decisions.md).
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { PRODUCT_LIMIT_SETTINGS, type ProductLimits } from './admin/product-limits.js';
import { addressRange } from './shared/address-ranges.js';
import { CHANGES_MAX_ITEMS, WEBHOOK_PRODUCT_IDS_MAX_ITEMS } from './generated/public-limits.js';

export interface Config {
  /** TCP port the HTTP server listens on. */
  port: number;
  /** Interface the HTTP server binds to. */
  host: string;
  /** SQLite database file (created with its folder when missing); the media store sits beside it. */
  databasePath: string;
  /** PostgreSQL connection URL (postgres://…): when set, the database is PostgreSQL, not the SQLite file. */
  databaseUrl: string | null;
  /** Bearer token of the admin API (`/admin/v1`). Generated per start when not configured. */
  adminToken: string;
  /** True when adminToken came from the environment rather than being generated. */
  adminTokenConfigured: boolean;
  /** Base URL clients reach this service at; used in printed examples and hosted URLs. */
  publicBaseUrl: string;
  /** True when publicBaseUrl came from CPS_PUBLIC_BASE_URL: the panel then accepts forms from that origin only. */
  publicBaseUrlConfigured: boolean;
  /**
   * Proxies (IP addresses and CIDR ranges) whose X-Forwarded-For is believed: from one of them, the
   * client's address is the header's rightmost one that is not such a proxy (http/client-address.ts);
   * empty: the TCP peer is the client, and the header is ignored.
   */
  trustedProxies: string[];
  /** Build the demo catalog on start when the database holds no merchant. */
  demoOnEmpty: boolean;
  /** Products in the demo catalog built on first start. */
  demoProducts: number;
  /** Request sizes, and (ProductLimits, admin/product-limits.ts) the bounds of one product's source. */
  limits: ProductLimits & {
    // per_page's default (50) and range (1..200) are the spec's contract (spec 8), not configuration.
    /** Largest admin request body accepted (bytes); the NDJSON import has its own limit. */
    adminBodyBytes: number;
    /** Largest NDJSON import accepted (bytes). */
    importBodyBytes: number;
    /** Deepest nesting of arrays and objects an admin JSON body (or import line) may have. */
    maxJsonDepth: number;
    /** Products read, resolved and written per bounded step of a bulk re-publish, and import lines per transaction. */
    publishChunk: number;
    /**
     * A publish run's driver holds it this long past each chunk; a run held by no one is resumed
     * by another process, which looks at start and every half of this.
     */
    publishRunLeaseMs: number;
    /**
     * An import still checking its file whose progress has not been written for this long was left
     * by its process (stopped, killed): the next look of a `serve` or `worker` ends it as interrupted.
     */
    importStalledMs: number;
    /** Products one page of the admin API's product list looks at, at most (matching its filters or not). */
    productListScan: number;
  };
  storage: {
    /** A merchant-wide write holds the event loop at most about this long before it lets reads run. */
    writeSliceMs: number;
    /** A transaction waits this long for another process's write lock (SQLite), or a statement for a lock (PostgreSQL), before it fails. */
    lockTimeoutMs: number;
    /** The WAL is checkpointed in a background thread at most this often after commits (SQLite). */
    checkpointIntervalMs: number;
    /** Connections to PostgreSQL this process keeps at most. */
    poolSize: number;
  };
  webhooks: {
    /** Hosts (names or IPs) exempt from the SSRF guard and allowed over http:// (local development, tests). */
    allowHosts: string[];
    /** Per-request time-out of a delivery. */
    timeoutMs: number;
    /** Changes of one event kind for one endpoint and store wait at most this long to be batched ... */
    coalesceMs: number;
    /** ... or until this many product ids are waiting. */
    batchSize: number;
    /** Deliveries in flight at once to one endpoint (every process's), and overall (this process's). */
    perEndpointConcurrency: number;
    overallConcurrency: number;
    /**
     * Of this process's overall slots, at most this many hold deliveries to one merchant's
     * endpoints: a merchant whose receivers hang leaves the other slots to the other merchants.
     */
    perMerchantConcurrency: number;
    /** Waits before retry 1, 2, ... of a failed delivery (jittered ±20%); then it is given up. */
    backoffSeconds: number[];
    /** Consecutive failed attempts after which the merchant's owners are notified. */
    notifyAfterFailures: number;
    /** Owners are notified again for one failure streak at most this often. */
    renotifyHours: number;
    /** Consecutive failed attempts, spanning at least pauseMinStreakMinutes, that pause an endpoint ... */
    pauseAfterFailures: number;
    pauseMinStreakMinutes: number;
    /** ... for this cooldown. */
    cooldownMinutes: number;
    /** How often the dispatcher looks for work. */
    pollIntervalMs: number;
    /** A delivery claimed by a process that died is re-sent this long after its time-out. */
    leaseMarginMs: number;
    /**
     * After a secret rotation the old secret keeps signing this long, unless the merchant confirms
     * the new one sooner (product decisions: 24 h); 0: the new secret signs at once.
     */
    secretGraceHours: number;
  };
  images: {
    /** Run the image mirroring worker inside `serve` (turn off when a separate `worker` runs it). */
    mirrorInServe: boolean;
    /** Folder of the local media store (mirrored copies). */
    mediaDir: string;
    /** Per-request time-out of an image fetch. */
    timeoutMs: number;
    /** Largest image accepted. */
    maxBytes: number;
    /** Images fetched at once (by one mirror). */
    concurrency: number;
    /** At most this many of them for one merchant (capped at `concurrency`): the rest stay free for the others. */
    merchantConcurrency: number;
    /** At most this many of them from one origin (scheme, host, port) of one merchant. */
    originConcurrency: number;
    /** Waits before retry 1, 2, ... of a failing source; the last one repeats. */
    retrySeconds: number[];
    /** A source failing (other than 404/410) for this long is dead. */
    deadAfterHours: number;
    /** How often the worker looks for work. */
    pollIntervalMs: number;
  };
  /** Run the webhook dispatcher inside `serve` (turn off when a separate `worker` runs it). */
  webhookDispatcher: boolean;
  /**
   * Where `serve` runs its dispatcher and mirror: `thread`, a worker thread of its own (the event
   * loop answering requests never runs their statements); `inline`, on the serving event loop.
   */
  workers: 'thread' | 'inline';
  /**
   * The nice value (0-19) of `serve`'s worker threads on Linux: on a busy machine the thread that
   * answers requests gets the CPU first, the background work whatever is left (0: same priority).
   */
  workerNice: number;
  /** Owners' notifications by e-mail, in addition to the notifications table. */
  smtp: { url: string | null; from: string };
  /** Per-API-key token bucket on /v1 (product decisions, "Errors and bad input"); both at least 1. */
  rateLimit: {
    /** Requests a key may send at once (the bucket's capacity). */
    burst: number;
    /** Requests per second the bucket refills at (the sustained rate). */
    perSecond: number;
  };
  /**
   * A process accepts an active API key it has looked up for this long without looking again (0:
   * every request looks it up): a key revoked by another process stops working here within this time.
   */
  apiKeyCacheMs: number;
  /**
   * A key's last use (admin ApiKey `last_used_at`) is written at most this often per key (at least
   * 1 s): never a write per request; the time shown is at most about this old.
   */
  apiKeyLastUsedSeconds: number;
  /** gzip/br of public JSON responses by Accept-Encoding: bodies smaller than this go out as they are. */
  compressionMinBytes: number;
  /** Memory for coded (gzip/br) bytes of JSON reads, kept by strong ETag and coding so a page is coded once; 0 turns it off. */
  compressionCacheBytes: number;
  /**
   * Memory for published bytes read (pages, `?ids=` lists), served again while the merchant's
   * published version has not moved (catalog/read-cache.ts); 0 turns it off.
   */
  readCacheBytes: number;
  operations: {
    /** Least severe log level written (pino): fatal, error, warn, info, debug, trace or silent. */
    logLevel: LogLevel;
    /** Write one log line per HTTP request (method, route, status, duration, request id). */
    accessLog: boolean;
    /** Bearer token `/metrics` requires; null leaves it open. */
    metricsToken: string | null;
    /** A database statement slower than this (ms) is logged at warn with its name; 0: never. */
    slowStatementMs: number;
    /** Port `worker` answers /healthz, /readyz and /metrics on; null: no listener. */
    workerOpsPort: number | null;
    /** On SIGTERM, /readyz answers 503 this long while the process still serves (for load balancers). */
    shutdownDelayMs: number;
    /** Then requests in flight get this long to finish (deliveries and image fetches their own time-outs). */
    shutdownGraceMs: number;
  };
  panel: {
    /** An invitation link is valid this long. */
    invitationHours: number;
    /** A panel session ends after this long without a request ... */
    sessionIdleMinutes: number;
    /** ... and this long after sign-in in any case. */
    sessionAbsoluteHours: number;
    /**
     * Failed sign-ins of one account from one address within the window, after which each further
     * attempt of that pair waits (429): signInDelaySeconds, doubling with each failure, at most the window.
     */
    signInMaxFailures: number;
    /** The same for one address, whatever accounts it tries (spraying). */
    signInAddressMaxFailures: number;
    signInWindowMinutes: number;
    signInDelaySeconds: number;
    /** A secret shown once (new key, signing secret, invitation link) waits this long for the page that shows it. */
    shownOnceMinutes: number;
  };
  /** Snapshot exports of a store (`GET /v1/products/export`, catalog/snapshot-export.ts). */
  exports: {
    /** Products read per statement of an export's snapshot: a bounded step, the event loop free between two. */
    stepRows: number;
    /**
     * Bytes of an export read ahead of a slow client that are kept in memory; past them the rest
     * waits in a temporary file, so the snapshot ends at the database's pace, not the client's.
     */
    memoryBytes: number;
    /** Folder of those temporary files (each removed from the folder as soon as it is opened). */
    spoolDir: string;
    /** Snapshots this process reads at once (each holds a database connection); the others wait their turn. */
    concurrency: number;
    /** Exports one API key may have in flight at once (from the request to the last byte sent); 429 above. */
    perKey: number;
    /** A client that takes none of the bytes waiting for it for this long is cut off (its connection closed, no trailer). */
    stallTimeoutMs: number;
  };
  changes: {
    /** spec 4.4: recorded changes one `GET /v1/changes` response covers at most (1..1000). */
    feedWindow: number;
    /** Feed history kept at least this long; older changes are deleted. */
    retentionDays: number;
    /** How often the serving process deletes changes older than the retention. */
    pruneIntervalSeconds: number;
    /** Changes deleted per transaction while pruning (the event loop is free between two). */
    pruneBatch: number;
    /** The longest a `GET /v1/changes?wait=N` long-poll waits for a change (wait is clamped to it; 0: never waits). */
    maxWaitSeconds: number;
    /** A Server-Sent Events stream of the feed with nothing to send for this long sends a comment (a heartbeat). */
    heartbeatSeconds: number;
    /** Live feed connections (long-polls waiting, streams open) one API key may hold at once, per process. */
    livePerKey: number;
    /** Every store with waiting feed clients is read this often, whatever wake-ups came (writers in other processes). */
    livePollIntervalMs: number;
  };
}

type Env = Record<string, string | undefined>;

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

function databaseUrl(env: Env): string | null {
  const raw = env.CPS_DATABASE_URL;
  if (raw === undefined || raw === '') return null;
  if (!/^postgres(ql)?:\/\//.test(raw)) throw new Error('CPS_DATABASE_URL must be a postgres:// or postgresql:// URL (unset it to use the SQLite file at CPS_DB_PATH)');
  return raw;
}

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

/** CPS_TRUSTED_PROXIES: each entry an IP address or a CIDR range, refused at start otherwise (a typo must not trust the wrong peers). */
function trustedProxies(env: Env): string[] {
  const entries = (env.CPS_TRUSTED_PROXIES ?? '').split(',').map((entry) => entry.trim()).filter(Boolean);
  for (const entry of entries) {
    if (!addressRange(entry)) throw new Error(`CPS_TRUSTED_PROXIES must list IP addresses or CIDR ranges (10.0.0.0/8, 2001:db8::/32), got "${entry}"`);
  }
  return entries;
}

function logLevel(env: Env): LogLevel {
  const raw = env.CPS_LOG_LEVEL || 'info';
  if (!(LOG_LEVELS as readonly string[]).includes(raw)) throw new Error(`CPS_LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}, got "${raw}"`);
  return raw as LogLevel;
}

function int(env: Env, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!/^[0-9]+$/.test(raw)) throw new Error(`${name} must be a non-negative integer, got "${raw}"`);
  return Number(raw);
}

function bool(env: Env, name: string, fallback: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (['1', 'true', 'yes'].includes(raw.toLowerCase())) return true;
  if (['0', 'false', 'no'].includes(raw.toLowerCase())) return false;
  throw new Error(`${name} must be true or false, got "${raw}"`);
}

function oneOf<T extends string>(env: Env, name: string, values: readonly T[], fallback: T): T {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!(values as readonly string[]).includes(raw)) throw new Error(`${name} must be one of ${values.join(', ')}, got "${raw}"`);
  return raw as T;
}

/** The longest a long-poll of the change feed may be configured to wait (openapi: the `wait` parameter). */
export const MAX_FEED_WAIT_SECONDS = 300;

/** An old signing secret signs at most 30 days after a rotation. */
const MAX_SECRET_GRACE_HOURS = 720;

function atMost(value: number, ceiling: number, name: string): number {
  if (value > ceiling) throw new Error(`${name} must be at most ${ceiling}, got ${value}`);
  return value;
}

/** Product decisions set floors some settings may not go below (e.g. feed history >= 30 days). */
function atLeast(value: number, floor: number, name: string): number {
  if (value < floor) throw new Error(`${name} must be at least ${floor}, got ${value}`);
  return value;
}

/** The bounds of one product's source (issue 21.10), each at least 1. */
function productLimits(env: Env): ProductLimits {
  return Object.fromEntries(Object.entries(PRODUCT_LIMIT_SETTINGS).map(([name, { env: variable, fallback }]) =>
    [name, atLeast(int(env, variable, fallback), 1, variable)])) as unknown as ProductLimits;
}

/** Reads the configuration from environment variables; the README lists them with their defaults. */
/** Overrides for tests and embedding: any top-level value, or some fields of a group. */
export type ConfigOverrides = {
  [K in keyof Config]?: Config[K] extends unknown[] ? Config[K] : Config[K] extends object ? Partial<Config[K]> : Config[K];
};

export function loadConfig(env: Env = process.env, overrides: ConfigOverrides = {}): Config {
  const port = int(env, 'CPS_PORT', 8080);
  const host = env.CPS_HOST || '127.0.0.1';
  const adminToken = env.CPS_ADMIN_TOKEN || `adm_${randomBytes(24).toString('base64url')}`;
  const config: Config = {
    port,
    host,
    databasePath: path.resolve(env.CPS_DB_PATH || './data/catalog.db'),
    databaseUrl: databaseUrl(env),
    adminToken,
    adminTokenConfigured: Boolean(env.CPS_ADMIN_TOKEN),
    publicBaseUrl: (env.CPS_PUBLIC_BASE_URL || `http://${host}:${port}`).replace(/\/+$/, ''),
    publicBaseUrlConfigured: Boolean(env.CPS_PUBLIC_BASE_URL),
    trustedProxies: trustedProxies(env),
    demoOnEmpty: bool(env, 'CPS_DEMO_ON_EMPTY', true),
    demoProducts: int(env, 'CPS_DEMO_PRODUCTS', 500),
    limits: {
      adminBodyBytes: int(env, 'CPS_ADMIN_BODY_BYTES', 1024 * 1024),
      importBodyBytes: int(env, 'CPS_IMPORT_BODY_BYTES', 64 * 1024 * 1024),
      maxJsonDepth: Math.max(1, int(env, 'CPS_ADMIN_MAX_JSON_DEPTH', 32)),
      publishChunk: Math.max(1, int(env, 'CPS_PUBLISH_CHUNK', 500)),
      publishRunLeaseMs: Math.max(100, int(env, 'CPS_PUBLISH_RUN_LEASE_MS', 60_000)),
      productListScan: atLeast(int(env, 'CPS_PRODUCT_LIST_SCAN', 5000), 200, 'CPS_PRODUCT_LIST_SCAN'),
      importStalledMs: atLeast(int(env, 'CPS_IMPORT_STALLED_SECONDS', 60), 4, 'CPS_IMPORT_STALLED_SECONDS') * 1000,
      ...productLimits(env),
    },
    storage: {
      writeSliceMs: Math.max(1, int(env, 'CPS_WRITE_SLICE_MS', 5)),
      lockTimeoutMs: int(env, 'CPS_DB_LOCK_TIMEOUT_MS', 30_000),
      checkpointIntervalMs: Math.max(10, int(env, 'CPS_WAL_CHECKPOINT_INTERVAL_MS', 1000)),
      poolSize: Math.max(1, int(env, 'CPS_DB_POOL_SIZE', 10)),
    },
    webhooks: {
      allowHosts: (env.CPS_WEBHOOK_ALLOW_HOSTS ?? '').split(',').map((h) => h.trim()).filter(Boolean),
      timeoutMs: int(env, 'CPS_WEBHOOK_TIMEOUT_MS', 10_000),
      coalesceMs: int(env, 'CPS_WEBHOOK_COALESCE_MS', 2000),
      batchSize: Math.min(WEBHOOK_PRODUCT_IDS_MAX_ITEMS, Math.max(1, int(env, 'CPS_WEBHOOK_BATCH_SIZE', WEBHOOK_PRODUCT_IDS_MAX_ITEMS))),
      perEndpointConcurrency: Math.max(1, int(env, 'CPS_WEBHOOK_ENDPOINT_CONCURRENCY', 4)),
      overallConcurrency: Math.max(1, int(env, 'CPS_WEBHOOK_CONCURRENCY', 32)),
      // A quarter of the default slots: three merchants whose receivers all hang leave a quarter to everyone else.
      perMerchantConcurrency: Math.max(1, int(env, 'CPS_WEBHOOK_MERCHANT_CONCURRENCY', 8)),
      backoffSeconds: (env.CPS_WEBHOOK_BACKOFF_SECONDS ?? '30,120,600,3600,21600').split(',').map((v) => {
        if (!/^\d+$/.test(v.trim())) throw new Error(`CPS_WEBHOOK_BACKOFF_SECONDS must list whole seconds, got "${v}"`);
        return Number(v.trim());
      }),
      notifyAfterFailures: Math.max(1, int(env, 'CPS_WEBHOOK_NOTIFY_AFTER_FAILURES', 5)),
      renotifyHours: int(env, 'CPS_WEBHOOK_RENOTIFY_HOURS', 24),
      pauseAfterFailures: Math.max(1, int(env, 'CPS_WEBHOOK_PAUSE_AFTER_FAILURES', 20)),
      pauseMinStreakMinutes: int(env, 'CPS_WEBHOOK_PAUSE_MIN_STREAK_MINUTES', 60),
      cooldownMinutes: int(env, 'CPS_WEBHOOK_COOLDOWN_MINUTES', 60),
      pollIntervalMs: Math.max(10, int(env, 'CPS_WEBHOOK_POLL_INTERVAL_MS', 250)),
      leaseMarginMs: int(env, 'CPS_WEBHOOK_LEASE_MARGIN_MS', 30_000),
      secretGraceHours: atMost(int(env, 'CPS_WEBHOOK_SECRET_GRACE_HOURS', 24), MAX_SECRET_GRACE_HOURS, 'CPS_WEBHOOK_SECRET_GRACE_HOURS'),
    },
    webhookDispatcher: bool(env, 'CPS_WEBHOOK_DISPATCHER', true),
    workers: oneOf(env, 'CPS_WORKERS', ['thread', 'inline'] as const, 'thread'),
    workerNice: atMost(int(env, 'CPS_WORKER_NICE', 10), 19, 'CPS_WORKER_NICE'),
    images: {
      mirrorInServe: bool(env, 'CPS_IMAGE_MIRRORING', true),
      // Beside the database unless configured (resolved below, after overrides of databasePath).
      mediaDir: env.CPS_MEDIA_DIR ? path.resolve(env.CPS_MEDIA_DIR) : '',
      timeoutMs: int(env, 'CPS_IMAGE_TIMEOUT_MS', 15_000),
      maxBytes: int(env, 'CPS_IMAGE_MAX_BYTES', 10 * 1024 * 1024),
      concurrency: Math.max(1, int(env, 'CPS_IMAGE_CONCURRENCY', 4)),
      merchantConcurrency: Math.max(1, int(env, 'CPS_IMAGE_MERCHANT_CONCURRENCY', 3)),
      originConcurrency: Math.max(1, int(env, 'CPS_IMAGE_ORIGIN_CONCURRENCY', 2)),
      retrySeconds: (env.CPS_IMAGE_RETRY_SECONDS ?? '60,300,1800,7200,21600,43200').split(',').map((v) => {
        if (!/^\d+$/.test(v.trim())) throw new Error(`CPS_IMAGE_RETRY_SECONDS must list whole seconds, got "${v}"`);
        return Number(v.trim());
      }),
      deadAfterHours: int(env, 'CPS_IMAGE_DEAD_AFTER_HOURS', 72),
      pollIntervalMs: Math.max(10, int(env, 'CPS_IMAGE_POLL_INTERVAL_MS', 1000)),
    },
    smtp: { url: env.CPS_SMTP_URL || null, from: env.CPS_SMTP_FROM || 'catalog-publishing@localhost' },
    // 600 at once covers a full sync of a 120k-product store at 200 per page; 50/s after that (README).
    rateLimit: {
      burst: atLeast(int(env, 'CPS_RATE_LIMIT_BURST', 600), 1, 'CPS_RATE_LIMIT_BURST'),
      perSecond: atLeast(int(env, 'CPS_RATE_LIMIT_PER_SECOND', 50), 1, 'CPS_RATE_LIMIT_PER_SECOND'),
    },
    apiKeyCacheMs: int(env, 'CPS_API_KEY_CACHE_MS', 1000),
    apiKeyLastUsedSeconds: atLeast(int(env, 'CPS_API_KEY_LAST_USED_SECONDS', 60), 1, 'CPS_API_KEY_LAST_USED_SECONDS'),
    compressionMinBytes: int(env, 'CPS_COMPRESSION_MIN_BYTES', 1024),
    // 64 MiB holds ~5000 coded pages of 200 products (~13 KB each): every page of 5 stores of 100k products in both codings.
    compressionCacheBytes: int(env, 'CPS_COMPRESSION_CACHE_BYTES', 64 * 1024 * 1024),
    // 128 MiB holds ~770 pages of 200 products (~166 KB each with their digests): the pages of
    // every store an integrator is syncing now, several times over.
    readCacheBytes: int(env, 'CPS_READ_CACHE_BYTES', 128 * 1024 * 1024),
    operations: {
      logLevel: logLevel(env),
      accessLog: bool(env, 'CPS_ACCESS_LOG', true),
      metricsToken: env.CPS_METRICS_TOKEN || null,
      slowStatementMs: int(env, 'CPS_SLOW_STATEMENT_MS', 100),
      workerOpsPort: env.CPS_OPS_PORT ? int(env, 'CPS_OPS_PORT', 0) : null,
      shutdownDelayMs: int(env, 'CPS_SHUTDOWN_DELAY_MS', 0),
      shutdownGraceMs: int(env, 'CPS_SHUTDOWN_GRACE_MS', 10_000),
    },
    panel: {
      invitationHours: Math.max(1, int(env, 'CPS_PANEL_INVITATION_HOURS', 72)),
      sessionIdleMinutes: Math.max(1, int(env, 'CPS_PANEL_SESSION_IDLE_MINUTES', 60)),
      sessionAbsoluteHours: Math.max(1, int(env, 'CPS_PANEL_SESSION_HOURS', 12)),
      signInMaxFailures: Math.max(1, int(env, 'CPS_PANEL_SIGN_IN_MAX_FAILURES', 5)),
      signInAddressMaxFailures: Math.max(1, int(env, 'CPS_PANEL_SIGN_IN_ADDRESS_MAX_FAILURES', 20)),
      signInWindowMinutes: Math.max(1, int(env, 'CPS_PANEL_SIGN_IN_WINDOW_MINUTES', 15)),
      signInDelaySeconds: Math.max(1, int(env, 'CPS_PANEL_SIGN_IN_DELAY_SECONDS', 30)),
      shownOnceMinutes: Math.max(1, int(env, 'CPS_PANEL_SHOWN_ONCE_MINUTES', 10)),
    },
    exports: {
      stepRows: atLeast(int(env, 'CPS_EXPORT_STEP_ROWS', 500), 1, 'CPS_EXPORT_STEP_ROWS'),
      memoryBytes: int(env, 'CPS_EXPORT_MEMORY_BYTES', 8 * 1024 * 1024),
      spoolDir: path.resolve(env.CPS_EXPORT_SPOOL_DIR || os.tmpdir()),
      concurrency: atLeast(int(env, 'CPS_EXPORT_CONCURRENCY', 2), 1, 'CPS_EXPORT_CONCURRENCY'),
      perKey: atLeast(int(env, 'CPS_EXPORTS_PER_KEY', 2), 1, 'CPS_EXPORTS_PER_KEY'),
      stallTimeoutMs: atLeast(int(env, 'CPS_EXPORT_STALL_TIMEOUT_MS', 60_000), 100, 'CPS_EXPORT_STALL_TIMEOUT_MS'),
    },
    changes: {
      feedWindow: Math.min(CHANGES_MAX_ITEMS, Math.max(1, int(env, 'CPS_FEED_WINDOW', CHANGES_MAX_ITEMS))),
      retentionDays: atLeast(int(env, 'CPS_CHANGE_RETENTION_DAYS', 30), 30, 'CPS_CHANGE_RETENTION_DAYS'),
      pruneIntervalSeconds: Math.max(1, int(env, 'CPS_CHANGE_PRUNE_INTERVAL_SECONDS', 3600)),
      pruneBatch: atLeast(int(env, 'CPS_CHANGE_PRUNE_BATCH', 1000), 1, 'CPS_CHANGE_PRUNE_BATCH'),
      // 30 s stays under the idle time-outs of common load balancers and proxies (60 s).
      maxWaitSeconds: atMost(int(env, 'CPS_FEED_MAX_WAIT_SECONDS', 30), MAX_FEED_WAIT_SECONDS, 'CPS_FEED_MAX_WAIT_SECONDS'),
      heartbeatSeconds: atMost(atLeast(int(env, 'CPS_FEED_HEARTBEAT_SECONDS', 15), 1, 'CPS_FEED_HEARTBEAT_SECONDS'), 300, 'CPS_FEED_HEARTBEAT_SECONDS'),
      livePerKey: atLeast(int(env, 'CPS_FEED_LIVE_PER_KEY', 20), 1, 'CPS_FEED_LIVE_PER_KEY'),
      livePollIntervalMs: atLeast(int(env, 'CPS_FEED_LIVE_POLL_MS', 1000), 50, 'CPS_FEED_LIVE_POLL_MS'),
    },
  };
  const merged: Config = {
    ...config, ...overrides,
    limits: { ...config.limits, ...overrides.limits },
    storage: { ...config.storage, ...overrides.storage },
    panel: { ...config.panel, ...overrides.panel },
    changes: { ...config.changes, ...overrides.changes },
    exports: { ...config.exports, ...overrides.exports },
    webhooks: { ...config.webhooks, ...overrides.webhooks },
    smtp: { ...config.smtp, ...overrides.smtp },
    images: { ...config.images, ...overrides.images },
    rateLimit: { ...config.rateLimit, ...overrides.rateLimit },
    operations: { ...config.operations, ...overrides.operations },
  };
  if (!merged.images.mediaDir) merged.images = { ...merged.images, mediaDir: path.join(path.dirname(merged.databasePath), 'media') };
  return merged;
}
