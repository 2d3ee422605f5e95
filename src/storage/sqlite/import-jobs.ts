// NDJSON import jobs on SQLite: one row per import, its progress written as it runs.
import type { ImportJobStore } from '../port.js';
import type { ImportJobProgress, ImportJobRecord } from '../records.js';
import { yieldToOthers } from '../../shared/cooperative.js';
import type { Row, SqliteConnection } from './connection.js';

const PROGRESS_FIELDS = [
  'state', 'updated_at', 'finished_at', 'lines_read', 'operations', 'products_applied', 'upserted', 'deleted', 'error', 'error_code', 'problems',
] as const;

const toJob = (row: Row): ImportJobRecord => ({ ...(row as unknown as ImportJobRecord), problems: JSON.parse(row.problems as string) });

export class SqliteImportJobs implements ImportJobStore {
  static readonly writes = ['insertImportJob', 'updateImportJob', 'interruptStalledImportJobs', 'insertImportChunks', 'deleteImportChunks'] as const;

  constructor(private readonly c: SqliteConnection) {}

  async insertImportJob(job: Omit<ImportJobRecord, 'id'>): Promise<ImportJobRecord> {
    const info = this.c.stmt(`INSERT INTO import_jobs (merchant_id, started_by, file_name, state, started_at, updated_at, finished_at,
        lines_read, operations, products_applied, upserted, deleted, error, error_code, problems)
      VALUES (@merchant_id, @started_by, @file_name, @state, @started_at, @updated_at, @finished_at,
        @lines_read, @operations, @products_applied, @upserted, @deleted, @error, @error_code, @problems)`)
      .run({ ...job, problems: JSON.stringify(job.problems) });
    return toJob(this.c.stmt('SELECT * FROM import_jobs WHERE id = ?').get(info.lastInsertRowid) as Row);
  }

  async updateImportJob(id: number, progress: ImportJobProgress): Promise<void> {
    const fields = PROGRESS_FIELDS.filter((field) => progress[field] !== undefined);
    if (fields.length === 0) return;
    const values = Object.fromEntries(fields.map((field) => [field, field === 'problems' ? JSON.stringify(progress.problems) : progress[field]]));
    this.c.stmt(`UPDATE import_jobs SET ${fields.map((field) => `${field} = @${field}`).join(', ')} WHERE id = @id`).run({ ...values, id });
  }

  async importJob(merchantId: number, id: number): Promise<ImportJobRecord | undefined> {
    const row = this.c.stmt('SELECT * FROM import_jobs WHERE merchant_id = ? AND id = ?').get(merchantId, id) as Row | undefined;
    return row && toJob(row);
  }

  async listImportJobs(merchantId: number, limit: number, beforeId = Number.MAX_SAFE_INTEGER): Promise<ImportJobRecord[]> {
    return (this.c.stmt('SELECT * FROM import_jobs WHERE merchant_id = ? AND id < ? ORDER BY id DESC LIMIT ?').all(merchantId, beforeId, limit) as Row[])
      .map(toJob);
  }

  async interruptStalledImportJobs(updatedBefore: string, at: string, error: string): Promise<ImportJobRecord[]> {
    // import_jobs_running (migration 34): only the running jobs are looked at.
    return (this.c.stmt(`UPDATE import_jobs SET state = 'failed', error_code = 'interrupted', error = ?, finished_at = ?, updated_at = ?
      WHERE state = 'running' AND operations IS NULL AND updated_at < ? RETURNING *`).all(error, at, at, updatedBefore) as Row[]).map(toJob);
  }

  async insertImportChunks(jobId: number, chunks: { seq: number; operations: string }[]): Promise<void> {
    const insert = this.c.stmt('INSERT INTO import_job_chunks (job_id, seq, operations) VALUES (?, ?, ?)');
    for (const chunk of chunks) {
      // A chunk is hundreds of kilobytes: the requests waiting meanwhile run between two.
      await yieldToOthers();
      insert.run(jobId, chunk.seq, chunk.operations);
    }
  }

  async nextImportChunk(jobId: number): Promise<{ seq: number; operations: string } | undefined> {
    return this.c.stmt('SELECT seq, operations FROM import_job_chunks WHERE job_id = ? ORDER BY seq LIMIT 1').get(jobId) as
      { seq: number; operations: string } | undefined;
  }

  async deleteImportChunks(jobId: number, seq?: number): Promise<void> {
    if (seq === undefined) this.c.stmt('DELETE FROM import_job_chunks WHERE job_id = ?').run(jobId);
    else this.c.stmt('DELETE FROM import_job_chunks WHERE job_id = ? AND seq = ?').run(jobId, seq);
  }
}
