// The order vitest starts test files in. With several forks the run ends when its longest file
// does: started last, a 60 s file alone on one fork is a minute of the run. vitest orders by the
// durations of the previous run when it has them (node_modules/.vite), and otherwise by file size,
// which starts these short files late; so without timings, the files known to take longest
// (about 15 s or more on 2 cores) start first, longest first, then the rest in vitest's order.
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/** `project:path`, longest first (a run on 2 cores, 4 forks, docs/testing.md#how-long). */
export const LONGEST = [
  'sqlite:test/scale/bench-cost.test.ts',
  'sqlite:test/cli.test.ts',
  'postgres:test/faults/deliveries.test.ts',
  'sqlite:test/scale/bench-scale.test.ts',
  'postgres:test/faults/shutdown.test.ts',
  'postgres:test/storage/bounded-statements.test.ts',
  'postgres:test/webhooks/secret-rotation-cli.test.ts',
  'sqlite:test/webhooks/secret-rotation-cli.test.ts',
  'postgres:test/http/writes-and-reads.test.ts',
  'sqlite:test/webhooks/crash.test.ts',
  'postgres:test/changes/cursor-bounds.test.ts',
  'sqlite:test/operations/backup-and-shutdown.test.ts',
  'sqlite:test/client/package.test.ts',
  'postgres:test/webhooks/health.test.ts',
  'sqlite:test/changes/live.test.ts',
  'sqlite:test/faults/import.test.ts',
  'postgres:test/faults/import.test.ts',
  'postgres:test/images/operator-tools.test.ts',
];

export class SlowFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const keyOf = (file: TestSpecification) => `${file.project.name}:${file.moduleId.slice(this.ctx.config.root.length + 1)}`;
    if (sorted.some((file) => this.ctx.cache.getFileTestResults(keyOf(file)))) return sorted;
    const rank = (file: TestSpecification) => {
      const index = LONGEST.indexOf(keyOf(file));
      return index === -1 ? LONGEST.length : index;
    };
    return sorted
      .map((file, index) => ({ file, index }))
      .sort((a, b) => rank(a.file) - rank(b.file) || a.index - b.index)
      .map(({ file }) => file);
  }
}
