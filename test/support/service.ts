// A real service for tests: a fresh database on the project's engine (a SQLite file, or a database
// on the test PostgreSQL server: engine.ts), the real server on 127.0.0.1 (port 0), and request
// helpers whose every response passes through the contract harness.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { CatalogAdmin } from '../../src/admin/catalog-admin.js';
import { issueApiKey } from '../../src/tenancy/api-keys.js';
import { scopeToMerchant } from '../../src/storage/merchant-scope.js';
import { loadConfig, type Config, type ConfigOverrides } from '../../src/config.js';
import { silentLogger, type Logger } from '../../src/operations/log.js';
import { startServer, type RunningServer } from '../../src/server.js';
import { createService, type Service } from '../../src/service.js';
import type { CatalogStorage } from '../../src/storage/port.js';
import { SqliteStorage } from '../../src/storage/sqlite/index.js';
import { contractFetch } from './contract.js';
import { createTestDatabase, type TestDatabase } from './engine.js';

export const ADMIN_TOKEN = 'adm_test_token_0123456789abcdef';

export interface TestService {
  url: string;
  dir: string;
  config: Config;
  /** The service the server runs (service.ts): its storage, domain services, dispatcher and mirror. */
  service: Service;
  /** The service's database: its engine, location, and what a child process needs to open it. */
  database: TestDatabase;
  storage: CatalogStorage;
  admin: CatalogAdmin;
  server: RunningServer;
  /** fetch with contract validation of every response. */
  fetch: typeof fetch;
  /** GET/POST/... against the public API with an API key; returns status, headers and parsed JSON. */
  api(pathAndQuery: string, key: string | null, init?: RequestInit): Promise<TestResponse>;
  /** A request against the admin API with the admin token. */
  adminApi(method: string, pathAndQuery: string, body?: unknown, init?: RequestInit): Promise<TestResponse>;
  /** Issues an API key for a merchant directly in storage. */
  keyFor: (merchantId: number) => Promise<string>;
  close(): Promise<void>;
}

export interface TestResponse {
  status: number;
  headers: Headers;
  body: any;
  text: string;
}

export interface TestServiceOptions {
  now?: () => Date;
  config?: ConfigOverrides;
  /** Where the built HTML docs are (scripts/generate/build-docs.ts); by default a folder without them (the pages answer 404). */
  docsDir?: string;
  /** Where the service logs; by default nowhere (log level silent). */
  logger?: Logger;
  /** The storage engine (default: the project's, engine.ts). */
  engine?: TestDatabase['engine'];
}

export async function startTestService(options: TestServiceOptions = {}): Promise<TestService> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-test-'));
  const config = loadConfig(
    {},
    {
      port: 0,
      host: '127.0.0.1',
      databasePath: path.join(dir, 'catalog.db'),
      adminToken: ADMIN_TOKEN,
      adminTokenConfigured: true,
      demoOnEmpty: false,
      // Tests drive the admin API with the operator token far faster than one credential of a
      // deployment is allowed to (CPS_ADMIN_RATE_*: 1,000 at once, 100 a second); the limit's own
      // tests (test/http/admin-rate-limits.test.ts) set theirs.
      adminRateLimit: { burst: 1_000_000, perSecond: 1_000_000 },
      ...options.config,
    },
  );
  // Tests move injected clocks far ahead at once, and work due by time (a retry, a probe) must be
  // looked at without waiting for a backed-off poll in real time: the idle back-off stays off unless
  // a test sets it (test/operations/idle-poll.test.ts).
  if (options.config?.webhooks?.idlePollMaxMs === undefined) config.webhooks.idlePollMaxMs = config.webhooks.pollIntervalMs;
  if (options.config?.images?.idlePollMaxMs === undefined) config.images.idlePollMaxMs = config.images.pollIntervalMs;
  const database = await createTestDatabase(dir, options.engine);
  // SQLite: the service opens the file from its config, as `serve` does; PostgreSQL: the test's database.
  const service = createService(config, {
    now: options.now,
    logger: options.logger ?? silentLogger,
    storage: database.engine === 'sqlite' ? undefined : await database.open(),
  });
  const { storage } = service;
  const server = await startServer(service, { docsDir: options.docsDir ?? path.join(dir, 'no-docs') });
  const validatingFetch = contractFetch();
  const { admin } = service;

  async function call(pathAndQuery: string, init: RequestInit): Promise<TestResponse> {
    const response = await validatingFetch(`${server.url}${pathAndQuery}`, init);
    const text = await response.text();
    let body: unknown;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      body = undefined;
    }
    return { status: response.status, headers: response.headers, body, text };
  }

  return {
    url: server.url,
    dir,
    config,
    service,
    database,
    storage,
    admin,
    server,
    fetch: validatingFetch,
    api: (pathAndQuery, key, init = {}) =>
      call(pathAndQuery, {
        ...init,
        headers: { ...(key ? { Authorization: `Bearer ${key}` } : {}), ...(init.headers as Record<string, string>) },
      }),
    adminApi: (method, pathAndQuery, body, init = {}) =>
      call(pathAndQuery, {
        ...init,
        method,
        headers: {
          Authorization: `Bearer ${ADMIN_TOKEN}`,
          ...(body !== undefined && typeof body !== 'string' ? { 'Content-Type': 'application/json' } : {}),
          ...(init.headers as Record<string, string>),
        },
        body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
      }),
    keyFor: async (merchantId) => (await issueApiKey(scopeToMerchant(storage, merchantId), 'test', new Date())).key,
    close: async () => {
      await server.close();
      await service.close();
      await database.drop();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The service's SQLite storage, for tests that look into the file (SQLite-only tests). */
export function sqliteStorageOf(service: Pick<TestService, 'storage'>): SqliteStorage {
  if (!(service.storage instanceof SqliteStorage))
    throw new Error('This test reads the SQLite file: mark it sqliteOnly (test/support/engine.ts)');
  return service.storage;
}
