// The fault-test harness: the real `serve` in a child process on a real database (an SQLite file, or
// a PostgreSQL database: the approach of test/webhooks/crash.test.ts), killed with SIGKILL and
// started again; a real receiver that verifies every delivery's signature and schema
// (test/support/receiver.ts); probes that query the database beside the running service on either
// engine; and the checks every fault scenario ends with: the full recompute (test/support/verify.ts)
// and "the receiver saw every change".
// Used by the quick variants (test/faults/*.test.ts) and by `npm run fault` (scripts/dev/fault.ts).
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import pg from 'pg';
import type { ConsistencyReport } from '../support/verify.js';
import { contractFetch } from '../support/contract.js';
import { Receiver } from '../support/receiver.js';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const ADMIN_TOKEN = 'adm_fault_test_token_0123456789';

/** A port nobody listens on: bind port 0, note it, release it (serve needs a fixed CPS_PORT). */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

const running = new Set<ChildProcess>();

/** SIGKILLs every service child still running (test teardown, script exit). */
export function killAllServices(): void {
  for (const child of running) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
}

/** What each command prints once it is running. */
const RUNNING: Record<'serve' | 'worker', string> = { serve: 'listening on', worker: 'webhook dispatcher and image mirroring running' };

/** `node --import tsx src/cli.ts serve` (or `worker`) as a child process. */
export class ServiceProcess {
  private constructor(
    readonly child: ChildProcess,
    private readonly log: () => string,
  ) {}

  /** Starts `serve` (or `worker`), under a file descriptor limit when given, and resolves once it prints that it is running. */
  static start(
    env: Record<string, string>,
    timeoutMs = 30_000,
    command: 'serve' | 'worker' = 'serve',
    options: { descriptorLimit?: number; preload?: readonly string[] } = {},
  ): Promise<ServiceProcess> {
    // A test's fault hooks (test/faults/stall-answers.ts) load after tsx, before the CLI.
    const hooks = (options.preload ?? []).flatMap((module) => ['--import', module]);
    const node = [process.execPath, '--import', 'tsx', ...hooks, 'src/cli.ts', command];
    // Under `ulimit -n` (soft and hard alike: Node raises a soft limit to the hard one at start); exec keeps the pid.
    const [file, ...args] =
      options.descriptorLimit === undefined ? node : ['sh', '-c', `ulimit -n ${options.descriptorLimit} && exec "$@"`, 'sh', ...node];
    const child = spawn(file!, args, {
      cwd: ROOT,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    running.add(child);
    child.once('exit', () => running.delete(child));
    let output = '';
    // Keep only the tail: a long run logs a lot.
    const append = (chunk: Buffer) => {
      output = (output + chunk.toString()).slice(-20_000);
    };
    child.stdout.on('data', append);
    child.stderr.on('data', append);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${command} did not start:\n${output}`)), timeoutMs);
      const onData = () => {
        if (!output.includes(RUNNING[command])) return;
        clearTimeout(timer);
        child.stdout.off('data', onData);
        child.off('exit', onExit);
        resolve(new ServiceProcess(child, () => output));
      };
      const onExit = (code: number | null, signal: string | null) => {
        clearTimeout(timer);
        reject(new Error(`${command} exited (${code ?? signal}) before running:\n${output}`));
      };
      child.stdout.on('data', onData);
      child.once('exit', onExit);
    });
  }

  get pid(): number {
    return this.child.pid!;
  }

  get output(): string {
    return this.log();
  }

  get alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Sends the signal and waits until the process is gone. */
  async stop(signal: 'SIGKILL' | 'SIGTERM'): Promise<void> {
    if (!this.alive) return;
    const exited = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
    this.child.kill(signal);
    await exited;
  }

  /** Resident set size in KiB (VmRSS of /proc/<pid>/status), undefined once it has exited. */
  rssKib(): number | undefined {
    try {
      const match = /^VmRSS:\s+(\d+) kB/m.exec(fs.readFileSync(`/proc/${this.pid}/status`, 'utf8'));
      return match ? Number(match[1]) : undefined;
    } catch {
      return undefined;
    }
  }
}

/** Opens an SQLite database beside the service (WAL: readers never block its writer) for one read. */
export function readDatabase<T>(file: string, read: (db: Database.Database) => T): T {
  const db = new Database(file, { fileMustExist: true });
  try {
    db.pragma('busy_timeout = 5000');
    return read(db);
  } finally {
    db.close();
  }
}

/**
 * Where a fault world's service keeps its data (test/support/engine.ts's TestDatabase fits): an
 * SQLite file, or a PostgreSQL database that the service migrates when it is empty.
 */
export interface FaultDatabase {
  engine: 'sqlite' | 'postgres';
  /** SQLite: the file; PostgreSQL: the postgres:// URL. */
  location: string;
  /** What a child process needs to use it (CPS_DB_PATH or CPS_DATABASE_URL). */
  env: Record<string, string>;
}

export const sqliteFile = (file: string): FaultDatabase => ({ engine: 'sqlite', location: file, env: { CPS_DB_PATH: file } });
export const postgresDatabase = (url: string): FaultDatabase => ({ engine: 'postgres', location: url, env: { CPS_DATABASE_URL: url } });

/**
 * A connection of the test's own to the service's database, for probing while it runs: committed
 * data only, simple SQL that both engines accept, `?` placeholders. Close it.
 */
export interface DatabaseProbe {
  rows<T>(sql: string, params?: unknown[]): Promise<T[]>;
  /** The first column of the first row (counts and ids come back as numbers on both engines). */
  value<T = number>(sql: string, params?: unknown[]): Promise<T>;
  /** Whether some other connection has a write transaction open right now. */
  writeTransactionOpen(): Promise<boolean>;
  close(): Promise<void>;
}

class SqliteProbe implements DatabaseProbe {
  private readonly db: Database.Database;

  constructor(file: string) {
    this.db = new Database(file, { fileMustExist: true });
    this.db.pragma('busy_timeout = 5000');
  }

  async rows<T>(sql: string, params: unknown[] = []): Promise<T[]> {
    return this.db.prepare(sql).all(...params) as T[];
  }

  async value<T>(sql: string, params: unknown[] = []): Promise<T> {
    return this.db
      .prepare(sql)
      .pluck()
      .get(...params) as T;
  }

  /** The service's writes run in BEGIN IMMEDIATE transactions: one that fails at once means one is open. */
  async writeTransactionOpen(): Promise<boolean> {
    this.db.pragma('busy_timeout = 0');
    try {
      this.db.exec('BEGIN IMMEDIATE');
      this.db.exec('ROLLBACK');
      return false;
    } catch (error) {
      if ((error as { code?: string }).code === 'SQLITE_BUSY') return true;
      throw error;
    } finally {
      this.db.pragma('busy_timeout = 5000');
    }
  }

  async close(): Promise<void> {
    this.db.close();
  }
}

/** bigint (ids, counts) as a JS number, as the service's own pool reads them; on this client only. */
const INT8: number = pg.types.builtins.INT8;
const numericBigints = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === INT8 ? Number : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
};

/**
 * Another backend of this database inside a transaction that has written (it holds a transaction
 * id), whether running a statement or idle between two: reads (snapshots, idle polls) hold none.
 */
const OPEN_WRITE_TRANSACTIONS = `SELECT count(*) FROM pg_stat_activity
  WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_xid IS NOT NULL
    AND state IN ('active', 'idle in transaction', 'idle in transaction (aborted)')`;

class PostgresProbe implements DatabaseProbe {
  private constructor(private readonly client: pg.Client) {}

  static async open(url: string): Promise<PostgresProbe> {
    const client = new pg.Client({ connectionString: url, types: numericBigints, application_name: 'cps-fault-probe' });
    // A server that goes away under the probe fails its next query; without a listener it would end the process.
    client.on('error', () => {});
    await client.connect();
    return new PostgresProbe(client);
  }

  async rows<T>(sql: string, params: unknown[] = []): Promise<T[]> {
    let n = 0;
    return (
      await this.client.query(
        sql.replace(/\?/g, () => `$${++n}`),
        params,
      )
    ).rows as T[];
  }

  async value<T>(sql: string, params: unknown[] = []): Promise<T> {
    const [row] = await this.rows<Record<string, unknown>>(sql, params);
    return (row ? Object.values(row)[0] : undefined) as T;
  }

  async writeTransactionOpen(): Promise<boolean> {
    return (await this.value<number>(OPEN_WRITE_TRANSACTIONS)) > 0;
  }

  async close(): Promise<void> {
    await this.client.end();
  }
}

/** A probe connection to the database (see DatabaseProbe). */
export function openProbe(database: FaultDatabase): Promise<DatabaseProbe> {
  return database.engine === 'sqlite' ? Promise.resolve(new SqliteProbe(database.location)) : PostgresProbe.open(database.location);
}

/** One read through a probe of its own. */
export async function readFrom<T>(database: FaultDatabase, read: (db: DatabaseProbe) => Promise<T>): Promise<T> {
  const probe = await openProbe(database);
  try {
    return await read(probe);
  } finally {
    await probe.close();
  }
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `condition` every intervalMs until it holds; throws `what` after timeoutMs. */
export async function until(
  condition: () => boolean | Promise<boolean>,
  timeoutMs: number,
  what: () => string,
  intervalMs = 20,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms: ${what()}`);
    await sleep(intervalMs);
  }
}

/** What is still to record or deliver changes: publish runs left, outbox rows, pending or failed deliveries. */
async function unfinishedWork(db: DatabaseProbe): Promise<{ runs: number; waiting: number; unfinished: number }> {
  return {
    runs: await db.value('SELECT count(*) FROM publish_runs'),
    waiting: await db.value('SELECT count(*) FROM webhook_outbox'),
    unfinished: await db.value("SELECT count(*) FROM webhook_deliveries WHERE status IN ('pending', 'failed')"),
  };
}

export const ndjson = (lines: unknown[]) => `${lines.map((line) => JSON.stringify(line)).join('\n')}\n`;

export interface FaultWorldOptions {
  /** The database the service runs on (default: an SQLite file in the world's folder). */
  database?: FaultDatabase;
  /** Rows resolved and written per transaction (CPS_PUBLISH_CHUNK): an import commits per chunk. */
  publishChunk?: number;
  /** How the receiver answers (delay makes deliveries be in flight at a kill). */
  receiverDelayMs?: number;
  /**
   * CPS_WEBHOOK_TIMEOUT_MS and CPS_WEBHOOK_LEASE_MARGIN_MS (default 1000 each: a delivery in flight
   * at a kill is re-sent soon after; a delivery claimed ahead that waits longer than the margin is
   * left to its lease).
   */
  webhookTimeoutMs?: number;
  webhookLeaseMarginMs?: number;
  log?: (line: string) => void;
}

export interface ReceiverCheck {
  changes: number;
  requests: number;
}

/**
 * One service on one database (either engine) with one receiver, and the operations of every fault
 * scenario: crash (SIGKILL), restart, wait until deliveries drained, and the two end checks.
 */
export class FaultWorld {
  readonly dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cps-fault-'));
  readonly database: FaultDatabase;
  readonly publishChunk: number;
  readonly log: (line: string) => void;
  service: ServiceProcess | undefined;
  /** Modules the next start() preloads into `serve` (fault hooks: test/faults/stall-answers.ts). */
  preload: string[] = [];
  merchantId = 0;
  private readonly fetch = contractFetch();
  private env: Record<string, string> = {};
  private base = '';

  private constructor(
    readonly receiver: Receiver,
    options: FaultWorldOptions,
  ) {
    this.database = options.database ?? sqliteFile(path.join(this.dir, 'catalog.db'));
    this.publishChunk = options.publishChunk ?? 2000;
    this.log = options.log ?? (() => {});
  }

  static async create(options: FaultWorldOptions = {}): Promise<FaultWorld> {
    const receiver = await Receiver.start({ behaviour: { status: 204, delayMs: options.receiverDelayMs ?? 0 } });
    const world = new FaultWorld(receiver, options);
    const port = await freePort();
    world.base = `http://127.0.0.1:${port}`;
    world.env = {
      // The world's database only: a CPS_DATABASE_URL this process inherited does not apply.
      CPS_DATABASE_URL: '',
      ...world.database.env,
      CPS_MEDIA_DIR: path.join(world.dir, 'media'),
      CPS_PORT: String(port),
      CPS_HOST: '127.0.0.1',
      CPS_ADMIN_TOKEN: ADMIN_TOKEN,
      CPS_DEMO_ON_EMPTY: 'false',
      CPS_IMAGE_MIRRORING: 'false',
      CPS_PUBLISH_CHUNK: String(world.publishChunk),
      // A publish run a killed service left is resumed within a second of the restart.
      CPS_PUBLISH_RUN_LEASE_MS: '1000',
      CPS_WEBHOOK_ALLOW_HOSTS: '127.0.0.1',
      CPS_WEBHOOK_COALESCE_MS: '100',
      CPS_WEBHOOK_POLL_INTERVAL_MS: '20',
      // A delivery in flight at the kill is re-sent once its claim lapses: time-out + lease margin.
      CPS_WEBHOOK_TIMEOUT_MS: String(options.webhookTimeoutMs ?? 1000),
      CPS_WEBHOOK_LEASE_MARGIN_MS: String(options.webhookLeaseMarginMs ?? 1000),
    };
    return world;
  }

  async start(): Promise<void> {
    const started = Date.now();
    this.service = await ServiceProcess.start(this.env, undefined, 'serve', { preload: this.preload });
    this.log(
      `  serve started (pid ${this.service.pid}, ${this.database.engine === 'sqlite' ? 'SQLite' : 'PostgreSQL'}) in ${Date.now() - started} ms`,
    );
  }

  /** kill -9, and wait until the process is gone. */
  async crash(): Promise<void> {
    await this.service!.stop('SIGKILL');
    this.log(`  serve killed with SIGKILL (${this.service!.child.signalCode})`);
  }

  async restart(): Promise<void> {
    await this.start();
  }

  /** SIGTERM (graceful shutdown), and wait until the process is gone; returns its exit code. */
  async terminate(): Promise<number | null> {
    await this.service!.stop('SIGTERM');
    const code = this.service!.child.exitCode;
    this.log(`  serve stopped with SIGTERM (exit code ${code})`);
    return code;
  }

  /** An admin request that must succeed; returns the parsed body. */
  async admin(method: string, pathname: string, body?: unknown, contentType = 'application/json'): Promise<any> {
    const response = await this.adminRequest(method, pathname, body, contentType);
    const text = await response.text();
    if (response.status >= 300) throw new Error(`${method} ${pathname}: ${response.status} ${text.slice(0, 500)}`);
    return text ? JSON.parse(text) : undefined;
  }

  /** The raw admin request (for one that a kill interrupts). */
  adminRequest(
    method: string,
    pathname: string,
    body?: unknown,
    contentType = 'application/json',
    headers: Record<string, string> = {},
  ): Promise<Response> {
    return this.fetch(`${this.base}${pathname}`, {
      method,
      headers: { Authorization: `Bearer ${ADMIN_TOKEN}`, ...(body === undefined ? {} : { 'Content-Type': contentType }), ...headers },
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    });
  }

  /**
   * An admin request whose body the caller writes and may never end (an upload cut off by a kill);
   * its response (or error) is ignored.
   */
  adminUpload(pathname: string, contentType: string, contentLength: number): http.ClientRequest {
    const request = http.request(`${this.base}${pathname}`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${ADMIN_TOKEN}`, 'Content-Type': contentType, 'Content-Length': String(contentLength) },
    });
    request.on('error', () => {});
    request.on('response', (response) => response.resume());
    return request;
  }

  /** The environment `serve` runs with (its database, ports, token), for a process of the test's own. */
  get serviceEnv(): Record<string, string> {
    return { ...this.env };
  }

  get merchantPath(): string {
    return `/admin/v1/merchants/${this.merchantId}`;
  }

  /**
   * A merchant with three stores in three currencies (the EUR->PLN rate re-prices the PLN store: costs are in EUR and USD),
   * two customer groups with their own rules, two suppliers, an attribute definition, and one
   * webhook endpoint for every store and event, pointing at the receiver.
   */
  async setupMerchant(): Promise<void> {
    const merchant = await this.admin('POST', '/admin/v1/merchants', { name: 'Fault Outfitters', sku_pattern: 'FO-{ref}' });
    this.merchantId = merchant.id;
    const base = this.merchantPath;
    await this.admin('PUT', `${base}/stores/de`, { name: 'Fault DE', locale: 'de-DE', currency: 'EUR', exclude_out_of_stock: true });
    await this.admin('PUT', `${base}/stores/pl`, { name: 'Fault PL', locale: 'pl-PL', currency: 'PLN' });
    await this.admin('PUT', `${base}/stores/uk`, { name: 'Fault UK', locale: 'en-GB', currency: 'GBP' });
    const retail = await this.admin('POST', `${base}/customer-groups`, { name: 'retail' });
    const wholesale = await this.admin('POST', `${base}/customer-groups`, { name: 'wholesale' });
    await this.admin('POST', `${base}/pricing-rules`, { priority: 10, customer_group_id: wholesale.id, markup_percent: '12.5' });
    await this.admin('POST', `${base}/pricing-rules`, {
      priority: 20,
      customer_group_id: retail.id,
      markup_percent: '40',
      price_ending: 99,
    });
    await this.admin('PUT', `${base}/exchange-rates/EUR/PLN`, { rate: '4.25' });
    await this.admin('PUT', `${base}/exchange-rates/EUR/GBP`, { rate: '0.86' });
    await this.admin('PUT', `${base}/exchange-rates/USD/EUR`, { rate: '0.92' });
    await this.admin('PUT', `${base}/suppliers/alpine`, { name: 'Alpine Wholesale AG' });
    await this.admin('PUT', `${base}/suppliers/baltic`, { name: 'Baltic Outdoor' });
    await this.admin('PUT', `${base}/attributes/weight`, { unit: 'kg', labels: { de: 'Gewicht', pl: 'Waga' } });
    const endpoint = await this.admin('POST', `${base}/webhook-endpoints`, { url: this.receiver.url });
    this.receiver.secret = endpoint.secret;
    // Change timestamps are whole seconds: from the next second on, the recompute's outbox check
    // knows every change came after the endpoint (verify.ts, `subscribed`).
    await sleep(1000 - (Date.now() % 1000) + 5);
  }

  /** A connection for probing while the service runs; close it. */
  open(): Promise<DatabaseProbe> {
    return openProbe(this.database);
  }

  /** One read through a connection of its own. */
  read<T>(read: (db: DatabaseProbe) => Promise<T>): Promise<T> {
    return readFrom(this.database, read);
  }

  /**
   * Waits (bounded) until no publish run is left, the outbox is empty and no delivery is pending or
   * failed. A run (a resumed import or re-publishing) records changes a chunk per transaction: the
   * outbox and the deliveries can be empty between two of its chunks, with more changes to come.
   */
  async drained(timeoutMs = 60_000): Promise<void> {
    const started = Date.now();
    const db = await this.open();
    try {
      let state = { runs: 0, waiting: 0, unfinished: 0 };
      await until(
        async () => {
          state = await unfinishedWork(db);
          return state.runs === 0 && state.waiting === 0 && state.unfinished === 0;
        },
        timeoutMs,
        () => `deliveries not drained: ${JSON.stringify(state)}`,
        50,
      );
    } finally {
      await db.close();
    }
    this.log(`  deliveries drained in ${Date.now() - started} ms`);
  }

  /**
   * The full recompute (test/support/verify.ts) in one snapshot, in a process of its own so that the
   * receiver keeps answering meanwhile; throws listing what disagrees.
   */
  async verify(when: string): Promise<ConsistencyReport> {
    const started = Date.now();
    const output = await new Promise<string>((resolve, reject) => {
      execFile(
        process.execPath,
        ['--import', 'tsx', path.join(ROOT, 'test', 'faults', 'verify-process.ts'), this.database.location],
        { cwd: ROOT, maxBuffer: 64 * 1024 * 1024 },
        (error, stdout, stderr) => (error ? reject(new Error(`${error.message}\n${stderr}`)) : resolve(stdout)),
      );
    });
    const report = JSON.parse(output) as ConsistencyReport;
    if (report.problemCount > 0) {
      throw new Error(`full recompute ${when}: ${report.problemCount} problems:\n${report.problems.join('\n')}`);
    }
    this.log(
      `  full recompute ${when}: ${report.payloadsCompared} payloads of ${report.products} products in ${report.stores} stores ` +
        `equal to the stored ones; ${report.changes} changes agree with them; ${report.deliveriesCovered} (change, endpoint) ` +
        `pairs in the outbox or a delivery (${Date.now() - started} ms)`,
    );
    return report;
  }

  /** Every change in the database reached the receiver at least once (it verified each delivery). */
  async receiverSawEveryChange(): Promise<ReceiverCheck> {
    const changes = await this.read((db) =>
      db.rows<{ store_id: number; product_id: number; change_type: string }>('SELECT store_id, product_id, change_type FROM changes'),
    );
    const delivered = new Set<string>();
    const payloads = this.receiver.payloads;
    for (const payload of payloads) {
      for (const id of payload.product_ids) delivered.add(`${payload.event}:${payload.store_id}:${id}`);
    }
    const missing = changes.filter(
      (c) =>
        !delivered.has(`${c.change_type}:${c.store_id}:${c.product_id}`) &&
        // spec 2.7: a removal reaches an all-stores endpoint with store_id null.
        !(c.change_type === 'removed' && delivered.has(`removed:null:${c.product_id}`)),
    );
    if (missing.length > 0) {
      // What became of the first one: the deliveries that carry it, by status, and its outbox rows.
      const first = missing[0]!;
      const carrying = await this.read((db) =>
        db.rows<{ id: number; status: string; attempts: number; event: string; store_id: number | null; product_ids: string }>(
          'SELECT id, status, attempts, event, store_id, product_ids FROM webhook_deliveries ORDER BY id',
        ),
      );
      const withIt = carrying
        .filter((d) => (JSON.parse(d.product_ids) as number[]).includes(first.product_id))
        .map(({ product_ids: ids, ...d }) => ({ ...d, ids: (JSON.parse(ids) as number[]).length }));
      const statuses = carrying.reduce<Record<string, number>>((n, d) => ({ ...n, [d.status]: (n[d.status] ?? 0) + 1 }), {});
      // Work still under way now: the check ran before the world was drained (its changes may yet arrive).
      const underWay = await this.read(unfinishedWork);
      throw new Error(
        `${missing.length} of ${changes.length} changes never reached the receiver, e.g. ${JSON.stringify(missing.slice(0, 5))}; ` +
          `deliveries carrying product ${first.product_id}: ${JSON.stringify(withIt)}; all deliveries by status: ${JSON.stringify(statuses)}; ` +
          `publish runs, outbox rows and pending or failed deliveries now: ${JSON.stringify(underWay)}`,
      );
    }
    this.log(`  the receiver saw all ${changes.length} changes at least once (${payloads.length} verified deliveries)`);
    return { changes: changes.length, requests: payloads.length };
  }

  async close(): Promise<void> {
    await this.service?.stop('SIGKILL');
    await this.receiver.close();
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

/**
 * A product line for imports with some variety: EUR or USD offers from one or two suppliers, own
 * stock for some, an out-of-stock one now and then (excluded from `de`), a weight attribute, and
 * a title carrying the version so a test can tell which lines were applied.
 */
export function catalogProduct(i: number, version: number) {
  const cost = (cents: number) => `${Math.floor(cents / 100)}.${String(cents % 100).padStart(2, '0')}`;
  const offers: { supplier_ref: string; quantity: number; cost: string; currency: string }[] = [
    {
      supplier_ref: 'alpine',
      quantity: i % 13 === 0 ? 0 : (i % 7) + 1,
      cost: cost(1000 + ((i * 37 + version * 11) % 9000)),
      currency: 'EUR',
    },
  ];
  if (i % 3 === 0) offers.push({ supplier_ref: 'baltic', quantity: i % 5, cost: cost(900 + ((i * 53) % 9500)), currency: 'USD' });
  return {
    op: 'upsert_product',
    product: {
      ref: `P-${i}`,
      eans: [String(4000000000000 + i)],
      manufacturer: ['Alpenwerk', 'Nordkamm', null][i % 3],
      content: {
        de: { title: `Produkt ${i} v${version}`, description: i % 2 ? 'Leicht und robust.' : null },
        pl: { title: `Produkt ${i} v${version}`, description: null },
        en: { title: `Product ${i} v${version}`, description: null },
      },
      offers,
      own_stock: i % 4 === 0 ? { quantity: i % 3, cost: cost(800 + (i % 700)), currency: 'EUR' } : null,
      supplier_attributes: [{ supplier_ref: 'alpine', key: 'weight', value: String(((i % 40) + 1) / 10) }],
    },
  };
}
