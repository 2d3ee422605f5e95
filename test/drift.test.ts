// The app must implement exactly the authored documents: same operations (method and path), same
// parameters, same status codes. Routes are generated from the documents, so drift shows up as a
// route not registered, a route registered by hand, or a document edited without regenerating.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { adminApi } from '../src/http/admin-api.js';
import { createApp } from '../src/http/app.js';
import { publicApi } from '../src/http/public-api.js';
import adminDocument from '../src/generated/admin-openapi.json' with { type: 'json' };
import operationsDocument from '../src/generated/operations-openapi.json' with { type: 'json' };
import publicDocument from '../src/generated/public-openapi.json' with { type: 'json' };
import { operationsApi } from '../src/http/operations-api.js';
import { Lifecycle } from '../src/operations/health.js';
import { silentLogger } from '../src/operations/log.js';
import { ServiceMetrics } from '../src/operations/metrics.js';
import { createService, type Service } from '../src/service.js';
import { openSqliteStorage } from '../src/storage/sqlite/index.js';
import { startTestService, type TestService } from './support/service.js';

type Json = Record<string, any>;
const METHODS = ['get', 'put', 'post', 'patch', 'delete'];

interface OperationShape {
  parameters: string[];
  statuses: string[];
}

function resolve(doc: Json, value: Json): Json {
  return value.$ref
    ? resolve(
        doc,
        (value.$ref as string)
          .slice(2)
          .split('/')
          .reduce((n: Json, k) => n[k], doc),
      )
    : value;
}

/** What the authored document says each operation takes and answers. */
function documented(doc: Json): Map<string, OperationShape> {
  const shapes = new Map<string, OperationShape>();
  for (const [template, item] of Object.entries(doc.paths as Json)) {
    for (const method of METHODS) {
      const operation = item[method];
      if (!operation) continue;
      const parameters = [...(item.parameters ?? []), ...(operation.parameters ?? [])]
        .map((p: Json) => resolve(doc, p))
        .map((p: Json) => `${p.in === 'header' ? 'header' : p.in}:${p.in === 'header' ? p.name.toLowerCase() : p.name}`)
        .sort();
      shapes.set(`${method.toUpperCase()} ${template}`, { parameters, statuses: Object.keys(operation.responses).sort() });
    }
  }
  return shapes;
}

/** What the app registered through @hono/zod-openapi. */
function registered(app: { openAPIRegistry: { definitions: Json[] } }): Map<string, OperationShape> {
  const shapes = new Map<string, OperationShape>();
  for (const definition of app.openAPIRegistry.definitions) {
    if (definition.type !== 'route') continue;
    const route = definition.route;
    const parameters: string[] = [];
    for (const [part, location] of [
      ['params', 'path'],
      ['query', 'query'],
      ['headers', 'header'],
    ] as const) {
      const schema = route.request?.[part];
      if (schema) parameters.push(...Object.keys(schema.shape).map((name) => `${location}:${name}`));
    }
    shapes.set(`${route.method.toUpperCase()} ${route.path}`, {
      parameters: parameters.sort(),
      statuses: Object.keys(route.responses).map(String).sort(),
    });
  }
  return shapes;
}

/** Operations specified ahead of their implementation (none at the moment). */
const SPECIFIED_NOT_YET_SERVED: string[] = [];

let service: Service;
let dir: string;

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(process.cwd(), 'node_modules', '.drift-'));
  const databasePath = path.join(dir, 'drift.db');
  // Built, not started: nothing here runs the dispatcher or the mirror.
  service = createService(loadConfig({}, { adminToken: 'x', databasePath, changes: { feedWindow: 1000 } }), {
    logger: silentLogger,
    storage: openSqliteStorage(databasePath),
  });
});
afterAll(async () => {
  await service.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('the app implements exactly the authored documents', () => {
  it('registers every public operation with the documented parameters and statuses, and no other', () => {
    const expected = documented(publicDocument);
    for (const pending of SPECIFIED_NOT_YET_SERVED) expected.delete(pending);
    expect(registered(publicApi(service))).toEqual(expected);
  });

  it('registers every admin operation with the documented parameters and statuses, and no other', () => {
    expect(registered(adminApi(service))).toEqual(documented(adminDocument));
  });

  it('registers every operations operation with the documented parameters and statuses, and no other', () => {
    const metrics = new ServiceMetrics(service.storage, () => new Date(), silentLogger);
    const app = operationsApi({ storage: service.storage, metrics, lifecycle: new Lifecycle(), metricsToken: null });
    expect(registered(app)).toEqual(documented(operationsDocument));
  });

  it('routes no undocumented path under /v1 or /admin/v1', () => {
    const app = createApp(service);
    const documentedRoutes = new Set([...documented(publicDocument).keys(), ...documented(adminDocument).keys()]);
    const served = app.routes
      .filter((r) => r.method !== 'ALL' && /^\/(v1|admin\/v1)\//.test(r.path))
      .map((r) => `${r.method} ${r.path.replace(/:([A-Za-z_]+)/g, '{$1}')}`);
    expect(served.length).toBeGreaterThanOrEqual(documentedRoutes.size - SPECIFIED_NOT_YET_SERVED.length);
    for (const route of served) expect(documentedRoutes, route).toContain(route);
  });
});

describe('the served documents', () => {
  // The HTML docs built from them: test/http/docs.test.ts.
  let service: TestService;
  beforeAll(async () => {
    service = await startTestService();
  });
  afterAll(() => service.close());

  it('serves the authored, bundled public document at /openapi.json', async () => {
    const response = await fetch(`${service.url}/openapi.json`);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual(publicDocument);
  });

  it('serves the authored, bundled admin document at /admin/openapi.json', async () => {
    const response = await fetch(`${service.url}/admin/openapi.json`);
    expect(await response.json()).toEqual(adminDocument);
  });

  it('serves the authored, bundled operations document at /operations/openapi.json', async () => {
    const response = await fetch(`${service.url}/operations/openapi.json`);
    expect(await response.json()).toEqual(operationsDocument);
  });
});
