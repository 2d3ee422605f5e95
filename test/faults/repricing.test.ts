// kill -9 during an exchange-rate re-pricing (issue 6, fault tests; quick variant of `npm run fault`).
import { afterAll, expect } from 'vitest';
import { killAllServices } from './harness.js';
import { killDuringRepricing } from './scenarios.js';
import { onTestDatabase, scenarioIt } from './test-database.js';

afterAll(killAllServices);

scenarioIt('re-prices all products or none when the service is killed (SIGKILL) during an exchange-rate change, and agrees with a full recompute', () => onTestDatabase(async (database) => {
  const report = await killDuringRepricing({ database, products: 4000, publishChunk: 500 });
  expect(['none', 'all']).toContain(report.outcome);
  expect(report.afterRestart.problems).toEqual([]);
  expect(report.afterRestart.payloadsCompared).toBe(4000 * 3);
  expect(report.repriced).toBeGreaterThan(0);
  expect(report.receiver.changes).toBeGreaterThan(0);
}), 300_000);
