// The typed client is a package an integrator installs: `npm run pack:client`
// packs it (scripts/generate/pack-client.ts), the tarball installs OFFLINE into an empty project, and an
// integrator's TypeScript example type-checks against the package's .d.ts and runs against the
// real server: the paging iterator, pollChanges, a store's snapshot export and syncStore over it,
// following the live feed (pollChanges with follow), and verifyWebhook
// and verifyWebhookDelivery (a Standard Webhooks delivery), with the generated payload
// validator it ships, which needs no runtime dependency. Its README (what npm shows) names every
// helper the package exports, each in an example.
import { execFile } from 'node:child_process';
import { createHmac } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Webhook } from 'standardwebhooks';
import { CLIENT_PACKAGE, CLIENT_README, packClient } from '../../scripts/generate/pack-client.js';
import { adminOk, createMerchant, importNdjson } from '../support/admin-http.js';
import { startTestService, type TestService } from '../support/service.js';

const run = promisify(execFile);
const repo = path.resolve(import.meta.dirname, '../..');

/**
 * The lock entries of the package's dependencies, copied from this repository's lockfile (name,
 * version, integrity). npm 11 reads full registry metadata to resolve a range, and the npm cache
 * only holds the abbreviated kind from `npm ci`: with a lockfile, `npm install --offline` needs
 * no metadata, only the tarballs, which the cache has.
 */
function lockEntriesFor(dependencies: Record<string, string>): Record<string, unknown> {
  const lock = JSON.parse(fs.readFileSync(path.join(repo, 'package-lock.json'), 'utf8'));
  const entries: Record<string, unknown> = {};
  const pending = Object.keys(dependencies);
  while (pending.length) {
    const name = pending.pop()!;
    const key = `node_modules/${name}`;
    if (entries[key]) continue;
    const entry = lock.packages[key];
    if (!entry) throw new Error(`${name} is not in package-lock.json`);
    entries[key] = entry;
    pending.push(...Object.keys(entry.dependencies ?? {}));
  }
  return entries;
}

// What an integrator writes: typed against the package's .d.ts, run with plain node.
const EXAMPLE = `
import {
  createCatalogClient, exportStore, iterateProducts, mapReplica, pollChanges, syncStore, type ChangeCursor, type Product, type StoreSnapshot,
} from '${CLIENT_PACKAGE}';
import { verifyWebhook, verifyWebhookDelivery, WebhookVerificationError, type WebhookPayload } from '${CLIENT_PACKAGE}/webhooks';
import { createHmac } from 'node:crypto';

const env = process.env as Record<string, string>;
const client = createCatalogClient({ baseUrl: env.BASE_URL, apiKey: env.API_KEY });

// @ts-expect-error: the client's paths are typed from the document; /v1/nope is not one of them.
void client.GET('/v1/nope');

const titles: string[] = [];
for await (const product of iterateProducts(client, { store: 'de', perPage: 2 })) {
  const typed: Product = product;
  titles.push(typed.title ?? '');
}

let cursor: ChangeCursor | undefined;
const changed: number[] = [];
const feed = pollChanges(client, { store: 'de' });
for (;;) {
  const next = await feed.next();
  if (next.done) { cursor = next.value; break; }
  changed.push(...next.value.changes.map((change) => change.product_id));
}

// The store from one snapshot, and the feed cursor of that snapshot: where the feed above ended.
const exported: number[] = [];
const products = exportStore(client, { store: 'de' });
let snapshot: StoreSnapshot;
for (;;) {
  const next = await products.next();
  if (next.done) { snapshot = next.value; break; }
  exported.push(next.value.id);
}
const replica = mapReplica();
const synced = await syncStore(client, { store: 'de', replica });

// Following the live feed from the synced cursor: each poll waits on the server (wait=1) for a
// change; none comes here, so the follower is stopped after 1.5 s, having waited.
let followed = 'ended';
const followStarted = Date.now();
try {
  for await (const window of pollChanges(client, { store: 'de', cursor: synced, follow: true, waitSeconds: 1, signal: AbortSignal.timeout(1500) })) {
    followed = 'window of ' + window.changes.length;
  }
} catch (error) {
  const name = (error as Error).name;
  if (name === 'TimeoutError' || name === 'AbortError') followed = Date.now() - followStarted >= 1400 ? 'waited' : 'stopped too soon';
}

const payload: WebhookPayload = verifyWebhook({
  secret: env.SECRET, rawBody: env.BODY,
  headers: { 'x-service-timestamp': env.TIMESTAMP, 'x-service-signature': env.SIGNATURE },
});
// A delivery with the Standard Webhooks headers (signed by the standardwebhooks package): the id to deduplicate on.
const delivery = verifyWebhookDelivery({
  secret: env.SECRET, rawBody: env.BODY,
  headers: {
    'x-service-timestamp': env.TIMESTAMP, 'x-service-signature': env.SIGNATURE,
    'webhook-id': env.WEBHOOK_ID, 'webhook-timestamp': env.TIMESTAMP, 'webhook-signature': env.STANDARD_SIGNATURE,
  },
});
let tampered = 'accepted';
try {
  verifyWebhook({ secret: env.SECRET, rawBody: env.BODY.replace('1', '2'), headers: { 'x-service-timestamp': env.TIMESTAMP, 'x-service-signature': env.SIGNATURE } });
} catch (error) {
  if (error instanceof WebhookVerificationError) tampered = error.reason;
}

// Signed, but 101 ids: the package's generated validator holds it to the document's maxItems.
const oversized = JSON.stringify({ ...JSON.parse(env.BODY), product_ids: Array.from({ length: 101 }, (_, i) => i + 1) });
const oversizedSignature = 'sha256=' + createHmac('sha256', env.SECRET).update(env.TIMESTAMP + '.' + oversized).digest('hex');
let rejected = 'accepted';
try {
  verifyWebhook({ secret: env.SECRET, rawBody: oversized, headers: { 'x-service-timestamp': env.TIMESTAMP, 'x-service-signature': oversizedSignature } });
} catch (error) {
  if (error instanceof WebhookVerificationError) rejected = error.reason + ' ' + error.schemaErrors.map((e) => e.instancePath).join();
}

console.log(JSON.stringify({
  titles, changed, caughtUp: typeof cursor?.since === 'string', exported, snapshotAtFeedEnd: JSON.stringify(snapshot.cursor) === JSON.stringify(cursor),
  replica: [...replica.products.keys()], synced: JSON.stringify(synced) === JSON.stringify(cursor), event: payload.event, tampered, rejected,
  delivery: [delivery.id, delivery.scheme, delivery.payload.event], followed,
}));
`;

// A merchant's system: its ERP pushes the catalog and its integration watches its own receiver.
const ADMIN_EXAMPLE = `
import { createAdminClient, importProducts, unwrap, CatalogApiError, type Delivery, type ProductSource } from '${CLIENT_PACKAGE}/admin';
import { verifyWebhook, type WebhookPayload } from '${CLIENT_PACKAGE}/webhooks';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

const env = process.env as Record<string, string>;
const merchant_id = Number(env.MERCHANT_ID);
const admin = createAdminClient({ baseUrl: env.BASE_URL, key: env.ADMIN_KEY });

// The receiver: verifies each delivery with the endpoint's secret (known once it is registered).
let secret = '';
const received: WebhookPayload[] = [];
const receiver = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    try {
      received.push(verifyWebhook({ secret, rawBody: Buffer.concat(chunks).toString('utf8'), headers: req.headers }));
      res.writeHead(204).end();
    } catch {
      res.writeHead(400).end();
    }
  });
});
await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));

// 1. An NDJSON import: two products, each with two offers.
const offer = (supplier_ref: string, cost: string) => ({ supplier_ref, quantity: 5, cost, currency: 'EUR' });
const imported = await importProducts(admin, merchant_id, [
  { op: 'upsert_product', product: { ref: 'ERP-1', content: { de: { title: 'Zelt', description: null } }, offers: [offer('alpine', '80.00'), offer('baltic', '75.00')] } },
  { op: 'upsert_product', product: { ref: 'ERP-2', content: { de: { title: 'Kocher', description: null } }, offers: [offer('alpine', '30.00')] } },
]);

// 2. An endpoint for the price changes of store de, pointed at the receiver.
const endpoint = await unwrap(admin.POST('/admin/v1/merchants/{merchant_id}/webhook-endpoints', {
  params: { path: { merchant_id } },
  body: { url: 'http://127.0.0.1:' + (receiver.address() as AddressInfo).port + '/hooks', store: 'de', events: ['price'], standard_webhooks: false, payload: 'thin', max_per_second: null },
}));
secret = endpoint.secret;

// 3. One cost changed: GET the source, send its offers back with baltic's cost changed (a merge patch replaces arrays whole).
const path = { merchant_id, product_ref: 'ERP-1' };
const source: ProductSource = await unwrap(admin.GET('/admin/v1/merchants/{merchant_id}/products/{product_ref}', { params: { path } }));
const patched = await unwrap(admin.PATCH('/admin/v1/merchants/{merchant_id}/products/{product_ref}', {
  params: { path },
  body: { offers: source.offers.map((o) => (o.supplier_ref === 'baltic' ? { ...o, cost: '70.00' } : o)) },
}));
// Never called, only type-checked: a patch is typed from the product document, where a cost is a decimal string.
// @ts-expect-error: 70 is a number.
void (() => admin.PATCH('/admin/v1/merchants/{merchant_id}/products/{product_ref}', { params: { path }, body: { offers: [{ supplier_ref: 'baltic', quantity: 1, cost: 70, currency: 'EUR' }] } }));

// 4. The endpoint's deliveries, until the price change has been delivered.
let deliveries: Delivery[] = [];
for (const deadline = Date.now() + 15_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 100))) {
  deliveries = (await unwrap(admin.GET('/admin/v1/merchants/{merchant_id}/webhook-endpoints/{endpoint_id}/deliveries', {
    params: { path: { merchant_id, endpoint_id: endpoint.id } },
  }))).data;
  if (deliveries.some((d) => d.status === 'succeeded')) break;
}
receiver.close();

// The key holds no operator's right: issuing keys stays the operator's.
let forbidden = 'allowed';
try {
  await unwrap(admin.POST('/admin/v1/merchants/{merchant_id}/api-keys', { params: { path: { merchant_id } }, body: { name: 'wider', scopes: ['catalog:write'], stores: null, expires_at: null } }));
} catch (error) {
  if (error instanceof CatalogApiError) forbidden = error.status + ' ' + error.problem.code;
}

console.log(JSON.stringify({
  imported,
  costs: patched.offers.map((o) => o.supplier_ref + ' ' + o.cost),
  deliveries: deliveries.map((d) => [d.event, d.status, d.product_ids.length]),
  received: received.map((p) => p.event),
  forbidden,
}));
`;

describe('the client package', () => {
  let service: TestService;
  let apiKey: string;
  let merchantId: number;
  let adminKey: string;
  let dir: string;
  let tarball: string;
  beforeAll(async () => {
    // The admin example registers an endpoint to its own receiver on 127.0.0.1; the dispatcher delivers at once.
    service = await startTestService({ config: { webhooks: { allowHosts: ['127.0.0.1'], coalesceMs: 100, pollIntervalMs: 20 } } });
    const merchant = await createMerchant(service, 'Package Outfitters');
    apiKey = merchant.key;
    merchantId = merchant.id;
    adminKey = (
      await adminOk(service, 'POST', `${merchant.base}/api-keys`, { name: 'erp', scopes: ['catalog:write', 'webhooks:write'] }, 201)
    ).key;
    await adminOk(service, 'PUT', `${merchant.base}/suppliers/alpine`, { name: 'Alpine Wholesale AG' });
    await adminOk(service, 'PUT', `${merchant.base}/suppliers/baltic`, { name: 'Baltic Outdoor' });
    await adminOk(service, 'PUT', `${merchant.base}/stores/de`, { name: 'Deutschland', locale: 'de-DE', currency: 'EUR' });
    await adminOk(service, 'POST', `${merchant.base}/customer-groups`, { name: 'retail' }, 201);
    const product = (ref: string, title: string) => ({
      op: 'upsert_product',
      product: { ref, content: { de: { title, description: null } }, own_stock: { quantity: 1, cost: '5.00', currency: 'EUR' } },
    });
    const imported = await importNdjson(service, merchant.id, [product('A', 'Alpha'), product('B', 'Beta'), product('C', 'Gamma')]);
    expect(imported.status, imported.text).toBe(200);
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-integrator-'));
    tarball = await packClient(path.join(dir, 'packed'));
  }, 120_000);
  afterAll(async () => {
    await service?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('carries its README, which shows install, every helper each entry point exports, the cursor shape and the errors', async () => {
    const readme = (await run('tar', ['xzOf', tarball, 'package/README.md'])).stdout;
    expect(readme).toBe(fs.readFileSync(path.join(repo, CLIENT_README), 'utf8'));
    expect(readme).toMatch(/^## Install$/m);
    expect(readme).toContain('npm install ./catalog-publishing-client-');
    // Every value an entry point exports (functions, classes, constants) is named in code in the README, and shown in an example.
    const examples = [...readme.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]!).join('\n');
    for (const entry of ['index', 'admin', 'webhooks']) {
      const exported = Object.keys(await import(path.join(repo, `src/client/${entry}.ts`)));
      expect(exported.length, entry).toBeGreaterThan(3);
      for (const name of exported) {
        expect(readme, `${entry}: ${name} in the README`).toContain(`\`${name}`);
        expect(examples, `${entry}: ${name} in an example`).toMatch(new RegExp(`\\b${name}\\b`));
      }
    }
    // The cursor as the helpers take it, against the wire's names.
    for (const words of ['ChangeCursor', '{ since, since_id }', 'next_since', 'next_id', 'CatalogApiError', 'problem.code']) {
      expect(readme).toContain(words);
    }
  });

  it('installs offline from its tarball into an empty project, with only its own dependencies', async () => {
    const manifest = JSON.parse((await run('tar', ['xzOf', tarball, 'package/package.json'])).stdout);
    expect(manifest.name).toBe(CLIENT_PACKAGE);
    expect(Object.keys(manifest.dependencies)).toEqual(['openapi-fetch']);

    const project = path.join(dir, 'shop');
    fs.mkdirSync(project);
    fs.writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'shop', private: true, type: 'module' }));
    fs.writeFileSync(
      path.join(project, 'package-lock.json'),
      JSON.stringify({
        name: 'shop',
        lockfileVersion: 3,
        requires: true,
        packages: { '': { name: 'shop' }, ...lockEntriesFor(manifest.dependencies) },
      }),
    );
    await run('npm', ['install', '--offline', '--no-audit', '--no-fund', tarball], { cwd: project });
    const installed = fs
      .readdirSync(path.join(project, 'node_modules'))
      .filter((n) => !n.startsWith('.'))
      .sort();
    expect(installed).toEqual([CLIENT_PACKAGE, 'openapi-fetch', 'openapi-typescript-helpers']);
  }, 60_000);

  it("type-checks an integrator's example against its .d.ts and runs it: paging, the change feed, a snapshot export and syncStore, following the live feed, webhooks of both schemes", async () => {
    const project = path.join(dir, 'shop');
    fs.writeFileSync(path.join(project, 'example.ts'), EXAMPLE);
    fs.writeFileSync(
      path.join(project, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'ES2022',
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          strict: true,
          skipLibCheck: false,
          outDir: 'out',
          lib: ['ES2023', 'DOM'],
          types: ['node'],
          typeRoots: [path.join(repo, 'node_modules', '@types')],
        },
        files: ['example.ts'],
      }),
    );
    const tsc = await run(process.execPath, [path.join(repo, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json'], {
      cwd: project,
    }).catch((error: { stdout: string }) => ({ stdout: error.stdout, failed: true }));
    expect(tsc, tsc.stdout).not.toHaveProperty('failed');

    const body = JSON.stringify({
      event: 'price',
      store_id: 1,
      product_ids: [1],
      occurred_at: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
    });
    const timestamp = String(Math.floor(Date.now() / 1000));
    const secret = 'whsec_exampleSecretForThePackageTest0123456789abcdefgh';
    const signature = `sha256=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`;
    const standardSignature = new Webhook(secret).sign('dlv_42', new Date(Number(timestamp) * 1000), body);
    const { stdout } = await run(process.execPath, ['out/example.js'], {
      cwd: project,
      env: {
        ...process.env,
        BASE_URL: service.url,
        API_KEY: apiKey,
        SECRET: secret,
        BODY: body,
        TIMESTAMP: timestamp,
        SIGNATURE: signature,
        WEBHOOK_ID: 'dlv_42',
        STANDARD_SIGNATURE: standardSignature,
      },
    });
    expect(JSON.parse(stdout)).toEqual({
      titles: ['Alpha', 'Beta', 'Gamma'],
      changed: [1, 2, 3],
      caughtUp: true,
      exported: [1, 2, 3],
      snapshotAtFeedEnd: true,
      replica: [1, 2, 3],
      synced: true,
      event: 'price',
      tampered: 'signature_mismatch',
      rejected: 'invalid_payload /product_ids',
      delivery: ['dlv_42', 'standard', 'price'],
      followed: 'waited',
    });
  }, 60_000);
  it('runs a merchant system on the admin client with a catalog:write + webhooks:write key: an import, a merge patch of one cost, an endpoint to its own receiver and its deliveries', async () => {
    const project = path.join(dir, 'shop');
    fs.writeFileSync(path.join(project, 'admin-example.ts'), ADMIN_EXAMPLE);
    const tsconfig = JSON.parse(fs.readFileSync(path.join(project, 'tsconfig.json'), 'utf8'));
    fs.writeFileSync(path.join(project, 'tsconfig.admin.json'), JSON.stringify({ ...tsconfig, files: ['admin-example.ts'] }));
    const tsc = await run(process.execPath, [path.join(repo, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.admin.json'], {
      cwd: project,
    }).catch((error: { stdout: string }) => ({ stdout: error.stdout, failed: true }));
    expect(tsc, tsc.stdout).not.toHaveProperty('failed');

    service.service.dispatcher.start();
    const { stdout } = await run(process.execPath, ['out/admin-example.js'], {
      cwd: project,
      env: { ...process.env, BASE_URL: service.url, MERCHANT_ID: String(merchantId), ADMIN_KEY: adminKey },
    });
    expect(JSON.parse(stdout)).toEqual({
      imported: { lines: 2, upserted: 2, deleted: 0 },
      costs: ['alpine 80.00', 'baltic 70.00'],
      deliveries: [['price', 'succeeded', 1]],
      received: ['price'],
      forbidden: '403 forbidden',
    });
    // The source the operator reads holds the new cost.
    const source = await adminOk(service, 'GET', `/admin/v1/merchants/${merchantId}/products/ERP-1`);
    expect(source.offers.map((o: { cost: string }) => o.cost)).toEqual(['80.00', '70.00']);
  }, 60_000);
});
