// NDJSON import jobs, written once for both engines (dialect.ts): one row per import, its progress
// written as it runs.
import type { ImportJobStore } from '../port.js';
import type { ImportJobProgress, ImportJobRecord } from '../../admin/model.js';
import type { Row, SqlConnection } from './dialect.js';

const JOB_FIELDS = [
  'merchant_id',
  'started_by',
  'file_name',
  'state',
  'started_at',
  'updated_at',
  'finished_at',
  'lines_read',
  'operations',
  'products_applied',
  'upserted',
  'deleted',
  'error',
  'error_code',
  'problems',
] as const;
const PROGRESS_FIELDS = [
  'state',
  'updated_at',
  'finished_at',
  'lines_read',
  'operations',
  'products_applied',
  'upserted',
  'deleted',
  'error',
  'error_code',
  'problems',
] as const;

const toJob = (row: Row): ImportJobRecord => ({
  ...(row as unknown as ImportJobRecord),
  problems: JSON.parse(row.problems as string) as ImportJobRecord['problems'],
});
const stored = (field: string, value: unknown) => (field === 'problems' ? JSON.stringify(value) : value);

export class SqlImportJobs implements ImportJobStore {
  static readonly writes = [
    'insertImportJob',
    'updateImportJob',
    'interruptStalledImportJobs',
    'insertImportChunks',
    'takeImportChunk',
    'countImportChunk',
    'deleteImportChunks',
  ] as const;

  constructor(private readonly c: SqlConnection) {}

  async insertImportJob(job: Omit<ImportJobRecord, 'id'>): Promise<ImportJobRecord> {
    const row = await this.c.one(
      `INSERT INTO import_jobs (${JOB_FIELDS.join(', ')})
      VALUES (${JOB_FIELDS.map((_, i) => `$${i + 1}`).join(', ')}) RETURNING *`,
      JOB_FIELDS.map((field) => stored(field, job[field])),
    );
    return toJob(row!);
  }

  async updateImportJob(id: number, progress: ImportJobProgress): Promise<void> {
    const fields = PROGRESS_FIELDS.filter((field) => progress[field] !== undefined);
    if (fields.length === 0) return;
    await this.c.run(`UPDATE import_jobs SET ${fields.map((field, i) => `${field} = $${i + 2}`).join(', ')} WHERE id = $1`, [
      id,
      ...fields.map((field) => stored(field, progress[field])),
    ]);
  }

  async importJob(merchantId: number, id: number): Promise<ImportJobRecord | undefined> {
    const row = await this.c.one('SELECT * FROM import_jobs WHERE merchant_id = $1 AND id = $2', [merchantId, id]);
    return row && toJob(row);
  }

  async listImportJobs(merchantId: number, limit: number, beforeId = Number.MAX_SAFE_INTEGER): Promise<ImportJobRecord[]> {
    return (
      await this.c.rows('SELECT * FROM import_jobs WHERE merchant_id = $1 AND id < $2 ORDER BY id DESC LIMIT $3', [
        merchantId,
        beforeId,
        limit,
      ])
    ).map(toJob);
  }

  async interruptStalledImportJobs(updatedBefore: string, at: string, error: string): Promise<ImportJobRecord[]> {
    // import_jobs_running (migration 34): only the running jobs are looked at.
    return (
      await this.c.rows(
        `UPDATE import_jobs SET state = 'failed', error_code = 'interrupted', error = $1, finished_at = $2, updated_at = $2
      WHERE state = 'running' AND operations IS NULL AND updated_at < $3 RETURNING *`,
        [error, at, updatedBefore],
      )
    ).map(toJob);
  }

  async insertImportChunks(jobId: number, chunks: { seq: number; operations: string }[]): Promise<void> {
    // A statement per chunk (hundreds of kilobytes each), the requests waiting meanwhile run between
    // two; one array parameter of the whole file would be escaped and sent in one synchronous step.
    for (const chunk of chunks) {
      await this.c.yieldToOthers();
      await this.c.run('INSERT INTO import_job_chunks (job_id, seq, operations) VALUES ($1, $2, $3)', [jobId, chunk.seq, chunk.operations]);
    }
  }

  async nextImportChunk(jobId: number): Promise<{ seq: number; operations: string } | undefined> {
    return this.c.one<{ seq: number; operations: string }>(
      'SELECT seq, operations FROM import_job_chunks WHERE job_id = $1 ORDER BY seq LIMIT 1',
      [jobId],
    );
  }

  async takeImportChunk(jobId: number, heldSeq?: number): Promise<{ seq: number; operations: string | null } | undefined> {
    // Read and deleted in one statement; the text is sent back only when the caller does not hold
    // it (~350 KB a chunk: the import that staged it keeps it in memory).
    return this.c.one<{ seq: number; operations: string | null }>(
      `DELETE FROM import_job_chunks
      WHERE job_id = $1 AND seq = (SELECT min(seq) FROM import_job_chunks WHERE job_id = $1)
      RETURNING seq, CASE WHEN seq = $2 THEN NULL ELSE operations END AS operations`,
      [jobId, heldSeq ?? null],
    );
  }

  async countImportChunk(
    jobId: number,
    applied: { products: number; upserted: number; deleted: number },
    at: string,
  ): Promise<{ finished: boolean } | undefined> {
    // The job's progress moved by the chunk, and the job finished with its last one, in one statement
    // (the SET's expressions read the row as it was).
    const last = 'operations IS NOT NULL AND products_applied + $2 >= operations';
    const row = await this.c.one<{ state: string }>(
      `UPDATE import_jobs SET products_applied = products_applied + $2, upserted = upserted + $3, deleted = deleted + $4,
        updated_at = $5, state = CASE WHEN ${last} THEN 'succeeded' ELSE state END,
        finished_at = CASE WHEN ${last} THEN $5 ELSE finished_at END
      WHERE id = $1 RETURNING state`,
      [jobId, applied.products, applied.upserted, applied.deleted, at],
    );
    return row && { finished: row.state === 'succeeded' };
  }

  async deleteImportChunks(jobId: number, seq?: number): Promise<void> {
    if (seq === undefined) await this.c.run('DELETE FROM import_job_chunks WHERE job_id = $1', [jobId]);
    else await this.c.run('DELETE FROM import_job_chunks WHERE job_id = $1 AND seq = $2', [jobId, seq]);
  }
}
