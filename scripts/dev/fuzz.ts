// The full contract fuzz: at least 10,000 generated requests across every public and
// admin operation against a fresh service on 127.0.0.1; prints requests per operation and status
// and every failure with the seed that reproduces it. Exits 1 when anything failed.
//
//   npm run fuzz                                  a new random seed, 10,000 requests
//   npm run fuzz -- --seed 42 --requests 20000    a given seed and length
import { FUZZ_LIMITS, formatReport, runContractFuzz, startFuzzService } from '../../test/fuzz/engine.js';

function option(name: string): number | undefined {
  const index = process.argv.indexOf(`--${name}`);
  if (index < 0) return undefined;
  const value = Number(process.argv[index + 1]);
  if (!Number.isSafeInteger(value) || value < 0) throw new Error(`--${name} needs a non-negative integer`);
  return value;
}

const seed = option('seed') ?? Math.floor(Math.random() * 2 ** 31);
const requests = option('requests') ?? 10_000;
console.log(`contract fuzz: seed ${seed}, ${requests} requests (replay with: npm run fuzz -- --seed ${seed} --requests ${requests})`);

const service = await startFuzzService();
try {
  const report = await runContractFuzz(service, {
    seed,
    requests,
    limits: FUZZ_LIMITS,
    onProgress: (sent) => console.log(`  ${sent} requests sent`),
  });
  console.log(formatReport(report));
  process.exitCode = report.failures.length ? 1 : 0;
} finally {
  await service.close();
}
