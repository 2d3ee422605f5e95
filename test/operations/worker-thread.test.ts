// `serve` runs its dispatcher and mirror in a worker thread of their own by default
// (CPS_WORKERS, docs/operating.md#processes-serve-and-worker): the thread mirrors images and delivers signed webhooks on its own connections to
// the same database, the serving process's /metrics counts its deliveries and statements, the
// serving process's writes wake it at once (the mirror polls once a minute here), and SIGTERM stops both cleanly. CPS_WORKERS=inline
// runs them on the serving event loop as before; an unknown value is refused at start.
import Database from 'better-sqlite3';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { freePort, ROOT, ServiceProcess, until } from '../faults/harness.js';
import { ImageServer } from '../support/image-server.js';
import { Receiver } from '../support/receiver.js';
import { nodeArguments } from '../support/node-command.js';
import { adminCalls } from '../support/admin-calls.js';

const ADMIN_TOKEN = 'adm_worker_thread_test';
let images: ImageServer;
let receiver: Receiver;
let service: ServiceProcess | undefined;
let dir: string;

beforeAll(async () => {
  images = await ImageServer.start();
});
afterAll(async () => {
  await images.close();
});
afterEach(async () => {
  await service?.stop('SIGKILL');
  service = undefined;
  await receiver?.close();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

async function startServe(
  workers?: string,
): Promise<{ base: string; admin: (method: string, pathname: string, body?: unknown) => Promise<any> }> {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-worker-thread-'));
  receiver = await Receiver.start({ behaviour: { status: 204 } });
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  service = await ServiceProcess.start({
    CPS_DATABASE_URL: '',
    CPS_DB_PATH: path.join(dir, 'catalog.db'),
    CPS_MEDIA_DIR: path.join(dir, 'media'),
    CPS_PORT: String(port),
    CPS_HOST: '127.0.0.1',
    CPS_ADMIN_TOKEN: ADMIN_TOKEN,
    CPS_DEMO_ON_EMPTY: 'false',
    CPS_WEBHOOK_ALLOW_HOSTS: '127.0.0.1',
    CPS_WEBHOOK_COALESCE_MS: '50',
    // The mirror's poll is long: only a wake-up from the serving process's commit gets the image
    // mirrored within the test's time. (The dispatcher polls to close its coalescing windows.)
    CPS_WEBHOOK_POLL_INTERVAL_MS: '100',
    CPS_IMAGE_POLL_INTERVAL_MS: '60000',
    ...(workers === undefined ? {} : { CPS_WORKERS: workers }),
  });
  await until(
    () => service!.output.includes('"msg":"listening"'),
    10_000,
    () => service!.output,
  );
  const admin = adminCalls(base, ADMIN_TOKEN);
  return { base, admin };
}

/** A merchant with a store, an endpoint on the receiver and one product whose image is on the image server; returns its API key. */
async function catalogWithWork(admin: (method: string, pathname: string, body?: unknown) => Promise<any>): Promise<string> {
  const merchant = await admin('POST', '/admin/v1/merchants', { name: 'Thread Outfitters' });
  const base = `/admin/v1/merchants/${merchant.id}`;
  await admin('PUT', `${base}/stores/de`, { name: 'DE', locale: 'de-DE', currency: 'EUR' });
  await admin('PUT', `${base}/suppliers/alpine`, { name: 'Alpine' });
  const endpoint = await admin('POST', `${base}/webhook-endpoints`, { url: receiver.url });
  receiver.secret = endpoint.secret;
  await admin('PUT', `${base}/products/tent`, {
    content: { de: { title: 'Zelt' } },
    images: [{ url: images.url('/png/tent.png') }],
    offers: [{ supplier_ref: 'alpine', quantity: 3, cost: '10.00', currency: 'EUR' }],
  });
  return (await admin('POST', `${base}/api-keys`, { name: 'test' })).key as string;
}

/** The nice value of each thread of the process (Linux: /proc/PID/task/TID/stat, field 19), by thread id. */
function threadNiceness(pid: number): Map<number, number> {
  const niceness = new Map<number, number>();
  for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
    const stat = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    // After the command name in parentheses: field 3 (state) onwards; nice is field 19.
    niceness.set(Number(tid), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]));
  }
  return niceness;
}

const metric = (text: string, name: string, labels: string) =>
  Number(new RegExp(`^${name}\\{${labels}\\} (\\S+)$`, 'm').exec(text)?.[1] ?? Number.NaN);

describe("serve's workers in a thread of their own (CPS_WORKERS)", () => {
  it('mirrors and delivers from the worker thread by default, counts its deliveries and statements in /metrics, and stops cleanly on SIGTERM', async () => {
    const { base, admin } = await startServe();
    expect(service!.output).toMatch(/"workers":"thread"/);
    // Both threads started before the port was listened on (the first requests do not wait on their start).
    const listening = service!.output.indexOf('"msg":"listening"');
    for (const thread of ['workers', 'publishing']) {
      const started = new RegExp(`"thread":"${thread}".*"msg":"worker thread started"`).exec(service!.output);
      expect(started?.index).toBeLessThan(listening);
    }
    const key = await catalogWithWork(admin);
    // The worker threads (workers, publishing) run at CPS_WORKER_NICE (10 by default), the thread
    // that answers requests at the process's own priority.
    const niceness = threadNiceness(service!.pid);
    const own = os.getPriority();
    expect(niceness.get(service!.pid)).toBe(own);
    expect([...niceness.values()].filter((nice) => nice === Math.min(19, own + 10)).length).toBeGreaterThanOrEqual(2);
    // The image is mirrored: the payload shows the service's copy (spec 2.1 image rule 2).
    await until(
      async () => {
        const product = await (await fetch(`${base}/v1/products?per_page=1`, { headers: { Authorization: `Bearer ${key}` } })).json();
        return String(product.data[0]?.images[0]).startsWith(`${base}/media/`);
      },
      15_000,
      () => `the image was not mirrored:\n${service!.output.slice(-3000)}`,
    );
    await until(
      () => receiver.requests.length >= 2,
      15_000,
      () => `the receiver got ${receiver.requests.length} deliveries`,
    );
    expect(receiver.requests.map((r) => r.payload.event).sort()).toEqual(expect.arrayContaining(['content', 'price']));
    const text = await (await fetch(`${base}/metrics`)).text();
    await until(
      async () => metric(await (await fetch(`${base}/metrics`)).text(), 'cps_webhook_deliveries_total', 'outcome="succeeded"') >= 2,
      5000,
      () => `deliveries counted: ${metric(text, 'cps_webhook_deliveries_total', 'outcome="succeeded"')}`,
    );
    // The thread's statements, named as the serving process's are (reported every second).
    await until(
      async () => /statement="deliveries\.claimDueDeliveries"/.test(await (await fetch(`${base}/metrics`)).text()),
      5000,
      () => 'no statement of the dispatcher in /metrics',
    );
    // A merchant-wide re-publish (a store's settings) is handed to the thread (the hand-off itself:
    // test/storage/publish-runs.test.ts): the call answers once the run has ended.
    const merchant = (await admin('GET', '/admin/v1/merchants')).data[0];
    await admin('PUT', `/admin/v1/merchants/${merchant.id}/stores/de`, {
      name: 'DE (renamed)',
      locale: 'de-DE',
      currency: 'EUR',
      is_default: true,
    });
    const db = new Database(path.join(dir, 'catalog.db'), { readonly: true });
    try {
      expect(db.prepare('SELECT count(*) FROM publish_runs').pluck().get()).toBe(0);
    } finally {
      db.close();
    }
    await service!.stop('SIGTERM');
    expect(service!.child.exitCode).toBe(0);
    expect(service!.output).toMatch(/stopped cleanly/);
    expect(service!.output).not.toMatch(/worker thread (failed|ended)/);
  });

  it("wakes the workers thread's mirror at once for an import the publishing thread applies (SQLite tells only the committing thread)", async () => {
    const { base, admin } = await startServe();
    const key = await catalogWithWork(admin);
    const firstImage = async () => {
      const product = await (await fetch(`${base}/v1/products?per_page=1`, { headers: { Authorization: `Bearer ${key}` } })).json();
      return String(product.data[0]?.images[0]);
    };
    // The first product's image, written by the serving thread, is mirrored: the mirror has made its
    // first claim, and polls again only after CPS_IMAGE_POLL_INTERVAL_MS (a minute). A guard against
    // a hang, not the claim (the wake-up below is): under a load of 20 on 2 cores it took over 15 s.
    await until(
      async () => (await firstImage()).startsWith(`${base}/media/`),
      60_000,
      () => 'the first image was not mirrored',
    );
    const merchant = (await admin('GET', '/admin/v1/merchants')).data[0];
    const line = JSON.stringify({
      op: 'upsert_product',
      product: {
        ref: 'lamp',
        content: { de: { title: 'Lampe' } },
        images: [{ url: images.url('/png/lamp.png') }],
        offers: [{ supplier_ref: 'alpine', quantity: 2, cost: '5.00', currency: 'EUR' }],
      },
    });
    const imported = await fetch(`${base}/admin/v1/merchants/${merchant.id}/imports`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${ADMIN_TOKEN}`, 'Content-Type': 'application/x-ndjson' },
      body: `${line}\n`,
    });
    expect(imported.status).toBe(200);
    const answered = performance.now();
    // Applied by the publishing thread: its commit wakes the other thread's mirror through the
    // serving thread, long before the minute's poll.
    await until(
      () => images.hits('/png/lamp.png') > 0,
      15_000,
      () => `the imported image was not fetched:\n${service!.output.slice(-3000)}`,
    );
    expect(performance.now() - answered).toBeLessThan(15_000);
    expect(service!.output).toMatch(/"thread":"publishing"/);
  });

  it('runs them on the serving event loop with CPS_WORKERS=inline', async () => {
    const { admin } = await startServe('inline');
    expect(service!.output).toMatch(/"workers":"inline"/);
    expect([...threadNiceness(service!.pid).values()].every((nice) => nice === os.getPriority())).toBe(true);
    await catalogWithWork(admin);
    await until(
      () => receiver.requests.length >= 2,
      15_000,
      () => `the receiver got ${receiver.requests.length} deliveries`,
    );
    await service!.stop('SIGTERM');
    expect(service!.child.exitCode).toBe(0);
  });

  it('CPS_WORKER_NICE: 10 by default, 0 to 19, anything else refused naming the setting', () => {
    expect(loadConfig({}).workerNice).toBe(10);
    expect(loadConfig({ CPS_WORKER_NICE: '0' }).workerNice).toBe(0);
    expect(loadConfig({ CPS_WORKER_NICE: '19' }).workerNice).toBe(19);
    expect(() => loadConfig({ CPS_WORKER_NICE: '20' })).toThrow(/CPS_WORKER_NICE must be at most 19, got 20/);
    expect(() => loadConfig({ CPS_WORKER_NICE: '-5' })).toThrow(/CPS_WORKER_NICE must be a non-negative integer/);
  });

  it('refuses an unknown CPS_WORKERS value at start, naming the setting', async () => {
    const run = promisify(execFile);
    const failed = await run(process.execPath, nodeArguments('src/cli.ts', ['serve']), {
      cwd: ROOT,
      env: { ...process.env, CPS_WORKERS: 'process', CPS_DB_PATH: path.join(os.tmpdir(), 'cps-unused.db') },
    }).then(
      () => undefined,
      (error: { code: number; stderr: string }) => error,
    );
    expect(failed?.code).not.toBe(0);
    expect(failed?.stderr).toMatch(/CPS_WORKERS must be one of thread, inline, got "process"/);
  });
});
