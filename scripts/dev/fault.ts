// `npm run fault`: the full variant of the fault tests (test/faults/*.test.ts run the quick one in
// `npm test`). kill -9 of the real `serve` during a bulk import, an exchange-rate re-pricing and a
// delivery burst, at larger sizes; after each restart a full recompute of every payload, the change
// feed and the outbox, and the receiver's log against every change; and SIGTERM during a delivery
// burst (graceful shutdown: exit 0, every delivery made exactly once). Each on SQLite (a file) and
// on PostgreSQL (a database of its own on a server started from the installed binaries for the run).
// scale-out (PostgreSQL only): two `serve` and three `worker` processes on one database, a
// burst of changes written through both servers, kill -9 of a worker. Prints what it checked.
//   FAULT_ENGINE (default both)      sqlite, postgres or both
//   FAULT_PRODUCTS (default 40000)   products per scenario (the delivery bursts use a quarter)
//   FAULT_SCALE_OUT_CHANGES (default 50000)   changes in the scale-out burst
//   FAULT_SCENARIOS (default import,repricing,deliveries,shutdown,scale-out)
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { killAllServices, postgresDatabase, type FaultDatabase } from '../../test/faults/harness.js';
import { killDuringDeliveries, killDuringImport, killDuringRepricing, stopDuringDeliveries } from '../../test/faults/scenarios.js';
import { killWorkerOnPostgres } from '../../test/faults/scale-out.js';
import { startPostgresServer, type PostgresServer } from './postgres-server.js';

type Engine = 'sqlite' | 'postgres';

const products = Number(process.env.FAULT_PRODUCTS ?? 40_000);
const scaleOutChanges = Number(process.env.FAULT_SCALE_OUT_CHANGES ?? 50_000);
const scenarios = (process.env.FAULT_SCENARIOS ?? 'import,repricing,deliveries,shutdown,scale-out').split(',').map((s) => s.trim());
const engineChoice = process.env.FAULT_ENGINE ?? 'both';
if (!Number.isInteger(products) || products < 100) throw new Error('FAULT_PRODUCTS must be an integer of at least 100');
if (!['sqlite', 'postgres', 'both'].includes(engineChoice)) throw new Error('FAULT_ENGINE must be sqlite, postgres or both');
const engines: Engine[] = engineChoice === 'both' ? ['sqlite', 'postgres'] : [engineChoice as Engine];

const started = Date.now();
const elapsed = () => `${((Date.now() - started) / 1000).toFixed(1)} s`;
const log = (line: string) => console.log(`[${elapsed().padStart(7)}] ${line}`);

// PostgreSQL: one throwaway server for the run (as the test suite's), a database per scenario.
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-fault-run-'));
// The server runs as the postgres user when this runs as root: it must be able to reach its folder.
fs.chmodSync(dir, 0o755);
let server: PostgresServer | undefined;
process.on('exit', () => {
  killAllServices();
  server?.stopSync('immediate');
  fs.rmSync(dir, { recursive: true, force: true });
});
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => process.exit(130));

let databases = 0;
/** A new, empty database on the run's server (started on first use); the service migrates it. */
async function postgresFor(name: string): Promise<{ database: FaultDatabase; drop: () => Promise<void> }> {
  if (!server) {
    server = await startPostgresServer({ dir: path.join(dir, 'postgres'), durable: false });
    log(`PostgreSQL server on ${server.url} for this run`);
  }
  const databaseName = `fault_${++databases}_${name.replace(/\W/g, '_')}`;
  const onServer = async (sql: string) => {
    const client = new pg.Client(server!.url);
    await client.connect();
    try {
      await client.query(sql);
    } finally {
      await client.end();
    }
  };
  await onServer(`CREATE DATABASE ${databaseName}`);
  return {
    database: postgresDatabase(server.urlOf(databaseName)),
    drop: () => onServer(`DROP DATABASE IF EXISTS ${databaseName} WITH (FORCE)`),
  };
}

const burst = Math.max(100, Math.floor(products / 4));
const runs: Record<string, (database: FaultDatabase | undefined) => Promise<unknown>> = {
  import: (database) => killDuringImport({ database, products, publishChunk: 2000, log }),
  repricing: (database) => killDuringRepricing({ database, products, publishChunk: 2000, log }),
  deliveries: (database) => killDuringDeliveries({ database, products: burst, publishChunk: 2000, log }),
  shutdown: (database) => stopDuringDeliveries({ database, products: burst, publishChunk: 2000, log }),
  // Each imported product is one price and one content change in its store.
  'scale-out': (database) =>
    killWorkerOnPostgres({ products: Math.ceil(scaleOutChanges / 2), batchSize: 20, database: { url: database!.location }, log }),
};
const titles: Record<string, string> = {
  import: `kill -9 during a bulk NDJSON import of ${products} products (chunks of 2000, one transaction each)`,
  repricing: `kill -9 during an exchange-rate re-pricing of ${products} products in two stores (one transaction)`,
  deliveries: `kill -9 during a delivery burst (${burst} products in 3 stores)`,
  shutdown: `SIGTERM during a delivery burst (${burst} products in 3 stores)`,
  'scale-out': `2 serve + 3 worker: kill -9 of a worker during a burst of ${scaleOutChanges} changes to one receiver`,
};
for (const name of scenarios) if (!runs[name]) throw new Error(`unknown scenario "${name}" (${Object.keys(runs).join(', ')})`);

const results: string[] = [];
let failed = 0;
for (const engine of engines) {
  for (const name of scenarios) {
    if (name === 'scale-out' && engine === 'sqlite') continue; // several processes on one database: PostgreSQL's
    const label = `${engine === 'sqlite' ? 'SQLite' : 'PostgreSQL'}, ${name}`;
    log(`${label}: ${titles[name]}`);
    const scenarioStarted = Date.now();
    let drop: (() => Promise<void>) | undefined;
    try {
      let database: FaultDatabase | undefined;
      if (engine === 'postgres') ({ database, drop } = await postgresFor(name));
      await runs[name]!(database);
      log(`  PASS ${label}`);
      results.push(`PASS ${label} (${((Date.now() - scenarioStarted) / 1000).toFixed(1)} s)`);
    } catch (error) {
      failed++;
      killAllServices();
      log(`  FAIL ${label}: ${(error as Error).stack ?? String(error)}`);
      results.push(`FAIL ${label}`);
    } finally {
      await drop?.().catch(() => undefined);
    }
  }
}
await server?.stop('fast').catch(() => undefined);
server = undefined;
for (const line of results) log(line);
log(failed ? `${failed} of ${results.length} scenario runs failed` : `all ${results.length} scenario runs passed`);
process.exit(failed ? 1 : 0);
