// Starts the HTTP service on a storage file: used by `serve` and by the tests (port 0).
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { serve, type ServerType } from '@hono/node-server';
import type { Config } from './config.js';
import { createApp } from './http/app.js';
import type { CatalogStorage } from './storage/port.js';

/** Where `npm run build:docs` writes the HTML docs (next to the compiled code). */
export const DOCS_FILE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'dist', 'docs', 'index.html');

export interface RunningServer {
  url: string;
  port: number;
  /** Stops accepting, waits up to graceMs for requests in flight, then closes. */
  close(graceMs?: number): Promise<void>;
}

export async function startServer(
  storage: CatalogStorage, config: Config, options: { now?: () => Date; docsFile?: string } = {},
): Promise<RunningServer> {
  const app = createApp({ storage, config, now: options.now, docsFile: options.docsFile ?? DOCS_FILE });
  const server: ServerType = await new Promise((resolve) => {
    const s = serve({ fetch: app.fetch, port: config.port, hostname: config.host }, () => resolve(s));
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${config.host}:${port}`,
    port,
    // Graceful: stop accepting, let requests in flight finish (idle keep-alive connections close
    // at once), and cut what is left after the grace period.
    close: (graceMs = 10_000) => new Promise((resolve, reject) => {
      server.close((error) => (error ? reject(error) : resolve()));
      if ('closeIdleConnections' in server) server.closeIdleConnections();
      const force = setTimeout(() => {
        if ('closeAllConnections' in server) server.closeAllConnections();
      }, graceMs);
      force.unref();
    }),
  };
}
