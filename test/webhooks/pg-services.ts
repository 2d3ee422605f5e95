// Several services on one PostgreSQL database, as several processes would run them: each its own
// storage (its own pool and listening connection) through createService, the first one serving the
// admin API on 127.0.0.1 so tests build catalogs over HTTP. The server comes from
// test/storage/pg-server.ts (initdb and pg_ctl in a temporary folder); each world gets a fresh database.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig, type ConfigOverrides } from '../../src/config.js';
import { silentLogger } from '../../src/operations/log.js';
import { startServer, type RunningServer } from '../../src/server.js';
import { createService, type Service } from '../../src/service.js';
import { openPostgresStorage, type PostgresStorage } from '../../src/storage/postgres/index.js';
import { ADMIN_TOKEN, type TestResponse, type TestService } from '../support/service.js';
import type { TestPostgres } from '../storage/pg-server.js';

export interface PgServices {
  /** The services, one per "process", on one database. */
  services: Service[];
  storages: PostgresStorage[];
  /** The database they share. */
  url: string;
  /** The admin API of the first service, in the shape the admin-http helpers take. */
  admin: TestService;
  close(): Promise<void>;
}

let databases = 0;

export async function startPgServices(postgres: TestPostgres, count: number, overrides: ConfigOverrides = {}): Promise<PgServices> {
  const url = await postgres.createDatabase(`dispatch_${process.pid}_${++databases}`);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-pg-dispatch-'));
  const config = loadConfig(
    {},
    {
      port: 0,
      host: '127.0.0.1',
      databasePath: path.join(dir, 'unused.db'),
      adminToken: ADMIN_TOKEN,
      adminTokenConfigured: true,
      demoOnEmpty: false,
      ...overrides,
      webhooks: { allowHosts: ['127.0.0.1'], ...overrides.webhooks },
    },
  );
  const storages = Array.from({ length: count }, () => openPostgresStorage(url, { poolSize: 4 }));
  await Promise.all(storages.map((storage) => storage.ready));
  const services = storages.map((storage) => createService(config, { storage, logger: silentLogger }));
  const server: RunningServer = await startServer(services[0]!, { docsDir: path.join(dir, 'no-docs') });

  async function adminApi(method: string, pathAndQuery: string, body?: unknown, init: RequestInit = {}): Promise<TestResponse> {
    const response = await fetch(`${server.url}${pathAndQuery}`, {
      ...init,
      method,
      headers: {
        Authorization: `Bearer ${ADMIN_TOKEN}`,
        ...(body !== undefined && typeof body !== 'string' ? { 'Content-Type': 'application/json' } : {}),
        ...(init.headers as Record<string, string>),
      },
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, headers: response.headers, body: text ? JSON.parse(text) : undefined, text };
  }

  return {
    services,
    storages,
    url,
    admin: { adminApi } as unknown as TestService,
    async close() {
      await server.close();
      for (const service of services) await service.close();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
