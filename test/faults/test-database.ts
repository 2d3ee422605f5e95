// The database a quick fault test runs its scenario on: the vitest project's engine
// (test/support/engine.ts: an SQLite file, or a fresh database on the run's PostgreSQL server),
// dropped afterwards. The service runs in a child process beside the test, so on PostgreSQL the
// scenarios need a real server: on the embedded pglite (one connection, no server) they are skipped.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createTestDatabase, severalConnections } from '../support/engine.js';
import type { FaultDatabase } from './harness.js';

/** `it` for a fault scenario: skipped, by name, where the child process could not reach the database (pglite). */
export const scenarioIt = severalConnections.it;

/** Runs `scenario` on a new database of the project's engine, then deletes it. */
export async function onTestDatabase<T>(scenario: (database: FaultDatabase) => Promise<T>): Promise<T> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-fault-db-'));
  const database = await createTestDatabase(dir);
  try {
    return await scenario(database);
  } finally {
    await database.drop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
