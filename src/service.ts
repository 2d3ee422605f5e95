// One place builds the service: storage, the domain services, the outbound address guard, the
// webhook dispatcher, the image mirror and the metrics, once per process. `serve`, `worker`, every
// CLI command, the benchmarks and the tests build it here; what they run of it is theirs to choose.
import nodemailer from 'nodemailer';
import { PanelAccounts, type AccountMailer } from './admin/accounts.js';
import { ApiKeyUses } from './tenancy/api-key-uses.js';
import { ActiveApiKeys } from './tenancy/api-keys.js';
import { HeldApiKeys } from './tenancy/held-api-keys.js';
import { CatalogAdmin } from './admin/catalog-admin.js';
import { ImportJobs } from './admin/import-jobs.js';
import { CatalogReads } from './catalog/reads.js';
import { LiveFeed } from './changes/live.js';
import { PublishedReadCache } from './catalog/read-cache.js';
import type { Config } from './config.js';
import { createImageMirror, type ImageMirror } from './images/mirror.js';
import { createLogger, type Logger } from './operations/log.js';
import { ServiceMetrics, type DeliveryObserver } from './operations/metrics.js';
import { isStatementTimed } from './operations/statements.js';
import { setYieldSlice } from './shared/cooperative.js';
import type { CatalogStorage } from './storage/port.js';
import { openPostgresStorage } from './storage/postgres/index.js';
import { openSqliteStorage } from './storage/sqlite/index.js';
import { withHeldCommits } from './storage/held-commits.js';
import { IdempotencyKeys } from './admin/idempotency-keys.js';
import { AddressGuard } from './outbound/address-guard.js';
import { createWebhookDispatcher, type WebhookDispatcher } from './webhooks/dispatcher.js';
import { WebhookEndpoints } from './webhooks/endpoints.js';

export interface Service {
  config: Config;
  now: () => Date;
  logger: Logger;
  storage: CatalogStorage;
  metrics: ServiceMetrics;
  /** The SSRF guard every outbound request (receivers, image sources) and registration goes through. */
  guard: AddressGuard;
  admin: CatalogAdmin;
  /** NDJSON imports run as jobs whose progress and outcome live in the database. */
  imports: ImportJobs;
  /** The administration panel's users, invitations, sessions and audit log. */
  accounts: PanelAccounts;
  reads: CatalogReads;
  /** The public API's keys as this process remembers them (CPS_API_KEY_CACHE_MS); the admin's revoke forgets one at once. */
  apiKeys: ActiveApiKeys;
  /** The keys this process's open streams and long-polls hold: a revoked key ends them (here at once, elsewhere within CPS_API_KEY_CACHE_MS). */
  heldApiKeys: HeldApiKeys;
  /** Each API key's last use, written at most once per CPS_API_KEY_LAST_USED_SECONDS per key. */
  apiKeyUses: ApiKeyUses;
  endpoints: WebhookEndpoints;
  /** The admin API's Idempotency-Keys, kept CPS_IDEMPOTENCY_HOURS. */
  idempotencyKeys: IdempotencyKeys;
  /**
   * The change feed's waiting clients (long-polls, streams) and their wake-ups; it listens to the
   * storage from its first client on (serve's worker threads tell it their commits: worker-thread.ts).
   */
  liveFeed: LiveFeed;
  /** Built here, started by whoever runs it (serve or worker). */
  dispatcher: WebhookDispatcher;
  mirror: ImageMirror;
  /** Stops the dispatcher and the mirror (they take no new work and finish what they hold) and waits for running imports. */
  stopWork(): Promise<void>;
  /** stopWork(), then closes storage. */
  close(): Promise<void>;
}

export interface ServiceOptions {
  now?: () => Date;
  logger?: Logger;
  /** Storage already opened (tests that open it themselves); by default the configured database. */
  storage?: CatalogStorage;
  /** Where the dispatcher counts its attempts (a worker thread's: the serving thread's /metrics); by default this service's metrics. */
  deliveries?: DeliveryObserver;
}

/**
 * The configured database, with every migration applied: PostgreSQL when CPS_DATABASE_URL is set
 * (its operations wait for the migrations, which start at once), else the SQLite file.
 */
export function openStorage(config: Config, logger?: Logger): CatalogStorage {
  if (config.databaseUrl) {
    return openPostgresStorage(config.databaseUrl, {
      poolSize: config.storage.poolSize,
      poolIdleMs: config.storage.poolIdleMs,
      lockTimeoutMs: config.storage.lockTimeoutMs,
    });
  }
  return openSqliteStorage(config.databasePath, {
    lockTimeoutMs: config.storage.lockTimeoutMs,
    snapshotConnections: config.storage.poolSize,
    checkpointIntervalMs: config.storage.checkpointIntervalMs,
    onCheckpointError: (error) => logger?.warn({ error }, 'WAL checkpoint failed (the next one retries)'),
  });
}

export function createService(config: Config, options: ServiceOptions = {}): Service {
  const now = options.now ?? (() => new Date());
  const logger = options.logger ?? createLogger(config.operations);
  setYieldSlice(config.storage.writeSliceMs);
  // A request's transactions may hold their commit for its answer (storage/held-commits.ts: the admin API's idempotency keys).
  const storage = withHeldCommits(options.storage ?? openStorage(config, logger));
  const metrics = new ServiceMetrics(storage, now, logger, {
    slowStatementMs: config.operations.slowStatementMs,
    countMax: config.operations.metricsCountMax,
  });
  // Every statement's duration into /metrics, and the slow ones into the log (also a storage the caller opened).
  if (isStatementTimed(storage)) storage.observeStatements(metrics);
  const guard = new AddressGuard(config.webhooks.allowHosts);
  const dispatcher = createWebhookDispatcher(storage, config, { now, logger, metrics: options.deliveries ?? metrics, guard });
  const apiKeys = new ActiveApiKeys(storage, config.apiKeyCacheMs, now);
  const heldApiKeys = new HeldApiKeys(storage, apiKeys, config.apiKeyCacheMs, logger, now);
  const apiKeyUses = new ApiKeyUses(storage, config.apiKeyLastUsedSeconds * 1000, now, logger);
  const admin = new CatalogAdmin(
    storage,
    now,
    config.limits.publishChunk,
    heldApiKeys,
    config.limits.publishRunLeaseMs,
    config.limits,
    config.apiKeysPerMerchant,
  );
  const mirror = createImageMirror(storage, config, { now, logger, guard, publisher: admin.publisher });
  const imports = new ImportJobs(storage, admin, now, {
    chunkSize: config.limits.publishChunk,
    maxJsonDepth: config.limits.maxJsonDepth,
    stalledAfterMs: config.limits.importStalledMs,
  });
  const {
    feedWindow,
    maxWaitSeconds,
    heartbeatSeconds,
    livePerKey,
    livePerMerchant,
    livePerProcess,
    livePollIntervalMs,
    windowCache,
    turnMs,
  } = config.changes;
  const liveFeed = new LiveFeed(
    storage,
    {
      feedWindow,
      maxWaitSeconds,
      heartbeatSeconds,
      perKey: livePerKey,
      perMerchant: livePerMerchant,
      perProcess: livePerProcess,
      pollIntervalMs: livePollIntervalMs,
      windowCache,
      turnMs,
    },
    logger,
  );
  metrics.countLiveConnections(
    () => liveFeed.connections,
    () => liveFeed.waitingClients,
  );
  let stopping: Promise<void> | undefined;
  let closing: Promise<void> | undefined;
  const stopWork = () => {
    stopping ??= Promise.all([dispatcher.stop(), mirror.stop(), imports.drain(), admin.publishRuns.stop()]).then(() => undefined);
    return stopping;
  };
  return {
    config,
    now,
    logger,
    storage,
    metrics,
    guard,
    admin,
    imports,
    accounts: new PanelAccounts(storage, config, now, accountMailer(config, logger), metrics),
    reads: new CatalogReads(storage, config.readCacheBytes > 0 ? new PublishedReadCache(config.readCacheBytes, metrics) : undefined),
    apiKeys,
    heldApiKeys,
    apiKeyUses,
    endpoints: new WebhookEndpoints(storage, guard, now, config.webhooks.secretGraceHours, config.webhooks.fullPayloadBytes),
    idempotencyKeys: new IdempotencyKeys(storage, now, config.changes.idempotencyHours),
    liveFeed,
    dispatcher,
    mirror,
    stopWork,
    close: () => {
      liveFeed.close();
      heldApiKeys.close();
      closing ??= stopWork()
        .then(() => apiKeyUses.flush())
        .then(() => storage.close())
        .finally(() => metrics.close());
      return closing;
    },
  };
}

/** What the panel's accounts e-mail when SMTP is configured: invitations, password resets, password changes. */
function accountMailer(config: Config, logger: Logger): AccountMailer | undefined {
  if (!config.smtp.url) return undefined;
  const transport = nodemailer.createTransport(config.smtp.url);
  return async ({ to, subject, text }) => {
    try {
      await transport.sendMail({ from: config.smtp.from, to, subject, text });
    } catch (error) {
      logger.error({ err: error, subject }, 'e-mailing a panel account failed');
    }
  };
}
