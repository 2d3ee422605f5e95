// An import applied by a run (admin/import-jobs.ts): the checked operations are staged a
// chunk per row with a publish run, which applies them a chunk per transaction. Handed off (serve's
// publishing thread), the process that follows runs applies them while the request only waits; a
// run whose process stopped between two chunks is resumed from its next chunk by another process.
// On the project's engine (SQLite and PostgreSQL); two PublishRuns over one storage stand for two processes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ImportJobs, INTERRUPTED_IMPORT } from '../../src/admin/import-jobs.js';
import { PublishRuns } from '../../src/catalog/publish-runs.js';
import { silentLogger } from '../../src/operations/log.js';
import { RELEASED_PUBLISH_RUN } from '../../src/storage/records.js';
import type { ImportJobRecord } from '../../src/admin/model.js';
import { startTestService, type TestService } from '../support/service.js';

const CHUNK = 10;
const PRODUCTS = 45;
/** A job checking its file whose progress was not written for this long is ended as interrupted. */
const STALLED_MS = 400;

let service: TestService;
let merchantId: number;

beforeAll(async () => {
  service = await startTestService();
  merchantId = (await service.admin.createMerchant({ name: 'Import Run Outfitters' })).id;
  await service.admin.upsertStore(merchantId, 'de', {
    name: 'DE',
    locale: 'de-DE',
    currency: 'EUR',
    is_default: true,
    active: true,
    exclude_out_of_stock: false,
  });
  await service.admin.upsertSupplier(merchantId, 'alpine', 'Alpine');
});
afterAll(() => service?.close());

const file = (prefix: string) =>
  Array.from(
    { length: PRODUCTS },
    (_, n) =>
      `${JSON.stringify({
        op: 'upsert_product',
        product: {
          ref: `${prefix}-${n}`,
          content: { de: { title: `${prefix} ${n}` } },
          offers: [{ supplier_ref: 'alpine', quantity: 1, cost: '10.00', currency: 'EUR' }],
        },
      })}\n`,
  ).join('');

/**
 * A process: its publish runs, and its import jobs applying their chunks (each call to applyNext
 * counted, and each chunk it took: its seq, and whether its text was read back from the database).
 */
function aProcess(handOff = false) {
  const runs = new PublishRuns(service.storage, service.admin.publisher, () => new Date());
  runs.handOff = handOff;
  const imports = new ImportJobs(
    service.storage,
    service.admin,
    () => new Date(),
    { chunkSize: CHUNK, maxJsonDepth: 64, progressIntervalMs: 0, stalledAfterMs: STALLED_MS },
    runs,
  );
  const applied: number[] = [];
  const taken: { seq: number; readBack: boolean }[] = [];
  const applyNext = imports.applyNext.bind(imports);
  imports.applyNext = async (tx, run) => {
    const recording = new Proxy(tx, {
      get(target, name, receiver) {
        if (name !== 'takeImportChunk') return Reflect.get(target, name, receiver) as unknown;
        return async (jobId: number, heldSeq?: number) => {
          const chunk = await target.takeImportChunk(jobId, heldSeq);
          if (chunk) taken.push({ seq: chunk.seq, readBack: chunk.operations !== null });
          return chunk;
        };
      },
    });
    const more = await applyNext(recording, run);
    applied.push(run.import_job_id!);
    return more;
  };
  return { runs, imports, applied, taken };
}

/** The statements the service's storage ran since the last call, by name. */
function statements(): Map<string, number> {
  return new Map(service.service.metrics.drainStatements().map((s) => [s.name, s.count]));
}

/** Every product of the file is in the catalog, and nothing of the job is left to apply. */
async function expectApplied(jobId: number, prefix: string): Promise<void> {
  expect(await service.storage.importJob(merchantId, jobId)).toMatchObject({
    state: 'succeeded',
    operations: PRODUCTS,
    products_applied: PRODUCTS,
    upserted: PRODUCTS,
    deleted: 0,
    error: null,
    finished_at: expect.any(String),
  });
  expect(await service.storage.nextImportChunk(jobId)).toBeUndefined();
  expect(await service.storage.stalledPublishRuns('9999-01-01T00:00:00.000Z', 100)).toEqual([]);
  for (const n of [0, PRODUCTS - 1]) expect((await service.admin.productSource(merchantId, `${prefix}-${n}`)).ref).toBe(`${prefix}-${n}`);
}

describe('an import applied by a run', () => {
  it('handed off, is applied a chunk per transaction by the process that follows runs, while the request only waits', async () => {
    const caller = aProcess(true);
    const follower = aProcess();
    const stopFollowing = follower.runs.follow(silentLogger, 60_000);
    try {
      const { job, done } = await caller.imports.start(merchantId, 'operator', 'handed.ndjson', file('H'));
      expect(await done).toEqual({ lines: PRODUCTS, upserted: PRODUCTS, deleted: 0 });
      await expectApplied(job.id, 'H');
      // Five chunks of ten, each applied by the follower (woken by the commit of the staged run).
      expect(follower.applied).toEqual([job.id, job.id, job.id, job.id, job.id]);
      expect(caller.applied).toEqual([]);
      // The follower reads each chunk's text back: the caller staged them.
      expect(follower.taken.every((chunk) => chunk.readBack)).toBe(true);
      await follower.runs.drained();
    } finally {
      stopFollowing();
    }
  });

  it('stopped between two chunks, tells the request, keeps the job running with the chunks applied, and is resumed from its next chunk by another process', async () => {
    const first = aProcess();
    const applyNext = first.imports.applyNext.bind(first.imports);
    first.imports.applyNext = async (tx, run) => {
      const more = await applyNext(tx, run);
      // SIGTERM after the second chunk: the run is given up before the third.
      if (first.applied.length === 2) void first.runs.stop();
      return more;
    };
    const { job, done } = await first.imports.start(merchantId, 'operator', 'stopped.ndjson', file('S'));
    await expect(done).rejects.toMatchObject({ status: 500, detail: expect.stringMatching(/rest is applied when the service runs again/) });
    expect(await service.storage.importJob(merchantId, job.id)).toMatchObject({
      state: 'running',
      operations: PRODUCTS,
      products_applied: 2 * CHUNK,
      error: null,
    });
    expect(await service.storage.nextImportChunk(job.id)).toMatchObject({ seq: 3 });
    const [stalled] = await service.storage.stalledPublishRuns(new Date().toISOString(), 10);
    expect(stalled).toMatchObject({ import_job_id: job.id, after_product_id: 2, leased_until: RELEASED_PUBLISH_RUN });

    const second = aProcess();
    expect(await second.runs.resumeStalled()).toBe(1);
    await second.runs.drained();
    await expectApplied(job.id, 'S');
    // Three chunks left: the second process applied those, and only those, their text read back
    // (the first process staged them); the first had its two from memory.
    expect(second.applied).toHaveLength(3);
    expect(second.taken).toEqual([3, 4, 5].map((seq) => ({ seq, readBack: true })));
    expect(first.taken).toEqual([1, 2].map((seq) => ({ seq, readBack: false })));
  });

  it('applies the chunks its own process staged without reading their text back, in two statements of the job and one of the names it may refer to a chunk', async () => {
    const first = aProcess();
    expect(await (await first.imports.start(merchantId, 'operator', 'held.ndjson', file('M'))).done).toMatchObject({ upserted: PRODUCTS });
    const again = aProcess();
    statements();
    const { job, done } = await again.imports.start(merchantId, 'operator', 'held-again.ndjson', file('M'));
    expect(await done).toEqual({ lines: PRODUCTS, upserted: PRODUCTS, deleted: 0 });
    const ran = statements();
    await expectApplied(job.id, 'M');
    // Five chunks, each taken (read and deleted in one statement) without its text, and counted in one.
    expect(again.taken).toEqual([1, 2, 3, 4, 5].map((seq) => ({ seq, readBack: false })));
    expect(ran.get('importJobs.takeImportChunk')).toBe(5);
    expect(ran.get('importJobs.countImportChunk')).toBe(5);
    // Neither the chunk nor the job is read by itself while the run applies it (the job twice by
    // the request: before staging and once ended).
    expect(ran.get('importJobs.nextImportChunk')).toBeUndefined();
    expect(ran.get('importJobs.deleteImportChunks')).toBeUndefined();
    expect(ran.get('importJobs.importJob')).toBe(2);
    // The suppliers and stores a source may name: one statement for the check of the file and one a chunk.
    expect(ran.get('productSources.sourceReferenceNames')).toBe(6);
    expect(ran.get('catalogSetup.listSuppliers')).toBeUndefined();
    expect(ran.get('tenancy.listStores')).toBeUndefined();
  });

  it("handed off to its own process's follow (PostgreSQL with the workers off), applies its chunks from memory", async () => {
    const own = aProcess(true);
    const stopFollowing = own.runs.follow(silentLogger, 60_000);
    try {
      const { done } = await own.imports.start(merchantId, 'operator', 'own.ndjson', file('O'));
      expect(await done).toEqual({ lines: PRODUCTS, upserted: PRODUCTS, deleted: 0 });
      expect(own.taken).toEqual([1, 2, 3, 4, 5].map((seq) => ({ seq, readBack: false })));
      await own.runs.drained();
    } finally {
      stopFollowing();
    }
  });

  it('with a chunk that can no longer be applied, fails with the problem, drops the chunks left and keeps those before', async () => {
    const runner = aProcess();
    const applyNext = runner.imports.applyNext.bind(runner.imports);
    runner.imports.applyNext = async (tx, run) => {
      // Before the third chunk: the supplier the file's lines name is deleted (in the chunk's transaction).
      if (runner.applied.length === 2) await tx.deleteSupplier(merchantId, 'alpine');
      return applyNext(tx, run);
    };
    const { job, done } = await runner.imports.start(merchantId, 'operator', 'conflict.ndjson', file('C'));
    await expect(done).rejects.toMatchObject({ status: 409, detail: expect.stringContaining('line 21') });
    expect(await service.storage.importJob(merchantId, job.id)).toMatchObject({
      state: 'failed',
      operations: PRODUCTS,
      products_applied: 2 * CHUNK,
      error_code: 'conflict',
      finished_at: expect.any(String),
    });
    expect(await service.storage.nextImportChunk(job.id)).toBeUndefined();
    expect(await service.storage.stalledPublishRuns('9999-01-01T00:00:00.000Z', 100)).toEqual([]);
    expect((await service.admin.productSource(merchantId, 'C-19')).ref).toBe('C-19');
    await expect(service.admin.productSource(merchantId, 'C-20')).rejects.toMatchObject({ status: 404 });
  });
});

describe('an import whose chunks are sent while its file is checked', () => {
  it('has each full chunk in the database before the rest of the file arrives, and none left once applied', async () => {
    const { imports } = aProcess();
    let open!: () => void;
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    const lines = file('E').split('\n');
    async function* upload() {
      // Two chunks and a part: the two full ones are sent while the rest is awaited.
      yield new TextEncoder().encode(lines.slice(0, 2 * CHUNK + 3).join('\n') + '\n');
      await gate;
      yield new TextEncoder().encode(lines.slice(2 * CHUNK + 3).join('\n'));
    }
    const { job, done } = await imports.start(merchantId, 'operator', 'early.ndjson', upload());
    await expect.poll(async () => (await service.storage.nextImportChunk(job.id))?.seq, { timeout: 5_000 }).toBe(1);
    // Not staged yet: no run applies them until the whole file is checked.
    expect(await service.storage.importJob(merchantId, job.id)).toMatchObject({ state: 'running', operations: null, products_applied: 0 });
    open();
    expect(await done).toEqual({ lines: PRODUCTS, upserted: PRODUCTS, deleted: 0 });
    await expectApplied(job.id, 'E');
  });

  it('with a bad line after chunks were sent, applies nothing and leaves none of them', async () => {
    const { imports } = aProcess();
    const lines = file('B').trimEnd().split('\n');
    lines[3 * CHUNK + 2] = '{"op":"upsert_product","product":{"ref":"B-bad","offers":"none"}}';
    const { job, done } = await imports.start(merchantId, 'operator', 'bad.ndjson', `${lines.join('\n')}\n`);
    await expect(done).rejects.toMatchObject({ status: 400 });
    expect(await service.storage.importJob(merchantId, job.id)).toMatchObject({
      state: 'failed',
      error_code: 'invalid_body',
      products_applied: 0,
    });
    expect(await service.storage.nextImportChunk(job.id)).toBeUndefined();
    await expect(service.admin.productSource(merchantId, 'B-0')).rejects.toMatchObject({ status: 404 });
  });
});

describe('an import whose process stopped while it checked the file', () => {
  const job = (fields: Partial<ImportJobRecord>) =>
    service.storage.insertImportJob({
      merchant_id: merchantId,
      started_by: 'operator',
      file_name: 'left.ndjson',
      state: 'running',
      started_at: '2026-01-01T00:00:00.000Z',
      updated_at: '2026-01-01T00:00:00.000Z',
      finished_at: null,
      lines_read: 7,
      operations: null,
      products_applied: 0,
      upserted: 0,
      deleted: 0,
      error: null,
      error_code: null,
      problems: [],
      ...fields,
    });

  it('is ended as interrupted by the next look, with nothing applied; a staged or fresh one is not', async () => {
    const left = await job({});
    // Its process had sent a chunk before it stopped: no run will apply it.
    await service.storage.insertImportChunks(left.id, [{ seq: 1, operations: '[]' }]);
    const staged = await job({ operations: 45 });
    const fresh = await job({ updated_at: new Date().toISOString() });
    const { runs } = aProcess();
    await runs.resumeStalled();
    expect(await service.storage.importJob(merchantId, left.id)).toMatchObject({
      state: 'failed',
      error_code: 'interrupted',
      error: INTERRUPTED_IMPORT,
      lines_read: 7,
      operations: null,
      products_applied: 0,
      finished_at: expect.any(String),
    });
    expect(await service.storage.nextImportChunk(left.id)).toBeUndefined();
    // Staged: its run applies it (or resumes it); fresh: its process is checking it now.
    expect(await service.storage.importJob(merchantId, staged.id)).toMatchObject({ state: 'running', error_code: null });
    expect(await service.storage.importJob(merchantId, fresh.id)).toMatchObject({ state: 'running', error_code: null });
    for (const id of [staged.id, fresh.id])
      await service.storage.updateImportJob(id, { state: 'failed', finished_at: new Date().toISOString() });
  });

  it('is kept alive by its process while no line arrives, so it is never ended as interrupted while the upload is only slow', async () => {
    const checking = aProcess();
    let open!: () => void;
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    async function* slowUpload() {
      yield new TextEncoder().encode(file('S').split('\n').slice(0, 3).join('\n') + '\n');
      await gate;
    }
    const { job: started, done } = await checking.imports.start(merchantId, 'operator', 'slow.ndjson', slowUpload());
    // Three times the stall limit with no line arriving (the heartbeat writes every quarter of it).
    await new Promise((resolve) => setTimeout(resolve, 3 * STALLED_MS));
    const other = aProcess();
    expect(await other.imports.interruptAbandoned()).toEqual([]);
    expect(await service.storage.importJob(merchantId, started.id)).toMatchObject({ state: 'running', error_code: null });
    open();
    expect(await done).toEqual({ lines: 3, upserted: 3, deleted: 0 });
  });
});
