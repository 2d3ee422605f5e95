// Delivery ids that reveal nothing: each delivery's `webhook-id` is `dlv_` and 32 random hex
// digits, the same on every retry, the same on both engines; `X-Service-Replaces` names the
// original's; the admin API shows the id the receiver saw (`webhook_id`, `replaces_webhook_id`) and
// finds the delivery by it. Over the admin API with real receivers on 127.0.0.1; and migration 58
// on a database written before it: a delivery a receiver may have seen keeps its `dlv_` and number.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import type { CatalogStorage } from '../../src/storage/port.js';
import { openSqliteStorage } from '../../src/storage/sqlite/index.js';
import { migrations as sqliteMigrations } from '../../src/storage/sqlite/migrations.js';
import { adminOk, createMerchant } from '../support/admin-http.js';
import { runCli } from '../support/cli.js';
import { onPglite, TEST_ENGINE } from '../support/engine.js';
import { testPostgres } from '../support/postgres.js';
import { answers } from '../support/receiver.js';
import { startTestService } from '../support/service.js';
import { SECOND, startWebhookWorld, type WebhookWorld } from './harness.js';

const OPAQUE = /^dlv_[0-9a-f]{32}$/;
const AT = '2026-11-30T00:00:00.000Z';

let world: WebhookWorld | undefined;
const dirs: string[] = [];
afterEach(async () => {
  await world?.close();
  world = undefined;
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

describe('webhook-id', () => {
  it('is dlv_ and 32 random hex digits, the same on every retry, shown by the admin API and found by it', async () => {
    const w = await startWebhookWorld({ stores: ['de'], webhooks: { backoffSeconds: [30] } });
    world = w;
    // The first request fails, every later one succeeds.
    let seen = 0;
    const receiver = await w.receiver({ behaviour: () => (seen++ === 0 ? answers.serverError : answers.ok) });
    const created = await w.register(receiver, { events: ['price'] });
    const other = await w.register(await w.receiver(), { events: ['price'] });
    await w.putProduct('A', { cost: '11.00' });
    await w.after(2 * SECOND);
    await w.putProduct('B', { cost: '12.00' });
    await w.after(2 * SECOND);
    await w.after(31 * SECOND);
    const [first, second, retry] = receiver.requests;
    expect(receiver.count).toBe(3);
    const ids = [first, second, retry].map((r) => String(r!.headers['webhook-id']));
    for (const id of ids) expect(id).toMatch(OPAQUE);
    // Two deliveries, two unrelated ids; the retry keeps its delivery's.
    expect(ids[1]).not.toBe(ids[0]);
    expect(ids[2]).toBe(ids[0]);

    // The admin API shows the id the receiver saw, and finds the delivery by it (on its endpoint only).
    const deliveries = await w.deliveries(created.id);
    expect(deliveries.map((d) => d.webhook_id).sort()).toEqual([ids[0], ids[1]].sort());
    for (const d of deliveries) expect(d.webhook_id).not.toBe(`dlv_${d.id}`);
    const found = await w.deliveries(created.id, `&webhook_id=${ids[0]}`);
    expect(found).toHaveLength(1);
    expect(found[0]).toMatchObject({ webhook_id: ids[0], attempts: 2, status: 'succeeded', replaces_webhook_id: null });
    expect((await w.delivery(created.id, found[0]!.id)).attempts.map((a) => a.request_headers?.['webhook-id'])).toEqual([ids[0], ids[0]]);
    expect(await w.deliveries(other.id, `&webhook_id=${ids[0]}`)).toEqual([]);
    expect(await w.deliveries(created.id, `&webhook_id=dlv_${'0'.repeat(32)}`)).toEqual([]);
    expect(await w.deliveries(created.id, `&webhook_id=${ids[0]}&status=failed`)).toEqual([]);
    const malformed = await w.service.adminApi('GET', `${w.merchant.base}/webhook-endpoints/${created.id}/deliveries?webhook_id=dlv_1x`);
    expect(malformed.status, malformed.text).toBe(400);
  });

  it("of a resend is its own, and X-Service-Replaces is the original's, as the admin API shows", async () => {
    const w = await startWebhookWorld({ stores: ['de'] });
    world = w;
    const receiver = await w.receiver();
    const created = await w.register(receiver, { events: ['price'] });
    await w.putProduct('A', { cost: '11.00' });
    await w.after(2 * SECOND);
    const [original] = await w.deliveries(created.id);
    const resent = await w.post(`/webhook-endpoints/${created.id}/deliveries/${original!.id}/resend`);
    expect(resent.status, resent.text).toBe(202);
    expect(resent.body).toMatchObject({ replaces: original!.id, replaces_webhook_id: original!.webhook_id });
    expect(resent.body.webhook_id).toMatch(OPAQUE);
    await w.deliverDue();
    const [sent, again] = receiver.requests;
    expect(sent!.headers['webhook-id']).toBe(original!.webhook_id);
    expect(again!.headers['webhook-id']).toBe(resent.body.webhook_id);
    expect(again!.headers['x-service-replaces']).toBe(original!.webhook_id);
    // The receiver's X-Service-Replaces finds the original.
    expect((await w.deliveries(created.id, `&webhook_id=${String(again!.headers['x-service-replaces'])}`))[0]!.id).toBe(original!.id);
  });
});

describe('the CLI', () => {
  it('lists the delivery with a webhook-id (--webhook-id) and resends a delivery named by it (--delivery dlv_…)', async () => {
    const service = await startTestService();
    try {
      const merchant = await createMerchant(service, 'Command Line Outfitters');
      await adminOk(service, 'PUT', `${merchant.base}/stores/de`, { name: 'DE', locale: 'de-DE', currency: 'EUR' });
      const created = await adminOk(
        service,
        'POST',
        `${merchant.base}/webhook-endpoints`,
        { url: 'https://hooks.outfitters-shop.com/c' },
        201,
      );
      const path = `${merchant.base}/webhook-endpoints/${created.id}`;
      const sent = await service.adminApi('POST', `${path}/test`, undefined, { headers: { 'Content-Type': 'application/json' } });
      expect(sent.status, sent.text).toBe(202);
      await service.adminApi('POST', `${path}/test`, undefined, { headers: { 'Content-Type': 'application/json' } });
      const env = { ...service.database.env, CPS_DEMO_ON_EMPTY: 'false' };
      const endpointArgs = ['--merchant', String(merchant.id), '--endpoint', String(created.id), '--json'];
      const listed = await runCli(['webhooks', 'deliveries', ...endpointArgs, '--webhook-id', sent.body.webhook_id], env);
      expect(listed.code, listed.stderr).toBe(0);
      expect((JSON.parse(listed.stdout) as { id: number }[]).map((d) => d.id)).toEqual([sent.body.id]);
      const resent = await runCli(['webhooks', 'resend', ...endpointArgs, '--delivery', sent.body.webhook_id], env);
      expect(resent.code, resent.stderr).toBe(0);
      expect(JSON.parse(resent.stdout)).toMatchObject({ replaces: sent.body.id, replaces_webhook_id: sent.body.webhook_id });
      const unknown = await runCli(['webhooks', 'resend', ...endpointArgs, '--delivery', `dlv_${'0'.repeat(32)}`], env);
      expect(unknown.code).not.toBe(0);
      expect(unknown.stderr).toContain('has webhook-id');
    } finally {
      await service.close();
    }
  });
});

/** The deliveries a database written before migration 58 holds: one sent, one never attempted, a resend of the sent one. */
const BEFORE_58 = [
  `INSERT INTO merchants (name, created_at) VALUES ('Before', '${AT}')`,
  `INSERT INTO webhook_endpoints (merchant_id, url, events, secret, created_at)
    VALUES (1, 'https://hooks.example.com/catalog', '["price"]', 'whsec_x', '${AT}')`,
  `INSERT INTO webhook_deliveries (endpoint_id, event, store_id, product_ids, occurred_at, status, attempts, created_at)
    VALUES (1, 'price', 1, '[7]', '${AT}', 'succeeded', 1, '${AT}')`,
  `INSERT INTO webhook_deliveries (endpoint_id, event, store_id, product_ids, occurred_at, status, attempts, next_attempt_at, created_at)
    VALUES (1, 'price', 1, '[8]', NULL, 'pending', 0, '${AT}', '${AT}')`,
  `INSERT INTO webhook_deliveries (endpoint_id, event, store_id, product_ids, occurred_at, status, attempts, next_attempt_at, created_at,
    replaces) VALUES (1, 'price', 1, '[7]', NULL, 'pending', 0, '${AT}', '${AT}', 1)`,
];

/** After migration 58: the sent delivery keeps dlv_1, the others get random ids, and new ones too. */
async function expectMigrated(storage: CatalogStorage): Promise<void> {
  expect(await storage.missingMigrations()).toEqual([]);
  const [resend, pending, sent] = await storage.listDeliveries(1, { limit: 10 });
  expect(sent).toMatchObject({ id: 1, webhook_id: 'dlv_1', replaces_webhook_id: null });
  expect(pending!.webhook_id).toMatch(OPAQUE);
  expect(resend).toMatchObject({ id: 3, replaces: 1, replaces_webhook_id: 'dlv_1' });
  expect(resend!.webhook_id).toMatch(OPAQUE);
  expect(resend!.webhook_id).not.toBe(pending!.webhook_id);
  expect((await storage.listDeliveries(1, { limit: 10, webhookId: 'dlv_1' })).map((d) => d.id)).toEqual([1]);
  const added = await storage.insertDelivery({
    endpoint_id: 1,
    event: 'price',
    store_id: 1,
    product_ids: [9],
    occurred_at: null,
    status: 'pending',
    attempts: 0,
    next_attempt_at: AT,
    created_at: AT,
    replaces: 1,
  });
  expect(added.webhook_id).toMatch(OPAQUE);
  expect(added.replaces_webhook_id).toBe('dlv_1');
}

describe.skipIf(TEST_ENGINE !== 'sqlite')('SQLite: migration 58 on deliveries made before it', () => {
  it('keeps the dlv_ and number of a delivery a receiver may have seen, and gives the others random ids', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-delivery-ids-'));
    dirs.push(dir);
    const file = path.join(dir, 'catalog.db');
    const db = new Database(file);
    db.exec('CREATE TABLE schema_migrations (id INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)');
    for (const migration of sqliteMigrations.filter((m) => m.id < 58)) {
      db.exec(migration.sql);
      db.prepare('INSERT INTO schema_migrations VALUES (?, ?, ?)').run(migration.id, migration.name, AT);
    }
    for (const statement of BEFORE_58) db.exec(statement);
    db.close();
    const storage = openSqliteStorage(file);
    try {
      await expectMigrated(storage);
    } finally {
      await storage.close();
    }
  });
});

describe.skipIf(TEST_ENGINE !== 'postgres' || onPglite())('PostgreSQL: migration 58 on deliveries made before it', () => {
  it('keeps the dlv_ and number of a delivery a receiver may have seen, and gives the others random ids', async () => {
    const { migrations, statementsOf } = await import('../../src/storage/postgres/migrations.js');
    const { openPostgresStorage } = await import('../../src/storage/postgres/index.js');
    const server = testPostgres();
    if (server.kind !== 'server') throw new Error('needs a server');
    const name = `cps_before_58_${process.pid}`;
    const admin = new pg.Client(server.url);
    await admin.connect();
    await admin.query(`DROP DATABASE IF EXISTS ${name}`);
    await admin.query(`CREATE DATABASE ${name}`);
    const url = server.url.replace(/\/[^/]*$/, `/${name}`);
    const before = new pg.Client(url);
    await before.connect();
    let opened: Awaited<ReturnType<typeof openPostgresStorage>> | undefined;
    try {
      await before.query(
        'CREATE TABLE schema_migrations (id integer PRIMARY KEY, name text NOT NULL, applied_at text COLLATE "C" NOT NULL)',
      );
      for (const migration of migrations.filter((m) => m.id < 58)) {
        for (const statement of statementsOf(migration.sql)) await before.query(statement);
        await before.query('INSERT INTO schema_migrations VALUES ($1, $2, $3)', [migration.id, migration.name, AT]);
      }
      for (const statement of BEFORE_58) await before.query(statement);
      opened = openPostgresStorage(url);
      await opened.ready;
      await expectMigrated(opened);
    } finally {
      await opened?.close();
      await before.end();
      await admin.query(`DROP DATABASE IF EXISTS ${name}`);
      await admin.end();
    }
  });
});
