// App assembly: the public, admin and operations APIs, the administration panel (/panel), the served documents and docs, one error
// shape, request ids and the access log on every request.
import { Hono, type MiddlewareHandler } from 'hono';
import adminDocument from '../generated/admin-openapi.json' with { type: 'json' };
import publicDocument from '../generated/public-openapi.json' with { type: 'json' };
import { LocalFolderMediaStore } from '../images/media-store.js';
import { panelApp } from '../panel/index.js';
import { closeWhenBodyUnread } from './close-when-body-unread.js';
import type { ConnectionsReadout } from '../operations/descriptors.js';
import { Lifecycle } from '../operations/health.js';
import type { Service } from '../service.js';
import { accessLog } from './access-log.js';
import { answeredWith, answerHeaders } from './direct-answer.js';
import { adminApi } from './admin-api.js';
import { refuseWhenClosing } from './closing.js';

import { browserPreflight } from './browser-cors.js';
import { CodedBodyCache } from './coded-body-cache.js';
import { compression } from './compression.js';
import { docsPages } from './docs.js';
import { notFound, renderError } from './errors.js';
import { operationsApi } from './operations-api.js';
import { publicApi } from './public-api.js';
import { TokenBucketLimiter } from './rate-limit.js';
import { requestId } from './request-id.js';

export interface AppOptions {
  /** Where `npm run build:docs` wrote the HTML docs; /docs, /admin/docs and /operations/docs serve them (docs.ts). */
  docsDir?: string;
  /** Turns /readyz to 503 on shutdown. */
  lifecycle?: Lifecycle;
  /** The listener's connection cap, shown by /readyz (server.ts). */
  connections?: ConnectionsReadout;
}

const publicJson = JSON.stringify(publicDocument);
const adminJson = JSON.stringify(adminDocument);

/** The HTTP surface of a service (service.ts): every handler calls one of its domain services. */
export function createApp(service: Service, { docsDir, lifecycle = new Lifecycle(), connections }: AppOptions = {}) {
  const { storage, config, now, logger, metrics } = service;
  const app = new Hono();
  app.onError(renderError);
  app.notFound(notFound);
  // Before the middlewares that name a header of every answer (answerHeader), so it runs after them.
  app.use('*', answerHeaders());
  app.use('*', requestId());
  app.use('*', accessLog(logger, metrics, config.operations.accessLog));
  // The Date header comes from the same clock as change timestamps: clients take it as a
  // starting cursor for the change feed (listChanges, "Initial sync").
  const dateHeader: MiddlewareHandler = async (c, next) => {
    await next();
    if (answeredWith(c) === undefined) c.res.headers.set('Date', now().toUTCString());
  };
  app.use('*', dateHeader);
  // The public API's paths only: the admin API and the panel are served until the grace period ends.
  for (const path of ['/v1/*', '/media/*']) app.use(path, refuseWhenClosing(lifecycle));

  // JSON of the public API and the documents, coded when asked; media and the admin API are not.
  const codedBodies = config.compressionCacheBytes > 0 ? new CodedBodyCache(config.compressionCacheBytes, metrics) : undefined;
  for (const path of ['/v1/*', '/openapi.json', '/admin/openapi.json']) app.use(path, compression(config.compressionMinBytes, codedBodies));

  // The authored, bundled documents, exactly as committed (not rebuilt from code).
  app.get('/openapi.json', (c) => c.body(publicJson, 200, { 'Content-Type': 'application/json' }));
  app.get('/admin/openapi.json', (c) => c.body(adminJson, 200, { 'Content-Type': 'application/json' }));
  app.route('/', docsPages(docsDir));

  // Browsers (CORS): preflights answered before any key is asked for; Vary: Origin on every answer.
  app.use('/v1/*', browserPreflight(service.apiKeys));
  app.route(
    '/',
    publicApi(service, {
      media: new LocalFolderMediaStore(config.images.mediaDir),
      // The limiter's clock is the app's, so tests refill buckets by moving it.
      rateLimiter: new TokenBucketLimiter(config.rateLimit, now),
    }),
  );
  app.route('/', adminApi(service));
  app.use('/panel/*', closeWhenBodyUnread);
  app.route('/panel', panelApp(service));
  app.route('/', operationsApi({ storage, metrics, lifecycle, metricsToken: config.operations.metricsToken, connections }));
  return app;
}
