// `npm run bench:coding -- BODY.json`: which gzip level and brotli quality the compression of JSON
// reads uses (src/http/compression.ts). For every level: one-shot CPU per coding of the
// body (the mean over many runs, and the median wall time, zlib's sync API so the figure is the coding alone), the coded
// size, and CPU per saved kilobyte. BODY is a page as the service sends it (for example
// `curl -H "Authorization: Bearer $KEY" ".../v1/products?per_page=200" > page1.json`).
// Usage: npm run bench:coding -- BODY [--json]
import fs from 'node:fs';
import { parseArgs } from 'node:util';
import zlib from 'node:zlib';

const { values: flags, positionals } = parseArgs({ allowPositionals: true, options: { json: { type: 'boolean' } } });
const [file] = positionals;
if (!file) throw new Error('usage: bench-coding BODY.json');
const body = fs.readFileSync(file);
const RUNS = Number(process.env.BENCH_RUNS ?? 200);

const brotliParams = (quality: number): zlib.BrotliOptions => ({
  params: {
    [zlib.constants.BROTLI_PARAM_QUALITY]: quality,
    [zlib.constants.BROTLI_PARAM_MODE]: zlib.constants.BROTLI_MODE_TEXT,
    [zlib.constants.BROTLI_PARAM_SIZE_HINT]: body.length,
    [zlib.constants.BROTLI_PARAM_LGWIN]: Math.min(22, Math.max(16, Math.ceil(Math.log2(body.length)))),
  },
});

const levels: { coding: string; level: number; code: () => Buffer }[] = [
  ...[1, 2, 3, 4, 5, 6, 9].map((level) => ({ coding: 'gzip', level, code: () => zlib.gzipSync(body, { level }) })),
  ...[0, 1, 2, 3, 4, 5].map((level) => ({ coding: 'br', level, code: () => zlib.brotliCompressSync(body, brotliParams(level)) })),
];

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const rows = levels.map(({ coding, level, code }) => {
  for (let i = 0; i < 20; i++) code(); // warm up
  // CPU over all runs (getrusage is too coarse for one run of ~100 µs), and the median wall time of one.
  const wall: number[] = [];
  let size = 0;
  const before = process.cpuUsage();
  for (let i = 0; i < RUNS; i++) {
    const started = performance.now();
    size = code().length;
    wall.push((performance.now() - started) * 1000);
  }
  const used = process.cpuUsage(before);
  const us = (used.user + used.system) / RUNS;
  return {
    coding,
    level,
    cpu_us: us,
    wall_us: median(wall),
    bytes: size,
    ratio: size / body.length,
    us_per_saved_kb: us / ((body.length - size) / 1024),
  };
});

if (flags.json) {
  console.log(JSON.stringify({ body_bytes: body.length, runs: RUNS, levels: rows }, null, 2));
} else {
  console.log(`${body.length} bytes, CPU: mean over ${RUNS} one-shot codings per level; wall: their median`);
  console.log(
    `${'coding'.padEnd(8)}${'level'.padStart(6)}${'CPU µs'.padStart(9)}${'wall µs'.padStart(9)}${'bytes'.padStart(9)}${'ratio'.padStart(8)}${'µs per saved KB'.padStart(17)}`,
  );
  for (const r of rows) {
    console.log(
      `${r.coding.padEnd(8)}${String(r.level).padStart(6)}${r.cpu_us.toFixed(0).padStart(9)}${r.wall_us.toFixed(0).padStart(9)}${String(r.bytes).padStart(9)}` +
        `${(r.ratio * 100).toFixed(1).padStart(7)}%${r.us_per_saved_kb.toFixed(2).padStart(17)}`,
    );
  }
}
