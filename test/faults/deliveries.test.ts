// kill -9 during a delivery burst, with the full recompute (fault tests; quick variant of
// `npm run fault`). test/webhooks/crash.test.ts covers a larger burst with the receiver check alone.
import { afterAll, expect } from 'vitest';
import { killAllServices } from './harness.js';
import { killDuringDeliveries } from './scenarios.js';
import { onTestDatabase, scenarioIt } from './test-database.js';

afterAll(killAllServices);

scenarioIt(
  'agrees with a full recompute and delivers every change at least once after a SIGKILL during a delivery burst',
  () =>
    onTestDatabase(async (database) => {
      const report = await killDuringDeliveries({ database, products: 1500, publishChunk: 500 });
      expect(report.unfinishedAtKill).toBeGreaterThan(0);
      expect(report.receiver.changes).toBe(report.changes);
    }),
  300_000,
);
