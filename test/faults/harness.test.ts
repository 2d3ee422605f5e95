// The fault harness's "drained" (test/faults/harness.ts), which "the receiver saw every change"
// relies on: it must not pass while a publish run is left. A run (an import the restarted service
// resumes, a re-publishing) records its changes a chunk per transaction, so between two of its
// chunks the outbox can be empty and every delivery made with more changes still to come; the
// import fault test (test/faults/import.test.ts) then read those later changes before their
// deliveries were made and reported them as never having reached the receiver. On the project's
// engine; no service runs: the run here is one a killed service left.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'vitest';
import { CatalogAdmin } from '../../src/admin/catalog-admin.js';
import { createTestDatabase } from '../support/engine.js';
import { FaultWorld } from './harness.js';
import { scenarioIt } from './test-database.js';

scenarioIt(
  'is not drained while a publish run is left, however empty the outbox and the deliveries',
  async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-drained-'));
    const database = await createTestDatabase(dir);
    const storage = await database.open();
    const world = await FaultWorld.create({ database });
    try {
      const merchant = await new CatalogAdmin(storage, () => new Date(), 10).createMerchant({ name: 'Drained Outfitters' });
      const run = await storage.transaction((tx) =>
        tx.insertPublishRun({
          merchant_id: merchant.id,
          store_ids: null,
          after_product_id: 0,
          import_job_id: null,
          driver: 'killed',
          leased_until: '2000-01-01T00:00:00.000Z',
          created_at: '2000-01-01T00:00:00.000Z',
        }),
      );
      await expect(world.drained(300)).rejects.toThrow(/deliveries not drained: \{"runs":1,"waiting":0,"unfinished":0\}/);
      await storage.transaction((tx) => tx.deletePublishRun(run.id));
      await world.drained(5_000);
    } finally {
      await world.close();
      await storage.close();
      await database.drop();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  },
  60_000,
);
