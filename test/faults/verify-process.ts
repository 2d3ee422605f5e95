// The full recompute (test/support/verify.ts) of a database in a process of its own, printed as
// JSON: the fault harness runs it beside a live service without stalling its own event loop (where
// the receiver runs) for the seconds a large recompute takes. DATABASE is an SQLite file or a
// postgres:// URL.
import { verifyCatalog } from '../support/verify.js';
import { openPostgresStorage } from '../../src/storage/postgres/index.js';
import { openSqliteStorage } from '../../src/storage/sqlite/index.js';

const [database] = process.argv.slice(2);
if (!database) throw new Error('usage: verify-process DATABASE');
const storage = /^postgres(ql)?:\/\//.test(database) ? openPostgresStorage(database) : openSqliteStorage(database);
try {
  process.stdout.write(`${JSON.stringify(await verifyCatalog(storage))}\n`);
} finally {
  await storage.close();
}
