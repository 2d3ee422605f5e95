// kill -9 while an import is still checking its file: nothing of it was applied, and
// the job does not stay `running` forever. The next process that looks (a `serve` or `worker`, at
// start and then periodically) ends it as interrupted once its progress has not been written for
// CPS_IMPORT_STALLED_SECONDS; that process's clock is injected here, so the test does not wait.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, expect } from 'vitest';
import { INTERRUPTED_IMPORT } from '../../src/admin/import-jobs.js';
import { loadConfig } from '../../src/config.js';
import { createService } from '../../src/service.js';
import { catalogProduct, FaultWorld, killAllServices, ndjson, until } from './harness.js';
import { onTestDatabase, scenarioIt } from './test-database.js';

afterAll(killAllServices);

scenarioIt(
  'ends an import killed while it checked its file as interrupted, with nothing applied',
  () =>
    onTestDatabase(async (database) => {
      const world = await FaultWorld.create({ database });
      await world.start();
      await world.setupMerchant();
      const probe = await world.open();
      try {
        // A 200-line file announced whole (Content-Length), of which the first 100 lines arrive.
        const lines = Array.from({ length: 200 }, (_, i) => catalogProduct(i, 1));
        const upload = world.adminUpload(`${world.merchantPath}/imports`, 'application/x-ndjson', Buffer.byteLength(ndjson(lines)));
        upload.write(ndjson(lines.slice(0, 100)));
        // The job exists, and its progress (written at most every 500 ms while lines arrive) shows lines read.
        await until(
          async () => Number(await probe.value('SELECT coalesce(max(lines_read), 0) FROM import_jobs')) >= 32,
          30_000,
          () => 'the import never read its lines',
        );
        await world.crash();
        const [job] = await probe.rows<{ id: number; merchant_id: number; state: string; operations: number | null }>(
          'SELECT id, merchant_id, state, operations FROM import_jobs',
        );
        expect(job).toMatchObject({ state: 'running', operations: null });

        // The next process, as it looks at start: CPS_IMPORT_STALLED_SECONDS (60) after the kill.
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-interrupted-'));
        const later = createService(loadConfig({ ...world.serviceEnv, CPS_MEDIA_DIR: path.join(dir, 'media') }), {
          now: () => new Date(Date.now() + 61_000),
        });
        try {
          await later.admin.publishRuns.resumeStalled();
          const ended = await later.storage.importJob(Number(job!.merchant_id), Number(job!.id));
          expect(ended).toMatchObject({
            state: 'failed',
            error_code: 'interrupted',
            error: INTERRUPTED_IMPORT,
            operations: null,
            products_applied: 0,
            finished_at: expect.any(String),
          });
          expect(ended!.lines_read).toBeGreaterThanOrEqual(32);
          expect(Number(await probe.value('SELECT count(*) FROM products'))).toBe(0);
        } finally {
          await later.close();
          fs.rmSync(dir, { recursive: true, force: true });
        }
      } finally {
        await probe.close();
        await world.close();
      }
    }),
  120_000,
);
