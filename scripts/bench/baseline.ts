// Two versions of the service side by side in one benchmark run (bench:writes, bench:reads): the
// candidate (this working tree, uncommitted changes included) and a baseline (a git ref, checked out
// into a temporary worktree that uses this tree's node_modules). A benchmark drives each version only
// through what every version has — its CLI, its HTTP API, its own scripts/bench/bench-server.ts — never
// through src/ imports: the internal APIs change between versions, those do not.
// `--baseline REF` picks the ref; without it origin/main, else main, else HEAD~1.
import { execFileSync, fork, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const candidateDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

export interface Checkout {
  name: 'baseline' | 'candidate';
  ref: string;
  sha: string;
  /** The version's tree: run its CLI and scripts with this as cwd. */
  dir: string;
}

export interface SideBySide {
  /** Removed with everything in it when the run ends, however it ends. */
  tempDir: string;
  /** Baseline first. */
  checkouts: [Checkout, Checkout];
}

const children = new Set<ChildProcess>();
let baselineTree: string | null = null;
let tempDir: string | null = null;

export const git = (...args: string[]) =>
  execFileSync('git', args, { cwd: candidateDir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();

export function resolveBaseline(requested: string | undefined): { ref: string; sha: string } {
  for (const ref of requested ? [requested] : ['origin/main', 'main', 'HEAD~1']) {
    try {
      return { ref, sha: git('rev-parse', '--verify', '--quiet', `${ref}^{commit}`) };
    } catch {
      /* not a commit here: try the next */
    }
  }
  throw new Error(
    requested ? `baseline ${requested} is not a commit here` : 'no baseline: none of origin/main, main, HEAD~1 is a commit here',
  );
}

/** Tracked children started in a session of their own (trackSession): killed with their whole process group. */
const sessionLeaders = new Set<ChildProcess>();
let sessionWatchdog: ChildProcess | null = null;

/** Every tracked child, SIGKILLed (synchronous: also from a signal handler or on exit). */
export function killTracked(): void {
  for (const child of children) {
    if (sessionLeaders.has(child) && child.pid && child.exitCode === null && child.signalCode === null) {
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        /* its group is gone already */
      }
    }
    child.kill('SIGKILL');
  }
}

/** Every tracked child stopped gracefully (stopChild), one after the other. */
export async function stopTracked(): Promise<void> {
  for (const child of [...children]) await stopChild(child);
}

/** Killed (SIGKILL) when the run ends, so no service outlives an interrupted benchmark. */
export function track<T extends ChildProcess>(child: T): T {
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child;
}

// Killing the bench's own process group (Ctrl-C, a job's kill) no longer reaches a child in a
// session of its own: a watchdog in a session of its own too SIGKILLs their groups once the bench's
// end closes its stdin, however the bench ended (SIGKILL included).
const WATCHDOG = `
  const groups = new Set();
  let rest = '';
  process.stdin.on('data', (chunk) => {
    const lines = (rest + chunk).split('\\n');
    rest = lines.pop();
    for (const line of lines) (line[0] === '+' ? groups.add(line.slice(1)) : groups.delete(line.slice(1)));
  });
  process.stdin.on('close', () => {
    for (const pid of groups) try { process.kill(-Number(pid), 'SIGKILL'); } catch {}
    process.exit(0);
  });`;

function watchSession(pid: number, live: boolean): void {
  if (!sessionWatchdog) {
    sessionWatchdog = spawn(process.execPath, ['-e', WATCHDOG], { detached: true, stdio: ['pipe', 'ignore', 'ignore'] });
    sessionWatchdog.unref();
    sessionWatchdog.stdin!.on('error', () => {}); // a watchdog gone: only the bench's own clean-up is left
    (sessionWatchdog.stdin as unknown as { unref(): void }).unref();
  }
  sessionWatchdog.stdin!.write(`${live ? '+' : '-'}${pid}\n`);
}

/**
 * `track` for a child spawned with `detached: true` (setsid: a session and process group of its own,
 * as a service's own unit runs it): killed with its group, also when the bench itself is killed.
 */
export function trackSession<T extends ChildProcess>(child: T): T {
  track(child);
  if (!child.pid) return child;
  const pid = child.pid;
  sessionLeaders.add(child);
  watchSession(pid, true);
  child.once('exit', () => {
    sessionLeaders.delete(child);
    watchSession(pid, false);
  });
  return child;
}

/**
 * The Node arguments that run `module` (a path in the tree, say `src/cli.ts`) of the tree at `dir`:
 * `--import tsx module`; in a vitest run, this tree's modules from the JavaScript its global setup
 * built (CPS_TEST_BUILD, test/support/build.ts), without tsx's loader and its second of CPU a start.
 */
export function moduleArguments(dir: string, module: string): string[] {
  const built = process.env.CPS_TEST_BUILD;
  if (built && path.resolve(dir) === candidateDir) return [path.join(built, module.replace(/\.tsx?$/, '.js'))];
  return ['--import', 'tsx', module];
}

/** `tsx src/cli.ts ...args` of one tree, as `node --import tsx` so the child's pid is the service's. */
export function cli(dir: string, args: string[], env: Record<string, string> = {}): { child: ChildProcess; output: () => string } {
  const child = track(
    spawn(process.execPath, [...moduleArguments(dir, 'src/cli.ts'), ...args], {
      cwd: dir,
      env: { ...inheritedEnv(), ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  );
  return { child, output: keepOutput(child) };
}

/** This process's environment without CPS_* settings, which would configure the versions' services. */
export const inheritedEnv = () => Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('CPS_')));

/** The last 8000 characters a child wrote, for error messages. */
export function keepOutput(child: ChildProcess): () => string {
  let output = '';
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-8000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  return () => output;
}

export const exited = (child: ChildProcess) =>
  new Promise<number | null>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve(child.exitCode);
    else child.once('exit', (code) => resolve(code));
  });

/** The version's demo catalog (`demo --json`, 3 stores), built by its own CLI into `database` (an SQLite file, or a postgres:// URL). */
export async function buildDemo(
  checkout: Pick<Checkout, 'name' | 'dir'>,
  database: string,
  products: number,
  log: (line: string) => void,
): Promise<{ merchantId: number; apiKey: string }> {
  const started = performance.now();
  const onPostgres = /^postgres(ql)?:\/\//.test(database);
  const { child, output } = cli(
    checkout.dir,
    ['demo', ...(onPostgres ? [] : ['--db', database]), '--products', String(products), '--json'],
    onPostgres ? { CPS_DATABASE_URL: database } : {},
  );
  const code = await exited(child);
  if (code !== 0) throw new Error(`${checkout.name}: demo exited ${code}:\n${output()}`);
  const demo = JSON.parse(output().trim().split('\n').at(-1)!) as { merchant_id: number; api_key: string };
  log(`${checkout.name}: demo catalog of ${products} products built in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  return { merchantId: demo.merchant_id, apiKey: demo.api_key };
}

/** Synchronous, so it also runs from a signal handler and on exit: children, the baseline worktree, temp files. */
function cleanUp(): void {
  killTracked();
  if (baselineTree) {
    try {
      git('worktree', 'remove', '--force', baselineTree);
    } catch {
      fs.rmSync(baselineTree, { recursive: true, force: true });
      try {
        git('worktree', 'prune');
      } catch {
        /* nothing more to do */
      }
    }
    baselineTree = null;
  }
  if (tempDir) fs.rmSync(tempDir, { recursive: true, force: true });
  tempDir = null;
}

/**
 * Runs `bench` with a temp dir and both checkouts, then cleans up — also on SIGINT/SIGTERM (exit 130)
 * and on an uncaught error. A failure of the run itself sets exit code 1; verdicts never do.
 */
export async function runSideBySide(
  options: { tempPrefix: string; baseline: string | undefined; log: (line: string) => void },
  bench: (run: SideBySide) => Promise<void>,
): Promise<void> {
  const { log } = options;
  tempDir = fs.mkdtempSync(path.join(os.tmpdir(), options.tempPrefix));
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      console.error(`\n${signal}: stopping the services and removing ${tempDir}`);
      cleanUp();
      process.exit(130);
    });
  }
  process.once('exit', cleanUp);
  const started = performance.now();
  try {
    const base = resolveBaseline(options.baseline);
    const dirty = git('status', '--porcelain', '--untracked-files=no') ? ' + uncommitted changes' : '';
    baselineTree = path.join(tempDir, 'baseline-tree');
    git('worktree', 'add', '--detach', baselineTree, base.sha);
    fs.symlinkSync(fs.realpathSync(path.join(candidateDir, 'node_modules')), path.join(baselineTree, 'node_modules'));
    const checkouts: [Checkout, Checkout] = [
      { name: 'baseline', ref: base.ref, sha: base.sha, dir: baselineTree },
      { name: 'candidate', ref: 'working tree', sha: `${git('rev-parse', 'HEAD')}${dirty}`, dir: candidateDir },
    ];
    for (const c of checkouts) log(`${c.name.padEnd(9)} ${c.ref}: ${c.sha}`);
    await bench({ tempDir, checkouts });
    log(`\nwhole run: ${((performance.now() - started) / 1000).toFixed(0)} s`);
  } catch (error) {
    console.error(error);
    process.exitCode = 1;
  } finally {
    cleanUp();
  }
}

/** A benchmark script of the tree at `dir`: scripts/bench/ (scripts/ in trees from before 2026-11-29). */
export function benchScriptIn(dir: string, script: string): string {
  const current = path.join(dir, 'scripts', 'bench', script);
  return fs.existsSync(current) ? current : path.join(dir, 'scripts', script);
}

/** A server process of the bench-server contract: `script DB`, {port} over IPC once listening, 'cpu' answered with process.cpuUsage(). */
export interface BenchServerProcess {
  base: string;
  /** The server's CPU time so far, user + system, in µs. */
  cpu: () => Promise<number>;
  stop: () => Promise<void>;
}

/** `dir`/scripts/`script` on `database` (scripts/bench/bench-server.ts, bench-reference-server.ts), run from `dir`; `name` labels its errors. */
export async function startBenchServerProcess(dir: string, script: string, database: string, name: string): Promise<BenchServerProcess> {
  const child = track(
    fork(benchScriptIn(dir, script), [database], {
      cwd: dir,
      env: inheritedEnv(),
      execArgv: ['--import', 'tsx'],
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    }),
  );
  const output = keepOutput(child);
  /** The next IPC message, or the child's death. */
  const next = <T>(what: string, timeoutMs: number) =>
    new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        cleanup();
        reject(new Error(`${name}: ${script} sent nothing ${what} within ${timeoutMs / 1000} s:\n${output()}`));
      }, timeoutMs);
      const onMessage = (message: T) => {
        cleanup();
        resolve(message);
      };
      const onExit = () => {
        cleanup();
        reject(new Error(`${name}: ${script} exited (${child.exitCode ?? child.signalCode}) ${what}:\n${output()}`));
      };
      const cleanup = () => {
        clearTimeout(timer);
        child.off('message', onMessage);
        child.off('exit', onExit);
      };
      child.on('message', onMessage);
      child.once('exit', onExit);
    });
  const { port } = await next<{ port: number }>('before listening', 120_000);
  return {
    base: `http://127.0.0.1:${port}`,
    cpu: async () => {
      const reply = next<{ cpu: NodeJS.CpuUsage }>('for cpu', 30_000);
      child.send('cpu');
      const { cpu } = await reply;
      return cpu.user + cpu.system;
    },
    stop: () => stopChild(child),
  };
}

/** SIGTERM, then SIGKILL after 15 s; resolves once the child has exited. */
export async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  const killer = setTimeout(() => child.kill('SIGKILL'), 15_000);
  await exited(child);
  clearTimeout(killer);
}

/**
 * NDJSON of `count` new products valid for the demo merchant (its suppliers, its three stores'
 * languages), refs `BENCH-<TAG>-000001`…: what bench:writes, bench:postgres and bench:cost import.
 * `options.images(n)`: product n's image URLs (default: one on the demo's image host, which never
 * resolves); `options.costStep`: added to every cost (the same refs with new prices in every store).
 */
export function demoImportBody(count: number, tag: string, options: { images?: (n: number) => string[]; costStep?: number } = {}): string {
  const images = options.images ?? ((n: number) => [`https://images.demo-supplier.test/bench-${tag}/${n}.jpg`]);
  const lines: string[] = [];
  for (let n = 1; n <= count; n++) {
    const cost = (10 + (n % 997) * 0.19 + (options.costStep ?? 0)).toFixed(2);
    const offers = [{ supplier_ref: 'alpine-wholesale', quantity: 1 + (n % 40), cost, currency: 'EUR' }];
    if (n % 2 === 0)
      offers.push({ supplier_ref: 'baltic-outdoor', quantity: n % 25, cost: (Number(cost) * 0.98).toFixed(2), currency: 'EUR' });
    if (n % 3 === 0) offers.push({ supplier_ref: 'pacific-imports', quantity: 5, cost: (Number(cost) * 1.05).toFixed(2), currency: 'USD' });
    lines.push(
      JSON.stringify({
        op: 'upsert_product',
        product: {
          ref: `BENCH-${tag.toUpperCase()}-${String(n).padStart(6, '0')}`,
          manufacturer: 'Nordkamm',
          content: {
            de: { title: `Nordkamm Zelt ${n}`, description: `Zelt aus Nylon, Modell ${n}.` },
            en: { title: `Nordkamm Tent ${n}`, description: `Tent made of nylon, model ${n}.` },
            pl: { title: `Nordkamm Namiot ${n}`, description: `Namiot, model ${n}.` },
          },
          images: images(n).map((url) => ({ url })),
          offers,
          supplier_attributes: [{ supplier_ref: 'alpine-wholesale', key: 'weight', value: (1 + (n % 30) / 10).toFixed(2) }],
        },
      }),
    );
  }
  return `${lines.join('\n')}\n`;
}
