// `npm run fault`: the full variant of the fault tests (test/faults/*.test.ts run the quick one in
// `npm test`). kill -9 of the real `serve` during a bulk import, an exchange-rate re-pricing and a
// delivery burst, at larger sizes; after each restart a full recompute of every payload, the change
// feed and the outbox, and the receiver's log against every change; and SIGTERM during a delivery
// burst (graceful shutdown: exit 0, every delivery made exactly once). Prints what it checked.
// scale-out (issue 12): two `serve` and three `worker` processes on one PostgreSQL database (started
// from the installed binaries), a burst of changes written through both servers, kill -9 of a worker.
//   FAULT_PRODUCTS (default 40000)   products per scenario (the delivery bursts use a quarter)
//   FAULT_SCALE_OUT_CHANGES (default 50000)   changes in the scale-out burst
//   FAULT_SCENARIOS (default import,repricing,deliveries,shutdown,scale-out)
import { killAllServices } from '../test/faults/harness.js';
import { killDuringDeliveries, killDuringImport, killDuringRepricing, stopDuringDeliveries } from '../test/faults/scenarios.js';
import { killWorkerOnPostgres } from '../test/faults/scale-out.js';

const products = Number(process.env.FAULT_PRODUCTS ?? 40_000);
const scaleOutChanges = Number(process.env.FAULT_SCALE_OUT_CHANGES ?? 50_000);
const scenarios = (process.env.FAULT_SCENARIOS ?? 'import,repricing,deliveries,shutdown,scale-out').split(',').map((s) => s.trim());
if (!Number.isInteger(products) || products < 100) throw new Error('FAULT_PRODUCTS must be an integer of at least 100');

const started = Date.now();
const elapsed = () => `${((Date.now() - started) / 1000).toFixed(1)} s`;
const log = (line: string) => console.log(`[${elapsed().padStart(7)}] ${line}`);
process.on('exit', killAllServices);

const runs: Record<string, () => Promise<unknown>> = {
  import: () => killDuringImport({ products, publishChunk: 2000, log }),
  repricing: () => killDuringRepricing({ products, publishChunk: 2000, log }),
  deliveries: () => killDuringDeliveries({ products: Math.max(100, Math.floor(products / 4)), publishChunk: 2000, log }),
  shutdown: () => stopDuringDeliveries({ products: Math.max(100, Math.floor(products / 4)), publishChunk: 2000, log }),
  // Each imported product is one price and one content change in its store.
  'scale-out': () => killWorkerOnPostgres({ products: Math.ceil(scaleOutChanges / 2), batchSize: 20, log }),
};
const titles: Record<string, string> = {
  import: `kill -9 during a bulk NDJSON import of ${products} products (chunks of 2000, one transaction each)`,
  repricing: `kill -9 during an exchange-rate re-pricing of ${products} products in two stores (one transaction)`,
  deliveries: `kill -9 during a delivery burst (${Math.floor(products / 4)} products in 3 stores)`,
  shutdown: `SIGTERM during a delivery burst (${Math.floor(products / 4)} products in 3 stores)`,
  'scale-out': `PostgreSQL, 2 serve + 3 worker: kill -9 of a worker during a burst of ${scaleOutChanges} changes to one receiver`,
};

let failed = 0;
for (const name of scenarios) {
  const run = runs[name];
  if (!run) throw new Error(`unknown scenario "${name}" (${Object.keys(runs).join(', ')})`);
  log(`${titles[name]}`);
  try {
    await run();
    log(`  PASS ${name}`);
  } catch (error) {
    failed++;
    log(`  FAIL ${name}: ${(error as Error).stack ?? error}`);
  }
}
log(failed ? `${failed} of ${scenarios.length} scenarios failed` : `all ${scenarios.length} scenarios passed`);
process.exit(failed ? 1 : 0);
