// kill -9 during a bulk NDJSON import (fault tests; quick variant of `npm run fault`).
import { afterAll, expect } from 'vitest';
import { killAllServices } from './harness.js';
import { killDuringImport } from './scenarios.js';
import { onTestDatabase, scenarioIt } from './test-database.js';

afterAll(killAllServices);

scenarioIt(
  'keeps exactly the whole chunks applied before a SIGKILL during a bulk import consistent, the restarted service completes the import, and sending it again changes nothing',
  () =>
    onTestDatabase(async (database) => {
      const report = await killDuringImport({ database, products: 4000, publishChunk: 250 });
      expect(report.chunksAppliedAtKill).toBeGreaterThan(0);
      expect(report.linesAppliedAtKill).toBeLessThan(report.lines);
      expect(report.linesAppliedAtKill % report.chunk).toBe(0);
      expect(report.afterRestart.problems).toEqual([]);
      expect(report.afterRestart.products).toBe(4000);
      expect(report.changesOfResend).toBe(0);
      expect(report.afterResend.problems).toEqual([]);
      expect(report.afterResend.products).toBe(4000);
      expect(report.afterResend.changes).toBe(report.afterRestart.changes);
      expect(report.receiver.changes).toBeGreaterThan(0);
    }),
  300_000,
);
