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
  close(): Promise<void>;
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
    close: () => new Promise((resolve, reject) => {
      server.close((error) => (error ? reject(error) : resolve()));
      if ('closeAllConnections' in server) server.closeAllConnections();
    }),
  };
}
