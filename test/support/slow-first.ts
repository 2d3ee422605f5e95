// The order vitest starts test files in. With several forks the run ends when its longest file
// does: started last, a 3-minute file alone on one fork is 3 minutes of the run. vitest's own order
// runs one project after the other (every postgres file before any sqlite one), longest first only
// within each, and by file size when it has no timings (a clean clone), which starts the short
// files of the longest runs late. Here: every file by its last duration (node_modules/.vite), the
// files known to take longest first when there is none, across both projects; then the short ones
// a project at a time.
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/** `project:path`, longest first (`.ci/run` on 2 cores, one fork, 2026-11-29: 25 s to 230 s each). */
export const LONGEST = [
  'sqlite:test/cli.test.ts',
  'sqlite:test/scale/bench-cost.test.ts',
  'sqlite:test/scale/bench-scale.test.ts',
  'sqlite:test/client/package.test.ts',
  'postgres:test/faults/import.test.ts',
  'sqlite:test/operations/backup-and-shutdown.test.ts',
  'sqlite:test/cli-arguments.test.ts',
  'postgres:test/storage/bounded-statements.test.ts',
  'postgres:test/faults/repricing.test.ts',
  'sqlite:test/images/operator-tools.test.ts',
  'postgres:test/webhooks/secret-rotation-cli.test.ts',
  'postgres:test/storage/postgres.test.ts',
  'sqlite:test/faults/import.test.ts',
  'sqlite:test/webhooks/secret-rotation-cli.test.ts',
  'postgres:test/changes/feed.test.ts',
  'sqlite:test/operations/worker-thread.test.ts',
  'sqlite:test/faults/repricing.test.ts',
  'sqlite:test/webhooks/crash.test.ts',
  'postgres:test/faults/postgres-scale-out.test.ts',
  'sqlite:test/faults/recompute.test.ts',
  'sqlite:test/fuzz/contract-fuzz.test.ts',
  'sqlite:test/panel/safety.test.ts',
  'postgres:test/faults/shutdown.test.ts',
  'sqlite:test/webhooks/delivery.test.ts',
];

/** Files estimated to take this long or longer start first whatever their project. */
const LONG_MS = 5_000;

export class SlowFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const keyOf = (file: TestSpecification) => `${file.project.name}:${file.moduleId.slice(this.ctx.config.root.length + 1)}`;
    // An estimate in ms: the last run's duration, else a rank among the known longest (above any timing).
    const estimate = (file: TestSpecification) => {
      const key = keyOf(file);
      const index = LONGEST.indexOf(key);
      if (index !== -1 && !this.ctx.cache.getFileTestResults(key)) return 1e9 - index;
      return this.ctx.cache.getFileTestResults(key)?.duration ?? 0;
    };
    // Below LONG_MS, one project's files together: a fork runs one project's files one after the
    // other without starting again (isolate: false) only while the next file is of its project.
    const group = (file: TestSpecification, estimate: number) => (estimate >= LONG_MS ? 0 : file.project.name === 'postgres' ? 1 : 2);
    return sorted
      .map((file, index) => ({ file, index, estimate: estimate(file) }))
      .map((entry) => ({ ...entry, group: group(entry.file, entry.estimate) }))
      .sort((a, b) => a.group - b.group || b.estimate - a.estimate || a.index - b.index)
      .map(({ file }) => file);
  }
}
