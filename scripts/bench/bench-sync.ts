// `npm run bench:sync`: a full sync of a store with the typed client, what an integrator
// actually runs: `syncStore` of the default store of a BENCH_PRODUCTS catalog (the demo generator)
// into a fresh in-memory replica, against the real app served by scripts/bench/bench-server.ts in its own
// process (access log, metrics, rate limiter on). Three syncs one after the other, on one server:
//   compressed        - the client's defaults: Node's fetch asks for gzip (Accept-Encoding: gzip,
//                       deflate); every page is coded now (the cache of coded bodies is cold)
//   identity          - the same sync asking for Accept-Encoding: identity
//   compressed-warm   - the compressed sync again right after: pages from the cache of coded bodies
// For each: wall time, the server's CPU time for the whole sync (process.cpuUsage over IPC), the
// client's CPU time, requests and how their bodies were coded. BENCH_ROUNDS repeats the three on a
// fresh server each round (so the first compressed sync is cold every time); medians over rounds.
// Since the snapshot export exists, syncStore reads the store with one snapshot export (GET /v1/products/export)
// instead of pages, so `requests` is the export and the feed's polls, and `compressed-warm` codes
// the export again (exports are coded as they stream, never kept); `npm run bench:export` sets
// the export against paging side by side.
// Usage: npm run bench:sync -- [--json]   BENCH_PRODUCTS (100000), BENCH_ROUNDS (1)
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { createCatalogClient, mapReplica, syncStore } from '../../src/client/index.js';
import { buildDemo, candidateDir, startBenchServerProcess, type Checkout } from './baseline.js';

const PRODUCTS = Number(process.env.BENCH_PRODUCTS ?? 100_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 1);
const { values: flags } = parseArgs({ options: { json: { type: 'boolean' } } });
const log = (line: string) => (flags.json ? console.error(line) : console.log(line));

const SYNCS = ['compressed', 'identity', 'compressed-warm'] as const;
type Sync = (typeof SYNCS)[number];
interface SyncResult {
  wall_ms: number;
  server_cpu_ms: number;
  client_cpu_ms: number;
  requests: number;
  products: number;
  codings: Record<string, number>;
}

interface Server {
  base: string;
  cpu: () => Promise<number>;
  stop: () => Promise<void>;
}

/** scripts/bench/bench-server.ts on `database`; its CPU in ms. */
async function startServer(database: string): Promise<Server> {
  const server = await startBenchServerProcess(candidateDir, 'bench-server.ts', database, 'candidate');
  return { ...server, cpu: async () => (await server.cpu()) / 1000 };
}

async function sync(server: Server, apiKey: string, kind: Sync): Promise<SyncResult> {
  const codings: Record<string, number> = {};
  let requests = 0;
  const client = createCatalogClient({
    baseUrl: server.base,
    apiKey,
    fetch: async (request) => {
      if (kind === 'identity') request.headers.set('Accept-Encoding', 'identity');
      const response = await globalThis.fetch(request);
      requests++;
      const coding = response.headers.get('Content-Encoding') ?? 'none';
      codings[coding] = (codings[coding] ?? 0) + 1;
      return response;
    },
  });
  const replica = mapReplica();
  const [serverBefore, clientBefore, started] = [await server.cpu(), process.cpuUsage(), performance.now()];
  await syncStore(client, { replica });
  const wall = performance.now() - started;
  const clientCpu = process.cpuUsage(clientBefore);
  const serverCpu = (await server.cpu()) - serverBefore;
  return {
    wall_ms: wall,
    server_cpu_ms: serverCpu,
    client_cpu_ms: (clientCpu.user + clientCpu.system) / 1000,
    requests,
    products: replica.products.size,
    codings,
  };
}

const median = (xs: number[]) => {
  const sorted = [...xs].sort((a, b) => a - b);
  return (sorted[Math.floor((sorted.length - 1) / 2)]! + sorted[Math.ceil((sorted.length - 1) / 2)]!) / 2;
};

const tempDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-bench-sync-'));
try {
  const database = path.join(tempDir, 'sync.db');
  const checkout = { name: 'candidate', ref: 'HEAD', sha: '', dir: candidateDir } as Checkout;
  const { apiKey } = await buildDemo(checkout, database, PRODUCTS, log);
  const results = Object.fromEntries(SYNCS.map((s) => [s, [] as SyncResult[]])) as Record<Sync, SyncResult[]>;
  for (let round = 1; round <= ROUNDS; round++) {
    const server = await startServer(database);
    try {
      for (const kind of SYNCS) {
        const result = await sync(server, apiKey, kind);
        results[kind].push(result);
        log(
          `round ${round} ${kind.padEnd(16)} ${result.products} products, ${result.requests} requests ${JSON.stringify(result.codings)}: ` +
            `wall ${(result.wall_ms / 1000).toFixed(2)} s, server CPU ${(result.server_cpu_ms / 1000).toFixed(2)} s, client CPU ${(result.client_cpu_ms / 1000).toFixed(2)} s`,
        );
      }
    } finally {
      await server.stop();
    }
  }
  const summary = Object.fromEntries(
    SYNCS.map((kind) => [
      kind,
      {
        wall_ms: median(results[kind].map((r) => r.wall_ms)),
        server_cpu_ms: median(results[kind].map((r) => r.server_cpu_ms)),
        client_cpu_ms: median(results[kind].map((r) => r.client_cpu_ms)),
        requests: results[kind][0]!.requests,
        codings: results[kind][0]!.codings,
      },
    ]),
  ) as Record<Sync, Omit<SyncResult, 'products'>>;
  if (flags.json) {
    console.log(JSON.stringify({ products: PRODUCTS, rounds: ROUNDS, syncs: summary, rounds_detail: results }, null, 2));
  } else {
    console.log('');
    console.log(`full sync of the default store of a ${PRODUCTS}-product catalog with syncStore; medians over ${ROUNDS} round(s)`);
    console.log(
      `${'sync'.padEnd(18)}${'wall s'.padStart(8)}${'server CPU s'.padStart(14)}${'per request ms'.padStart(16)}${'client CPU s'.padStart(14)}${'requests'.padStart(10)}  codings`,
    );
    for (const kind of SYNCS) {
      const s = summary[kind];
      console.log(
        `${kind.padEnd(18)}${(s.wall_ms / 1000).toFixed(2).padStart(8)}${(s.server_cpu_ms / 1000).toFixed(2).padStart(14)}` +
          `${(s.server_cpu_ms / s.requests).toFixed(2).padStart(16)}${(s.client_cpu_ms / 1000).toFixed(2).padStart(14)}${String(s.requests).padStart(10)}  ${JSON.stringify(s.codings)}`,
      );
    }
  }
} finally {
  fs.rmSync(tempDir, { recursive: true, force: true });
}
