// `npm run bench:writes`: do big writes stall reads? Two versions of the service side by side in one
// run: the candidate (this working tree, uncommitted changes included) and a baseline (a git ref,
// checked out into a temporary worktree that uses this tree's node_modules). Each version is driven
// only through its own CLI and HTTP API (no src/ imports here: the internal APIs change, those do not).
// Per version: its own `demo` builds the catalog (BENCH_PRODUCTS, 3 stores) once; every round serves a
// fresh copy of it with `serve` in a child process on 127.0.0.1, while one client (this process)
// reads in a loop (each write is sent by a client process of its own, as another integrator would),
// sequentially, GET /v1/stores and page 1 (per_page=200) in turn. Phases: idle (BENCH_IDLE_SECONDS),
// then during the EUR/GBP re-pricing (PUT .../exchange-rates/EUR/GBP, re-resolving the GBP store; the
// EUR store too before a changed rate re-resolved only the stores a cost converts differently into), then during an import of BENCH_IMPORT_PRODUCTS new products (NDJSON). A write's reads are
// the ones in flight at any moment while it was (counting only reads that started during the write
// would miss the one sent just before it and held for its whole length); idle reads are the ones that
// started and finished in the idle window. Versions alternate in rounds (baseline first
// in odd rounds, candidate first in even ones) so machine noise hits both alike; reads are pooled
// over the rounds, write durations are medians.
// Targets, for the candidate: during the re-pricing and during the import, slowest read
// <= 200 ms and p99 <= 50 ms; re-pricing duration <= 1.5 x the baseline's.
// The checkouts, the CLI runner and the clean-up are scripts/bench/baseline.ts, shared with bench:reads.
// Usage: npm run bench:writes -- [--baseline REF] [--json]
//   REF defaults to origin/main, else main, else HEAD~1. BENCH_ROUNDS (2), BENCH_PRODUCTS (100000),
//   BENCH_IDLE_SECONDS (3), BENCH_IMPORT_PRODUCTS (20000). Exits 0 whatever the verdicts.
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { spawn } from 'node:child_process';
import { buildDemo, cli, demoImportBody, exited, keepOutput, runSideBySide, track, type Checkout } from './baseline.js';

const PRODUCTS = Number(process.env.BENCH_PRODUCTS ?? 100_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const IDLE_SECONDS = Number(process.env.BENCH_IDLE_SECONDS ?? 3);
const IMPORT_PRODUCTS = Number(process.env.BENCH_IMPORT_PRODUCTS ?? 20_000);
const ADMIN_TOKEN = 'bench-writes-admin-token';
const TARGETS = { maxMs: 200, p99Ms: 50, repricingRatio: 1.5 };
const { values: flags } = parseArgs({ options: { baseline: { type: 'string' }, json: { type: 'boolean' } } });
// With --json, stdout carries only the result.
const log = (line: string) => (flags.json ? console.error(line) : console.log(line));

type Phase = 'idle' | 'repricing' | 'import';
const PHASES: Phase[] = ['idle', 'repricing', 'import'];
interface Version extends Checkout {
  database: string;
  merchantId: number;
  apiKey: string;
  reads: Record<Phase, number[]>;
  writeMs: { repricing: number[]; import: number[] };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const median = (xs: number[]) => {
  const sorted = [...xs].sort((a, b) => a - b);
  return (sorted[Math.floor((sorted.length - 1) / 2)]! + sorted[Math.ceil((sorted.length - 1) / 2)]!) / 2;
};
/** Nearest-rank percentile; NaN when there is nothing to rank. */
const percentile = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.max(0, Math.ceil(p * xs.length) - 1)] ?? NaN;

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net
      .createServer()
      .once('error', reject)
      .listen(0, '127.0.0.1', () => {
        const { port } = server.address() as net.AddressInfo;
        server.close(() => resolve(port));
      });
  });
}

/** `serve` on a copy of the database, ready when /readyz answers 200. */
async function startService(version: Version, database: string): Promise<{ base: string; stop: () => Promise<void> }> {
  const port = await freePort();
  const { child, output } = cli(version.dir, ['serve'], {
    CPS_DB_PATH: database,
    CPS_PORT: String(port),
    CPS_HOST: '127.0.0.1',
    CPS_ADMIN_TOKEN: ADMIN_TOKEN,
    CPS_DEMO_ON_EMPTY: 'false',
    CPS_LOG_LEVEL: 'silent',
    CPS_ACCESS_LOG: 'false',
    CPS_WEBHOOK_DISPATCHER: 'false',
    CPS_IMAGE_MIRRORING: 'false',
    // The reader must never be throttled: the limiter's bookkeeping still runs on every read.
    CPS_RATE_LIMIT_BURST: '1000000000',
    CPS_RATE_LIMIT_PER_SECOND: '1000000000',
  });
  const base = `http://127.0.0.1:${port}`;
  const stop = async () => {
    child.kill('SIGTERM');
    const killer = setTimeout(() => child.kill('SIGKILL'), 15_000);
    await exited(child);
    clearTimeout(killer);
  };
  for (const deadline = Date.now() + 120_000; ; ) {
    if (child.exitCode !== null) throw new Error(`${version.name}: serve exited ${child.exitCode}:\n${output()}`);
    const ready = await fetch(`${base}/readyz`).then(
      async (r) => (await r.arrayBuffer(), r.ok),
      () => false,
    );
    if (ready) return { base, stop };
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`${version.name}: not ready after 120 s:\n${output()}`);
    }
    await sleep(100);
  }
}

async function request(url: string, init: RequestInit & { token: string }): Promise<unknown> {
  const response = await fetch(url, { ...init, headers: { Authorization: `Bearer ${init.token}`, ...init.headers } });
  const text = await response.text();
  if (!response.ok) throw new Error(`${init.method ?? 'GET'} ${url}: ${response.status} ${text.slice(0, 500)}`);
  return text ? JSON.parse(text) : null;
}

/** One client reading in a loop, one request at a time; every read's start and latency. */
function startReader(base: string, apiKey: string) {
  const reads: { startedAt: number; endedAt: number }[] = [];
  const urls = [`${base}/v1/stores`, `${base}/v1/products?per_page=200`];
  let running = true;
  let failure: Error | null = null;
  const loop = (async () => {
    for (let i = 0; running; i++) {
      const startedAt = performance.now();
      const response = await fetch(urls[i % 2]!, { headers: { Authorization: `Bearer ${apiKey}` } });
      await response.arrayBuffer();
      if (response.status !== 200) throw new Error(`${urls[i % 2]}: ${response.status}`);
      reads.push({ startedAt, endedAt: performance.now() });
    }
  })().catch((error: unknown) => {
    failure = error instanceof Error ? error : new Error(String(error));
  });
  return {
    within: (from: number, to: number) => reads.filter((r) => r.startedAt >= from && r.endedAt <= to).map((r) => r.endedAt - r.startedAt),
    overlapping: (from: number, to: number) =>
      reads.filter((r) => r.startedAt < to && r.endedAt > from).map((r) => r.endedAt - r.startedAt),
    stop: async () => {
      running = false;
      await loop;
      if (failure) throw failure;
    },
  };
}

/**
 * A write sent by another client process (the writer and the reader must not share an event loop,
 * or the writer's own upload delays the reads measured). Returns its response and when the request
 * was sent and answered, on this process's performance.now() clock.
 */
async function timedWrite(
  tempDir: string,
  url: string,
  init: { method: string; token: string; contentType: string; body: string },
): Promise<{ from: number; to: number; result: any }> {
  const bodyFile = path.join(tempDir, `write-${Date.now()}.body`);
  fs.writeFileSync(bodyFile, init.body);
  const script = `
    const body = require('node:fs').readFileSync(${JSON.stringify(bodyFile)});
    const from = performance.timeOrigin + performance.now();
    fetch(${JSON.stringify(url)}, { method: ${JSON.stringify(init.method)}, body,
      headers: { Authorization: 'Bearer ' + ${JSON.stringify(init.token)}, 'Content-Type': ${JSON.stringify(init.contentType)} } })
      .then(async (response) => {
        const text = await response.text();
        const to = performance.timeOrigin + performance.now();
        process.stdout.write(JSON.stringify({ from, to, status: response.status, text }));
      });`;
  const child = track(spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] }));
  const output = keepOutput(child);
  await exited(child);
  fs.rmSync(bodyFile, { force: true });
  const answer = JSON.parse(output()) as { from: number; to: number; status: number; text: string };
  if (answer.status < 200 || answer.status > 299) throw new Error(`${init.method} ${url}: ${answer.status} ${answer.text.slice(0, 500)}`);
  // Epoch milliseconds to this process's performance.now().
  return {
    from: answer.from - performance.timeOrigin,
    to: answer.to - performance.timeOrigin,
    result: answer.text ? JSON.parse(answer.text) : null,
  };
}

async function runRound(version: Version, round: number, ndjson: string, tempDir: string): Promise<void> {
  const roundDir = path.join(tempDir, `${version.name}-round-${round}`);
  fs.mkdirSync(roundDir);
  const database = path.join(roundDir, 'catalog.db');
  fs.copyFileSync(version.database, database, fs.constants.COPYFILE_FICLONE);
  const service = await startService(version, database);
  const admin = `${service.base}/admin/v1/merchants/${version.merchantId}`;
  try {
    const rates = (await request(`${admin}/exchange-rates`, { token: ADMIN_TOKEN })) as {
      data: { base: string; quote: string; rate: string }[];
    };
    const current = rates.data.find((r) => r.base === 'EUR' && r.quote === 'GBP');
    if (!current) throw new Error(`${version.name}: the demo has no EUR/GBP rate`);
    const rate = (Number(current.rate) * 1.02).toFixed(4);
    const ukPrices = async () =>
      (
        (await request(`${service.base}/v1/products?store=uk&per_page=200`, { token: version.apiKey })) as { data: { prices: unknown }[] }
      ).data.map((p) => JSON.stringify(p.prices));
    const pricesBefore = await ukPrices();

    const reader = startReader(service.base, version.apiKey);
    await sleep(1000); // warm-up: the first reads after a start are not counted
    const idle = { from: performance.now(), to: 0 };
    await sleep(IDLE_SECONDS * 1000);
    idle.to = performance.now();
    const repricing = await timedWrite(tempDir, `${admin}/exchange-rates/EUR/GBP`, {
      method: 'PUT',
      token: ADMIN_TOKEN,
      contentType: 'application/json',
      body: JSON.stringify({ rate }),
    });
    await sleep(1000);
    const imported = await timedWrite(tempDir, `${admin}/imports`, {
      method: 'POST',
      token: ADMIN_TOKEN,
      contentType: 'application/x-ndjson',
      body: ndjson,
    });
    await reader.stop();

    // The writes did what they are timed for: prices in the GBP store moved, every line was applied.
    const pricesAfter = await ukPrices();
    const repriced = pricesAfter.filter((p, i) => p !== pricesBefore[i]).length;
    if (repriced === 0) throw new Error(`${version.name}: EUR/GBP ${current.rate} -> ${rate} changed no price on page 1 of uk`);
    if (imported.result.upserted !== IMPORT_PRODUCTS)
      throw new Error(`${version.name}: import upserted ${imported.result.upserted} of ${IMPORT_PRODUCTS}`);

    version.reads.idle.push(...reader.within(idle.from, idle.to));
    version.reads.repricing.push(...reader.overlapping(repricing.from, repricing.to));
    version.reads.import.push(...reader.overlapping(imported.from, imported.to));
    version.writeMs.repricing.push(repricing.to - repricing.from);
    version.writeMs.import.push(imported.to - imported.from);
    log(
      `round ${round} ${version.name.padEnd(9)} re-pricing EUR/GBP ${current.rate} -> ${rate}: ${(repricing.to - repricing.from).toFixed(0)} ms ` +
        `(${repriced}/${pricesBefore.length} of uk page 1 re-priced); import of ${IMPORT_PRODUCTS}: ${(imported.to - imported.from).toFixed(0)} ms`,
    );
  } finally {
    await service.stop();
    fs.rmSync(roundDir, { recursive: true, force: true });
  }
}

function report(versions: Version[]): void {
  const stats = (xs: number[]) => ({ reads: xs.length, p50: percentile(xs, 0.5), p99: percentile(xs, 0.99), max: percentile(xs, 1) });
  const [baseline, candidate] = versions as [Version, Version];
  const ratio = median(candidate.writeMs.repricing) / median(baseline.writeMs.repricing);
  const verdicts = [
    ...(['repricing', 'import'] as const).flatMap((phase) => {
      const s = stats(candidate.reads[phase]);
      return [
        { target: `${phase}: slowest read <= ${TARGETS.maxMs} ms`, measured: s.max, unit: 'ms', pass: s.max <= TARGETS.maxMs },
        { target: `${phase}: p99 read <= ${TARGETS.p99Ms} ms`, measured: s.p99, unit: 'ms', pass: s.p99 <= TARGETS.p99Ms },
      ];
    }),
    {
      target: `re-pricing duration candidate / baseline <= ${TARGETS.repricingRatio}`,
      measured: ratio,
      unit: '',
      pass: ratio <= TARGETS.repricingRatio,
    },
  ];
  if (flags.json) {
    console.log(
      JSON.stringify(
        {
          products: PRODUCTS,
          rounds: ROUNDS,
          import_products: IMPORT_PRODUCTS,
          versions: versions.map((v) => ({
            name: v.name,
            ref: v.ref,
            sha: v.sha,
            phases: Object.fromEntries(PHASES.map((phase) => [phase, stats(v.reads[phase])])),
            write_ms: v.writeMs,
          })),
          verdicts,
        },
        null,
        2,
      ),
    );
    return;
  }
  const ms = (x: number) => (Number.isNaN(x) ? '-' : x.toFixed(1)).padStart(8);
  console.log('');
  console.log(`${PRODUCTS} products, ${ROUNDS} round(s); reads pooled over the rounds, write durations: median (each round)`);
  console.log(
    `${'version'.padEnd(10)}${'phase'.padEnd(12)}${'reads'.padStart(7)}${'p50 ms'.padStart(8)}${'p99 ms'.padStart(8)}${'max ms'.padStart(8)}   write ms`,
  );
  for (const v of versions) {
    for (const phase of PHASES) {
      const s = stats(v.reads[phase]);
      const writes = phase === 'idle' ? [] : v.writeMs[phase];
      const write = writes.length ? `${median(writes).toFixed(0)} (${writes.map((w) => w.toFixed(0)).join(', ')})` : '-';
      console.log(`${v.name.padEnd(10)}${phase.padEnd(12)}${String(s.reads).padStart(7)}${ms(s.p50)}${ms(s.p99)}${ms(s.max)}   ${write}`);
    }
  }
  console.log('');
  console.log('targets, candidate:');
  for (const v of verdicts) {
    const measured = Number.isNaN(v.measured) ? 'nothing (no reads)' : `${v.measured.toFixed(v.unit ? 1 : 2)}${v.unit ? ` ${v.unit}` : ''}`;
    console.log(`  ${v.pass ? 'PASS' : 'FAIL'}  ${v.target}: measured ${measured}`);
  }
  const failed = verdicts.filter((v) => !v.pass).length;
  console.log(failed ? `\n*** ${failed} of ${verdicts.length} targets FAIL ***` : `\nall ${verdicts.length} targets PASS`);
}

await runSideBySide({ tempPrefix: 'cps-bench-writes-', baseline: flags.baseline, log }, async ({ tempDir, checkouts }) => {
  const versions: Version[] = checkouts.map((checkout) => ({
    ...checkout,
    database: path.join(tempDir, `${checkout.name}.db`),
    merchantId: 0,
    apiKey: '',
    reads: { idle: [], repricing: [], import: [] },
    writeMs: { repricing: [], import: [] },
  }));
  for (const v of versions) Object.assign(v, await buildDemo(v, v.database, PRODUCTS, log));
  const ndjson = demoImportBody(IMPORT_PRODUCTS, 'writes');
  for (let round = 1; round <= ROUNDS; round++) {
    for (const v of round % 2 ? versions : [...versions].reverse()) await runRound(v, round, ndjson, tempDir);
  }
  report(versions);
});
