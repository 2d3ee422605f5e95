// A CI-sized run of `npm run bench:scale` (scripts/bench/bench-scale.ts) on every
// `npm test`, so a regression in the *shape* of the service at work is caught here: a phase that
// never completes, a read that errors, a panel page or admin call that fails, a service that does not
// start, answer or exit on SIGTERM. The figures themselves (latencies, rates, verdicts against the
// issue's goals) belong to the benchmark and docs/benchmarks/log.md: nothing here asserts a time.
//
// The run: 1,000 products (2-5 images each; the demo's unresolvable host behind all of them, 200
// images of the first ones on the local origin) and 10 tenants of 30, every phase (a c i d e f h g b)
// with windows of 3 s, 20,000 old changes to prune and 2,000 deliveries in an endpoint's log; `serve` in child
// processes with every worker on, real HTTP on 127.0.0.1 only (the dead host's name is refused by
// the service's guard before any DNS query). No hanging image host
// (--hanging 0): a fetch hanging until the mirror's 15 s time-out would only make each SIGTERM wait
// for it (the benchmark measures that; this test only needs the exits).
import { describe, expect, it } from 'vitest';
import { runBenchScript } from '../support/bench-script.js';

const PHASES = ['a', 'c', 'i', 'd', 'e', 'f', 'h', 'g', 'b'];
/** The catalog, and what phases e and f import: enough for every phase to have work in its window. */
const PRODUCTS = 1000;

interface Stats {
  n: number;
  errors: number;
  p50: number | null;
  p99: number | null;
  max: number | null;
}
interface Phase {
  key: string;
  completed: boolean;
  seconds: number;
  first_answer_ms?: { stores_ms: number | null; page_ms: number | null; error?: string };
  reads: { all: Stats } & Record<string, Stats>;
  read_errors: string[];
  event_loop: { scrapes: number; scrapes_failed: number; max_ms: number | null };
  throughput: { value: number | null; unit: string; detail: Record<string, unknown> };
  pages?: { name: string; status: number; n: number; max: number | null; error?: string }[];
  verdicts: { goal: string; measured: string; pass: boolean }[];
}
interface Result {
  products: number;
  versions: { name: string; phases: Phase[]; shutdowns: { process: string; code: number | null; killed: boolean }[]; notes: string[] }[];
}

describe('bench:scale, CI-sized', () => {
  it('runs every phase against serve with every worker on, and each produces its figures without a failed read', async () => {
    const { code, stdout, stderr } = await runBenchScript(
      'bench-scale.ts',
      [
        '--products',
        String(PRODUCTS),
        // The live origin's backlog stays the default (400 per second of --phase-seconds: 1,200
        // images): with 200, phase a mirrored them all and phase c had nothing left to measure.
        '--json',
        '--phase-seconds',
        '3',
        '--tenants',
        '10',
        '--tenant-products',
        '30',
        '--seed-changes',
        '20000',
        '--seed-deliveries',
        '2000',
        '--endpoints',
        '4',
        '--hanging',
        '0',
      ],
      170_000,
    );
    expect(code, stderr).toBe(0);
    const result = JSON.parse(stdout) as Result;
    expect(result.products).toBe(PRODUCTS);
    expect(result.versions).toHaveLength(1);
    const [version] = result.versions;
    expect(version!.notes, 'nothing was skipped').toEqual([]);
    expect(version!.phases.map((p) => p.key)).toEqual(PHASES);

    for (const phase of version!.phases) {
      const where = `phase ${phase.key}: ${stderr.slice(-3000)}`;
      // Finished within its budget: a write answered, retention logged its pruning.
      expect(phase.completed, where).toBe(true);
      // The light reader read throughout, every kind of read, and every read answered 200.
      expect(phase.reads.all.n, where).toBeGreaterThan(0);
      expect(phase.read_errors, where).toEqual([]);
      expect(phase.reads.all.errors, where).toBe(0);
      for (const kind of ['page', 'stores', 'changes']) {
        if (phase.seconds >= 3) expect(phase.reads[kind]?.n ?? 0, `${where} (${kind})`).toBeGreaterThan(0);
      }
      expect(phase.reads.all.p99, where).not.toBeNull();
      // /metrics answered during the phase, with the event-loop figures.
      expect(phase.event_loop.scrapes - phase.event_loop.scrapes_failed, where).toBeGreaterThan(0);
      expect(phase.event_loop.max_ms, where).not.toBeNull();
      // The phase's own figure exists (its value is the benchmark's business).
      expect(phase.throughput.value, where).not.toBeNull();
      expect(Number.isFinite(phase.throughput.value), where).toBe(true);
      expect(phase.verdicts.length, where).toBeGreaterThan(0);
    }

    const byKey = Object.fromEntries(version!.phases.map((p) => [p.key, p]));
    // Every start answered its first reads.
    for (const key of ['a', 'g', 'b']) {
      expect(byKey[key]!.first_answer_ms?.stores_ms, key).not.toBeNull();
      expect(byKey[key]!.first_answer_ms?.page_ms, key).not.toBeNull();
    }
    // The writes did their work: the import applied every line, retention pruned what was seeded.
    expect(byKey.e!.throughput.detail.result).toMatchObject({ upserted: PRODUCTS });
    expect(byKey.g!.throughput.detail.pruned_ms_after_spawn).not.toBeNull();
    // Mirroring went on and the receivers got deliveries.
    expect(byKey.c!.throughput.detail.origin_fetches).toBeGreaterThan(0);
    // The dead host was marked down, its images left pending; a quiet window was measured; the 200
    // products on the second origin had every image fetched and mirrored.
    const dead = byKey.i!.throughput.detail as {
      dead_host: { down_since: string | null; images: { pending: number } };
      quiet: { seconds: number; cores: number; processes: unknown[] };
      fresh_images: number;
      mirrored_at_end: number;
      fresh_origin_fetches: number;
      first_mirrored_ms: number | null;
    };
    expect(dead.dead_host.down_since).not.toBeNull();
    expect(dead.dead_host.images.pending).toBeGreaterThan(0);
    expect(dead.quiet.seconds).toBeGreaterThan(0);
    expect(dead.quiet.processes).toHaveLength(1);
    expect(dead.fresh_images).toBe(700);
    expect(dead.mirrored_at_end).toBe(700);
    expect(dead.fresh_origin_fetches).toBe(700);
    expect(dead.first_mirrored_ms).not.toBeNull();
    expect(byKey.f!.throughput.detail.deliveries_in_phase).toBeGreaterThan(0);
    expect(byKey.b!.throughput.detail.merchants_delivered_to).toBeGreaterThan(0);
    // Every panel page and admin status call answered 200.
    expect(byKey.h!.pages!.length).toBeGreaterThanOrEqual(10);
    for (const page of byKey.h!.pages!) expect(page, page.name).toMatchObject({ status: 200, n: 5 });
    // Each SIGTERM ended its process cleanly (exit 0, never the bench's SIGKILL).
    expect(version!.shutdowns.length).toBe(3);
    for (const shutdown of version!.shutdowns) expect(shutdown, shutdown.process).toMatchObject({ code: 0, killed: false });
  }, 180_000);
});
