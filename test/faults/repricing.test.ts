// kill -9 part-way through an exchange-rate re-pricing (fault tests, docs/testing.md#fault-and-load-scripts;
// resumed after the restart; quick variant of `npm run fault`).
import { afterAll, expect } from 'vitest';
import { killAllServices } from './harness.js';
import { killDuringRepricing } from './scenarios.js';
import { onTestDatabase, scenarioIt } from './test-database.js';

afterAll(killAllServices);

scenarioIt(
  're-prices every product once when the service is killed (SIGKILL) part-way through an exchange-rate change: the restarted service resumes the publish run, and agrees with a full recompute',
  () =>
    onTestDatabase(async (database) => {
      const report = await killDuringRepricing({ database, products: 4000, publishChunk: 500 });
      expect(report.repricedAtKill).toBeGreaterThan(0);
      expect(report.repricedAtKill).toBeLessThan(4000);
      expect(report.afterRestart.problems).toEqual([]);
      expect(report.afterRestart.payloadsCompared).toBe(4000 * 3);
      expect(report.repriced).toBe(4000);
      expect(report.receiver.changes).toBeGreaterThan(0);
    }),
  300_000,
);
