#!/usr/bin/env node
// The command line: serve, import, keys, demo. `catalog-publishing-service --help` lists them.
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { SingleBar, Presets } from 'cli-progress';
import { issueApiKey } from './admin/api-keys.js';
import { CatalogAdmin } from './admin/catalog-admin.js';
import { buildDemoCatalog } from './admin/demo.js';
import { importNdjson } from './admin/import.js';
import { schedulePruning } from './changes/retention.js';
import { loadConfig } from './config.js';
import type { ChangeType, DeliveryStatus } from './storage/port.js';
import { AddressGuard } from './outbound/address-guard.js';
import { createImageMirror, retryDeadImages } from './images/mirror.js';
import { createWebhookDispatcher } from './webhooks/dispatcher.js';
import { EVENTS, WebhookEndpoints, endpointView } from './webhooks/endpoints.js';
import { ProblemError } from './shared/problem.js';
import { createLogger, type Logger } from './operations/log.js';
import { ServiceMetrics } from './operations/metrics.js';
import { startOperationsServer, startServer } from './server.js';
import { openSqliteStorage } from './storage/sqlite.js';

const USAGE = `Usage: catalog-publishing-service <command> [options]

Commands:
  serve                               run the HTTP service, the webhook dispatcher and image mirroring (CPS_* variables)
  worker                              run only the webhook dispatcher and image mirroring (beside a serve
                                      with CPS_WEBHOOK_DISPATCHER=false CPS_IMAGE_MIRRORING=false);
                                      /healthz, /readyz and /metrics on CPS_OPS_PORT when it is set
  backup --to FILE                    online backup of the database (safe while serve runs)
  images status --merchant ID         mirroring progress: images per state, the dead ones with their errors
  images retry-dead --merchant ID     fetch every dead image of the merchant again
  import FILE --merchant ID           bulk-import an NDJSON file of product operations
  keys create --merchant ID [--name N] issue an API key (printed once)
  demo [--db FILE] [--products N] [--json]
                                      build the deterministic demo catalog into a database
  webhooks create --merchant ID --url URL [--store SLUG] [--events price,content,removed]
  webhooks list --merchant ID         endpoints with their health
  webhooks rotate|delete|test --merchant ID --endpoint ID
  webhooks enable --merchant ID --endpoint ID   re-enable a paused or disabled endpoint
  webhooks deliveries --merchant ID --endpoint ID [--status S]   the attempt log, newest first
  webhooks resend --merchant ID --endpoint ID --delivery ID
  webhooks recover --merchant ID --endpoint ID --since ISO-TIME  re-send failed deliveries since then
  webhooks notifications --merchant ID

Common option: --db FILE (default: CPS_DB_PATH or ./data/catalog.db)`;

function fail(message: string): never {
  console.error(message);
  process.exit(2);
}

function positiveInt(value: string | undefined, name: string): number {
  if (!value || !/^[1-9][0-9]*$/.test(value)) fail(`--${name} must be a positive integer`);
  return Number(value);
}

async function main(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      db: { type: 'string' },
      merchant: { type: 'string' },
      name: { type: 'string' },
      products: { type: 'string' },
      url: { type: 'string' },
      store: { type: 'string' },
      events: { type: 'string' },
      endpoint: { type: 'string' },
      delivery: { type: 'string' },
      since: { type: 'string' },
      to: { type: 'string' },
      status: { type: 'string' },
      json: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const [command, ...rest] = positionals;
  if (values.help || !command) {
    console.log(USAGE);
    return;
  }
  const config = loadConfig(process.env, values.db ? { databasePath: path.resolve(values.db) } : {});

  if (command === 'serve') return serveCommand(config);
  if (command === 'worker') return workerCommand(config);

  const storage = openSqliteStorage(config.databasePath);
  const admin = new CatalogAdmin(storage, () => new Date(), config.limits.publishChunk);
  try {
    if (command === 'demo') {
      const products = values.products ? positiveInt(values.products, 'products') : config.demoProducts;
      const bar = values.json ? undefined : new SingleBar({ format: 'demo catalog [{bar}] {value}/{total} products' }, Presets.shades_classic);
      bar?.start(products, 0);
      const result = buildDemoCatalog(admin, products, (done) => bar?.update(done));
      bar?.stop();
      console.log(values.json ? JSON.stringify(result) : `merchant ${result.merchant_id}, API key ${result.api_key}`);
    } else if (command === 'keys' && rest[0] === 'create') {
      const merchantId = positiveInt(values.merchant, 'merchant');
      admin.merchant(merchantId);
      const key = issueApiKey(storage, merchantId, values.name ?? 'cli', new Date());
      console.log(values.json ? JSON.stringify(key) : `API key for merchant ${merchantId} (shown once): ${key.key}`);
    } else if (command === 'backup') {
      const destination = typeof values.to === 'string' ? path.resolve(values.to) : fail('backup needs --to FILE');
      if (fs.existsSync(destination)) fail(`${destination} exists: choose a new file`);
      await storage.backup(destination);
      console.log(`backed up ${config.databasePath} to ${destination}`);
    } else if (command === 'images' && rest[0] === 'status') {
      const merchantId = positiveInt(values.merchant, 'merchant');
      admin.merchant(merchantId);
      const dead = storage.deadImages(merchantId, 100).map(({ url, last_error, first_failure_at, updated_at }) => ({ url, last_error, first_failure_at, updated_at }));
      console.log(JSON.stringify({ ...storage.imageStateCounts(merchantId), dead_images: dead }, null, values.json ? undefined : 2));
    } else if (command === 'images' && rest[0] === 'retry-dead') {
      const merchantId = positiveInt(values.merchant, 'merchant');
      admin.merchant(merchantId);
      console.log(JSON.stringify({ retried: retryDeadImages(storage, merchantId, new Date(), config.limits.publishChunk) }));
    } else if (command === 'webhooks') {
      webhooksCommand(storage, config, rest[0], values);
    } else if (command === 'import') {
      const file = rest[0] ?? fail('import needs a FILE');
      const merchantId = positiveInt(values.merchant, 'merchant');
      const text = fs.readFileSync(file, 'utf8');
      const bar = new SingleBar({ format: 'import [{bar}] {value}/{total} lines' }, Presets.shades_classic);
      const result = importNdjson(admin, merchantId, text, {
        onStart: (total) => bar.start(total, 0),
        onProgress: (done) => bar.update(done),
      });
      bar.stop();
      console.log(JSON.stringify(result));
    } else {
      fail(`unknown command "${[command, ...rest].join(' ')}"\n\n${USAGE}`);
    }
  } catch (error) {
    if (error instanceof ProblemError) {
      const lines = error.invalidParams?.map((p) => `  ${p.name}: ${p.reason}`) ?? [];
      fail([`error: ${error.detail}`, ...lines].join('\n'));
    }
    throw error;
  } finally {
    storage.close();
  }
}

async function serveCommand(config: ReturnType<typeof loadConfig>): Promise<void> {
  const logger = createLogger(config.operations);
  const storage = openSqliteStorage(config.databasePath);
  const admin = new CatalogAdmin(storage, () => new Date(), config.limits.publishChunk);
  const credentialsFile = path.join(path.dirname(config.databasePath), 'demo-credentials.json');
  if (config.demoOnEmpty && storage.countMerchants() === 0) {
    console.log(`Empty database: building the demo catalog (${config.demoProducts} products) ...`);
    const demo = buildDemoCatalog(admin, config.demoProducts);
    fs.writeFileSync(credentialsFile, `${JSON.stringify(demo, null, 2)}\n`, { mode: 0o600 });
  }
  const metrics = new ServiceMetrics(storage, () => new Date(), logger);
  const server = await startServer(storage, config, { logger, metrics }).catch((error: unknown) => {
    logger.fatal({ err: error, port: config.port }, 'failed to start: the port cannot be listened on');
    storage.close();
    process.exit(1);
  });
  const stopPruning = schedulePruning(storage, () => new Date(), config.changes.retentionDays, config.changes.pruneIntervalSeconds, logger);
  const dispatcher = config.webhookDispatcher ? createWebhookDispatcher(storage, config, { logger, metrics }) : null;
  dispatcher?.start();
  const mirror = config.images.mirrorInServe ? createImageMirror(storage, config, { logger }) : null;
  mirror?.start();
  const demo = fs.existsSync(credentialsFile) ? JSON.parse(fs.readFileSync(credentialsFile, 'utf8')) : undefined;
  const base = config.publicBaseUrl;
  // For the person who ran `npm start`; the JSON log line after it is for the log pipeline.
  console.log([
    `Catalog publishing service listening on ${server.url} (database ${config.databasePath})`,
    `  API reference:  ${base}/docs   (document: ${base}/openapi.json, admin: ${base}/admin/openapi.json)`,
    demo ? `  Demo API key:   ${demo.api_key}   (merchant ${demo.merchant_id}; also in ${credentialsFile})` : '',
    demo ? `  Try:            curl -H "Authorization: Bearer ${demo.api_key}" "${base}/v1/products?store=pl&per_page=2"` : '',
    `  Admin token:    ${config.adminTokenConfigured ? '(CPS_ADMIN_TOKEN)' : `${config.adminToken}   (generated for this run; set CPS_ADMIN_TOKEN to fix it)`}`,
    `  Operations:     ${base}/healthz  ${base}/readyz  ${base}/metrics`,
  ].filter(Boolean).join('\n'));
  logger.info({
    url: server.url, database: config.databasePath, webhook_dispatcher: Boolean(dispatcher), image_mirroring: Boolean(mirror),
  }, 'listening');
  onShutdown(logger, shutdownDeadlineMs(config), async () => {
    stopPruning();
    // Not ready at once; load balancers get CPS_SHUTDOWN_DELAY_MS to see it while we still serve.
    server.lifecycle.shuttingDown = true;
    if (config.operations.shutdownDelayMs > 0) await new Promise((resolve) => setTimeout(resolve, config.operations.shutdownDelayMs));
    // In parallel: stop accepting and finish the requests in flight; the dispatcher and the
    // mirror take no new work and finish what they hold (bounded by their own time-outs).
    await Promise.all([server.close(), dispatcher?.stop(), mirror?.stop()]);
    storage.close();
  });
}

/** After this, a shutdown still waiting on something is cut short (exit 1). */
function shutdownDeadlineMs(config: ReturnType<typeof loadConfig>): number {
  const { shutdownDelayMs, shutdownGraceMs } = config.operations;
  return shutdownDelayMs + Math.max(shutdownGraceMs, config.webhooks.timeoutMs, config.images.timeoutMs) + 5000;
}

/**
 * SIGTERM or SIGINT: the stop function runs once (not ready at once, then requests, deliveries and
 * image fetches in flight finish), the database closes and the process exits 0. A second signal,
 * or the deadline passing, exits 1 at once.
 */
function onShutdown(logger: Logger, deadlineMs: number, stop: () => Promise<void>): void {
  let stopping = false;
  const handle = (signal: NodeJS.Signals) => {
    if (stopping) {
      logger.warn({ signal }, 'second signal: exiting without waiting');
      process.exit(1);
    }
    stopping = true;
    logger.info({ signal, deadline_ms: deadlineMs }, 'shutting down');
    setTimeout(() => {
      logger.fatal({ deadline_ms: deadlineMs }, 'shutdown did not finish in time: exiting');
      process.exit(1);
    }, deadlineMs).unref();
    stop().then(() => {
      logger.info('stopped cleanly');
      process.exit(0);
    }, (error: unknown) => {
      logger.fatal({ err: error }, 'shutdown failed');
      process.exit(1);
    });
  };
  process.on('SIGINT', handle);
  process.on('SIGTERM', handle);
}

function webhooksCommand(
  storage: ReturnType<typeof openSqliteStorage>, config: ReturnType<typeof loadConfig>, action: string | undefined,
  values: Record<string, string | boolean | undefined>,
): void {
  const endpoints = new WebhookEndpoints(storage, new AddressGuard(config.webhooks.allowHosts), () => new Date());
  const merchantId = positiveInt(values.merchant as string | undefined, 'merchant');
  const endpointId = () => positiveInt(values.endpoint as string | undefined, 'endpoint');
  const print = (value: unknown) => console.log(JSON.stringify(value, null, values.json ? undefined : 2));
  const view = (e: Parameters<typeof endpointView>[1]) => endpointView(storage, e);
  switch (action) {
    case 'create': {
      const events = typeof values.events === 'string' ? values.events.split(',') as ChangeType[] : undefined;
      const bad = events?.find((e) => !EVENTS.includes(e));
      if (bad) fail(`--events: unknown event "${bad}" (price, content, removed)`);
      const store = typeof values.store === 'string' ? values.store : null;
      const endpoint = endpoints.create(merchantId, { url: values.url as string ?? fail('--url is required'), store, events });
      print({ ...view(endpoint), secret: endpoint.secret });
      if (!values.json) console.log('The signing secret is shown once: store it now.');
      return;
    }
    case 'list':
      return print(endpoints.list(merchantId).map(view));
    case 'rotate': {
      const endpoint = endpoints.rotateSecret(merchantId, endpointId());
      return print({ ...view(endpoint), secret: endpoint.secret });
    }
    case 'delete':
      endpoints.delete(merchantId, endpointId());
      return console.log('deleted');
    case 'enable':
      return print(view(endpoints.update(merchantId, endpointId(), { status: 'active' })));
    case 'test':
      return print(endpoints.sendTest(merchantId, endpointId()));
    case 'deliveries': {
      const status = values.status as DeliveryStatus | undefined;
      const list = endpoints.deliveries(merchantId, endpointId(), { status, limit: 50 });
      return print(list.map((d) => ({ ...d, attempt_log: storage.listAttempts(d.id) })));
    }
    case 'resend':
      return print(endpoints.resend(merchantId, endpointId(), positiveInt(values.delivery as string | undefined, 'delivery')));
    case 'recover': {
      const since = values.since as string | undefined;
      if (!since || Number.isNaN(Date.parse(since))) fail('--since must be an ISO 8601 time');
      return print({ resent: endpoints.recover(merchantId, endpointId(), since) });
    }
    case 'notifications':
      return print(storage.listNotifications(merchantId, 50));
    default:
      fail(`unknown webhooks action "${action ?? ''}"\n\n${USAGE}`);
  }
}

async function workerCommand(config: ReturnType<typeof loadConfig>): Promise<void> {
  const logger = createLogger(config.operations);
  const storage = openSqliteStorage(config.databasePath);
  const metrics = new ServiceMetrics(storage, () => new Date(), logger);
  // The operations listener first: a port in use stops the worker before it takes any work.
  const ops = config.operations.workerOpsPort === null ? null
    : await startOperationsServer(storage, config, config.operations.workerOpsPort, { logger, metrics }).catch((error: unknown) => {
      logger.fatal({ err: error, port: config.operations.workerOpsPort }, 'failed to start: the operations port cannot be listened on');
      storage.close();
      process.exit(1);
    });
  const dispatcher = createWebhookDispatcher(storage, config, { logger, metrics });
  dispatcher.start();
  const mirror = createImageMirror(storage, config, { logger });
  mirror.start();
  logger.info({ database: config.databasePath, operations_url: ops?.url }, 'webhook dispatcher and image mirroring running');
  onShutdown(logger, shutdownDeadlineMs(config), async () => {
    if (ops) ops.lifecycle.shuttingDown = true;
    await Promise.all([dispatcher.stop(), mirror.stop(), ops?.close()]);
    storage.close();
  });
}

await main(process.argv.slice(2));
