// Re-publishing runs on PostgreSQL (catalog/publish-runs.ts): one row per run, moved by every chunk;
// a chunk's transaction locks its run, so two drivers never publish the same chunk.
import type { PublishRunStore } from '../port.js';
import { RELEASED_PUBLISH_RUN as RELEASED, type PublishRunRecord } from '../records.js';
import type { PgConnection, Row } from './connection.js';
import { notifyWork } from './wakeups.js';

const toRun = (row: Row): PublishRunRecord => ({
  id: Number(row.id),
  merchant_id: Number(row.merchant_id),
  after_product_id: Number(row.after_product_id),
  store_ids: row.store_ids === null ? null : (JSON.parse(row.store_ids as string) as number[]),
  import_job_id: row.import_job_id === null ? null : Number(row.import_job_id),
  driver: row.driver as string,
  leased_until: row.leased_until as string,
  created_at: row.created_at as string,
});

export class PgPublishRuns implements PublishRunStore {
  static readonly writes = ['insertPublishRun', 'updatePublishRun', 'deletePublishRun', 'releasePublishRun', 'takePublishRun'] as const;

  constructor(private readonly c: PgConnection) {}

  async insertPublishRun(run: Omit<PublishRunRecord, 'id'>): Promise<PublishRunRecord> {
    const row = await this.c.one(
      `INSERT INTO publish_runs (merchant_id, store_ids, after_product_id, import_job_id, driver, leased_until, created_at)
      VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING *`,
      [
        run.merchant_id,
        run.store_ids === null ? null : JSON.stringify(run.store_ids),
        run.after_product_id,
        run.import_job_id,
        run.driver,
        run.leased_until,
        run.created_at,
      ],
    );
    // A run held by no one is work for the workers of any process (delivered at COMMIT).
    if (run.leased_until === RELEASED) await notifyWork(this.c, 'publishing');
    return toRun(row!);
  }

  async publishRun(id: number): Promise<PublishRunRecord | undefined> {
    const row = await this.c.one(`SELECT * FROM publish_runs WHERE id = $1${this.c.inWriteTransaction ? ' FOR UPDATE' : ''}`, [id]);
    return row && toRun(row);
  }

  async updatePublishRun(id: number, patch: Pick<PublishRunRecord, 'after_product_id' | 'leased_until'>): Promise<void> {
    await this.c.run('UPDATE publish_runs SET after_product_id = $2, leased_until = $3 WHERE id = $1', [
      id,
      patch.after_product_id,
      patch.leased_until,
    ]);
  }

  async deletePublishRun(id: number): Promise<void> {
    await this.c.run('DELETE FROM publish_runs WHERE id = $1', [id]);
  }

  async releasePublishRun(id: number, driver: string): Promise<void> {
    await this.c.run('UPDATE publish_runs SET leased_until = $3 WHERE id = $1 AND driver = $2', [id, driver, RELEASED]);
  }

  async takePublishRun(id: number, driver: string, until: string, now: string): Promise<PublishRunRecord | undefined> {
    const row = await this.c.one('UPDATE publish_runs SET driver = $2, leased_until = $3 WHERE id = $1 AND leased_until < $4 RETURNING *', [
      id,
      driver,
      until,
      now,
    ]);
    return row && toRun(row);
  }

  async stalledPublishRuns(now: string, limit: number): Promise<PublishRunRecord[]> {
    return (await this.c.rows('SELECT * FROM publish_runs WHERE leased_until < $1 ORDER BY leased_until, id LIMIT $2', [now, limit])).map(
      toRun,
    );
  }
}
