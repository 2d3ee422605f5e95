// Re-publishing runs on SQLite (catalog/publish-runs.ts): one row per run, moved by every chunk.
import type { PublishRunStore } from '../port.js';
import { RELEASED_PUBLISH_RUN as RELEASED, type PublishRunRecord } from '../records.js';
import type { Row, SqliteConnection } from './connection.js';

const toRun = (row: Row): PublishRunRecord => ({
  ...(row as unknown as PublishRunRecord),
  store_ids: row.store_ids === null ? null : (JSON.parse(row.store_ids as string) as number[]),
});

export class SqlitePublishRuns implements PublishRunStore {
  static readonly writes = ['insertPublishRun', 'updatePublishRun', 'deletePublishRun', 'releasePublishRun', 'takePublishRun'] as const;

  constructor(private readonly c: SqliteConnection) {}

  async insertPublishRun(run: Omit<PublishRunRecord, 'id'>): Promise<PublishRunRecord> {
    const row = this.c
      .stmt(`INSERT INTO publish_runs (merchant_id, store_ids, after_product_id, import_job_id, driver, leased_until, created_at)
      VALUES (@merchant_id, @store_ids, @after_product_id, @import_job_id, @driver, @leased_until, @created_at) RETURNING *`)
      .get({ ...run, store_ids: run.store_ids === null ? null : JSON.stringify(run.store_ids) }) as Row;
    // A run held by no one is work for the workers (serve's worker thread drives it).
    if (run.leased_until === RELEASED) this.c.addedWork.add('publishing');
    return toRun(row);
  }

  async publishRun(id: number): Promise<PublishRunRecord | undefined> {
    const row = this.c.stmt('SELECT * FROM publish_runs WHERE id = ?').get(id) as Row | undefined;
    return row && toRun(row);
  }

  async updatePublishRun(id: number, patch: Pick<PublishRunRecord, 'after_product_id' | 'leased_until'>): Promise<void> {
    this.c
      .stmt('UPDATE publish_runs SET after_product_id = ?, leased_until = ? WHERE id = ?')
      .run(patch.after_product_id, patch.leased_until, id);
  }

  async deletePublishRun(id: number): Promise<void> {
    this.c.stmt('DELETE FROM publish_runs WHERE id = ?').run(id);
  }

  async releasePublishRun(id: number, driver: string): Promise<void> {
    this.c.stmt('UPDATE publish_runs SET leased_until = ? WHERE id = ? AND driver = ?').run(RELEASED, id, driver);
  }

  async takePublishRun(id: number, driver: string, until: string, now: string): Promise<PublishRunRecord | undefined> {
    const row = this.c
      .stmt('UPDATE publish_runs SET driver = ?, leased_until = ? WHERE id = ? AND leased_until < ? RETURNING *')
      .get(driver, until, id, now) as Row | undefined;
    return row && toRun(row);
  }

  async stalledPublishRuns(now: string, limit: number): Promise<PublishRunRecord[]> {
    return (
      this.c.stmt('SELECT * FROM publish_runs WHERE leased_until < ? ORDER BY leased_until, id LIMIT ?').all(now, limit) as Row[]
    ).map(toRun);
  }
}
