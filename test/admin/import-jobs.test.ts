// Import jobs (docs/panel.md#pages, "import"): every import, from
// the admin API or the panel, records in the database who started it and when, the lines read while
// the file is checked, the products applied chunk by chunk, and the outcome (the counts, or the bad
// lines with their reasons, or the conflict that stopped it); a second process on the same database
// shows an import the first one runs.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ImportJobs } from '../../src/admin/import-jobs.js';
import type { ImportJobRecord } from '../../src/admin/model.js';
import { operatorCookie } from '../panel/sign-in.js';
import { startTestService, type TestService } from '../support/service.js';

let service: TestService;
let merchantId: number;

beforeAll(async () => {
  service = await startTestService();
  merchantId = (await service.admin.createMerchant({ name: 'Import Jobs Outfitters' })).id;
  await service.admin.upsertStore(merchantId, 'de', {
    name: 'DE',
    locale: 'de-DE',
    currency: 'EUR',
    is_default: true,
    active: true,
    exclude_out_of_stock: false,
  });
  await service.admin.upsertSupplier(merchantId, 'alpine', 'Alpine');
  await service.admin.upsertSupplier(merchantId, 'baltic', 'Baltic');
});
afterAll(() => service?.close());

const line = (ref: string, supplier = 'baltic') =>
  JSON.stringify({
    op: 'upsert_product',
    product: { ref, content: { de: { title: ref } }, offers: [{ supplier_ref: supplier, quantity: 1, cost: '10.00', currency: 'EUR' }] },
  });
const lines = (from: number, to: number, supplier?: string) =>
  Array.from({ length: to - from + 1 }, (_, i) => `${line(`P-${from + i}`, supplier)}\n`).join('');

/** A request body that sends its first part, then waits until the test opens the gate. */
function gatedSource(first: string, rest: string): { source: AsyncIterable<Uint8Array>; open: () => void } {
  let open!: () => void;
  const gate = new Promise<void>((resolve) => {
    open = resolve;
  });
  async function* source() {
    yield new TextEncoder().encode(first);
    await gate;
    yield new TextEncoder().encode(rest);
  }
  return { source: source(), open };
}

/** Polls the job (no sleeping: each turn waits for the event loop) until it satisfies the check. */
async function jobWhen(id: number, check: (job: ImportJobRecord) => boolean): Promise<ImportJobRecord> {
  const deadline = Date.now() + 5000;
  for (;;) {
    const job = (await service.storage.importJob(merchantId, id))!;
    if (check(job)) return job;
    if (Date.now() > deadline) throw new Error(`import ${id} never got there: ${JSON.stringify(job)}`);
    await new Promise((resolve) => setImmediate(resolve));
  }
}

const jobs = () =>
  new ImportJobs(service.storage, service.admin, service.service.now, {
    chunkSize: 25,
    maxJsonDepth: 64,
    progressIntervalMs: 0,
    stalledAfterMs: 60_000,
  });

describe('an import job', () => {
  it('records the lines read while the file is checked, then the products applied, then the counts', async () => {
    const { source, open } = gatedSource(lines(1, 65), lines(66, 100));
    const { job, done } = await jobs().start(merchantId, 'owner@example.test', 'products.ndjson', source);
    expect(job).toMatchObject({
      state: 'running',
      started_by: 'owner@example.test',
      file_name: 'products.ndjson',
      lines_read: 0,
      operations: null,
    });
    const reading = await jobWhen(job.id, (j) => j.lines_read >= 64);
    expect(reading).toMatchObject({ state: 'running', lines_read: 64, operations: null, products_applied: 0, finished_at: null });
    await expect(service.admin.product(merchantId, 'P-1')).rejects.toMatchObject({ status: 404 });
    open();
    expect(await done).toEqual({ lines: 100, upserted: 100, deleted: 0 });
    expect(await service.storage.importJob(merchantId, job.id)).toMatchObject({
      state: 'succeeded',
      lines_read: 100,
      operations: 100,
      products_applied: 100,
      upserted: 100,
      deleted: 0,
      error: null,
      problems: [],
      finished_at: expect.any(String),
    });
  });

  it('records the bad lines with their reasons, and nothing applied', async () => {
    const { job, done } = await jobs().start(merchantId, 'operator', 'bad.ndjson', `${line('Q-1')}\n{"op":\n${line('Q-3', 'nobody')}\n`);
    await expect(done).rejects.toMatchObject({ status: 400 });
    const failed = await service.storage.importJob(merchantId, job.id);
    expect(failed).toMatchObject({
      state: 'failed',
      lines_read: 3,
      operations: null,
      products_applied: 0,
      error: expect.stringContaining('nothing was applied'),
    });
    expect(failed!.problems.map((p) => p.name)).toEqual(['line 2', 'line 3']);
    expect(failed!.problems[1]!.reason).toContain('nobody');
    await expect(service.admin.product(merchantId, 'Q-1')).rejects.toMatchObject({ status: 404 });
  });

  it('records a conflict that stops it midway, with the chunks applied before it', async () => {
    // The supplier is deleted while the file is read (its lines are checked against the references as
    // they were when reading began): the chunk that names it stops the import.
    const { source, open } = gatedSource(lines(201, 265), lines(266, 266, 'alpine'));
    const { job, done } = await jobs().start(merchantId, 'operator', 'late.ndjson', source);
    await jobWhen(job.id, (j) => j.lines_read >= 64);
    await service.admin.deleteSupplier(merchantId, 'alpine');
    open();
    await expect(done).rejects.toMatchObject({ status: 409 });
    expect(await service.storage.importJob(merchantId, job.id)).toMatchObject({
      state: 'failed',
      operations: 66,
      products_applied: 50,
      error: expect.stringContaining('line 66'),
    });
    await service.admin.upsertSupplier(merchantId, 'alpine', 'Alpine');
  });
});

describe('imports through the admin API', () => {
  it('are recorded as jobs started by the admin API, with their outcome', async () => {
    const before = (await service.storage.listImportJobs(merchantId, 100)).length;
    const ok = await service.adminApi('POST', `/admin/v1/merchants/${merchantId}/imports`, `${line('API-1')}\n${line('API-2')}\n`, {
      headers: { 'Content-Type': 'application/x-ndjson' },
    });
    expect(ok.status).toBe(200);
    const bad = await service.adminApi('POST', `/admin/v1/merchants/${merchantId}/imports`, '{"op":"nothing"}\n', {
      headers: { 'Content-Type': 'application/x-ndjson' },
    });
    expect(bad.status).toBe(400);
    const recent = await service.storage.listImportJobs(merchantId, 100);
    expect(recent).toHaveLength(before + 2);
    expect(recent[1]).toMatchObject({ started_by: 'admin API', file_name: null, state: 'succeeded', operations: 2, upserted: 2 });
    expect(recent[0]).toMatchObject({
      started_by: 'admin API',
      state: 'failed',
      problems: [{ name: 'line 1', reason: expect.any(String) }],
    });
    // An unknown merchant: 404, and no job.
    const unknown = await service.adminApi('POST', '/admin/v1/merchants/999999/imports', `${line('X')}\n`, {
      headers: { 'Content-Type': 'application/x-ndjson' },
    });
    expect(unknown.status).toBe(404);
    expect(await service.storage.listImportJobs(999999, 10)).toEqual([]);
  });
});

describe('an import seen from another process on the same database', () => {
  it('is started by one serve process and its page is answered by another', async () => {
    const other = await startTestService({ config: { databasePath: service.config.databasePath } });
    try {
      const cookie = await operatorCookie(service.url);
      const html = await (await fetch(`${service.url}/panel/merchants/${merchantId}/import`, { headers: { Cookie: cookie } })).text();
      const form = new FormData();
      form.set('_csrf', /name="_csrf" value="([^"]+)"/.exec(html)![1]!);
      form.set('file', new File([lines(301, 340)], 'shared.ndjson', { type: 'application/x-ndjson' }));
      const started = await fetch(`${service.url}/panel/merchants/${merchantId}/import`, {
        method: 'POST',
        redirect: 'manual',
        headers: { Cookie: cookie, Origin: service.url },
        body: form,
      });
      expect(started.status).toBe(303);
      const location = started.headers.get('location')!;
      expect(location).toMatch(new RegExp(`^/panel/merchants/${merchantId}/import/jobs/\\d+$`));
      const id = Number(location.split('/').pop());
      await jobWhen(id, (j) => j.state !== 'running');
      // The session and the job both live in the database: the other process answers.
      const page = await fetch(`${other.url}${location}`, { headers: { Cookie: cookie } });
      expect(page.status).toBe(200);
      const text = await page.text();
      expect(text).toContain('<dd id="import-state">succeeded</dd>');
      expect(text).toContain('shared.ndjson');
      expect(text).not.toContain('http-equiv="refresh"');
      // Under another merchant's URL the job does not exist.
      const elsewhere = (await other.admin.createMerchant({ name: 'Elsewhere' })).id;
      expect((await fetch(`${other.url}/panel/merchants/${elsewhere}/import/jobs/${id}`, { headers: { Cookie: cookie } })).status).toBe(
        404,
      );
    } finally {
      await other.close();
    }
  });
});
