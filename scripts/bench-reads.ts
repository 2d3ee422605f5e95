// `npm run bench:reads`: read throughput of GET /v1/products against the ceiling of this machine.
// Builds 100k products in 3 stores, starts the server in a child process, and measures with
// autocannon, interleaving the three targets in rounds so machine noise hits them alike:
//   static  - the same bytes as page 1, answered from memory by the same HTTP stack (the ceiling)
//   page 1  - GET /v1/products?per_page=200
//   last    - GET /v1/products?per_page=200&page=<last>
// Targets (issue #2): page 1 >= 0.60 x static; last page >= 0.90 x page 1.
import { fork } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { CatalogAdmin } from '../src/admin/catalog-admin.js';
import { buildDemoCatalog } from '../src/admin/demo.js';
import { openSqliteStorage } from '../src/storage/sqlite.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const PRODUCTS = Number(process.env.BENCH_PRODUCTS ?? 100_000);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 8);

async function main(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-bench-'));
  const databasePath = path.join(dir, 'bench.db');
  console.log(`building ${PRODUCTS} products in 3 stores ...`);
  const started = Date.now();
  const storage = openSqliteStorage(databasePath);
  const { api_key: apiKey } = buildDemoCatalog(new CatalogAdmin(storage), PRODUCTS);
  storage.close();
  console.log(`built in ${((Date.now() - started) / 1000).toFixed(1)} s`);

  const child = fork(path.join(here, 'bench-server.ts'), [databasePath], { execArgv: ['--import', 'tsx'], stdio: 'inherit' });
  const port: number = await new Promise((resolve) => child.once('message', (m: { port: number }) => resolve(m.port)));
  const base = `http://127.0.0.1:${port}`;
  const headers = { Authorization: `Bearer ${apiKey}` };
  try {
    const first = await fetch(`${base}/v1/products?per_page=200`, { headers });
    const page1 = await first.text();
    const lastPage = (JSON.parse(page1) as { meta: { last_page: number } }).meta.last_page;
    const last = await (await fetch(`${base}/v1/products?per_page=200&page=${lastPage}`, { headers })).text();
    await fetch(`${base}/__static`, { method: 'POST', body: page1 });
    console.log(`page 1: ${page1.length} bytes; last page (${lastPage}): ${last.length} bytes`);

    const targets = {
      static: `${base}/__static`,
      page1: `${base}/v1/products?per_page=200`,
      last: `${base}/v1/products?per_page=200&page=${lastPage}`,
    };
    const serverCpu = (): Promise<number> => new Promise((resolve) => {
      child.once('message', (m: { cpu: { user: number; system: number } }) => resolve(m.cpu.user + m.cpu.system));
      child.send('cpu');
    });
    const results: Record<keyof typeof targets, { rps: number[]; cpu: number[] }> = {
      static: { rps: [], cpu: [] }, page1: { rps: [], cpu: [] }, last: { rps: [], cpu: [] },
    };
    // Round 0 warms the JIT and the page cache and is not counted.
    for (let round = 0; round <= ROUNDS; round++) {
      for (const [name, url] of Object.entries(targets) as [keyof typeof targets, string][]) {
        const cpuBefore = await serverCpu();
        const run = await autocannon({ url, headers, connections: CONNECTIONS, duration: round === 0 ? 2 : SECONDS });
        const cpuPerRequest = (await serverCpu() - cpuBefore) / run.requests.total;
        if (run.non2xx || run.errors) throw new Error(`${name}: ${run.non2xx} non-2xx, ${run.errors} errors`);
        if (round === 0) continue;
        results[name].rps.push(run.requests.average);
        results[name].cpu.push(cpuPerRequest);
        console.log(`round ${round} ${name.padEnd(6)} ${run.requests.average.toFixed(0).padStart(6)} req/s  p99 ${run.latency.p99} ms  server CPU ${cpuPerRequest.toFixed(0)} us/request`);
      }
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    const [s, p, l] = [median(results.static.rps), median(results.page1.rps), median(results.last.rps)];
    const [cs, cp, cl] = [median(results.static.cpu), median(results.page1.cpu), median(results.last.cpu)];
    console.log('');
    console.log(`median req/s: static ${s.toFixed(0)}, page 1 ${p.toFixed(0)}, last page ${l.toFixed(0)}`);
    console.log(`page 1 / static    = ${(p / s).toFixed(2)}  (target >= 0.60)`);
    console.log(`last page / page 1 = ${(l / p).toFixed(2)}  (target >= 0.90)`);
    console.log(`median server CPU per request: static ${cs.toFixed(0)} us, page 1 ${cp.toFixed(0)} us, last page ${cl.toFixed(0)} us`);
    console.log(`as throughput (1/CPU): page 1 / static = ${(cs / cp).toFixed(2)}, last page / page 1 = ${(cp / cl).toFixed(2)}`);
  } finally {
    child.kill();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

await main();
