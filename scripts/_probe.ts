import { loadConfig } from '../src/config.js';
import { createService } from '../src/service.js';
import { buildDemoCatalog } from '../src/admin/demo.js';
import fs from 'node:fs';
const db = '/tmp/prof/p.db';
const fresh = !fs.existsSync(db);
const service = createService(loadConfig(process.env, { databasePath: db }));
if (fresh) await buildDemoCatalog(service.admin, Number(process.env.N ?? 30000));
const storage = service.storage as any;
if (process.env.NOCKPT) storage.db.pragma('wal_autocheckpoint = 0');
// time every tx operation
const tx = storage.tx;
const stats = new Map<string, { n: number; total: number; max: number }>();
for (const name of Object.keys(tx)) {
  const f = tx[name];
  tx[name] = async (...a: unknown[]) => { const t = performance.now(); const r = await f(...a); const d = performance.now() - t; const s = stats.get(name) ?? { n: 0, total: 0, max: 0 }; s.n++; s.total += d; s.max = Math.max(s.max, d); stats.set(name, s); return r; };
}
let last = performance.now(); let maxGap = 0; const gaps: number[] = [];
const timer = setInterval(() => { const now = performance.now(); const g = now - last; gaps.push(g); maxGap = Math.max(maxGap, g); last = now; }, 1);
const origExec = storage.db.exec.bind(storage.db);
storage.db.exec = (sql: string) => { const t = performance.now(); const r = origExec(sql); const d = performance.now() - t; if (d > 5) console.log(`exec ${sql}: ${d.toFixed(1)} ms`); return r; };
const t = performance.now();
await service.admin.upsertExchangeRate(1, { base: 'EUR', quote: 'GBP', rate: String(0.8 + Math.random() / 10) });
console.log(`repricing ${(performance.now() - t).toFixed(0)} ms; max event-loop gap ${maxGap.toFixed(1)} ms; gaps>20ms: ${gaps.filter((g) => g > 20).length}; p99 gap ${[...gaps].sort((a, b) => a - b)[Math.floor(gaps.length * 0.99)]!.toFixed(1)}`);
for (const [name, s] of [...stats].sort((a, b) => b[1].total - a[1].total)) console.log(`${name.padEnd(24)} n=${s.n} total=${s.total.toFixed(0)} max=${s.max.toFixed(1)}`);
clearInterval(timer);
await service.close();
