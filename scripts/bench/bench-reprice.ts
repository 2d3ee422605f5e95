// `npx tsx scripts/bench/bench-reprice.ts`: the CPU one re-priced product costs, a merchant-wide publish
// run measured alone (bench:scale's phase d without the deployment around it), for one or more
// source trees side by side on the same database.
//
// Per engine: the demo catalog (--products N, default 20,000; three stores, the UK one in GBP) and
// --endpoints E webhook endpoints (default 20, never delivered to: nothing dispatches) are built
// into a fresh database (PostgreSQL: a throwaway server, scripts/dev/postgres-server.ts, non-durable).
// Then, --rounds times, each tree in turn (the order alternating) runs in a process of its own
// (`node --import tsx`, its own src/) that opens the database, re-prices once to warm up, and then
// --repricings times PUTs a new EUR/GBP rate through the admin domain (CatalogAdmin's exchange
// rates: the write commits with a publish run, which this process drives to its end, as
// CPS_WORKERS=inline does), each re-resolving the GBP store's N products. Measured per re-pricing:
// wall time, the process's CPU (process.cpuUsage: every thread) and, on PostgreSQL, the database
// server's processes' CPU (/proc). Reported: CPU per product in microseconds (node, database, both)
// and products per second, the median over the re-pricings of each tree.
//
// Usage: npx tsx scripts/bench/bench-reprice.ts [--engine sqlite|postgres|both (postgres)] [--products N]
//   [--endpoints E] [--rounds R (2)] [--repricings K (3)] [--tree DIR ...] (default: this checkout)
//   [--env CPS_X=V,...] (every tree's process) [--profile DIR] (a CPU profile of each re-pricing process) [--json]
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { postgresServerCpu } from './process-sampler.js';
import { inAlternatingRounds, median, onEachEngine, runInTree, serviceOfTree } from './tree-rounds.js';

const { values: flags } = parseArgs({
  options: {
    engine: { type: 'string', default: 'postgres' },
    products: { type: 'string', default: '20000' },
    endpoints: { type: 'string', default: '20' },
    rounds: { type: 'string', default: '2' },
    repricings: { type: 'string', default: '3' },
    tree: { type: 'string', multiple: true },
    env: { type: 'string' },
    profile: { type: 'string' },
    json: { type: 'boolean', default: false },
    // Internal: run one tree's measurement in this process.
    child: { type: 'string' },
    database: { type: 'string' },
    'data-dir': { type: 'string' },
    build: { type: 'boolean', default: false },
  },
});

const log = (line: string) => (flags.json ? console.error(line) : console.log(line));
const HERE = path.dirname(new URL(import.meta.url).pathname);

interface Measured {
  wall_ms: number;
  node_us: number;
  db_us: number;
  products: number;
}

/** One tree's process: builds the catalog (--build) or re-prices (the first to warm up). */
async function child(tree: string, database: string, dataDir: string | undefined): Promise<void> {
  const { service } = await serviceOfTree(tree, database, 'bench-reprice-admin-token-0123456789');
  const products = Number(flags.products);
  if (flags.build) {
    const { buildDemoCatalog } = (await import(path.join(tree, 'src/admin/demo.ts'))) as typeof import('../../src/admin/demo.js');
    const demo = await buildDemoCatalog(service.admin, products);
    for (let i = 0; i < Number(flags.endpoints); i++) {
      await service.endpoints.create(demo.merchant_id, { url: `http://127.0.0.1:9/hooks/${i}` });
    }
    process.stdout.write(JSON.stringify({ merchant_id: demo.merchant_id }));
    await service.close();
    return;
  }
  const merchantId = 1;
  const rates = service.admin.exchangeRates;
  const current = (await rates.list(merchantId)).find((r) => r.base === 'EUR' && r.quote === 'GBP')!;
  let rate = Number(current.rate);
  const results: Measured[] = [];
  for (let i = 0; i <= Number(flags.repricings); i++) {
    rate = Number((rate * (i % 2 === 0 ? 1.02 : 0.99)).toFixed(4));
    const db0 = dataDir ? postgresServerCpu(dataDir) : 0;
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    await rates.upsert(merchantId, { base: 'EUR', quote: 'GBP', rate: String(rate) });
    const wall = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    const db = dataDir ? postgresServerCpu(dataDir) - db0 : 0;
    if (i > 0) results.push({ wall_ms: wall, node_us: cpu.user + cpu.system, db_us: db, products });
  }
  // The statements' wall time per re-pricing (sending to result, the waits included), on stderr.
  const statements = service.metrics.drainStatements().sort((a, b) => b.sumMs - a.sumMs);
  const per = (Number(flags.repricings) + 1) * (products / 1000);
  for (const s of statements.slice(0, 12)) {
    console.error(`  ${s.name}: ${(s.count / per).toFixed(1)} calls, ${(s.sumMs / per).toFixed(1)} ms per 1,000 products`);
  }
  process.stdout.write(JSON.stringify(results));
  await service.close();
}

function runChild(tree: string, database: string, dataDir: string | undefined, build: boolean): Promise<string> {
  const env = Object.fromEntries(
    (flags.env ?? '')
      .split(',')
      .filter(Boolean)
      .map((pair) => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)]),
  );
  const nodeArgs = flags.profile && !build ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(flags.profile)}`] : [];
  const args = ['--child', tree, '--database', database];
  args.push('--products', flags.products, '--endpoints', flags.endpoints, '--repricings', flags.repricings);
  if (dataDir) args.push('--data-dir', dataDir);
  if (build) args.push('--build');
  return runInTree(tree, path.join(HERE, 'bench-reprice.ts'), args, { nodeArgs, env });
}

async function main(): Promise<void> {
  if (flags.child) return child(flags.child, flags.database!, flags['data-dir']);
  const trees = (flags.tree?.length ? flags.tree : [path.resolve(HERE, '../..')]).map((t) => path.resolve(t));
  const engines = flags.engine === 'both' ? ['sqlite', 'postgres'] : [flags.engine];
  const report: Record<string, Record<string, Measured[]>> = {};
  await onEachEngine(engines, 'bench-reprice-', async ({ engine, database, dataDir }) => {
    const t0 = performance.now();
    await runChild(trees[0]!, database, undefined, true);
    log(
      `${engine}: demo catalog of ${flags.products} products, ${flags.endpoints} endpoints in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
    );
    const measured: Record<string, Measured[]> = Object.fromEntries(trees.map((t) => [t, []]));
    await inAlternatingRounds(trees, Number(flags.rounds), async (tree, round) => {
      const results = JSON.parse(await runChild(tree, database, dataDir, false)) as Measured[];
      measured[tree]!.push(...results);
      const line = results.map((r) => `${(r.node_us / r.products).toFixed(0)}+${(r.db_us / r.products).toFixed(0)} us`).join(', ');
      log(`${engine} round ${round + 1} ${tree}: ${line} (load ${os.loadavg()[0]!.toFixed(1)})`);
    });
    report[engine] = measured;
  });
  const rows = Object.entries(report).flatMap(([engine, byTree]) =>
    Object.entries(byTree).map(([tree, results]) => ({
      engine,
      tree,
      node_us_per_product: median(results.map((r) => r.node_us / r.products)),
      db_us_per_product: median(results.map((r) => r.db_us / r.products)),
      cpu_us_per_product: median(results.map((r) => (r.node_us + r.db_us) / r.products)),
      products_per_second: median(results.map((r) => r.products / (r.wall_ms / 1000))),
      n: results.length,
    })),
  );
  if (flags.json) process.stdout.write(`${JSON.stringify({ products: Number(flags.products), rows }, null, 1)}\n`);
  else {
    console.log('| engine | tree | node µs/product | database µs/product | CPU µs/product | products/s |');
    console.log('|---|---|---|---|---|---|');
    for (const r of rows) {
      console.log(
        `| ${r.engine} | ${r.tree} | ${r.node_us_per_product.toFixed(0)} | ${r.db_us_per_product.toFixed(0)} | ${r.cpu_us_per_product.toFixed(0)} | ${r.products_per_second.toFixed(0)} |`,
      );
    }
  }
}

await main();
