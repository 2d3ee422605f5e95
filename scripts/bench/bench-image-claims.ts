// Times image claims beside a down origin's backlog on SQLite, without a catalog: a synthetic
// database (test/support/image-backlog.ts: one merchant, N pending images on a down origin, one on a
// live origin) kept in the temporary folder for the next run, then 200 claims a simulated second
// apart, each statement's count and mean time, and with `plan` each statement's query plan.
//   npx tsx scripts/bench/bench-image-claims.ts 3000000 [plan]
import Database from 'better-sqlite3';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openSqliteStorage } from '../../src/storage/sqlite/index.js';
import { seedImageBacklog } from '../../test/support/image-backlog.js';

const down = Number(process.argv[2] ?? 10000);
const file = path.join(os.tmpdir(), `cps-image-backlog-${down}.db`);
const AT = '2026-11-26T08:00:00.000Z';
if (!fs.existsSync(file)) {
  const storage = openSqliteStorage(file);
  const merchant = (await storage.createMerchant({ name: 'M', sku_pattern: null, owner_emails: [], created_at: AT })).id;
  await storage.close();
  const backlog = { down, failed: 20, live: 1, at: AT, downSince: '2026-11-26T08:01:00.000Z', nextProbeAt: '2026-11-26T09:05:00.000Z' };
  await seedImageBacklog(file, merchant, backlog);
}
const storage = openSqliteStorage(file);
// Every statement's runs and time, by its text.
const statementClass = Object.getPrototypeOf(new Database(':memory:').prepare('SELECT 1')) as Record<string, (...a: unknown[]) => unknown>;
const seen = new Map<string, { n: number; ms: number; params: unknown[] }>();
for (const method of ['all', 'get', 'run']) {
  const real = statementClass[method]!;
  statementClass[method] = function (this: { source: string }, ...args: unknown[]) {
    const start = performance.now();
    const result = real.apply(this, args);
    const entry = seen.get(this.source) ?? { n: 0, ms: 0, params: args };
    entry.n++;
    entry.ms += performance.now() - start;
    seen.set(this.source, entry);
    return result;
  };
}
const fairness = { perMerchant: 64, perOrigin: 32, busy: [], deadAfterMs: 72 * 3600_000 };
let now = Date.parse('2026-11-26T09:00:00.000Z');
const claims = 200;
let found = 0;
const started = performance.now();
for (let i = 0; i < claims; i++) {
  now += 1000;
  const at = new Date(now).toISOString();
  found += (await storage.claimDueImageMirrors(at, 16, new Date(now + 60_000).toISOString(), fairness)).length;
}
console.log(`${down} down-origin images: ${((performance.now() - started) / claims).toFixed(3)} ms a claim, ${found} claimed`);
for (const [sql, e] of seen)
  if (!/^(BEGIN|COMMIT|SAVEPOINT|RELEASE)/.test(sql))
    console.log(`${e.n}x ${(e.ms / e.n).toFixed(3)} ms  ${sql.replace(/\s+/g, ' ').slice(0, 120)}`);
await storage.close();
if (process.argv[3] === 'plan') {
  const db = new Database(file, { readonly: true });
  for (const [sql, e] of seen) {
    if (!/^\s*(WITH|SELECT)/.test(sql)) continue;
    console.log(`-- ${sql.replace(/\s+/g, ' ').slice(0, 100)}`);
    for (const row of db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...e.params) as { detail: string }[]) console.log(`   ${row.detail}`);
  }
  db.close();
}
