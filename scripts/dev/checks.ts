// `npm run checks` (the first half of `npm test`): the checks before vitest, started at once rather
// than one after another. They are independent and each is mostly one thread (tsc and the type-aware
// eslint build a TypeScript program each), so on 2 cores eslint's time is the whole wait
// (docs/testing.md#npm-test). Each check's output is printed whole when it ends; the exit code is 1
// when any failed, after every one has ended, so that one run shows every failure.
import { spawn } from 'node:child_process';

/** npm scripts of package.json, the longest first. */
const CHECKS = ['lint', 'typecheck', 'generate:check', 'lint:spectral', 'lint:openapi', 'format:check'];

interface Outcome {
  name: string;
  code: number | null;
  seconds: number;
}

function run(name: string): Promise<Outcome> {
  const started = performance.now();
  const child = spawn('npm', ['run', '--silent', name], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const keep = (chunk: Buffer) => {
    output += chunk.toString();
  };
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  return new Promise((resolve) => {
    child.once('close', (code) => {
      const seconds = (performance.now() - started) / 1000;
      const verdict = code === 0 ? 'passed' : `FAILED (exit ${code})`;
      process.stdout.write(`\n> ${name}: ${verdict} in ${seconds.toFixed(1)} s\n${output.trimEnd()}\n`);
      resolve({ name, code, seconds });
    });
  });
}

const outcomes = await Promise.all(CHECKS.map(run));
const failed = outcomes.filter((outcome) => outcome.code !== 0);
console.log(failed.length ? `\nchecks failed: ${failed.map((outcome) => outcome.name).join(', ')}` : '\nevery check passed');
process.exitCode = failed.length ? 1 : 0;
