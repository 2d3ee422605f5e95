// Starts the HTTP service of a built service (service.ts): used by `serve` and by the tests (port
// 0), and the operations-only listener of `worker`.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { serve, type ServerType } from '@hono/node-server';
import type { Config } from './config.js';
import { createApp } from './http/app.js';
import { ConnectionCap } from './http/connection-cap.js';
import { operationsApp } from './http/operations-api.js';
import { connectionLimits, readDescriptorLimit } from './operations/descriptors.js';
import { Lifecycle } from './operations/health.js';
import type { Logger } from './operations/log.js';
import type { ServiceMetrics } from './operations/metrics.js';
import type { Service } from './service.js';

/** Where `npm run build:docs` writes the HTML docs (dist/docs, next to the compiled code; src/http/docs.ts). */
export const DOCS_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'dist', 'docs');

export interface RunningServer {
  url: string;
  port: number;
  /** What /readyz reports: close() turns it to shutting down first. */
  lifecycle: Lifecycle;
  metrics: ServiceMetrics;
  /** The listener's connections and their cap (CPS_MAX_CONNECTIONS), as /readyz shows them. */
  connections: ConnectionCap;
  /** Turns not ready, stops accepting, waits up to graceMs for requests in flight, then closes. */
  close(graceMs?: number): Promise<void>;
}

export interface ServerOptions {
  docsDir?: string;
}

/** The cap on this process's connections, from its descriptor limit as read now. */
function capConnections(config: Config, logger: Logger, metrics: ServiceMetrics): ConnectionCap {
  const { maxConnections, descriptorReserve } = config.operations;
  const limits = connectionLimits({ descriptorLimit: readDescriptorLimit(), descriptorReserve, maxConnections });
  const cap = new ConnectionCap(limits, logger, () => metrics.observeRefusedConnection());
  metrics.countConnections(cap);
  return cap;
}

async function listen(fetch: (request: Request) => Response | Promise<Response>, port: number, host: string, connections: ConnectionCap) {
  // A port in use (or any listen error) rejects instead of crashing the process.
  const server: ServerType = await new Promise((resolve, reject) => {
    const createCapped: typeof createServer = ((options: object, listener: Parameters<ConnectionCap['guard']>[0]) => {
      const created = createServer(options, connections.guard(listener));
      connections.attach(created);
      return created;
    }) as typeof createServer;
    const s = serve({ fetch, port, hostname: host, createServer: createCapped }, () => {
      s.off('error', reject);
      resolve(s);
    });
    s.once('error', reject);
  });
  const bound = (server.address() as AddressInfo).port;
  return {
    url: `http://${host}:${bound}`,
    port: bound,
    // Graceful: stop accepting, let requests in flight finish (idle keep-alive connections close
    // at once), and cut what is left after the grace period.
    close: (graceMs: number) =>
      new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        if ('closeIdleConnections' in server) server.closeIdleConnections();
        const force = setTimeout(() => {
          if ('closeAllConnections' in server) server.closeAllConnections();
        }, graceMs);
        force.unref();
      }),
  };
}

/** Serves the service's HTTP APIs on config.host:config.port (0: a free port). */
export async function startServer(service: Service, options: ServerOptions = {}): Promise<RunningServer> {
  const { config, metrics, logger } = service;
  const lifecycle = new Lifecycle();
  const connections = capConnections(config, logger, metrics);
  const app = createApp(service, { docsDir: options.docsDir ?? DOCS_DIR, lifecycle, connections });
  const http = await listen(app.fetch, config.port, config.host, connections);
  return {
    ...http,
    lifecycle,
    metrics,
    connections,
    close: (graceMs = config.operations.shutdownGraceMs) => {
      lifecycle.shuttingDown = true;
      lifecycle.closing = true;
      // The change feed's long-polls answer and its streams end now, not at the end of the grace period.
      service.liveFeed.close();
      return http.close(graceMs);
    },
  };
}

/** `worker`'s listener on CPS_OPS_PORT: /healthz, /readyz and /metrics only. */
export async function startOperationsServer(service: Service, port: number): Promise<Omit<RunningServer, 'metrics'>> {
  const { storage, config, metrics, logger } = service;
  const lifecycle = new Lifecycle();
  const connections = capConnections(config, logger, metrics);
  const app = operationsApp(
    { storage, metrics, lifecycle, metricsToken: config.operations.metricsToken, connections },
    logger,
    config.operations,
  );
  const http = await listen(app.fetch, port, config.host, connections);
  return {
    ...http,
    lifecycle,
    connections,
    close: (graceMs = config.operations.shutdownGraceMs) => {
      lifecycle.shuttingDown = true;
      return http.close(graceMs);
    },
  };
}
