// Import jobs (docs/panel.md#pages, "import"): every NDJSON import,
// whether the admin API's importProducts or the panel's upload, runs as a job whose progress (lines
// read, products applied) and outcome (the counts, or the bad lines with their reasons) are written
// to the database as it runs, so any process behind a load balancer shows it. The whole file is
// checked first (import.ts checkImport), its operations sent a chunk per row as the lines are checked;
// a valid file is then staged with a publish run (catalog/publish-runs.ts) that applies them a chunk per transaction:
// by this process, or, when `serve` runs its workers in threads, by its publishing thread, so the
// chunks' resolution and writes never hold the serving loop; a run its process left (SIGTERM, a
// crash) is resumed from its next chunk by the next process that looks.
import { isClientAbort } from '../shared/client-abort.js';
import { ProblemError } from '../shared/problem.js';
import type { ImportRunSteps, PublishRuns } from '../catalog/publish-runs.js';
import { audit, OPERATOR, type Actor } from './audit.js';
import type { CatalogAdmin } from './catalog-admin.js';
import { operationsJson, parseOperations, type ProductOperation } from '../catalog/product-sources.js';
import { appliedLines, checkImport, type ImportResult, type NdjsonSource } from './import.js';
import type { CatalogStorage, PublishRunRecord, StorageTx } from '../storage/port.js';
import { forMerchant, scopeToMerchant } from '../storage/merchant-scope.js';
import type { ImportErrorCode, ImportJobProgress, ImportJobRecord } from './model.js';

/** Who started an import from the admin API (the panel records the principal). */
export const ADMIN_API_ACTOR = 'admin API';

/** A bad line's reason is kept to this many characters (the job record stays bounded). */
const MAX_REASON_LENGTH = 500;

/** What an import whose process stopped while it checked the file says. */
export const INTERRUPTED_IMPORT =
  'The service stopped while this import was checking the file; nothing of it was applied. Send the whole file again.';

export interface ImportJobOptions {
  chunkSize: number;
  maxJsonDepth: number;
  /** Progress is written at most this often while lines are read (each committed chunk is written). */
  progressIntervalMs?: number;
  /**
   * A job checking its file whose progress has not been written for this long was left by its
   * process (stopped, killed, crashed): it is ended as interrupted. A process writes the progress of
   * each job it checks at least every quarter of this, even while no line arrives.
   */
  stalledAfterMs: number;
}

export interface StartedImport {
  job: ImportJobRecord;
  /** Settles when the import ends; the job records the outcome either way. */
  done: Promise<ImportResult>;
  /**
   * Resolves once every line is checked and the operations are staged (from then on the import is
   * applied to its end, by this process or the next); rejects as `done` does when it fails before.
   */
  staged: Promise<void>;
}

/** The job's error code for a failure: the problem's code when the documents list it for imports. */
function importErrorCode(error: unknown): ImportErrorCode {
  if (isClientAbort(error)) return 'interrupted';
  const code = error instanceof ProblemError ? error.code : undefined;
  return code === 'invalid_body' || code === 'conflict' || code === 'payload_too_large' ? code : 'internal_error';
}

const UNEXPECTED_FAILURE = 'The import stopped on an unexpected error.';

/**
 * The chunks' text an import process keeps after staging them, at most (all its imports together),
 * when it drives their run itself: the run reads back only the chunks it does not hold (another
 * process's, those past this budget, or after a restart). 64 MiB: ~180 chunks of 500 lines, a
 * 90,000-line file.
 */
const HELD_CHUNK_CHARACTERS = 64 * 1024 * 1024;

export class ImportJobs implements ImportRunSteps {
  /** The imports this process runs, so stopping waits for them. */
  private readonly running = new Set<Promise<unknown>>();
  /** The chunks this process staged and still holds, by job and seq (in seq order), and their characters. */
  private readonly held = new Map<number, Map<number, string>>();
  private heldCharacters = 0;

  constructor(
    private readonly storage: CatalogStorage,
    private readonly admin: CatalogAdmin,
    private readonly now: () => Date,
    private readonly options: ImportJobOptions,
    /** The runs that apply the staged chunks (the catalog's, by default). */
    private readonly runs: PublishRuns = admin.publishRuns,
  ) {
    // The runs of imports (this process's, or those it resumes) apply their chunks here.
    runs.importSteps = this;
  }

  /**
   * Records a running job and starts the import; returns once the job exists. 404 (and no job)
   * for an unknown merchant. `startedBy` is what the job shows (`admin API`, `CLI`, the panel's
   * user); the merchant's audit log records the import once, with the job, as done by `actor`.
   */
  async start(
    merchantId: number,
    startedBy: string,
    fileName: string | null,
    source: NdjsonSource,
    actor: Actor = OPERATOR,
  ): Promise<StartedImport> {
    await this.admin.merchant(merchantId);
    const now = this.now();
    const at = now.toISOString();
    const job = await this.storage.transaction(async (tx) => {
      const inserted = await scopeToMerchant(tx, merchantId).insertImportJob({
        started_by: startedBy,
        file_name: fileName,
        state: 'running',
        started_at: at,
        updated_at: at,
        finished_at: null,
        lines_read: 0,
        operations: null,
        products_applied: 0,
        upserted: 0,
        deleted: 0,
        error: null,
        error_code: null,
        problems: [],
      });
      await audit(
        tx,
        merchantId,
        actor,
        'import.start',
        `import ${inserted.id}${fileName === null ? '' : ` of "${fileName}"`}${startedBy === actor ? '' : ` (${startedBy})`}`,
        now,
      );
      return inserted;
    });
    let onStaged!: () => void;
    const staged = new Promise<void>((resolve) => {
      onStaged = resolve;
    });
    const done = this.run(job, source, onStaged);
    const tracked = done.catch(() => undefined);
    this.running.add(tracked);
    void tracked.finally(() => this.running.delete(tracked));
    // Failing before it was staged, it fails with the same error; a caller may await either (one
    // that awaits only `done` leaves this one handled).
    const stagedOrFailed = Promise.race([staged, done.then(() => undefined)]);
    stagedOrFailed.catch(() => undefined);
    return { job, done, staged: stagedOrFailed };
  }

  private async run(job: ImportJobRecord, source: NdjsonSource, onStaged: () => void): Promise<ImportResult> {
    const interval = this.options.progressIntervalMs ?? 500;
    let lastWritten = 0;
    let linesRead = 0;
    let staged = false;
    const write = (progress: ImportJobProgress) =>
      this.storage.updateImportJob(job.id, { ...progress, updated_at: this.now().toISOString() });
    // Alive while the file is read and checked, however slowly its lines arrive (after it is staged,
    // its run's lease says who applies it).
    const heartbeat = setInterval(
      () => {
        void write({ lines_read: linesRead }).catch(() => undefined);
      },
      Math.max(1, Math.floor(this.options.stalledAfterMs / 4)),
    );
    heartbeat.unref();
    // Chunks sent to the database (the last insert may be in flight): a file that fails its check has them deleted.
    let sent = false;
    let sending: Promise<void> = Promise.resolve();
    // Ended meanwhile by another process as interrupted: its record stays as that process wrote it.
    let interrupted = false;
    try {
      // The operations as the chunks their run applies, one transaction each, each sent as soon as
      // it is full (a chunk's text is one string, not a thousand parsed sources to keep): the
      // database writes it while the next lines are checked. One insert in flight at a time.
      let seq = 0;
      let pending: ProductOperation[] = [];
      const stage = async () => {
        const chunk = { seq: ++seq, operations: operationsJson(pending) };
        pending = [];
        await sending;
        sent = true;
        sending = this.storage.insertImportChunks(job.id, [chunk]);
        // Awaited before the next chunk or the staging; a failure meanwhile is not an unhandled rejection.
        sending.catch(() => undefined);
        this.hold(job.id, chunk);
      };
      const operations = await checkImport(
        this.admin,
        job.merchant_id,
        source,
        async (operation) => {
          pending.push(operation);
          if (pending.length >= this.options.chunkSize) await stage();
        },
        this.options.maxJsonDepth,
        async (lines) => {
          linesRead = lines;
          const at = this.now().getTime();
          if (at - lastWritten < interval) return;
          lastWritten = at;
          await write({ lines_read: lines });
        },
      );
      if (pending.length > 0) await stage();
      await sending;
      // Staged with its run in one transaction: from its COMMIT on, the import is applied to its end.
      const run = await this.storage.transaction(async (tx) => {
        // Ended meanwhile as interrupted (this process stalled past stalledAfterMs): its chunks may be gone.
        const current = await scopeToMerchant(tx, job.merchant_id).importJob(job.id);
        if (current?.state !== 'running') {
          interrupted = true;
          throw new ProblemError('internal_error', current?.error ?? UNEXPECTED_FAILURE);
        }
        await tx.updateImportJob(job.id, { lines_read: linesRead, operations, updated_at: this.now().toISOString() });
        return this.runs.begin(tx, job.merchant_id, null, job.id);
      });
      staged = true;
      clearInterval(heartbeat);
      onStaged();
      await this.runs.complete(run);
      const ended = await forMerchant(this.storage, job.merchant_id).importJob(job.id);
      if (ended?.state !== 'succeeded') {
        const code = ended?.error_code === 'interrupted' || !ended?.error_code ? 'internal_error' : ended.error_code;
        throw new ProblemError(code, ended?.error ?? UNEXPECTED_FAILURE);
      }
      return { lines: operations, upserted: ended.upserted, deleted: ended.deleted };
    } catch (error) {
      // Once staged, the run writes the outcome (or the next process resumes it).
      if (staged) throw error;
      // The chunks sent before the check failed: no run will apply them.
      if (sent) {
        await sending.catch(() => undefined);
        await this.storage.deleteImportChunks(job.id).catch(() => undefined);
      }
      if (interrupted) throw error;
      const problem = error instanceof ProblemError ? error : undefined;
      await write({
        state: 'failed',
        finished_at: this.now().toISOString(),
        lines_read: linesRead,
        error:
          problem?.detail ??
          (isClientAbort(error)
            ? 'The upload was interrupted: the client closed the connection before the end of the file. Nothing of it was applied; send the whole file again.'
            : UNEXPECTED_FAILURE),
        error_code: importErrorCode(error),
        problems: (problem?.invalidParams ?? []).map((p) => ({ name: p.name, reason: p.reason.slice(0, MAX_REASON_LENGTH) })),
      }).catch(() => undefined);
      throw error;
    } finally {
      clearInterval(heartbeat);
      this.release(job.id);
    }
  }

  /**
   * Keeps a staged chunk's text for the run that applies it in this process, while the budget allows;
   * none when the runs are left to another thread (serve's publishing thread reads them back).
   */
  private hold(jobId: number, chunk: { seq: number; operations: string }): void {
    if (!this.runs.drivenHere || this.heldCharacters + chunk.operations.length > HELD_CHUNK_CHARACTERS) return;
    let chunks = this.held.get(jobId);
    if (!chunks) this.held.set(jobId, (chunks = new Map<number, string>()));
    chunks.set(chunk.seq, chunk.operations);
    this.heldCharacters += chunk.operations.length;
  }

  /** The held chunks of the job up to `seq` (all without it) are let go. */
  private release(jobId: number, upTo = Infinity): void {
    const chunks = this.held.get(jobId);
    if (!chunks) return;
    for (const [seq, text] of chunks) {
      if (seq > upTo) break;
      chunks.delete(seq);
      this.heldCharacters -= text.length;
    }
    if (chunks.size === 0) this.held.delete(jobId);
  }

  /** ImportRunSteps: applies the job's next chunk and counts it; finishes the job with its last one. */
  async applyNext(tx: StorageTx, run: PublishRunRecord): Promise<boolean> {
    const jobId = run.import_job_id!;
    // The chunk taken (deleted with the transaction, which locks the run: no other driver takes it
    // meanwhile), its text read back only when this process does not hold it.
    const held = this.held.get(jobId);
    const heldSeq = held?.keys().next().value;
    const chunk = await tx.takeImportChunk(jobId, heldSeq);
    const at = this.now().toISOString();
    if (!chunk) {
      await tx.updateImportJob(jobId, { state: 'succeeded', finished_at: at, updated_at: at });
      return false;
    }
    const text = chunk.operations ?? held?.get(chunk.seq);
    if (text === undefined) throw new Error(`import ${jobId}: chunk ${chunk.seq} was neither held nor read`);
    // Held or not, the chunks up to this one are applied (by this transaction, or by another driver).
    this.release(jobId, chunk.seq);
    const operations = parseOperations(text);
    const applied = await this.admin.applyProductBatchIn(tx, run.merchant_id, operations);
    const counted = await tx.countImportChunk(
      jobId,
      { products: operations.length, upserted: applied.upserted, deleted: applied.deleted },
      at,
    );
    if (!counted) throw new Error(`import ${jobId} of run ${run.id} does not exist`);
    return !counted.finished;
  }

  /**
   * ImportRunSteps: ends the jobs whose process stopped while checking their file (nothing of them
   * was applied); a job stopped after its file was staged is resumed by its run instead.
   */
  async interruptAbandoned(): Promise<ImportJobRecord[]> {
    const now = this.now();
    const before = new Date(now.getTime() - this.options.stalledAfterMs).toISOString();
    const interrupted = await this.storage.interruptStalledImportJobs(before, now.toISOString(), INTERRUPTED_IMPORT);
    // The chunks such a job sent while its file was checked: no run will apply them.
    for (const job of interrupted) await this.storage.deleteImportChunks(job.id);
    return interrupted;
  }

  /**
   * ImportRunSteps: a chunk could not be applied: the job fails, its run and the chunks left go.
   * Its error says exactly which lines were applied (those before the first line of the chunk).
   */
  async fail(run: PublishRunRecord, error: unknown): Promise<void> {
    const problem = error instanceof ProblemError ? error : undefined;
    const at = this.now().toISOString();
    const jobId = run.import_job_id!;
    await this.storage.transaction(async (tx) => {
      const current = await tx.publishRun(run.id);
      if (current?.driver !== run.driver) return;
      const job = await scopeToMerchant(tx, run.merchant_id).importJob(jobId);
      const next = await tx.nextImportChunk(jobId);
      const stoppedAt = next ? (JSON.parse(next.operations) as ProductOperation[])[0]?.line : undefined;
      const applied = appliedLines(job?.products_applied ?? 0, stoppedAt, job?.lines_read ?? 0);
      await tx.deleteImportChunks(jobId);
      await tx.deletePublishRun(run.id);
      await tx.updateImportJob(jobId, {
        state: 'failed',
        finished_at: at,
        updated_at: at,
        error: `${problem?.detail ?? UNEXPECTED_FAILURE} ${applied}`,
        error_code: importErrorCode(error),
      });
    });
  }

  /** The merchant's import job; 404 for an unknown one or another merchant's. */
  async job(merchantId: number, id: number): Promise<ImportJobRecord> {
    await this.admin.merchant(merchantId);
    const job = await forMerchant(this.storage, merchantId).importJob(id);
    if (!job) throw new ProblemError('not_found', `Import ${id} does not exist.`);
    return job;
  }

  /** The merchant's imports, newest first (those older than the job `beforeId` when given). */
  async recent(merchantId: number, limit: number, beforeId?: number): Promise<ImportJobRecord[]> {
    await this.admin.merchant(merchantId);
    return forMerchant(this.storage, merchantId).listImportJobs(limit, beforeId);
  }

  /**
   * A running job whose progress stopped moving: the process that ran it is gone (the next look of
   * a `serve` or `worker` ends it as interrupted; until then it is shown as stalled).
   */
  stalled(job: ImportJobRecord): boolean {
    return (
      job.state === 'running' && job.operations === null && this.now().getTime() - Date.parse(job.updated_at) > this.options.stalledAfterMs
    );
  }

  /** Waits for the imports this process runs (the service stops after them). */
  async drain(): Promise<void> {
    while (this.running.size > 0) await Promise.all([...this.running]);
  }
}
