// The storage port on better-sqlite3: WAL, forward-only migrations at open, prepared statements,
// one class per aggregate over a connection and its statement cache.
//
// Separate connections, so a big write never stalls reads: transactions run one at a time on the
// write connection (BEGIN IMMEDIATE, queued in process; a lock held by another process is waited
// for asynchronously), while reads outside a transaction use a read-only connection, which sees the
// last committed state (a WAL snapshot) however long a write transaction stays open, and each
// snapshot() has a read connection of its own for its duration. A long write yields the event loop
// between its bounded steps (shared/cooperative.ts), so requests are answered meanwhile.
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import type { StatementObserver, StatementTiming } from '../../operations/statements.js';
import type { CatalogStorage, ChangedStores, StorageOperations, StorageTx, WorkTopic } from '../port.js';
import { OPERATIONAL_COUNT_MAX, type OperationalCounts } from '../records.js';
import { SqlCatalogSetup } from '../sql/catalog-setup.js';
import { SqlIdempotencyKeys } from '../sql/idempotency-keys.js';
import { SqlImportJobs } from '../sql/import-jobs.js';
import { SqlNotifications } from '../sql/notifications.js';
import { operationsOn, writesOf } from '../sql/operations.js';
import { SqlPanel } from '../sql/panel.js';
import { Checkpointer } from './checkpointer.js';
import { SqliteChanges } from './changes.js';
import { SqliteConnection } from './connection.js';
import { SqliteDeliveries } from './deliveries.js';
import { SqliteImages } from './images.js';
import { migrations } from './migrations.js';
import { SqliteOutbox } from './outbox.js';
import { SqliteProductSources } from './product-sources.js';
import { SqlitePublished } from './published.js';
import { SqlitePublishRuns } from './publish-runs.js';
import { SqliteTenancy } from './tenancy.js';
import { SqliteWebhookEndpoints } from './webhook-endpoints.js';

const AGGREGATES = [
  SqliteTenancy,
  SqlCatalogSetup,
  SqliteProductSources,
  SqliteImages,
  SqlitePublished,
  SqliteChanges,
  SqliteWebhookEndpoints,
  SqliteOutbox,
  SqliteDeliveries,
  SqlNotifications,
  SqlPanel,
  SqlImportJobs,
  SqlIdempotencyKeys,
  SqlitePublishRuns,
] as const;

/** Operations that write: called on the storage itself, each runs as its own transaction. */
const WRITES = writesOf(AGGREGATES);

export interface SqliteOptions {
  /** How long a transaction waits for another process's write lock before it fails (default 30 s). */
  lockTimeoutMs?: number;
  /** How often, at most, the WAL is checkpointed after commits, off the event loop (default 1 s). */
  checkpointIntervalMs?: number;
  /** Told when a background checkpoint fails (the next one retries). */
  onCheckpointError?: (error: string) => void;
  /** Read connections for snapshots kept at most (default 10, CPS_DB_POOL_SIZE): more snapshots at once wait for one. */
  snapshotConnections?: number;
}

function connect(file: string, options: { readonly?: boolean } = {}): Database.Database {
  const db = new Database(file, { readonly: options.readonly ?? false });
  if (options.readonly) {
    db.pragma('busy_timeout = 5000');
  } else {
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
  }
  db.pragma('foreign_keys = ON');
  return db;
}

/** Opens (creating when missing) the database file and applies pending migrations. */
export function openSqliteStorage(file: string, options: SqliteOptions = {}): SqliteStorage {
  if (file !== ':memory:') fs.mkdirSync(path.dirname(file), { recursive: true });
  const writer = connect(file);
  // The write connection never sleeps in SQLite on another process's lock: transaction() waits
  // for it asynchronously, so the event loop stays free.
  writer.pragma('busy_timeout = 0');
  migrate(writer);
  if (file === ':memory:') {
    // An in-memory database exists once per connection: reads share the write connection.
    return new SqliteStorage(writer, () => writer, null, options);
  }
  // Checkpoints run in a worker thread (checkpointer.ts), never inside a COMMIT on the event loop.
  writer.pragma('wal_autocheckpoint = 0');
  writer.pragma(`journal_size_limit = ${64 * 1024 * 1024}`);
  const checkpointer = new Checkpointer(file, options.checkpointIntervalMs ?? 1000, options.onCheckpointError ?? (() => {}), () => {
    // Without the worker, SQLite's own checkpoint in COMMIT keeps the WAL bounded.
    if (writer.open) writer.pragma('wal_autocheckpoint = 1000');
    options.onCheckpointError?.('the checkpoint worker ended: checkpoints run in COMMIT from now on');
  });
  return new SqliteStorage(writer, () => connect(file, { readonly: true }), checkpointer, options);
}

function migrate(db: Database.Database): void {
  db.pragma('busy_timeout = 5000');
  db.exec('CREATE TABLE IF NOT EXISTS schema_migrations (id INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)');
  const applied = new Set((db.prepare('SELECT id FROM schema_migrations').all() as { id: number }[]).map((r) => r.id));
  for (const migration of migrations) {
    if (applied.has(migration.id)) continue;
    db.transaction(() => {
      db.exec(migration.sql);
      db.prepare('INSERT INTO schema_migrations (id, name, applied_at) VALUES (?, ?, ?)').run(
        migration.id,
        migration.name,
        new Date().toISOString(),
      );
    })();
  }
  db.pragma('busy_timeout = 0');
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const isBusy = (error: unknown) => (error as { code?: string }).code === 'SQLITE_BUSY';

// Declaration merging: the aggregate operations are installed on each instance in the constructor,
// so the class cannot declare them itself; the interface is how its type says it has them.
/* eslint-disable @typescript-eslint/no-unsafe-declaration-merging, @typescript-eslint/no-empty-object-type -- the operations mixin, above */
export interface SqliteStorage extends StorageOperations {}

/** A read connection of its own for one snapshot at a time, with the operations bound to it. */
interface SnapshotConnection {
  connection: SqliteConnection;
  operations: StorageOperations;
}

export class SqliteStorage implements CatalogStorage {
  /* eslint-enable @typescript-eslint/no-unsafe-declaration-merging, @typescript-eslint/no-empty-object-type */
  private readonly read: SqliteConnection;
  private readonly write: SqliteConnection;
  private readonly tx: StorageTx;
  private readonly reader: StorageOperations;
  /** The queue when nothing is queued: a transaction then starts at once. */
  private readonly idle: Promise<void> = Promise.resolve();
  private queue: Promise<void> = this.idle;
  /** Read connections not in use by a snapshot: each snapshot has one to itself. */
  private readonly idleSnapshots: SnapshotConnection[] = [];
  private readonly snapshotConnections: Database.Database[] = [];
  /** Snapshots waiting for a read connection while all `maxSnapshotConnections` are in use. */
  private readonly snapshotWaiters: ((taken: SnapshotConnection) => void)[] = [];
  private readonly maxSnapshotConnections: number;
  private readonly lockTimeoutMs: number;
  /** This process's workers waiting for work (SQLite has no cross-process wake-up: they poll for that). */
  private readonly workListeners = new Map<WorkTopic, Set<() => void>>();
  /** The live feed of this process (another process's commits reach it by its fallback poll). */
  private readonly changeListeners = new Set<(stores: ChangedStores) => void>();
  /** Where every connection's statement durations go (operations/statements.ts). */
  private readonly timing: StatementTiming = { observer: null };

  constructor(
    readonly db: Database.Database,
    /** Opens a read-only connection (an in-memory database: returns the write connection). */
    private readonly openReader: () => Database.Database,
    private readonly checkpointer: Checkpointer | null,
    options: SqliteOptions = {},
  ) {
    this.lockTimeoutMs = options.lockTimeoutMs ?? 30_000;
    this.maxSnapshotConnections = options.snapshotConnections ?? 10;
    const readDb = openReader();
    this.read = new SqliteConnection(readDb, this.timing, 'storage.probe');
    this.write = new SqliteConnection(db, this.timing, 'storage.transaction');
    this.tx = operationsOn(AGGREGATES, this.write);
    this.reader = readDb === db ? this.tx : operationsOn(AGGREGATES, this.read);
    const self = this as unknown as Record<string, unknown>;
    for (const name of Object.keys(this.reader)) {
      const operation = name as keyof StorageOperations;
      // eslint-disable-next-line @typescript-eslint/unbound-method -- operationsOn binds each operation to its aggregate (sql/operations.ts)
      const read = this.reader[operation];
      self[name] = WRITES.has(name)
        ? (...args: unknown[]) => this.transaction((tx) => (tx[operation] as (...a: unknown[]) => Promise<unknown>)(...args))
        : read;
    }
  }

  async transaction<T>(fn: (tx: StorageTx) => Promise<T>): Promise<T> {
    const previous = this.queue;
    let release!: () => void;
    const turn = new Promise<void>((resolve) => {
      release = resolve;
    });
    this.queue = turn;
    // Transactions of this process run one after another; only another process's lock times out.
    await previous;
    try {
      await this.begin();
      this.write.addedWork.clear();
      this.write.changedStores.clear();
      try {
        const result = await fn(this.tx);
        this.write.stmt('COMMIT').run();
        this.checkpointer?.committed();
        this.wakeWorkers();
        return result;
      } catch (error) {
        if (this.db.inTransaction) this.write.stmt('ROLLBACK').run();
        this.write.addedWork.clear();
        this.write.changedStores.clear();
        throw error;
      }
    } finally {
      // The last one queued leaves the queue idle.
      if (this.queue === turn) this.queue = this.idle;
      release();
    }
  }

  /** BEGIN IMMEDIATE, waiting without blocking while another process holds the write lock. */
  private async begin(): Promise<void> {
    const deadline = Date.now() + this.lockTimeoutMs;
    for (let wait = 2; ; wait = Math.min(wait * 2, 100)) {
      try {
        this.write.stmt('BEGIN IMMEDIATE').run();
        return;
      } catch (error) {
        if (!isBusy(error) || Date.now() >= deadline) throw error;
      }
      await sleep(wait);
    }
  }

  /** Reports every statement's duration to the observer from now on (null: no more). */
  observeStatements(observer: StatementObserver | null): void {
    this.timing.observer = observer;
  }

  onWork(topic: WorkTopic, listener: () => void): () => void {
    let listeners = this.workListeners.get(topic);
    if (!listeners) this.workListeners.set(topic, (listeners = new Set()));
    listeners.add(listener);
    return () => {
      listeners.delete(listener);
    };
  }

  /** This process's commits wake its workers always (other processes' are found by polling). */
  wakeupsLive(): boolean {
    return true;
  }

  onChanges(listener: (stores: ChangedStores) => void): () => void {
    this.changeListeners.add(listener);
    return () => {
      this.changeListeners.delete(listener);
    };
  }

  /** After a COMMIT that added work: this process's workers look at once (other processes poll). */
  private wakeWorkers(): void {
    const topics = [...this.write.addedWork];
    this.write.addedWork.clear();
    for (const topic of topics) {
      for (const listener of [...(this.workListeners.get(topic) ?? [])]) listener();
    }
    // The live feed's waiting clients of the stores the commit recorded changes for.
    if (this.write.changedStores.size === 0) return;
    const stores = [...this.write.changedStores];
    this.write.changedStores.clear();
    for (const listener of [...this.changeListeners]) listener(stores);
  }

  snapshot<T>(fn: (reader: StorageOperations) => Promise<T>): Promise<T> {
    return this.onSnapshot((_connection, reader) => fn(reader));
  }

  private async onSnapshot<T>(fn: (connection: SqliteConnection, reader: StorageOperations) => Promise<T>): Promise<T> {
    if (!this.read.db.open) throw new TypeError('The database connection is not open');
    // An in-memory database has one connection: its reads see what is committed or being written.
    if (this.read.db === this.db) return fn(this.read, this.reader);
    // A read transaction on a connection of its own, so plain reads meanwhile (and other
    // snapshots) see the newest committed state, not this snapshot's.
    const taken = await this.takeSnapshotConnection();
    taken.connection.stmt('BEGIN').run();
    try {
      return await fn(taken.connection, taken.operations);
    } finally {
      taken.connection.stmt('COMMIT').run();
      this.giveBackSnapshotConnection(taken);
    }
  }

  /** An idle read connection, a new one below the bound, or the next one given back (each ~2 MiB and 2 descriptors). */
  private takeSnapshotConnection(): SnapshotConnection | Promise<SnapshotConnection> {
    const idle = this.idleSnapshots.pop();
    if (idle) return idle;
    if (this.snapshotConnections.length < this.maxSnapshotConnections) {
      const db = this.openReader();
      this.snapshotConnections.push(db);
      const connection = new SqliteConnection(db, this.timing, 'storage.snapshot');
      return { connection, operations: operationsOn(AGGREGATES, connection) };
    }
    return new Promise((resolve) => this.snapshotWaiters.push(resolve));
  }

  private giveBackSnapshotConnection(taken: SnapshotConnection): void {
    const next = this.snapshotWaiters.shift();
    if (next) next(taken);
    else this.idleSnapshots.push(taken);
  }

  async close(): Promise<void> {
    await this.queue;
    await this.checkpointer?.close();
    for (const db of this.snapshotConnections) db.close();
    if (this.read.db !== this.db) this.read.db.close();
    // The last connection to close checkpoints what is left and removes the WAL.
    this.db.close();
  }

  async ping(): Promise<void> {
    // Reads answer from the read connection; writes need the write connection open.
    if (!this.db.open) throw new TypeError('The database connection is not open');
    this.read.stmt('SELECT 1').get();
  }

  async missingMigrations(): Promise<number[]> {
    const applied = new Set(this.read.stmt('SELECT id FROM schema_migrations').pluck().all() as number[]);
    return migrations.map((m) => m.id).filter((id) => !applied.has(id));
  }

  async operationalCounts(countMax = OPERATIONAL_COUNT_MAX): Promise<OperationalCounts> {
    return this.onSnapshot(async (connection) => {
      const stmt = (sql: string) => connection.named('storage.operationalCounts').stmt(sql);
      const counts: OperationalCounts = {
        endpoints: { active: 0, paused: 0, disabled: 0 },
        // Changes (a row carries a write's products), counted in the first countMax rows at most.
        outboxDepth: stmt('SELECT min(coalesce(sum(product_count), 0), ?) FROM (SELECT product_count FROM webhook_outbox LIMIT ?)')
          .pluck()
          .get(countMax, countMax) as number,
        waitingDeliveries: { pending: 0, failed: 0 },
        oldestWaitingAt: null,
        images: { pending: 0, mirrored: 0, dead: 0 },
        imageOrigins: { failing: 0, down: 0 },
        imagesWaitingOnDownOrigins: 0,
      };
      for (const row of stmt('SELECT status, count(*) AS n FROM webhook_endpoints GROUP BY status').all() as {
        status: 'active';
        n: number;
      }[]) {
        counts.endpoints[row.status] = row.n;
      }
      // Endpoint by endpoint from the (endpoint, status) index: the matching rows only, never the
      // other status's backlog nor the delivered history.
      for (const status of ['pending', 'failed'] as const) {
        counts.waitingDeliveries[status] = stmt(`SELECT count(*) FROM (SELECT 1 FROM webhook_endpoints AS e
          CROSS JOIN webhook_deliveries AS d ON d.endpoint_id = e.id AND d.status = ? LIMIT ?)`)
          .pluck()
          .get(status, countMax) as number;
      }
      // The listed images (what the merchants' summaries count), from the counts kept per merchant.
      for (const row of stmt('SELECT state, sum(n) AS n FROM image_state_counts GROUP BY state').all() as {
        state: 'pending';
        n: number;
      }[]) {
        counts.images[row.state] = row.n;
      }
      // Image origins failing and down (a few rows), and the images waiting on the down ones from the
      // (merchant, origin, next attempt) index, each counted up to the bound.
      for (const down of [false, true]) {
        counts.imageOrigins[down ? 'down' : 'failing'] = stmt(
          `SELECT count(*) FROM (SELECT 1 FROM image_origins WHERE down_since IS ${down ? 'NOT NULL' : 'NULL'} LIMIT ?)`,
        )
          .pluck()
          .get(countMax) as number;
      }
      counts.imagesWaitingOnDownOrigins = stmt(`SELECT count(*) FROM (SELECT 1 FROM image_origins AS o
        CROSS JOIN image_mirrors AS m ON m.merchant_id = o.merchant_id AND m.origin = o.origin AND m.state = 'pending'
        WHERE o.down_since IS NOT NULL LIMIT ?)`)
        .pluck()
        .get(countMax) as number;
      // Not yet attempted: a failed delivery waiting for its retry is the receiver's lag, not the
      // dispatcher's (it shows in cps_webhook_deliveries_waiting{status="failed"}).
      // One probe per active endpoint, as oldestWaitingChangeAt (never the whole backlog).
      counts.oldestWaitingAt = stmt(`SELECT min(at) FROM (
        SELECT (SELECT min(o.created_at) FROM webhook_outbox AS o WHERE o.endpoint_id = e.id) AS at
          FROM webhook_endpoints AS e WHERE e.status = 'active'
        UNION ALL
        SELECT (SELECT min(coalesce(d.oldest_change_at, d.created_at)) FROM webhook_deliveries AS d
            WHERE d.endpoint_id = e.id AND d.status = 'pending' AND d.attempts = 0)
          FROM webhook_endpoints AS e WHERE e.status = 'active')`)
        .pluck()
        .get() as string | null;
      return counts;
    });
  }

  /** An online backup (SQLite backup API): consistent, taken while the service keeps running. */
  async backup(destination: string): Promise<void> {
    fs.mkdirSync(path.dirname(path.resolve(destination)), { recursive: true });
    await this.read.db.backup(destination);
  }
}
