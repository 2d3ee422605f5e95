// The server side of `npm run bench:reads`: the real app on a prepared database, as `serve` runs it
// (access log on, metrics), plus one route answering a fixed, pre-encoded copy of page 1's bytes
// (the ceiling: same HTTP stack, no authentication, no database, no assembly). Requests with
// `X-Bench-App: quiet` go to a second instance of the app with the access log off, so the cost of
// logging is measured side by side; with `X-Bench-App: uncached`, to an instance without the read
// cache of published bytes and without the cache of coded bodies (every request reads its rows and
// every gzip/br request pays its compression, as the first reader of a page does).
// Logs go to /dev/null: the cost of writing them, not of a terminal.
// DB is an SQLite file, or a postgres:// URL (bench:postgres serves both engines side by side).
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { loadConfig } from '../../src/config.js';
import { pino } from 'pino';
import { CatalogReads } from '../../src/catalog/reads.js';
import { createApp } from '../../src/http/app.js';
import { createLogger } from '../../src/operations/log.js';
import { createService } from '../../src/service.js';

const [database] = process.argv.slice(2);
if (!database) throw new Error('usage: bench-server DB (an SQLite file or a postgres:// URL)');
const onPostgres = /^postgres(ql)?:\/\//.test(database);
// The limiter runs (its cost is part of every read) but never throttles the load generator.
const rateLimit = { burst: 1e9, perSecond: 1e9 };
// The caches' budgets may be set for a run, to compare them: BENCH_READ_CACHE_BYTES and
// BENCH_COMPRESSION_CACHE_BYTES (the bench scripts pass no CPS_* variable on to their servers).
const cacheEnv = Object.fromEntries(
  ['READ', 'COMPRESSION'].flatMap((cache) => {
    const bytes = process.env[`BENCH_${cache}_CACHE_BYTES`];
    return bytes === undefined ? [] : [[`CPS_${cache}_CACHE_BYTES`, bytes]];
  }),
);
const config = loadConfig(cacheEnv, {
  ...(onPostgres ? { databaseUrl: database } : { databasePath: database }),
  adminToken: 'bench',
  rateLimit,
});
const logger = createLogger(config.operations, pino.destination({ dest: '/dev/null', sync: true }));
const service = createService(config, { logger });
const app = createApp(service);
const quiet = createApp({ ...service, config: { ...config, operations: { ...config.operations, accessLog: false } } });
const uncachedConfig = { ...config, compressionCacheBytes: 0, readCacheBytes: 0 };
const uncached = createApp({ ...service, config: uncachedConfig, reads: new CatalogReads(service.storage) });
const apps = new Map([
  ['quiet', quiet],
  ['uncached', uncached],
]);
let staticBody = Buffer.alloc(0);
const root = new Hono();
root.get('/__static', (c) => c.body(staticBody, 200, { 'Content-Type': 'application/json' }));
root.post('/__static', async (c) => {
  staticBody = Buffer.from(await c.req.arrayBuffer());
  return c.body(null, 204);
});
root.all('*', (c) => (apps.get(c.req.header('X-Bench-App') ?? '') ?? app).fetch(c.req.raw));
// The bench asks for the server's CPU time around each run: CPU per request is the figure that
// stays meaningful when the load generator, not the server, limits requests per second.
process.on('message', (message) => {
  if (message === 'cpu') process.send?.({ cpu: process.cpuUsage() });
});
const server = serve({ fetch: root.fetch, port: 0, hostname: '127.0.0.1' }, () => {
  process.send?.({ port: (server.address() as AddressInfo).port });
});
