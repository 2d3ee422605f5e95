// Import jobs (issue 11, "Import: upload an NDJSON file and watch its progress"): every NDJSON import,
// whether the admin API's importProducts or the panel's upload, runs as a job whose progress (lines
// read, products applied) and outcome (the counts, or the bad lines with their reasons) are written
// to the database as it runs, so any process behind a load balancer shows it. The import itself is
// importNdjson's, unchanged: validate the whole file first, then apply it chunk by chunk.
import { isClientAbort } from '../shared/client-abort.js';
import { ProblemError } from '../shared/problem.js';
import type { CatalogAdmin } from './catalog-admin.js';
import { importNdjson, type ImportResult, type NdjsonSource } from './import.js';
import type { CatalogStorage, ImportJobProgress, ImportJobRecord } from '../storage/port.js';

/** Who started an import from the admin API (the panel records the principal). */
export const ADMIN_API_ACTOR = 'admin API';

/** A bad line's reason is kept to this many characters (the job record stays bounded). */
const MAX_REASON_LENGTH = 500;

/** A running job whose progress has not moved for this long was cut off (its process stopped). */
export const STALLED_AFTER_MS = 5 * 60_000;

export interface ImportJobOptions {
  chunkSize: number;
  maxJsonDepth: number;
  /** Progress is written at most this often while lines are read (each committed chunk is written). */
  progressIntervalMs?: number;
}

export interface StartedImport {
  job: ImportJobRecord;
  /** Settles when the import ends; the job records the outcome either way. */
  done: Promise<ImportResult>;
}

export class ImportJobs {
  /** The imports this process runs, so stopping waits for them. */
  private readonly running = new Set<Promise<unknown>>();

  constructor(
    private readonly storage: CatalogStorage,
    private readonly admin: CatalogAdmin,
    private readonly now: () => Date,
    private readonly options: ImportJobOptions,
  ) {}

  /**
   * Records a running job and starts the import; returns once the job exists. 404 (and no job)
   * for an unknown merchant.
   */
  async start(merchantId: number, startedBy: string, fileName: string | null, source: NdjsonSource): Promise<StartedImport> {
    await this.admin.merchant(merchantId);
    const at = this.now().toISOString();
    const job = await this.storage.insertImportJob({
      merchant_id: merchantId, started_by: startedBy, file_name: fileName, state: 'running', started_at: at, updated_at: at,
      finished_at: null, lines_read: 0, operations: null, products_applied: 0, upserted: 0, deleted: 0, error: null, problems: [],
    });
    const done = this.run(job, source);
    const tracked = done.catch(() => undefined);
    this.running.add(tracked);
    void tracked.finally(() => this.running.delete(tracked));
    return { job, done };
  }

  private async run(job: ImportJobRecord, source: NdjsonSource): Promise<ImportResult> {
    const interval = this.options.progressIntervalMs ?? 500;
    let lastWritten = 0;
    let linesRead = 0;
    const write = (progress: ImportJobProgress) => this.storage.updateImportJob(job.id, { ...progress, updated_at: this.now().toISOString() });
    try {
      const result = await importNdjson(this.admin, job.merchant_id, source, {
        chunkSize: this.options.chunkSize,
        maxJsonDepth: this.options.maxJsonDepth,
        onLinesRead: async (lines) => {
          linesRead = lines;
          const at = this.now().getTime();
          if (at - lastWritten < interval) return;
          lastWritten = at;
          await write({ lines_read: lines });
        },
        onStart: async (operations) => {
          await write({ lines_read: linesRead, operations });
        },
        onProgress: async (applied) => {
          await write({ products_applied: applied });
        },
      });
      await write({
        state: 'succeeded', finished_at: this.now().toISOString(), lines_read: linesRead, products_applied: result.lines, upserted: result.upserted, deleted: result.deleted,
      });
      return result;
    } catch (error) {
      const problem = error instanceof ProblemError ? error : undefined;
      await write({
        state: 'failed',
        finished_at: this.now().toISOString(),
        lines_read: linesRead,
        error: problem?.detail ?? (isClientAbort(error)
          ? 'The upload was interrupted: the client closed the connection before the end of the file. Nothing of it was applied; send the whole file again.'
          : 'The import stopped on an unexpected error; the chunks committed before it stay applied.'),
        problems: (problem?.invalidParams ?? []).map((p) => ({ name: p.name, reason: p.reason.slice(0, MAX_REASON_LENGTH) })),
      }).catch(() => undefined);
      throw error;
    }
  }

  /** The merchant's import job; 404 for an unknown one or another merchant's. */
  async job(merchantId: number, id: number): Promise<ImportJobRecord> {
    await this.admin.merchant(merchantId);
    const job = await this.storage.importJob(merchantId, id);
    if (!job) throw new ProblemError('not_found', `Import ${id} does not exist.`);
    return job;
  }

  /** The merchant's most recent imports, newest first. */
  async recent(merchantId: number, limit: number): Promise<ImportJobRecord[]> {
    await this.admin.merchant(merchantId);
    return this.storage.listImportJobs(merchantId, limit);
  }

  /** A running job whose progress stopped moving: the process that ran it is gone. */
  stalled(job: ImportJobRecord): boolean {
    return job.state === 'running' && this.now().getTime() - Date.parse(job.updated_at) > STALLED_AFTER_MS;
  }

  /** Waits for the imports this process runs (the service stops after them). */
  async drain(): Promise<void> {
    while (this.running.size > 0) await Promise.all([...this.running]);
  }
}
