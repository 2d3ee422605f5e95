#!/usr/bin/env node
// The command line: serve, worker, import, imports, merchants, stores, keys, users, webhooks, demo. `--help` lists them.
import fs from 'node:fs';
import path from 'node:path';
import pino from 'pino';
import { SingleBar, Presets } from 'cli-progress';
import {
  CreateApiKeyInputSchema,
  RollApiKeyInputSchema,
  UpdateApiKeyInputSchema,
  CreateMerchantInputSchema,
  StoreInputSchema,
  WebhookEndpointInputSchema,
  WebhookEndpointUpdateSchema,
} from './generated/admin-routes.js';
import { buildDemoCatalog, type DemoResult } from './admin/demo.js';
import { schedulePruning } from './changes/retention.js';
import { ConfigError, databaseLabel, loadConfig, type Config, type ConfigOverrides } from './config.js';
import type { ChangeType } from './changes/model.js';
import type { DeliveryStatus } from './webhooks/model.js';
import { EVENTS } from './webhooks/endpoints.js';
import { ProblemError } from './shared/problem.js';
import { UsageError, parseCommandLine, positiveIntOption, secondsOption } from './cli-arguments.js';
import { createLogger, type Logger } from './operations/log.js';
import { startOperationsServer, startServer } from './server.js';
import { startWorkerThread } from './operations/worker-thread.js';
import { lowerPriority } from './operations/thread-priority.js';
import { createService, type Service } from './service.js';
import { principalName } from './admin/accounts.js';
import { PostgresStorage } from './storage/postgres/index.js';
import { SqliteStorage } from './storage/sqlite/index.js';

const USAGE = `Usage: catalog-publishing-service <command> [options]

Commands:
  serve                               run the HTTP service, the webhook dispatcher and image mirroring (CPS_* variables)
  worker                              run only the webhook dispatcher and image mirroring (beside a serve
                                      with CPS_WEBHOOK_DISPATCHER=false CPS_IMAGE_MIRRORING=false);
                                      /healthz, /readyz and /metrics on CPS_OPS_PORT when it is set
  backup --to FILE                    online backup of the SQLite database (safe while serve runs; PostgreSQL: pg_dump)
  images status --merchant ID         mirroring progress: images per state, the dead ones with their errors
  images retry-dead --merchant ID     fetch every dead image of the merchant again
  import FILE --merchant ID [--progress-seconds S]
                                      bulk-import an NDJSON file of product operations, recorded as an import job
                                      (a progress bar on a terminal, else a progress line on stderr every S seconds, default 5)
  imports list --merchant ID          the merchant's imports, newest first, with their progress or outcome
  imports show --merchant ID --import ID
  merchants list                      every merchant
  merchants create --name N           a new merchant (with its catch-all pricing rule)
  stores list --merchant ID           the merchant's stores, default first
  stores set --merchant ID --store SLUG --name N --locale L --currency C [--default] [--inactive] [--exclude-out-of-stock]
                                      create or replace a store (as PUT .../stores/{slug}: its products re-published)
  stores delete --merchant ID --store SLUG
  keys create --merchant ID [--name N] [--scopes S,S] [--stores SLUG,SLUG] [--expires-at TIME] [--allowed-origins O,O]
                                      issue an API key (printed once); scopes of catalog:read (the default),
                                      catalog:write, webhooks:read, webhooks:write; stores: restrict it to those;
                                      expires-at: when it stops working (RFC 3339; default never); allowed-origins:
                                      the web origins whose browser pages may read with it (CORS; default none)
  keys update --merchant ID --key ID [--name N] [--allowed-origins O,O]
                                      rename a key or replace its allowed origins (--allowed-origins '' allows none)
  keys list --merchant ID             the merchant's API keys (prefix, name, created, revoked, expiry; never the key)
  keys revoke --merchant ID --key ID  revoke a key: it stops working at once
  keys roll --merchant ID --key ID [--expires-at TIME]
                                      a new key with the same name, scopes, stores and origins (printed once); the old one
                                      stops at TIME, up to 7 days later (RFC 3339; default now)
  users invite --merchant ID --email E [--role owner|member]
                                      a single-use panel invitation link (printed; valid 72 h)
  users list --merchant ID            the merchant's panel users
  users reset --merchant ID --user ID a single-use password reset link for the user (printed; valid 72 h)
  users remove --merchant ID --user ID
                                      remove a user (not the merchant's last owner); their links stop working
  demo [--db FILE] [--products N] [--json]
                                      build the deterministic demo catalog into a database (the configured one without --db)
  webhooks create --merchant ID --url URL [--store SLUG] [--events ${EVENTS.join(',')}]
                  [--standard-webhooks on|off] [--max-per-second N] [--payload thin|full]
                                      --standard-webhooks on: also send the Standard Webhooks headers;
                                      --max-per-second: at most N deliveries a second (1 to 1000);
                                      --payload full: deliveries also carry the changed products
  webhooks update --merchant ID --endpoint ID [--url URL] [--store SLUG|all] [--events LIST]
                  [--standard-webhooks on|off] [--max-per-second N|none] [--payload thin|full]
  webhooks list --merchant ID         endpoints with their health
  webhooks rotate|delete|test --merchant ID --endpoint ID
                                      rotate: a new secret (printed once); the old one signs for
                                      CPS_WEBHOOK_SECRET_GRACE_HOURS more, or until confirm-secret
  webhooks confirm-secret --merchant ID --endpoint ID   sign with the rotated secret now
  webhooks enable --merchant ID --endpoint ID   re-enable a paused or disabled endpoint
  webhooks deliveries --merchant ID --endpoint ID [--status S] [--webhook-id dlv_…]   the attempt log, newest first
  webhooks resend --merchant ID --endpoint ID --delivery ID|dlv_…
  webhooks recover --merchant ID --endpoint ID --since ISO-TIME  re-send failed deliveries since then
  webhooks notifications --merchant ID

Every command works on the configured database: PostgreSQL when CPS_DATABASE_URL=postgres://… is set,
else the SQLite file at CPS_DB_PATH (default ./data/catalog.db).
Common option: --db FILE (an SQLite file, instead of the configured database)`;

function fail(message: string): never {
  console.error(message);
  process.exit(2);
}

/** The configuration of the environment; a bad value stops the command (exit 2) naming each bad variable. */
function configuration(overrides: ConfigOverrides): Config {
  try {
    return loadConfig(process.env, overrides);
  } catch (error) {
    if (error instanceof ConfigError) fail(`refusing to start: the configuration has bad values\n${error.message}`);
    throw error;
  }
}

/** A whole number option from 1 (an id, a count); anything else stops the command (exit 2) naming it. */
function positiveInt(value: string | undefined, name: string): number {
  return usage(() => positiveIntOption(value, name));
}

/** The result, or exit 2 with the message of a UsageError (never a stack trace). */
function usage<T>(parse: () => T): T {
  try {
    return parse();
  } catch (error) {
    if (error instanceof UsageError) fail(error.message);
    throw error;
  }
}

async function main(argv: string[]): Promise<void> {
  const { values, positionals } = usage(() =>
    parseCommandLine({
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
        scopes: { type: 'string' },
        stores: { type: 'string' },
        'expires-at': { type: 'string' },
        'allowed-origins': { type: 'string' },
        endpoint: { type: 'string' },
        email: { type: 'string' },
        role: { type: 'string' },
        user: { type: 'string' },
        delivery: { type: 'string' },
        'webhook-id': { type: 'string' },
        since: { type: 'string' },
        to: { type: 'string' },
        status: { type: 'string' },
        key: { type: 'string' },
        import: { type: 'string' },
        locale: { type: 'string' },
        currency: { type: 'string' },
        default: { type: 'boolean' },
        inactive: { type: 'boolean' },
        'exclude-out-of-stock': { type: 'boolean' },
        'progress-seconds': { type: 'string' },
        'standard-webhooks': { type: 'string' },
        payload: { type: 'string' },
        'max-per-second': { type: 'string' },
        json: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    }),
  );
  const [command, ...rest] = positionals;
  if (values.help || !command) {
    console.log(USAGE);
    return;
  }
  // --db names an SQLite file, whatever database is configured.
  const config = configuration(values.db ? { databasePath: path.resolve(values.db), databaseUrl: null } : {});

  if (command === 'serve') return serveCommand(config);
  if (command === 'worker') return workerCommand(config);

  // A one-shot command's answer is its stdout (--json): its log lines (a slow statement, say) go to stderr.
  const service = createService(config, { logger: createLogger(config.operations, pino.destination(2)) });
  const { admin, storage } = service;
  try {
    if (command === 'demo') {
      const products = values.products ? positiveInt(values.products, 'products') : config.demoProducts;
      const bar = values.json
        ? undefined
        : new SingleBar({ format: 'demo catalog [{bar}] {value}/{total} products' }, Presets.shades_classic);
      bar?.start(products, 0);
      const result = await buildDemoCatalog(admin, products, (done) => bar?.update(done));
      bar?.stop();
      console.log(values.json ? JSON.stringify(result) : `merchant ${result.merchant_id}, API key ${result.api_key}`);
    } else if (command === 'keys' && rest[0] === 'create') {
      const merchantId = positiveInt(values.merchant, 'merchant');
      // As POST .../api-keys: comma-separated scopes (default catalog:read) and stores (default: every store).
      const { name, scopes, stores, expires_at, allowed_origins } = checked(CreateApiKeyInputSchema, {
        name: values.name ?? 'cli',
        ...(values.scopes === undefined ? {} : { scopes: values.scopes.split(',') }),
        ...(values.stores === undefined ? {} : { stores: values.stores.split(',') }),
        ...(values['expires-at'] === undefined ? {} : { expires_at: values['expires-at'] }),
        ...(values['allowed-origins'] === undefined ? {} : { allowed_origins: originList(values['allowed-origins']) }),
      });
      const key = await admin.createApiKey(merchantId, name, CLI_OPERATOR, { scopes, stores, expires_at, allowed_origins });
      console.log(values.json ? JSON.stringify(key) : `API key for merchant ${merchantId} (shown once): ${key.key}`);
    } else if (command === 'keys' && rest[0] === 'roll') {
      const merchantId = positiveInt(values.merchant, 'merchant');
      // As POST .../api-keys/{key_id}/roll: the old key stops at --expires-at (default now).
      const { expires_at } = checked(RollApiKeyInputSchema, values['expires-at'] === undefined ? {} : { expires_at: values['expires-at'] });
      const key = await admin.rollApiKey(merchantId, positiveInt(values.key, 'key'), CLI_OPERATOR, expires_at);
      console.log(
        values.json
          ? JSON.stringify(key)
          : `API key ${key.id} for merchant ${merchantId}, replacing key ${key.rolled_from} (shown once): ${key.key}`,
      );
    } else if (command === 'keys' || command === 'merchants' || command === 'stores' || command === 'imports') {
      await setupCommand(service, command, rest[0], values);
    } else if (command === 'users') {
      await usersCommand(service, rest[0], values);
    } else if (command === 'backup') {
      if (storage instanceof PostgresStorage) {
        fail(
          [
            'backup copies an SQLite database; this deployment runs on PostgreSQL (CPS_DATABASE_URL).',
            "Back it up with PostgreSQL's own tools while the service runs, e.g.",
            '  pg_dump --format=custom --file=catalog.dump "$CPS_DATABASE_URL"',
            "(restore with pg_restore), or with your database service's snapshots and point-in-time recovery.",
          ].join('\n'),
        );
      }
      const destination = typeof values.to === 'string' ? path.resolve(values.to) : fail('backup needs --to FILE');
      if (fs.existsSync(destination)) fail(`${destination} exists: choose a new file`);
      if (!(storage instanceof SqliteStorage)) fail('backup copies an SQLite database');
      await storage.backup(destination);
      console.log(`backed up ${config.databasePath} to ${destination}`);
    } else if (command === 'images' && rest[0] === 'status') {
      const status = await admin.imageMirroring(positiveInt(values.merchant, 'merchant'));
      console.log(JSON.stringify(status, null, values.json ? undefined : 2));
    } else if (command === 'images' && rest[0] === 'retry-dead') {
      console.log(JSON.stringify({ retried: await admin.retryDeadImages(positiveInt(values.merchant, 'merchant')) }));
    } else if (command === 'webhooks') {
      await webhooksCommand(service, rest[0], values);
    } else if (command === 'import') {
      const file = rest[0] ?? fail('import needs a FILE');
      const merchantId = positiveInt(values.merchant, 'merchant');
      // Bytes, not text: a line that is not UTF-8 is refused with its number, never read as U+FFFD.
      if (!fs.existsSync(file)) fail(`import: no such file ${file}`);
      const progress = values['progress-seconds'];
      const every =
        progress === undefined ? IMPORT_PROGRESS_LINE_MS / 1000 : usage(() => secondsOption(progress, 'progress-seconds', 86_400));
      console.log(JSON.stringify(await importFile(service, merchantId, file, every * 1000)));
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
    await service.close();
  }
}

/** Off a terminal, the CLI's import prints its progress this often by default. */
const IMPORT_PROGRESS_LINE_MS = 5000;

/**
 * The CLI's import: an import job like the admin API's and the panel's (listed by `imports list`,
 * the panel and the admin API), its progress a bar on a terminal, else a line on stderr every
 * `lineEveryMs` (a log or a CI job shows where a long import is), and a last line with its outcome.
 */
async function importFile(service: Service, merchantId: number, file: string, lineEveryMs: number): Promise<unknown> {
  const { job, done } = await service.imports.start(merchantId, 'CLI', path.basename(file), fs.createReadStream(file));
  const terminal = process.stderr.isTTY === true;
  if (!terminal)
    console.error(`import ${job.id} of ${path.basename(file)} started (imports show --merchant ${merchantId} --import ${job.id})`);
  const bar = terminal ? new SingleBar({ format: 'import {phase} [{bar}] {value}/{total}' }, Presets.shades_classic) : undefined;
  let barTotal = 0;
  const show = async () => {
    const now = await service.storage.importJob(merchantId, job.id);
    if (!now || now.state !== 'running') return;
    const checking = now.operations === null;
    if (bar) {
      const total = checking ? Math.max(now.lines_read, 1) : now.operations!;
      if (total !== barTotal) {
        if (barTotal === 0) bar.start(total, 0, { phase: 'checking' });
        else bar.setTotal(total);
        barTotal = total;
      }
      bar.update(checking ? now.lines_read : now.products_applied, { phase: checking ? 'checking lines' : 'applying' });
    } else {
      console.error(
        checking
          ? `import ${job.id}: ${now.lines_read} lines read and checked`
          : `import ${job.id}: ${now.products_applied} of ${now.operations} operations applied`,
      );
    }
  };
  const timer = setInterval(() => void show().catch(() => undefined), terminal ? 250 : lineEveryMs);
  try {
    const result = await done;
    return { import_id: job.id, ...result };
  } finally {
    clearInterval(timer);
    bar?.stop();
    const ended = await service.storage.importJob(merchantId, job.id).catch(() => undefined);
    if (!terminal && ended) {
      console.error(
        `import ${job.id} ${ended.state}: ${ended.lines_read} lines read, ${ended.products_applied} of ${ended.operations ?? 0} operations applied`,
      );
    }
  }
}

/** Merchants, their stores and API keys, and the imports, as the operator (the CLI runs with the deployment's database). */
async function setupCommand(
  { admin, imports }: Service,
  command: 'keys' | 'merchants' | 'stores' | 'imports',
  action: string | undefined,
  values: Record<string, string | boolean | undefined>,
): Promise<void> {
  const print = (value: unknown) => console.log(JSON.stringify(value, null, values.json ? undefined : 2));
  const merchantId = () => positiveInt(values.merchant as string | undefined, 'merchant');
  const slug = () => (typeof values.store === 'string' ? values.store : fail('--store SLUG is required'));
  switch (`${command} ${action ?? ''}`) {
    case 'merchants list':
      return print(await admin.listMerchants());
    case 'merchants create': {
      const input = checked(CreateMerchantInputSchema, { name: values.name ?? fail('--name is required') });
      return print(await admin.createMerchant(input));
    }
    case 'keys list':
      return print((await admin.listApiKeys(merchantId())).map(({ merchant_id: _m, ...key }) => key));
    case 'keys update': {
      // As PATCH .../api-keys/{key_id}: only what is given changes.
      const patch = checked(UpdateApiKeyInputSchema, {
        ...(values.name === undefined ? {} : { name: values.name }),
        ...(values['allowed-origins'] === undefined ? {} : { allowed_origins: originList(values['allowed-origins'] as string) }),
      });
      const { merchant_id: _m, ...key } = await admin.updateApiKey(
        merchantId(),
        positiveInt(values.key as string | undefined, 'key'),
        patch,
        CLI_OPERATOR,
      );
      return print(key);
    }
    case 'keys revoke': {
      const id = merchantId();
      await admin.revokeApiKey(id, positiveInt(values.key as string | undefined, 'key'));
      return console.log('revoked');
    }
    case 'stores list':
      return print((await admin.listStores(merchantId())).map(({ merchant_id: _m, catalog_version: _v, ...store }) => store));
    case 'stores set': {
      const id = merchantId();
      const input = checked(StoreInputSchema, {
        name: values.name ?? fail('--name is required'),
        locale: values.locale ?? fail('--locale is required'),
        currency: values.currency ?? fail('--currency is required'),
        is_default: values.default === true,
        active: values.inactive !== true,
        exclude_out_of_stock: values['exclude-out-of-stock'] === true,
      });
      const { merchant_id: _m, catalog_version: _v, ...store } = await admin.upsertStore(id, slug(), input);
      return print(store);
    }
    case 'stores delete':
      await admin.deleteStore(merchantId(), slug());
      return console.log('deleted');
    case 'imports list':
      return print((await imports.recent(merchantId(), 50)).map(({ merchant_id: _m, ...job }) => job));
    case 'imports show': {
      const { merchant_id: _m, ...job } = await imports.job(merchantId(), positiveInt(values.import as string | undefined, 'import'));
      return print(job);
    }
    default:
      fail(`unknown command "${command} ${action ?? ''}"\n\n${USAGE}`);
  }
}

/** The input as the admin document states it (the same checks as the admin API), or exit 2 naming each problem. */
/** A comma-separated list of origins; an empty one lists none. */
const originList = (text: string): string[] => text.split(',').filter((origin) => origin !== '');

function checked<T>(
  schema: {
    safeParse(
      value: unknown,
    ): { success: true; data: T } | { success: false; error: { issues: { path: PropertyKey[]; message: string }[] } };
  },
  input: unknown,
): T {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  fail(result.error.issues.map((issue) => `--${String(issue.path[0] ?? '').replaceAll('_', '-')}: ${issue.message}`).join('\n'));
}

/** serve waits at most this long for its worker threads to start before it listens. */
const THREADS_START_WAIT_MS = 15_000;

async function serveCommand(config: ReturnType<typeof loadConfig>): Promise<void> {
  const service = createService(config);
  const { logger, storage, dispatcher, mirror } = service;
  const credentialsFile = path.join(path.dirname(config.databasePath), 'demo-credentials.json');
  if (config.demoOnEmpty && (await storage.countMerchants()) === 0) {
    console.log(`Empty database: building the demo catalog (${config.demoProducts} products) ...`);
    const demo = await buildDemoCatalog(service.admin, config.demoProducts);
    fs.writeFileSync(credentialsFile, `${JSON.stringify(demo, null, 2)}\n`, { mode: 0o600 });
  }
  // By default the dispatcher and the mirror run in a worker thread of their own, and so
  // do re-publishing a whole catalog (the requests that cause it wait for the thread to end it) and
  // the feed's retention.
  const workersInThread = config.workers === 'thread' && (config.webhookDispatcher || config.images.mirrorInServe);
  const stopPruning = workersInThread
    ? () => {}
    : schedulePruning(
        storage,
        service.now,
        config.changes.retentionDays,
        config.changes.pruneIntervalSeconds,
        logger,
        config.changes.pruneBatch,
      );
  // On PostgreSQL a run is handed off even with the workers off (serve beside `worker` processes, as
  // Scaling out recommends): a worker, or another serve's publishing thread, takes it at its NOTIFY,
  // and the request drives it itself should no one take it within a second.
  service.admin.publishRuns.handOff = workersInThread || config.databaseUrl !== null;
  // Re-publishing runs a stopped process left are resumed from where they stopped (by the thread, if any).
  const stopResuming = workersInThread ? () => {} : service.admin.publishRuns.follow(logger);
  // Two threads: a merchant-wide re-publish has a core's worth of work of its own, which the
  // dispatcher (coalescing what it records) and the mirror would otherwise share with it.
  const workerThreads = workersInThread
    ? [
        startWorkerThread(service, {
          name: 'workers',
          dispatcher: config.webhookDispatcher,
          mirror: config.images.mirrorInServe,
          publishing: false,
          pruning: true,
          counts: true,
        }),
        startWorkerThread(service, { name: 'publishing', dispatcher: false, mirror: false, publishing: true, pruning: false }),
      ]
    : [];
  // The threads load their code and open their connections before the port is listened on: the
  // first requests do not share the CPU with that (seconds when running from source under tsx).
  await Promise.race([
    Promise.all(workerThreads.map((thread) => thread.started)),
    new Promise((resolve) => setTimeout(resolve, THREADS_START_WAIT_MS).unref()),
  ]);
  const server = await startServer(service).catch(async (error: unknown) => {
    const reason = error instanceof RangeError ? error.message : 'the port cannot be listened on';
    logger.fatal({ err: error, port: config.port }, `failed to start: ${reason}`);
    await Promise.all(workerThreads.map((thread) => thread.stop()));
    await service.close();
    process.exit(1);
  });
  if (!workersInThread && config.webhookDispatcher) dispatcher.start();
  if (!workersInThread && config.images.mirrorInServe) mirror.start();
  const demo = fs.existsSync(credentialsFile) ? (JSON.parse(fs.readFileSync(credentialsFile, 'utf8')) as DemoResult) : undefined;
  // The port listened on (CPS_PORT=0 picks a free one) unless the public address is configured.
  const base = config.publicBaseUrlConfigured ? config.publicBaseUrl : server.url.replace(/\/+$/, '');
  const { limits } = server.connections;
  // For the person who ran `npm start`; the JSON log line after it is for the log pipeline.
  console.log(
    [
      `Catalog publishing service listening on ${server.url} (database ${databaseLabel(config)})`,
      `  API reference:  ${base}/docs   (document: ${base}/openapi.json; admin: ${base}/admin/docs, operations: ${base}/operations/docs)`,
      demo ? `  Demo API key:   ${demo.api_key}   (merchant ${demo.merchant_id}; also in ${credentialsFile})` : '',
      demo ? `  Try:            curl -H "Authorization: Bearer ${demo.api_key}" "${base}/v1/products?store=pl&per_page=2"` : '',
      `  Panel:          ${base}/panel   (operator: sign in with the admin token; invite merchant users there or with "users invite")`,
      `  Admin token:    ${config.adminTokenConfigured ? '(CPS_ADMIN_TOKEN)' : `${config.adminToken}   (generated for this run; set CPS_ADMIN_TOKEN to fix it)`}`,
      `  Operations:     ${base}/healthz  ${base}/readyz  ${base}/metrics`,
      `  Connections:    at most ${limits.maxConnections} (file descriptor limit ${limits.descriptorLimit ?? 'unknown'}, ${limits.descriptorReserve} kept in reserve)`,
    ]
      .filter(Boolean)
      .join('\n'),
  );
  logger.info(
    {
      url: server.url,
      database: databaseLabel(config),
      webhook_dispatcher: config.webhookDispatcher,
      image_mirroring: config.images.mirrorInServe,
      workers: workersInThread ? 'thread' : 'inline',
      descriptor_limit: limits.descriptorLimit,
      descriptor_reserve: limits.descriptorReserve,
      max_connections: limits.maxConnections,
    },
    'listening',
  );
  onShutdown(logger, shutdownDeadlineMs(config), async () => {
    stopPruning();
    stopResuming();
    // Not ready at once; load balancers get CPS_SHUTDOWN_DELAY_MS to see it while we still serve.
    server.lifecycle.shuttingDown = true;
    if (config.operations.shutdownDelayMs > 0) await new Promise((resolve) => setTimeout(resolve, config.operations.shutdownDelayMs));
    // In parallel: stop accepting and finish the requests in flight; the dispatcher and the
    // mirror take no new work and finish what they hold (bounded by their own time-outs). The
    // database closes after all of them.
    await Promise.all([server.close(), service.stopWork(), ...workerThreads.map((thread) => thread.stop())]);
    await service.close();
  });
}

/** After this, a shutdown still waiting on something is cut short (exit 1). */
function shutdownDeadlineMs(config: ReturnType<typeof loadConfig>): number {
  const { shutdownDelayMs, shutdownGraceMs } = config.operations;
  // Image fetches in flight are ended at once (ImageMirror.stop); deliveries finish within their time-out.
  return shutdownDelayMs + Math.max(shutdownGraceMs, config.webhooks.timeoutMs) + 5000;
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
    stop().then(
      () => {
        logger.info('stopped cleanly');
        process.exit(0);
      },
      (error: unknown) => {
        logger.fatal({ err: error }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', handle);
  process.on('SIGTERM', handle);
}

/** `--standard-webhooks on|off`. */
function onOff(value: string | boolean | undefined): boolean {
  if (value === 'on' || value === 'true') return true;
  if (value === 'off' || value === 'false') return false;
  return fail('--standard-webhooks takes on or off');
}

/** `--max-per-second`: a number, or `none` for no limit; absent: unchanged (undefined). */
function perSecond(value: string | boolean | undefined): number | null | undefined {
  if (value === undefined) return undefined;
  if (value === 'none') return null;
  return typeof value === 'string' && /^[0-9]+$/.test(value)
    ? Number(value)
    : fail('--max-per-second takes a whole number (1 to 1000) or none');
}

/** The CLI runs with the deployment's database, as the operator (like the admin token). */
const CLI_OPERATOR = principalName({ kind: 'operator' });

async function webhooksCommand(
  { endpoints }: Service,
  action: string | undefined,
  values: Record<string, string | boolean | undefined>,
): Promise<void> {
  const merchantId = positiveInt(values.merchant as string | undefined, 'merchant');
  const endpointId = () => positiveInt(values.endpoint as string | undefined, 'endpoint');
  const print = (value: unknown) => console.log(JSON.stringify(value, null, values.json ? undefined : 2));
  switch (action) {
    case 'create': {
      const events = typeof values.events === 'string' ? (values.events.split(',') as ChangeType[]) : undefined;
      const bad = events?.find((e) => !EVENTS.includes(e));
      if (bad) fail(`--events: unknown event "${bad}" (${EVENTS.join(', ')})`);
      const store = typeof values.store === 'string' ? values.store : null;
      const input = checked(WebhookEndpointInputSchema, {
        url: values.url ?? fail('--url is required'),
        store,
        events,
        standard_webhooks: values['standard-webhooks'] === undefined ? undefined : onOff(values['standard-webhooks']),
        payload: values.payload,
        max_per_second: perSecond(values['max-per-second']),
      });
      print(await endpoints.create(merchantId, input));
      if (!values.json) console.log('The signing secret is shown once: store it now.');
      return;
    }
    case 'update': {
      const events = typeof values.events === 'string' ? (values.events.split(',') as ChangeType[]) : undefined;
      const input = checked(WebhookEndpointUpdateSchema, {
        url: values.url,
        events,
        store: values.store === undefined ? undefined : values.store === 'all' ? null : values.store,
        standard_webhooks: values['standard-webhooks'] === undefined ? undefined : onOff(values['standard-webhooks']),
        payload: values.payload,
        max_per_second: perSecond(values['max-per-second']),
      });
      return print(await endpoints.update(merchantId, endpointId(), input, CLI_OPERATOR));
    }
    case 'list':
      return print(await endpoints.list(merchantId));
    case 'rotate': {
      const rotated = await endpoints.rotateSecret(merchantId, endpointId(), CLI_OPERATOR);
      print(rotated);
      if (!values.json) {
        const until = rotated.secret_rotation?.pending_until;
        console.log(
          until
            ? `The new secret is shown once: store it now. The old one signs until ${until}; run \`webhooks confirm-secret\` once the receiver accepts the new one.`
            : 'The new secret is shown once: store it now. It signs from now on.',
        );
      }
      return;
    }
    case 'confirm-secret':
      return print(await endpoints.confirmSecret(merchantId, endpointId(), CLI_OPERATOR));
    case 'delete':
      await endpoints.delete(merchantId, endpointId());
      return console.log('deleted');
    case 'enable':
      return print(await endpoints.update(merchantId, endpointId(), { status: 'active' }));
    case 'test':
      return print(await endpoints.sendTest(merchantId, endpointId()));
    case 'deliveries': {
      const status = values.status as DeliveryStatus | undefined;
      const webhookId = values['webhook-id'] as string | undefined;
      const list = await endpoints.deliveries(merchantId, endpointId(), { status, limit: 50, webhookId });
      const detail = await Promise.all(list.map((d) => endpoints.delivery(merchantId, endpointId(), d.id)));
      return print(list.map((d, i) => ({ ...d, attempt_log: detail[i]!.attempts })));
    }
    case 'resend': {
      // The delivery's id, or the webhook-id its receiver saw.
      const delivery = values.delivery as string | undefined;
      const deliveryId = delivery?.startsWith('dlv_')
        ? ((await endpoints.deliveries(merchantId, endpointId(), { limit: 1, webhookId: delivery }))[0]?.id ??
          fail(`no delivery of endpoint ${endpointId()} has webhook-id ${delivery}`))
        : positiveInt(delivery, 'delivery');
      return print(await endpoints.resend(merchantId, endpointId(), deliveryId));
    }
    case 'recover': {
      const since = values.since as string | undefined;
      if (!since || Number.isNaN(Date.parse(since))) fail('--since must be an ISO 8601 time');
      return print({ resent: await endpoints.recover(merchantId, endpointId(), since) });
    }
    case 'notifications':
      return print(await endpoints.notifications(merchantId, 50));
    default:
      fail(`unknown webhooks action "${action ?? ''}"\n\n${USAGE}`);
  }
}

/** Panel users, as the operator (the CLI runs with the deployment's database, like the admin token). */
async function usersCommand(
  { accounts, config }: Service,
  action: string | undefined,
  values: Record<string, string | boolean | undefined>,
): Promise<void> {
  const operator = { kind: 'operator' } as const;
  const merchantId = positiveInt(values.merchant as string | undefined, 'merchant');
  const print = (value: unknown) => console.log(JSON.stringify(value, null, values.json ? undefined : 2));
  switch (action) {
    case 'invite': {
      const email = typeof values.email === 'string' ? values.email : fail('--email is required');
      const role = (values.role ?? 'member') as 'owner' | 'member';
      const { token, ...invitation } = await accounts.invite(operator, merchantId, { email, role });
      return print({ ...invitation, link: `${config.publicBaseUrl}/panel/invitations/${token}` });
    }
    case 'list':
      return print(await accounts.listUsers(operator, merchantId));
    case 'reset': {
      const {
        token,
        role: _role,
        ...reset
      } = await accounts.requestPasswordReset(operator, merchantId, positiveInt(values.user as string | undefined, 'user'));
      return print({ ...reset, link: accounts.linkUrl(token!) });
    }
    case 'remove':
      await accounts.removeUser(operator, merchantId, positiveInt(values.user as string | undefined, 'user'));
      return console.log('removed');
    default:
      fail(`unknown users action "${action ?? ''}"\n\n${USAGE}`);
  }
}

async function workerCommand(config: ReturnType<typeof loadConfig>): Promise<void> {
  const service = createService(config);
  const { logger } = service;
  // `worker` runs background work alone: every thread yields to the serves' serving threads.
  lowerPriority(config.workerNice, logger, true);
  // The operations listener first: a port in use stops the worker before it takes any work.
  const ops =
    config.operations.workerOpsPort === null
      ? null
      : await startOperationsServer(service, config.operations.workerOpsPort).catch(async (error: unknown) => {
          logger.fatal({ err: error, port: config.operations.workerOpsPort }, 'failed to start: the operations port cannot be listened on');
          await service.close();
          process.exit(1);
        });
  service.dispatcher.start();
  service.mirror.start();
  const stopResuming = service.admin.publishRuns.follow(logger);
  logger.info(
    {
      database: databaseLabel(config),
      operations_url: ops?.url,
      ...(ops ? { descriptor_limit: ops.connections.limits.descriptorLimit, max_connections: ops.connections.limits.maxConnections } : {}),
    },
    'webhook dispatcher and image mirroring running',
  );
  onShutdown(logger, shutdownDeadlineMs(config), async () => {
    stopResuming();
    if (ops) ops.lifecycle.shuttingDown = true;
    await Promise.all([service.close(), ops?.close()]);
  });
}

await main(process.argv.slice(2));
