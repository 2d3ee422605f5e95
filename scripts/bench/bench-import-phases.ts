// `npx tsx scripts/bench/bench-import-phases.ts`: the CPU an imported line costs in each phase of an
// import job, the check of the file (with its chunks staged meanwhile) and the run that applies the
// chunks, for one or more source trees side by side on the same database (bench:cost measures the
// whole import inside a serve; this splits it, without the serve's HTTP and its other work).
//
// Per engine: the demo catalog (--products N, default 200) and one webhook endpoint (so each change
// writes its outbox row, as in bench:cost) are built into a fresh database (PostgreSQL: a throwaway
// server, non-durable), and the first tree imports --lines L new products (2 images each). Then,
// --rounds times, each tree in turn (the order alternating) runs in a process of its own (`node
// --import tsx`, its own src/) that opens the database as CPS_WORKERS=inline does (this process
// drives the import's run) and imports, --repeats times each: the same file again (unchanged), then
// the file with every cost moved (new cost: each store re-prices), alternating two costs. Measured
// per import: wall time and CPU (process.cpuUsage: every thread; on PostgreSQL the database server's
// processes from /proc) from the start to the staging (`staged`: every line checked, its chunks
// written) and from the staging to the end (the run applied every chunk). Reported: µs per line
// (node, database) per phase and the lines per second, the median of each tree; with --statements,
// each tree's statement counts per chunk (stderr).
//
// Usage: npx tsx scripts/bench/bench-import-phases.ts [--engine sqlite|postgres|both (both)] [--products N (200)]
//   [--lines L (20000)] [--rounds R (2)] [--repeats K (2)] [--tree DIR ...] (default: this checkout) [--statements] [--json]
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { demoImportBody } from './baseline.js';
import { postgresServerCpu } from './process-sampler.js';
import { inAlternatingRounds, median, onEachEngine, runInTree, serviceOfTree } from './tree-rounds.js';

const { values: flags } = parseArgs({
  options: {
    engine: { type: 'string', default: 'both' },
    products: { type: 'string', default: '200' },
    lines: { type: 'string', default: '20000' },
    rounds: { type: 'string', default: '2' },
    repeats: { type: 'string', default: '2' },
    tree: { type: 'string', multiple: true },
    statements: { type: 'boolean', default: false },
    json: { type: 'boolean', default: false },
    // Internal: one tree's measurement in this process.
    child: { type: 'string' },
    database: { type: 'string' },
    'data-dir': { type: 'string' },
    build: { type: 'boolean', default: false },
  },
});

const log = (line: string) => (flags.json ? console.error(line) : console.log(line));
const HERE = path.dirname(new URL(import.meta.url).pathname);
const LINES = Number(flags.lines);
const KINDS = ['unchanged', 'new_cost'] as const;
type Kind = (typeof KINDS)[number];

interface Phase {
  wall_ms: number;
  node_us: number;
  db_us: number;
}
interface Measured {
  kind: Kind;
  lines: number;
  check: Phase;
  apply: Phase;
}

const images = (n: number) => [`http://127.0.0.1:9/p/phases/${n}/1.jpg`, `http://127.0.0.1:9/p/phases/${n}/2.jpg`];

/** One tree's process: builds the catalog and imports the file once (--build), or measures the re-imports. */
async function child(tree: string, database: string, dataDir: string | undefined): Promise<void> {
  const { config, service } = await serviceOfTree(tree, database, 'bench-import-phases-admin-token-0123456789');
  const importOnce = async (body: string) => {
    const started = await service.imports.start(1, 'bench', null, body);
    await started.staged;
    return started.done;
  };
  if (flags.build) {
    const { buildDemoCatalog } = (await import(path.join(tree, 'src/admin/demo.ts'))) as typeof import('../../src/admin/demo.js');
    const demo = await buildDemoCatalog(service.admin, Number(flags.products));
    await service.endpoints.create(demo.merchant_id, { url: 'http://127.0.0.1:9/hooks/phases' });
    await importOnce(demoImportBody(LINES, 'phases', { images }));
    await service.close();
    return;
  }
  const bodies: Record<Kind, string[]> = {
    unchanged: [demoImportBody(LINES, 'phases', { images })],
    new_cost: [0.37, 0].map((costStep) => demoImportBody(LINES, 'phases', { images, costStep })),
  };
  const results: Measured[] = [];
  const cpu = () => ({ at: performance.now(), node: process.cpuUsage(), db: dataDir ? postgresServerCpu(dataDir) : 0 });
  const phase = (a: ReturnType<typeof cpu>, b: ReturnType<typeof cpu>): Phase => {
    const node = b.node.user + b.node.system - (a.node.user + a.node.system);
    return { wall_ms: b.at - a.at, node_us: node, db_us: b.db - a.db };
  };
  // A warm-up of each kind, not measured.
  for (const kind of KINDS) await importOnce(bodies[kind].at(-1)!);
  service.metrics.drainStatements();
  for (const kind of KINDS) {
    for (let i = 0; i < Number(flags.repeats); i++) {
      const body = bodies[kind][i % bodies[kind].length]!;
      const start = cpu();
      const started = await service.imports.start(1, 'bench', null, body);
      await started.staged;
      const staged = cpu();
      const result = await started.done;
      const end = cpu();
      results.push({ kind, lines: result.lines, check: phase(start, staged), apply: phase(staged, end) });
    }
    if (flags.statements) {
      const chunks = (Number(flags.repeats) * LINES) / config.limits.publishChunk;
      console.error(`  ${kind}: statements per chunk (calls, ms)`);
      for (const s of service.metrics.drainStatements().sort((a, b) => b.sumMs - a.sumMs)) {
        console.error(`    ${s.name}: ${(s.count / chunks).toFixed(2)}, ${(s.sumMs / chunks).toFixed(2)} ms`);
      }
    }
  }
  process.stdout.write(JSON.stringify(results));
  await service.close();
}

function runChild(tree: string, database: string, dataDir: string | undefined, build: boolean): Promise<string> {
  const args = ['--child', tree, '--database', database];
  args.push('--products', flags.products, '--lines', flags.lines, '--repeats', flags.repeats);
  if (dataDir) args.push('--data-dir', dataDir);
  if (build) args.push('--build');
  if (flags.statements) args.push('--statements');
  return runInTree(tree, path.join(HERE, 'bench-import-phases.ts'), args);
}

async function main(): Promise<void> {
  if (flags.child) return child(flags.child, flags.database!, flags['data-dir']);
  const trees = (flags.tree?.length ? flags.tree : [path.resolve(HERE, '../..')]).map((t) => path.resolve(t));
  const engines = flags.engine === 'both' ? ['sqlite', 'postgres'] : [flags.engine];
  const report: Record<string, Record<string, Measured[]>> = {};
  await onEachEngine(engines, 'bench-import-phases-', async ({ engine, database, dataDir }) => {
    const t0 = performance.now();
    await runChild(trees[0]!, database, undefined, true);
    log(`${engine}: demo catalog of ${flags.products} products and ${LINES} imported in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    const measured: Record<string, Measured[]> = Object.fromEntries(trees.map((t) => [t, []]));
    await inAlternatingRounds(trees, Number(flags.rounds), async (tree, round) => {
      if (flags.statements) console.error(`${engine} round ${round + 1} ${tree}:`);
      const results = JSON.parse(await runChild(tree, database, dataDir, false)) as Measured[];
      measured[tree]!.push(...results);
      const line = results
        .map(
          (r) =>
            `${r.kind} ${((r.check.node_us + r.apply.node_us) / r.lines).toFixed(0)}+${((r.check.db_us + r.apply.db_us) / r.lines).toFixed(0)} µs`,
        )
        .join(', ');
      log(`${engine} round ${round + 1} ${tree}: ${line} (load ${os.loadavg()[0]!.toFixed(1)})`);
    });
    report[engine] = measured;
  });
  const rows = Object.entries(report).flatMap(([engine, byTree]) =>
    Object.entries(byTree).flatMap(([tree, results]) =>
      KINDS.map((kind) => {
        const of = results.filter((r) => r.kind === kind);
        const per = (f: (r: Measured) => number) => median(of.map((r) => f(r) / r.lines));
        return {
          engine,
          tree,
          kind,
          check_node_us: per((r) => r.check.node_us),
          check_db_us: per((r) => r.check.db_us),
          apply_node_us: per((r) => r.apply.node_us),
          apply_db_us: per((r) => r.apply.db_us),
          cpu_us: per((r) => r.check.node_us + r.check.db_us + r.apply.node_us + r.apply.db_us),
          lines_per_second: median(of.map((r) => r.lines / ((r.check.wall_ms + r.apply.wall_ms) / 1000))),
          n: of.length,
        };
      }),
    ),
  );
  if (flags.json) process.stdout.write(`${JSON.stringify({ lines: LINES, rows }, null, 1)}\n`);
  else {
    console.log('| engine | tree | import | check: node + database µs/line | apply: node + database µs/line | CPU µs/line | lines/s |');
    console.log('|---|---|---|---|---|---|---|');
    for (const r of rows) {
      console.log(
        `| ${r.engine} | ${r.tree} | ${r.kind} | ${r.check_node_us.toFixed(1)} + ${r.check_db_us.toFixed(1)} | ${r.apply_node_us.toFixed(1)} + ${r.apply_db_us.toFixed(1)} | ${r.cpu_us.toFixed(1)} | ${r.lines_per_second.toFixed(0)} |`,
      );
    }
  }
}

await main();
