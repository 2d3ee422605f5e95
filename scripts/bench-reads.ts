// `npm run bench:reads`: read throughput of GET /v1/products against the ceiling of this machine.
// Builds 100k products in 3 stores, starts the server in a child process, and measures with
// autocannon, interleaving the targets in rounds so machine noise hits them alike:
//   static     - the same bytes as page 1, answered from memory by the same HTTP stack (the ceiling)
//   page1      - GET /v1/products?per_page=200
//   last       - GET /v1/products?per_page=200&page=<last>
//   page1-gzip - page 1 with Accept-Encoding: gzip (issue 6: compression, for clients that ask)
//   page1-br   - page 1 with Accept-Encoding: br
//   page1-nolog - page 1 from an app with the access log off (issue 6: what logging costs)
// Targets (issue #2): page 1 >= 0.60 x static; last page >= 0.90 x page 1 - for clients that do not
// ask for compression (autocannon sends no Accept-Encoding unless told).
import { fork } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { buildDemoCatalog } from '../src/admin/demo.js';
import { loadConfig } from '../src/config.js';
import { createService } from '../src/service.js';

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
  const service = createService(loadConfig({}, { databasePath }));
  const { api_key: apiKey } = await buildDemoCatalog(service.admin, PRODUCTS);
  await service.close();
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
    for (const coding of ['gzip', 'br'] as const) {
      const coded = await codedSize(`${base}/v1/products?per_page=200`, { ...headers, 'Accept-Encoding': coding });
      console.log(`page 1 with ${coding}: ${coded} bytes on the wire (${(coded / Buffer.byteLength(page1) * 100).toFixed(1)} %)`);
    }

    const targets = {
      static: { url: `${base}/__static`, headers },
      page1: { url: `${base}/v1/products?per_page=200`, headers },
      last: { url: `${base}/v1/products?per_page=200&page=${lastPage}`, headers },
      'page1-gzip': { url: `${base}/v1/products?per_page=200`, headers: { ...headers, 'Accept-Encoding': 'gzip' } },
      'page1-br': { url: `${base}/v1/products?per_page=200`, headers: { ...headers, 'Accept-Encoding': 'br' } },
      'page1-nolog': { url: `${base}/v1/products?per_page=200`, headers: { ...headers, 'X-Bench-App': 'quiet' } },
    };
    type Target = keyof typeof targets;
    const serverCpu = (): Promise<number> => new Promise((resolve) => {
      child.once('message', (m: { cpu: { user: number; system: number } }) => resolve(m.cpu.user + m.cpu.system));
      child.send('cpu');
    });
    const results = Object.fromEntries(Object.keys(targets).map((name) => [name, { rps: [] as number[], cpu: [] as number[] }])) as
      Record<Target, { rps: number[]; cpu: number[] }>;
    // Round 0 warms the JIT and the page cache and is not counted.
    for (let round = 0; round <= ROUNDS; round++) {
      for (const [name, target] of Object.entries(targets) as [Target, { url: string; headers: Record<string, string> }][]) {
        const cpuBefore = await serverCpu();
        const run = await autocannon({ ...target, connections: CONNECTIONS, duration: round === 0 ? 2 : SECONDS });
        const cpuPerRequest = (await serverCpu() - cpuBefore) / run.requests.total;
        if (run.non2xx || run.errors) throw new Error(`${name}: ${run.non2xx} non-2xx, ${run.errors} errors`);
        if (round === 0) continue;
        results[name].rps.push(run.requests.average);
        results[name].cpu.push(cpuPerRequest);
        console.log(`round ${round} ${name.padEnd(10)} ${run.requests.average.toFixed(0).padStart(6)} req/s  p99 ${run.latency.p99} ms  server CPU ${cpuPerRequest.toFixed(0)} us/request`);
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
    for (const name of ['page1-gzip', 'page1-br', 'page1-nolog'] as const) {
      console.log(`${name}: median ${median(results[name].rps).toFixed(0)} req/s, server CPU ${median(results[name].cpu).toFixed(0)} us/request`);
    }
    const nolog = median(results['page1-nolog'].rps);
    console.log(`access log: page 1 with / without = ${(p / nolog).toFixed(2)} req/s, CPU +${(cp - median(results['page1-nolog'].cpu)).toFixed(0)} us/request`);
  } finally {
    child.kill();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** Bytes on the wire of a coded response (fetch would decode it; node:http does not). */
function codedSize(url: string, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    http.get(url, { headers }, (res) => {
      let size = 0;
      res.on('data', (chunk: Buffer) => { size += chunk.length; });
      res.on('end', () => (res.headers['content-encoding'] ? resolve(size) : reject(new Error(`${url}: not coded`))));
    }).on('error', reject);
  });
}

await main();
