// The operations API (openapi/operations.yaml): liveness, readiness and Prometheus metrics. Served
// by `serve` next to the public and admin APIs, and alone by `worker` on CPS_OPS_PORT.
import { OpenAPIHono } from '@hono/zod-openapi';
import { Hono } from 'hono';
import type { Config } from '../config.js';
import operationsDocument from '../generated/operations-openapi.json' with { type: 'json' };
import { routes } from '../generated/operations-routes.js';
import type { ConnectionsReadout } from '../operations/descriptors.js';
import { Lifecycle, readiness, type DatabaseProbe } from '../operations/health.js';
import { silentLogger, type Logger } from '../operations/log.js';
import { PROMETHEUS_CONTENT_TYPE, type ServiceMetrics } from '../operations/metrics.js';
import { accessLog, requestLog } from './access-log.js';
import { answerHeaders } from './direct-answer.js';
import { metricsTokenAuth } from './auth.js';
import { notFound, renderError } from './errors.js';
import { requestId } from './request-id.js';
import { documentedRoutes } from './documented-responses.js';
import { validationHook } from './validation.js';

export interface OperationsDependencies {
  storage: DatabaseProbe;
  metrics: ServiceMetrics;
  lifecycle: Lifecycle;
  metricsToken: string | null;
  /** The listener's connection cap; /readyz shows it when given. */
  connections?: ConnectionsReadout;
}

const operationsJson = JSON.stringify(operationsDocument);

export function operationsApi({ storage, metrics, lifecycle, metricsToken, connections }: OperationsDependencies) {
  const app = new OpenAPIHono({ defaultHook: validationHook });
  app.onError(renderError);
  if (metricsToken) app.use('/metrics', metricsTokenAuth(metricsToken));
  const route = documentedRoutes(app);

  route(routes.getHealth, (c) => c.json({ status: 'ok' as const }, 200));

  route(routes.getReadiness, async (c) => {
    const answer = await readiness(storage, lifecycle, requestLog(c) ?? silentLogger, connections);
    return c.json(answer, answer.status === 'ready' ? 200 : 503);
  });

  route(routes.getMetrics, async (c) => c.text(await metrics.exposition(), 200, { 'Content-Type': PROMETHEUS_CONTENT_TYPE }));

  // The document itself, as committed (like /openapi.json and /admin/openapi.json).
  app.get('/operations/openapi.json', (c) => c.body(operationsJson, 200, { 'Content-Type': 'application/json' }));
  return app;
}

/** `worker`'s whole HTTP surface: the operations API with request ids and the access log. */
export function operationsApp(deps: OperationsDependencies, logger: Logger, config: Config['operations']) {
  const app = new Hono();
  app.onError(renderError);
  app.notFound(notFound);
  app.use('*', answerHeaders());
  app.use('*', requestId());
  app.use('*', accessLog(logger, deps.metrics, config.accessLog));
  app.route('/', operationsApi(deps));
  return app;
}
