// The full recompute (test/support/verify.ts) of a database file in a process of its own, printed as
// JSON: the fault harness runs it beside a live service without stalling its own event loop (where
// the receiver runs) for the seconds a large recompute takes.
import { verifyCatalog } from '../support/verify.js';
import { openSqliteStorage } from '../../src/storage/sqlite/index.js';

const [file] = process.argv.slice(2);
if (!file) throw new Error('usage: verify-process DATABASE');
const storage = openSqliteStorage(file);
try {
  process.stdout.write(`${JSON.stringify(await verifyCatalog(storage))}\n`);
} finally {
  await storage.close();
}
