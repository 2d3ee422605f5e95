// SIGTERM during a delivery burst (graceful shutdown; quick variant of `npm run fault`):
// exit 0, the deliveries in flight answered and recorded, the rest handed back to the outbox, and
// after the restart every delivery made exactly once.
import { afterAll, expect } from 'vitest';
import { killAllServices } from './harness.js';
import { stopDuringDeliveries } from './scenarios.js';
import { onTestDatabase, scenarioIt } from './test-database.js';

afterAll(killAllServices);

scenarioIt(
  'loses nothing and sends nothing twice when serve is stopped with SIGTERM during a delivery burst',
  () =>
    onTestDatabase(async (database) => {
      const report = await stopDuringDeliveries({ database, products: 1500, publishChunk: 500 });
      expect(report.inFlightAtStop).toBeGreaterThan(0);
      expect(report.handedBack).toBeGreaterThan(0);
      expect(report.receiver.changes).toBe(report.changes);
      expect(report.receiver.requests).toBe(report.deliveries);
    }),
  300_000,
);
