// A small run of `npm run bench:cost` (scripts/bench/bench-cost.ts) on every `npm test`, so its shape
// stays right: every unit on both engines (SQLite only without PostgreSQL binaries) measured from
// serve's /proc figures, beside its reference, with the verdicts. The figures themselves belong to
// the benchmark and docs/benchmarks/log.md: nothing here asserts a time or a ratio.
import { describe, expect, it } from 'vitest';
import { runBenchScript } from '../support/bench-script.js';
import { findPostgresBinaries } from '../../scripts/dev/postgres-server.js';

const UNITS = ['import', 'unchanged', 'new_cost', 'image', 'delivery'];

interface Unit {
  unit: string;
  units: number;
  cpuMsPerUnit: number;
  serveMsPerUnit: number;
  dbMsPerUnit: number;
  threadsMsPerUnit: { main: number; workers: number; helpers: number; ended: number };
  perSecond: number;
  detail: Record<string, unknown>;
  statements: { statement: string; perUnit: number }[];
  reference?: { units: number; cpuMsPerUnit: number; perSecond: number };
}
interface Result {
  results: { engine: string; deadHostDownSeconds: number | null; units: Unit[] }[];
  verdicts: { engine: string; unit: string; value: number | null; met: boolean | null }[];
}

describe('bench:cost, small', () => {
  it('measures every unit on each engine with its reference and gives the verdicts', async () => {
    const engines = findPostgresBinaries() ? ['sqlite', 'postgres'] : ['sqlite'];
    const imported = 100;
    const { code, stdout, stderr } = await runBenchScript(
      'bench-cost.ts',
      [
        '--engine',
        engines.length === 2 ? 'both' : 'sqlite',
        '--products',
        '100',
        '--import-products',
        String(imported),
        '--reference-images',
        '100',
        '--reference-deliveries',
        '50',
        // A few deliveries of warm-up before the delivery unit's window (the outbox is small here).
        '--warmup-deliveries',
        '5',
        '--unit-seconds',
        '60',
        '--json',
      ],
      280_000,
    );
    expect(code, stderr).toBe(0);
    const result = JSON.parse(stdout) as Result;
    expect(result.results.map((r) => r.engine)).toEqual(engines);
    for (const engine of result.results) {
      const where = `${engine.engine}: ${stderr.slice(-3000)}`;
      // The demo's dead host was marked down before anything was measured.
      expect(engine.deadHostDownSeconds, where).not.toBeNull();
      expect(engine.units.map((u) => u.unit)).toEqual(UNITS);
      for (const unit of engine.units) {
        expect(unit.units, `${unit.unit} ${JSON.stringify(unit.detail)} ${where}`).toBeGreaterThan(0);
        expect(unit.serveMsPerUnit, `${unit.unit} ${where}`).toBeGreaterThan(0);
        expect(Number.isFinite(unit.perSecond), unit.unit).toBe(true);
        // The database server's CPU is counted on PostgreSQL only.
        if (engine.engine === 'sqlite') expect(unit.dbMsPerUnit).toBe(0);
        expect(unit.reference?.units, unit.unit).toBeGreaterThan(0);
        expect(unit.reference!.cpuMsPerUnit, unit.unit).toBeGreaterThan(0);
      }
      const byUnit = Object.fromEntries(engine.units.map((u) => [u.unit, u]));
      // Every line of each import applied; the imports' statements were counted.
      for (const unit of ['import', 'unchanged', 'new_cost']) expect(byUnit[unit]!.units).toBe(imported);
      expect(byUnit.import!.statements.length).toBeGreaterThan(0);
      // The images on the local origin were mirrored, at most the imported ones; the receiver got deliveries.
      expect(byUnit.image!.units).toBeLessThanOrEqual(imported * 2);
      expect(byUnit.image!.detail.origin_requests).toBeGreaterThan(0);
      expect(byUnit.delivery!.units).toBeGreaterThan(0);
      // Beside the window after the warm-up, the figure from /readyz on, warm-up included (the
      // unit itself when the warm-up drained this small outbox).
      const cold = byUnit.delivery!.detail.from_start as { units: number; cpuMsPerUnit: number };
      expect(cold.cpuMsPerUnit).toBeGreaterThan(0);
      if (byUnit.delivery!.detail.warmup_drained) expect(cold.units).toBe(byUnit.delivery!.units);
      else expect(cold.units).toBeGreaterThanOrEqual(byUnit.delivery!.units + 5);
    }
    // One verdict per unit on SQLite, two on PostgreSQL (CPU and rate against SQLite's).
    expect(result.verdicts).toHaveLength(UNITS.length * (engines.length === 2 ? 3 : 1));
  }, 300_000);
});
