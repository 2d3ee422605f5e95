// The quick variant of the scale-out fault scenario (test/faults/scale-out.ts; `FAULT_SCENARIOS=scale-out
// npm run fault` runs 50,000 changes): two `serve` and three `worker` processes on one PostgreSQL
// database, kill -9 of a worker during a delivery burst.
import { describe, expect, it } from 'vitest';
import { OUTCOMES_PER_TRANSACTION } from '../../src/webhooks/attempt-recorder.js';
import { freshDatabase } from '../support/postgres.js';
import { killWorkerOnPostgres } from './scale-out.js';

describe('two serve and three worker processes on one PostgreSQL database', () => {
  it('deliver every change after kill -9 of a worker, re-sending only what its leases held, and the full recompute agrees', async () => {
    const database = await freshDatabase();
    try {
      const report = await killWorkerOnPostgres({ products: 1000, batchSize: 10, database });
      expect(report.changes).toBe(2000);
      expect(report.deliveries).toBeGreaterThanOrEqual(200);
      expect(report.requests).toBe(report.deliveries + report.sentTwice);
      // Sent twice: only deliveries leased when the worker was killed, at most its attempts awaiting
      // answers (the endpoint's concurrency, 6) and its answered successes awaiting their record.
      expect(report.sentTwice).toBeLessThanOrEqual(report.heldByKilledWorker);
      expect(report.sentTwice).toBeLessThanOrEqual(6 + OUTCOMES_PER_TRANSACTION);
    } finally {
      await database.drop();
    }
  }, 180_000);
});
