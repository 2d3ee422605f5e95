// `npm run bench:reads`: read throughput of GET /v1/products against the ceiling of this machine, for
// two versions side by side in one run: the candidate (this working tree) and a baseline (a git ref),
// checked out and cleaned up by scripts/bench/baseline.ts as for bench:writes. Each version is driven only
// through its own CLI and its own scripts/bench/bench-server.ts (no src/ imports here: the internal APIs
// change between versions; the bench server's contract does not: `bench-server.ts DB`, {port} over
// IPC, 'cpu' answered with process.cpuUsage(), POST/GET /__static, `X-Bench-App: quiet`).
// Per version: its own `demo` builds BENCH_PRODUCTS products in 3 stores; its bench server serves
// that database in a child process on 127.0.0.1. Both servers run throughout; autocannon drives the
// targets in rounds, each target for both versions back to back (which goes first alternates), so
// machine noise hits versions and targets alike:
//   static      - the same bytes as page 1, answered from memory by the same HTTP stack (the ceiling)
//   page1       - GET /v1/products?per_page=200
//   last        - GET /v1/products?per_page=200&page=<last>
//   ids         - GET /v1/products?ids= with 200 ids spread over the store
//   page1-gzip  - page 1 with Accept-Encoding: gzip (compression, for clients that ask;
//                 Answered from the cache of coded bodies after the first request)
//   page1-br    - page 1 with Accept-Encoding: br
//   page1-uncached, last-uncached, ids-uncached, page1-gzip-uncached, page1-br-uncached - the same
//                 from an app without the read cache of published bytes and without the cache of
//                 coded bodies (`X-Bench-App: uncached`): what the first reader of a page pays
//                 (a baseline without a read cache answers them as page1 ... ids)
//   page1-nolog - page 1 from an app with the access log off (what logging costs)
//   page1-fields, page1-fields-gzip, page1-fields-uncached - page 1 with `&fields=<--fields>` (a sparse
//                 fieldset, e.g. --fields id,sku,stock), measured only when --fields is given: what
//                 the cut-down page costs beside the whole one (a baseline without fields= answers 400)
// and once per round, not per version, the reference: scripts/bench/bench-reference-server.ts,
// bare node:http + better-sqlite3 in its own process answering page 1's payloads from the
// candidate's database file as one BLOB, the least a server can do for that page.
// Req/s and server CPU per request (the server's CPU time around each run: the figure that stays
// meaningful when the load generator, not the server, limits req/s) are medians over the rounds.
// Verdicts: the candidate's page 1 / static and last page / page 1 (req/s) are at least
// the baseline's, within 5 % of noise. For reference, the absolute levels first recorded in
// docs/benchmarks/log.md ("today's level", about 0.60 and 0.95) are printed too; autocannon sends no Accept-Encoding unless told.
// The read path's targets (docs/benchmarks/log.md, "Reads close to the limit") are printed as verdicts on the candidate: CPU per request of page 1 and the
// last page at most 1.5x the reference's, ?ids= at most 2x; a compressed page 1 at most the plain
// one + 0.3 ms; page 1 on the wire at most 1.25x the sizes recorded there. The same figures for a first
// read (uncached: both caches missed) are printed after them, for the record.
// Usage: npm run bench:reads -- [--baseline REF] [--json] [--only page1,last,...] [--fields id,sku,stock]
//   --only measures those targets alone (and the reference), and prints their table without the
//   verdicts, which need every target: a quick side-by-side check of one read.
//   REF defaults to origin/main, else main, else HEAD~1. BENCH_PRODUCTS (100000), BENCH_SECONDS (5),
//   BENCH_ROUNDS (3), BENCH_CONNECTIONS (8). Exits 0 whatever the verdicts.
import http from 'node:http';
import path from 'node:path';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import Database from 'better-sqlite3';
import { buildDemo, runSideBySide, startBenchServerProcess, type BenchServerProcess as BenchServer, type Checkout } from './baseline.js';

const PRODUCTS = Number(process.env.BENCH_PRODUCTS ?? 100_000);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 8);
const WARM_UP_SECONDS = 2;
/** Ratios of the candidate may fall this far below the baseline's before they fail: the noise of this machine. */
const NOISE = 0.05;
/** The first recorded "today's level" (docs/benchmarks/log.md), printed for reference. */
const REFERENCE = { page1PerStatic: 0.6, lastPerPage1: 0.95 };
/** The read path's limits: CPU per request against the reference target, and page 1 on the wire before it (gzip 6, brotli 4). */
const ISSUE_15 = { pagePerReference: 1.5, idsPerReference: 2, codingUs: 300, wireFactor: 1.25, gzipBytes: 11_201, brBytes: 11_047 };
const { values: flags } = parseArgs({
  options: { baseline: { type: 'string' }, json: { type: 'boolean' }, only: { type: 'string' }, fields: { type: 'string' } },
});
// With --json, stdout carries only the result.
const log = (line: string) => (flags.json ? console.error(line) : console.log(line));

const TARGETS = [
  'static',
  'page1',
  'last',
  'ids',
  'page1-gzip',
  'page1-br',
  'page1-uncached',
  'last-uncached',
  'ids-uncached',
  'page1-gzip-uncached',
  'page1-br-uncached',
  'page1-nolog',
  'page1-fields',
  'page1-fields-gzip',
  'page1-fields-uncached',
] as const;
type Target = (typeof TARGETS)[number];
const isFieldsTarget = (t: string) => t.startsWith('page1-fields');
/** The targets this run measures: all (the page1-fields ones with --fields alone), or those --only names. */
const MEASURED: readonly Target[] = flags.only
  ? flags.only.split(',').map((t) => {
      if (!(TARGETS as readonly string[]).includes(t)) throw new Error(`--only takes targets of ${TARGETS.join(',')}, got "${t}"`);
      if (isFieldsTarget(t) && !flags.fields) throw new Error(`--only ${t} needs --fields`);
      return t as Target;
    })
  : TARGETS.filter((t) => flags.fields || !isFieldsTarget(t));
/** Page 1 with the sparse fieldset --fields names (page 1 itself without it: not measured then). */
const fieldsQuery = flags.fields ? `&fields=${flags.fields}` : '';
interface Version extends Checkout {
  server: BenchServer;
  requests: Record<Target, { url: string; headers: Record<string, string> }>;
  bytes: { page1: number; last: number; lastPage: number; gzip: number | null; br: number | null };
  results: Record<Target, { rps: number[]; cpu: number[] }>;
  /** Where page 1's payloads are: for the reference target. */
  page1: { storeId: number; fromId: number; toId: number; database: string };
}
interface Reference {
  server: BenchServer;
  url: string;
  results: { rps: number[]; cpu: number[] };
}

const median = (xs: number[]) => {
  const sorted = [...xs].sort((a, b) => a - b);
  return (sorted[Math.floor((sorted.length - 1) / 2)]! + sorted[Math.ceil((sorted.length - 1) / 2)]!) / 2;
};

/** The version's own scripts/bench/bench-server.ts on `database`, run from its tree. */
function startBenchServer(checkout: Checkout, database: string): Promise<BenchServer> {
  return startBenchServerProcess(checkout.dir, 'bench-server.ts', database, checkout.name);
}

/** Bytes on the wire of a coded response (fetch would decode it; node:http does not); null when not coded. */
function codedSize(url: string, headers: Record<string, string>): Promise<number | null> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { headers }, (res) => {
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
        });
        res.on('end', () => resolve(res.headers['content-encoding'] ? size : null));
      })
      .on('error', reject);
  });
}

/** Starts the version's server on its built catalog, fetches page 1 and the last page, arms /__static. */
async function prepare(
  checkout: Checkout,
  database: string,
  { apiKey, merchantId }: { apiKey: string; merchantId: number },
): Promise<Version> {
  const server = await startBenchServer(checkout, database);
  try {
    const { base } = server;
    const headers = { Authorization: `Bearer ${apiKey}` };
    const get = async (url: string) => {
      const response = await fetch(url, { headers });
      const text = await response.text();
      if (!response.ok) throw new Error(`${checkout.name}: GET ${url}: ${response.status} ${text.slice(0, 500)}`);
      return text;
    };
    const page1 = await get(`${base}/v1/products?per_page=200`);
    const lastPage = (JSON.parse(page1) as { meta: { last_page: number } }).meta.last_page;
    const last = await get(`${base}/v1/products?per_page=200&page=${lastPage}`);
    // Page 1's store and product range (the reference target), and 200 ids spread over the store.
    const first = JSON.parse(page1) as { data: { id: number }[]; store: string };
    const db = new Database(database, { readonly: true });
    let storeId: number;
    let spread: number[];
    try {
      storeId = db.prepare('SELECT id FROM stores WHERE merchant_id = ? AND slug = ?').pluck().get(merchantId, first.store) as number;
      const all = db
        .prepare('SELECT product_id FROM published_products WHERE store_id = ? ORDER BY product_id')
        .pluck()
        .all(storeId) as number[];
      spread = Array.from({ length: Math.min(200, all.length) }, (_, i) => all[Math.floor((i * all.length) / Math.min(200, all.length))]!);
    } finally {
      db.close();
    }
    const armed = await fetch(`${base}/__static`, { method: 'POST', body: page1 });
    if (!armed.ok) throw new Error(`${checkout.name}: POST /__static: ${armed.status}`);
    const page1Url = `${base}/v1/products?per_page=200`;
    return {
      ...checkout,
      server,
      requests: {
        static: { url: `${base}/__static`, headers },
        page1: { url: page1Url, headers },
        last: { url: `${base}/v1/products?per_page=200&page=${lastPage}`, headers },
        ids: { url: `${base}/v1/products?ids=${spread.join(',')}`, headers },
        'page1-gzip': { url: page1Url, headers: { ...headers, 'Accept-Encoding': 'gzip' } },
        'page1-br': { url: page1Url, headers: { ...headers, 'Accept-Encoding': 'br' } },
        'page1-uncached': { url: page1Url, headers: { ...headers, 'X-Bench-App': 'uncached' } },
        'last-uncached': { url: `${base}/v1/products?per_page=200&page=${lastPage}`, headers: { ...headers, 'X-Bench-App': 'uncached' } },
        'ids-uncached': { url: `${base}/v1/products?ids=${spread.join(',')}`, headers: { ...headers, 'X-Bench-App': 'uncached' } },
        'page1-gzip-uncached': { url: page1Url, headers: { ...headers, 'Accept-Encoding': 'gzip', 'X-Bench-App': 'uncached' } },
        'page1-br-uncached': { url: page1Url, headers: { ...headers, 'Accept-Encoding': 'br', 'X-Bench-App': 'uncached' } },
        'page1-nolog': { url: page1Url, headers: { ...headers, 'X-Bench-App': 'quiet' } },
        'page1-fields': { url: `${page1Url}${fieldsQuery}`, headers },
        'page1-fields-gzip': { url: `${page1Url}${fieldsQuery}`, headers: { ...headers, 'Accept-Encoding': 'gzip' } },
        'page1-fields-uncached': { url: `${page1Url}${fieldsQuery}`, headers: { ...headers, 'X-Bench-App': 'uncached' } },
      },
      bytes: {
        page1: Buffer.byteLength(page1),
        last: Buffer.byteLength(last),
        lastPage,
        gzip: await codedSize(page1Url, { ...headers, 'Accept-Encoding': 'gzip' }),
        br: await codedSize(page1Url, { ...headers, 'Accept-Encoding': 'br' }),
      },
      results: Object.fromEntries(TARGETS.map((name) => [name, { rps: [], cpu: [] }])) as unknown as Version['results'],
      page1: { storeId, fromId: first.data[0]!.id, toId: first.data.at(-1)!.id, database },
    };
  } catch (error) {
    await server.stop();
    throw error;
  }
}

/** One autocannon run of one target on one version (or of the reference); counted unless it is the warm-up round. */
async function measure(version: Version | Reference, target: Target | 'reference', round: number): Promise<void> {
  const [name, request, results] =
    'requests' in version
      ? [version.name, version.requests[target as Target], version.results[target as Target]]
      : ['-', { url: version.url, headers: {} }, version.results];
  const cpuBefore = await version.server.cpu();
  const run = await autocannon({ ...request, connections: CONNECTIONS, duration: round === 0 ? WARM_UP_SECONDS : SECONDS });
  const cpuPerRequest = ((await version.server.cpu()) - cpuBefore) / run.requests.total;
  if (run.non2xx || run.errors) throw new Error(`${name} ${target}: ${run.non2xx} non-2xx, ${run.errors} errors`);
  if (round === 0) return;
  results.rps.push(run.requests.average);
  results.cpu.push(cpuPerRequest);
  log(
    `round ${round} ${target.padEnd(19)} ${name.padEnd(9)} ${run.requests.average.toFixed(0).padStart(6)} req/s  p99 ${String(run.latency.p99).padStart(4)} ms  server CPU ${cpuPerRequest.toFixed(0).padStart(5)} µs/request`,
  );
}

function summary(v: Version) {
  const rps = (t: Target) => median(v.results[t].rps);
  const cpu = (t: Target) => median(v.results[t].cpu);
  return {
    targets: Object.fromEntries(
      TARGETS.map((t) => [t, { rps: rps(t), cpu_us: cpu(t), rps_rounds: v.results[t].rps, cpu_us_rounds: v.results[t].cpu }]),
    ) as Record<Target, { rps: number; cpu_us: number; rps_rounds: number[]; cpu_us_rounds: number[] }>,
    ratios: {
      page1_per_static: rps('page1') / rps('static'),
      last_per_page1: rps('last') / rps('page1'),
      // As throughput (1 / CPU per request): what the server alone would allow.
      page1_per_static_cpu: cpu('static') / cpu('page1'),
      last_per_page1_cpu: cpu('page1') / cpu('last'),
      log_on_per_off: rps('page1') / rps('page1-nolog'),
    },
  };
}

/** The read path's figures of one version against the reference's CPU per request (µs). */
function againstReference(v: Version, s: ReturnType<typeof summary>, referenceUs: number) {
  const cpu = (t: Target) => s.targets[t].cpu_us;
  return {
    page1_per_reference: cpu('page1') / referenceUs,
    last_per_reference: cpu('last') / referenceUs,
    ids_per_reference: cpu('ids') / referenceUs,
    // CPU a compressed page 1 costs beyond the plain one, µs.
    gzip_extra_us: cpu('page1-gzip') - cpu('page1'),
    br_extra_us: cpu('page1-br') - cpu('page1'),
    gzip_uncached_extra_us: cpu('page1-gzip-uncached') - cpu('page1-uncached'),
    br_uncached_extra_us: cpu('page1-br-uncached') - cpu('page1-uncached'),
    page1_uncached_per_reference: cpu('page1-uncached') / referenceUs,
    last_uncached_per_reference: cpu('last-uncached') / referenceUs,
    ids_uncached_per_reference: cpu('ids-uncached') / referenceUs,
    gzip_wire_per_issue: (v.bytes.gzip ?? Number.NaN) / ISSUE_15.gzipBytes,
    br_wire_per_issue: (v.bytes.br ?? Number.NaN) / ISSUE_15.brBytes,
  };
}

function report(versions: [Version, Version], reference: Reference): void {
  const [baseline, candidate] = versions;
  const [b, c] = [summary(baseline), summary(candidate)];
  const referenceUs = median(reference.results.cpu);
  const referenceRps = median(reference.results.rps);
  const [b15, c15] = [againstReference(baseline, b, referenceUs), againstReference(candidate, c, referenceUs)];
  type Figure = keyof typeof c15;
  /** Each figure of the candidate (and the baseline's) against its read-path limit. */
  const limited = (rows: readonly (readonly [string, Figure, number, string])[]) =>
    rows.map(([label, key, limit, unit]) => ({
      label,
      limit: `${limit}${unit}`,
      candidate: c15[key],
      baseline: b15[key],
      within: c15[key] <= limit,
    }));
  const issue15 = limited([
    ['page 1 CPU / reference', 'page1_per_reference', ISSUE_15.pagePerReference, 'x'],
    ['last page CPU / reference', 'last_per_reference', ISSUE_15.pagePerReference, 'x'],
    ['?ids= CPU / reference', 'ids_per_reference', ISSUE_15.idsPerReference, 'x'],
    ['page 1 gzip CPU - page 1', 'gzip_extra_us', ISSUE_15.codingUs, ' µs'],
    ['page 1 br CPU - page 1', 'br_extra_us', ISSUE_15.codingUs, ' µs'],
    ['page 1 gzip on the wire / 11,201 bytes', 'gzip_wire_per_issue', ISSUE_15.wireFactor, 'x'],
    ['page 1 br on the wire / 11,047 bytes', 'br_wire_per_issue', ISSUE_15.wireFactor, 'x'],
  ]).map(({ label, limit, within, ...figures }) => ({ target: `${label} <= ${limit}`, ...figures, pass: within }));
  // A first read (both caches missed), against the same limits: for the record, not a verdict.
  const firstRead = limited([
    ['page 1 uncached CPU / reference', 'page1_uncached_per_reference', ISSUE_15.pagePerReference, 'x'],
    ['last page uncached CPU / reference', 'last_uncached_per_reference', ISSUE_15.pagePerReference, 'x'],
    ['?ids= uncached CPU / reference', 'ids_uncached_per_reference', ISSUE_15.idsPerReference, 'x'],
    ['page 1 gzip uncached CPU - page 1 uncached', 'gzip_uncached_extra_us', ISSUE_15.codingUs, ' µs'],
    ['page 1 br uncached CPU - page 1 uncached', 'br_uncached_extra_us', ISSUE_15.codingUs, ' µs'],
  ]).map(({ label, limit, ...figures }) => ({ target: `${label} (limit ${limit})`, ...figures }));
  const verdicts = (
    [
      ['page 1 / static', 'page1_per_static'],
      ['last page / page 1', 'last_per_page1'],
    ] as const
  ).map(([label, key]) => ({
    target: `${label} (req/s): candidate >= baseline x ${(1 - NOISE).toFixed(2)}`,
    candidate: c.ratios[key],
    baseline: b.ratios[key],
    pass: c.ratios[key] >= b.ratios[key] * (1 - NOISE),
  }));
  const issue10Levels = [
    {
      figure: 'page 1 / static (req/s)',
      level: REFERENCE.page1PerStatic,
      candidate: c.ratios.page1_per_static,
      baseline: b.ratios.page1_per_static,
    },
    {
      figure: 'last page / page 1 (req/s)',
      level: REFERENCE.lastPerPage1,
      candidate: c.ratios.last_per_page1,
      baseline: b.ratios.last_per_page1,
    },
  ];
  const candidatePerBaseline = Object.fromEntries(
    TARGETS.map((t) => [
      t,
      {
        rps: c.targets[t].rps / b.targets[t].rps,
        cpu: c.targets[t].cpu_us / b.targets[t].cpu_us,
      },
    ]),
  ) as Record<Target, { rps: number; cpu: number }>;
  if (flags.json) {
    console.log(
      JSON.stringify(
        {
          products: PRODUCTS,
          rounds: ROUNDS,
          seconds: SECONDS,
          connections: CONNECTIONS,
          versions: versions.map((v, i) => ({ name: v.name, ref: v.ref, sha: v.sha, bytes: v.bytes, ...[b, c][i] })),
          candidate_per_baseline: candidatePerBaseline,
          verdicts,
          reference: issue10Levels,
          reference_target: {
            rps: referenceRps,
            cpu_us: referenceUs,
            rps_rounds: reference.results.rps,
            cpu_us_rounds: reference.results.cpu,
          },
          issue15,
          first_read: firstRead,
        },
        null,
        2,
      ),
    );
    return;
  }
  const fixed = (x: number, digits = 2) => (Number.isFinite(x) ? x.toFixed(digits) : '-');
  console.log('');
  console.log(
    `${PRODUCTS} products, ${ROUNDS} round(s) of ${SECONDS} s per target and version, ${CONNECTIONS} connections; medians over the rounds`,
  );
  console.log(
    `${'target'.padEnd(20)}${'baseline req/s'.padStart(15)}${'CPU µs'.padStart(8)}${'candidate req/s'.padStart(17)}${'CPU µs'.padStart(8)}${'cand/base req/s'.padStart(17)}${'CPU'.padStart(7)}`,
  );
  for (const t of MEASURED) {
    console.log(
      `${t.padEnd(20)}${fixed(b.targets[t].rps, 0).padStart(15)}${fixed(b.targets[t].cpu_us, 0).padStart(8)}` +
        `${fixed(c.targets[t].rps, 0).padStart(17)}${fixed(c.targets[t].cpu_us, 0).padStart(8)}` +
        `${fixed(candidatePerBaseline[t].rps).padStart(17)}${fixed(candidatePerBaseline[t].cpu).padStart(7)}`,
    );
  }
  console.log(
    `${'reference'.padEnd(20)}${fixed(referenceRps, 0).padStart(15)}${fixed(referenceUs, 0).padStart(8)}   (one process for both: node:http + better-sqlite3, page 1's payloads as one BLOB)`,
  );
  if (flags.only) {
    for (const t of MEASURED)
      console.log(
        `${t} CPU / reference: baseline ${fixed(b.targets[t].cpu_us / referenceUs)}, candidate ${fixed(c.targets[t].cpu_us / referenceUs)}`,
      );
    console.log('(--only: no ratios or verdicts, they need every target)');
    return;
  }
  console.log('');
  console.log(`${'ratio'.padEnd(44)}${'baseline'.padStart(9)}${'candidate'.padStart(10)}`);
  const ratioLine = (label: string, key: keyof typeof b.ratios) =>
    console.log(`${label.padEnd(44)}${fixed(b.ratios[key]).padStart(9)}${fixed(c.ratios[key]).padStart(10)}`);
  ratioLine('page 1 / static (req/s)', 'page1_per_static');
  ratioLine('last page / page 1 (req/s)', 'last_per_page1');
  ratioLine('page 1 / static (1 / CPU per request)', 'page1_per_static_cpu');
  ratioLine('last page / page 1 (1 / CPU per request)', 'last_per_page1_cpu');
  ratioLine('page 1 with the access log / without (req/s)', 'log_on_per_off');
  console.log('');
  for (const v of versions) {
    const coded = (size: number | null) => (size === null ? 'not coded' : `${size} bytes (${((size / v.bytes.page1) * 100).toFixed(1)} %)`);
    console.log(
      `${v.name.padEnd(9)} page 1 ${v.bytes.page1} bytes, last page (${v.bytes.lastPage}) ${v.bytes.last} bytes; page 1 on the wire with gzip ${coded(v.bytes.gzip)}, with br ${coded(v.bytes.br)}`,
    );
  }
  console.log('');
  console.log('targets, candidate against the baseline measured in this run:');
  for (const v of verdicts)
    console.log(`  ${v.pass ? 'PASS' : 'FAIL'}  ${v.target}: candidate ${fixed(v.candidate)}, baseline ${fixed(v.baseline)}`);
  console.log(`for reference, the first recorded "today's level" (absolute figures move with the machine's load; not a verdict):`);
  for (const r of issue10Levels)
    console.log(`  ${r.figure} about ${r.level.toFixed(2)}: candidate ${fixed(r.candidate)}, baseline ${fixed(r.baseline)}`);
  console.log(`read-path targets, the candidate (baseline for comparison; reference ${fixed(referenceUs, 0)} µs CPU per request):`);
  for (const v of issue15) {
    const digits = v.target.endsWith('µs') ? 0 : 2;
    console.log(
      `  ${v.pass ? 'PASS' : 'FAIL'}  ${v.target}: candidate ${fixed(v.candidate, digits)}, baseline ${fixed(v.baseline, digits)}`,
    );
  }
  console.log('a first read (no read cache, no coded-body cache), for the record:');
  for (const v of firstRead) {
    const digits = v.target.endsWith('µs)') ? 0 : 2;
    console.log(
      `  ${v.within ? 'within' : 'beyond'}  ${v.target}: candidate ${fixed(v.candidate, digits)}, baseline ${fixed(v.baseline, digits)}`,
    );
  }
  const failed = verdicts.filter((v) => !v.pass).length + issue15.filter((v) => !v.pass).length;
  const all = verdicts.length + issue15.length;
  console.log(failed ? `\n*** ${failed} of ${all} targets FAIL ***` : `\nall ${all} targets PASS`);
}

await runSideBySide({ tempPrefix: 'cps-bench-reads-', baseline: flags.baseline, log }, async ({ tempDir, checkouts }) => {
  const versions: Version[] = [];
  let reference: Reference | undefined;
  try {
    // One after the other: two catalog builds at once would each take the other's CPU.
    // Both catalogs are built before either server starts: a server left idle while the other
    // version's catalog is built (~15 s of heavy writes) measured up to 2x the CPU on the targets
    // that allocate most, for the rest of the run (a same-commit control run showed it).
    const databases = checkouts.map((checkout) => path.join(tempDir, `${checkout.name}.db`));
    const demos = [];
    for (const [i, checkout] of checkouts.entries()) demos.push(await buildDemo(checkout, databases[i]!, PRODUCTS, log));
    for (const [i, checkout] of checkouts.entries()) versions.push(await prepare(checkout, databases[i]!, demos[i]!));
    // The reference reads the candidate's file with the candidate's script (it has none in older versions).
    const candidate = versions.at(-1)!;
    const { storeId, fromId, toId, database } = candidate.page1;
    const server = await startBenchServerProcess(candidate.dir, 'bench-reference-server.ts', database, candidate.name);
    reference = { server, url: `${server.base}/?store=${storeId}&from=${fromId}&to=${toId}`, results: { rps: [], cpu: [] } };
    const referenceBytes = Buffer.byteLength(await (await fetch(reference.url)).text());
    log(`reference: page 1's payloads from ${path.basename(database)}, ${referenceBytes} bytes`);
    for (const v of versions) {
      log(`${v.name}: page 1 ${v.bytes.page1} bytes; last page (${v.bytes.lastPage}) ${v.bytes.last} bytes`);
      if (flags.fields) {
        const sparse = await fetch(v.requests['page1-fields'].url, { headers: v.requests['page1-fields'].headers });
        log(`${v.name}: page 1 with fields=${flags.fields}: ${sparse.status}, ${Buffer.byteLength(await sparse.text())} bytes`);
      }
    }
    // Round 0 warms the JIT and the page cache and is not counted. Which version goes first
    // alternates from one target to the next and from one round to the next.
    for (let round = 0; round <= ROUNDS; round++) {
      await measure(reference, 'reference', round);
      for (const [i, target] of MEASURED.entries()) {
        for (const v of (round + i) % 2 ? [...versions].reverse() : versions) await measure(v, target, round);
      }
    }
    report(versions as [Version, Version], reference);
  } finally {
    await reference?.server.stop();
    for (const v of versions) await v.server.stop();
  }
});
