// The cost of timing one SQL statement: 1M indexed single-row get()s on an
// in-memory table, as the statement cache ran them before (Map lookup, get), through the timing
// wrapper with no observer, and observed into StatementMetrics; process CPU time, median of 9
// rounds. Usage: npx tsx scripts/bench/bench-statement-timing.ts
import Database from 'better-sqlite3';
import { SqliteConnection } from '../../src/storage/sqlite/connection.js';
import { StatementMetrics } from '../../src/operations/statements.js';
import { silentLogger } from '../../src/operations/log.js';
const db = new Database(':memory:');
db.exec(
  'CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT); INSERT INTO t WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 1000) SELECT x, hex(randomblob(20)) FROM n',
);
const SQL = 'SELECT v FROM t WHERE id = ?';
const raw = db.prepare(SQL);
const timing = { observer: null as StatementMetrics | null };
const conn = new SqliteConnection(db, timing).named('published.publishedPageOfStore');
const N = 1_000_000;
function run(f: (i: number) => unknown) {
  const t = process.cpuUsage();
  for (let i = 0; i < N; i++) f((i % 1000) + 1);
  const used = process.cpuUsage(t);
  const ns = ((used.user + used.system) * 1e3) / N;
  return ns;
}
const before = new Map([[SQL, raw]]);
const results: Record<string, number[]> = { before: [], unobserved: [], observed: [] };
for (let round = 0; round < 9; round++) {
  results.before!.push(run((i) => before.get(SQL)!.get(i)));
  timing.observer = null;
  results.unobserved!.push(run((i) => conn.stmt(SQL).get(i)));
  timing.observer = new StatementMetrics(silentLogger, 100);
  results.observed!.push(run((i) => conn.stmt(SQL).get(i)));
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
for (const [k, v] of Object.entries(results)) console.log(k, median(v).toFixed(0), 'ns per get()', v.map((x) => x.toFixed(0)).join(' '));
