// On PostgreSQL, serve's worker threads hear every NOTIFY on their own listening connections, so the
// serving thread does not listen to pass wake-ups on (each would wake the event loop that answers
// reads, at every commit of every process): it listens only once its live feed has a waiting client.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { freePort, ServiceProcess, until } from '../faults/harness.js';
import { ImageServer } from '../support/image-server.js';
import { freshDatabase, type FreshDatabase } from '../support/postgres.js';
import { adminCalls } from '../support/admin-calls.js';

const ADMIN_TOKEN = 'adm_serve_wakeups_test';
let images: ImageServer;
let service: ServiceProcess | undefined;
let database: FreshDatabase | undefined;
let dir: string | undefined;

beforeAll(async () => {
  images = await ImageServer.start();
});
afterAll(async () => {
  await images.close();
});
afterEach(async () => {
  await service?.stop('SIGKILL');
  service = undefined;
  await database?.drop();
  database = undefined;
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

/** The database's connections whose last statement was a LISTEN: one per listening storage. */
async function listeningConnections(url: string): Promise<number> {
  const client = new pg.Client(url);
  await client.connect();
  try {
    const { rows } = await client.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %'",
    );
    return rows[0]!.n;
  } finally {
    await client.end();
  }
}

describe("serve's serving thread on PostgreSQL", () => {
  it('leaves the LISTEN to its worker threads, whose own wake-up mirrors an image the serving thread committed at once', async () => {
    database = await freshDatabase();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-serve-wakeups-'));
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    service = await ServiceProcess.start({
      CPS_DATABASE_URL: database.url,
      CPS_MEDIA_DIR: path.join(dir, 'media'),
      CPS_PORT: String(port),
      CPS_HOST: '127.0.0.1',
      CPS_ADMIN_TOKEN: ADMIN_TOKEN,
      CPS_DEMO_ON_EMPTY: 'false',
      CPS_WEBHOOK_ALLOW_HOSTS: '127.0.0.1',
      // Only a wake-up gets the image mirrored within the test's time.
      CPS_IMAGE_POLL_INTERVAL_MS: '60000',
    });
    await until(
      () => service!.output.includes('"msg":"listening"'),
      30_000,
      () => service!.output,
    );
    const admin = adminCalls(base, ADMIN_TOKEN);
    const merchant = await admin('POST', '/admin/v1/merchants', { name: 'Wake-up Outfitters' });
    const scope = `/admin/v1/merchants/${merchant.id}`;
    await admin('PUT', `${scope}/stores/de`, { name: 'DE', locale: 'de-DE', currency: 'EUR' });
    await admin('PUT', `${scope}/suppliers/alpine`, { name: 'Alpine' });
    const key = (await admin('POST', `${scope}/api-keys`, { name: 'test' })).key as string;
    // Two listening connections: the workers thread's (dispatcher, mirror) and the publishing thread's.
    await until(
      async () => (await listeningConnections(database!.url)) === 2,
      15_000,
      () => 'the worker threads did not both listen',
    );
    await admin('PUT', `${scope}/products/tent`, {
      content: { de: { title: 'Zelt' } },
      images: [{ url: images.url('/png/tent.png') }],
      offers: [{ supplier_ref: 'alpine', quantity: 3, cost: '10.00', currency: 'EUR' }],
    });
    await until(
      async () => {
        const product = await (
          await fetch(`${base}/v1/products?store=de&per_page=1`, { headers: { Authorization: `Bearer ${key}` } })
        ).json();
        return String(product.data[0]?.images[0]).startsWith(`${base}/media/`);
      },
      15_000,
      () => `the image was not mirrored:\n${service!.output.slice(-3000)}`,
    );
    // Still none on the serving thread: reads and writes did not make it listen.
    expect(await listeningConnections(database.url)).toBe(2);
    // The change feed's first waiting client makes it listen (a commit elsewhere answers it at once).
    const feed = await fetch(`${base}/v1/changes?store=de`, { headers: { Authorization: `Bearer ${key}` } });
    const { next_since: since, next_id: sinceId } = (await feed.json()) as { next_since: string; next_id: number };
    const waiting = fetch(`${base}/v1/changes?store=de&since=${encodeURIComponent(since)}&since_id=${sinceId}&wait=2`, {
      headers: { Authorization: `Bearer ${key}` },
    });
    await until(
      async () => (await listeningConnections(database!.url)) === 3,
      15_000,
      () => 'the live feed did not listen',
    );
    expect((await waiting).status).toBe(200);
  }, 120_000);
});
