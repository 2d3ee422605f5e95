// The server side of `npm run bench:reads`: the real app on a prepared database, plus one route
// answering a fixed, pre-encoded copy of page 1's bytes (the ceiling: same HTTP stack, no
// authentication, no database, no assembly).
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { loadConfig } from '../src/config.js';
import { createApp } from '../src/http/app.js';
import { openSqliteStorage } from '../src/storage/sqlite.js';

const [databasePath] = process.argv.slice(2);
if (!databasePath) throw new Error('usage: bench-server DB');
const storage = openSqliteStorage(databasePath);
// The limiter runs (its cost is part of every read) but never throttles the load generator.
const rateLimit = { burst: 1e9, perSecond: 1e9 };
const app = createApp({ storage, config: loadConfig({}, { databasePath, adminToken: 'bench', rateLimit }) });
let staticBody = Buffer.alloc(0);
const root = new Hono();
root.get('/__static', (c) => c.body(staticBody, 200, { 'Content-Type': 'application/json' }));
root.post('/__static', async (c) => {
  staticBody = Buffer.from(await c.req.arrayBuffer());
  return c.body(null, 204);
});
root.route('/', app);
// The bench asks for the server's CPU time around each run: CPU per request is the figure that
// stays meaningful when the load generator, not the server, limits requests per second.
process.on('message', (message) => {
  if (message === 'cpu') process.send?.({ cpu: process.cpuUsage() });
});
const server = serve({ fetch: root.fetch, port: 0, hostname: '127.0.0.1' }, () => {
  process.send?.({ port: (server.address() as AddressInfo).port });
});
