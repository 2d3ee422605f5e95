// App assembly: the public, admin and operations APIs, the served documents and docs, one error
// shape, request ids and the access log on every request.
import fs from 'node:fs';
import { Hono } from 'hono';
import { CatalogAdmin } from '../admin/catalog-admin.js';
import { CatalogReads } from '../catalog/reads.js';
import type { Config } from '../config.js';
import adminDocument from '../generated/admin-openapi.json' with { type: 'json' };
import publicDocument from '../generated/public-openapi.json' with { type: 'json' };
import type { CatalogStorage } from '../storage/port.js';
import { LocalFolderMediaStore } from '../images/media-store.js';
import { Lifecycle } from '../operations/health.js';
import { createLogger, type Logger } from '../operations/log.js';
import { ServiceMetrics } from '../operations/metrics.js';
import { accessLog } from './access-log.js';
import { adminApi } from './admin-api.js';
import { compression } from './compression.js';
import { notFound, renderError } from './errors.js';
import { operationsApi } from './operations-api.js';
import { publicApi } from './public-api.js';
import { TokenBucketLimiter } from './rate-limit.js';
import { requestId } from './request-id.js';

export interface AppDependencies {
  storage: CatalogStorage;
  config: Config;
  now?: () => Date;
  /** Built HTML docs of the public API (`npm run build:docs`); /docs serves it when present. */
  docsFile?: string;
  /** Structured logs; by default a logger on stdout at the configured level. */
  logger?: Logger;
  /** The process's metrics (shared with its webhook dispatcher); by default the app's own. */
  metrics?: ServiceMetrics;
  /** Turns /readyz to 503 on shutdown. */
  lifecycle?: Lifecycle;
}

const publicJson = JSON.stringify(publicDocument);
const adminJson = JSON.stringify(adminDocument);

export function createApp({
  storage, config, now = () => new Date(), docsFile, logger = createLogger(config.operations),
  metrics = new ServiceMetrics(storage, now, logger), lifecycle = new Lifecycle(),
}: AppDependencies) {
  const admin = new CatalogAdmin(storage, now, config.limits.publishChunk);
  const app = new Hono();
  app.onError(renderError);
  app.notFound(notFound);
  app.use('*', requestId());
  app.use('*', accessLog(logger, metrics, config.operations.accessLog));
  // The Date header comes from the same clock as change timestamps: clients take it as a
  // starting cursor for the change feed (listChanges, "Initial sync").
  app.use('*', async (c, next) => {
    await next();
    c.res.headers.set('Date', now().toUTCString());
  });

  // JSON of the public API and the documents, coded when asked; media and the admin API are not.
  for (const path of ['/v1/*', '/openapi.json', '/admin/openapi.json']) app.use(path, compression(config.compressionMinBytes));

  // The authored, bundled documents, exactly as committed (not rebuilt from code).
  app.get('/openapi.json', (c) => c.body(publicJson, 200, { 'Content-Type': 'application/json' }));
  app.get('/admin/openapi.json', (c) => c.body(adminJson, 200, { 'Content-Type': 'application/json' }));
  app.get('/docs', (c) => {
    if (!docsFile || !fs.existsSync(docsFile)) {
      return c.text('The HTML docs are not built: run `npm run build:docs`. The document itself is at /openapi.json.', 404);
    }
    return c.html(fs.readFileSync(docsFile, 'utf8'));
  });

  app.route('/', publicApi(storage, config.changes.feedWindow, {
    media: new LocalFolderMediaStore(config.images.mediaDir),
    reads: new CatalogReads(storage),
    // The limiter's clock is the app's, so tests refill buckets by moving it.
    rateLimiter: new TokenBucketLimiter(config.rateLimit, now),
  }));
  app.route('/', adminApi(admin, config));
  app.route('/', operationsApi({ storage, metrics, lifecycle, metricsToken: config.operations.metricsToken }));
  return app;
}
