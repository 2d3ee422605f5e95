// The storage port on PostgreSQL (the `pg` driver): the engine for deployments past one machine,
// where several `serve` and `worker` processes share one database.
//
// A pool of connections: a transaction holds one client from BEGIN to COMMIT (READ COMMITTED; rows
// a write depends on are locked, and a serialization failure or deadlock retries the whole
// transaction), a snapshot holds one in a REPEATABLE READ READ ONLY transaction, and plain reads
// run on any idle client. Opening is synchronous (createService is): the pool is made at once and
// the migrations run in the background, under an advisory lock so that processes starting
// together apply each one once; every operation waits for them.
import pg from 'pg';
import type { StatementObserver, StatementTiming } from '../../operations/statements.js';
import type { CatalogStorage, ChangedStores, StorageOperations, StorageTx, WorkTopic } from '../port.js';
import { OPERATIONAL_COUNT_MAX, type OperationalCounts } from '../records.js';
import { SqlCatalogSetup } from '../sql/catalog-setup.js';
import { SqlIdempotencyKeys } from '../sql/idempotency-keys.js';
import { SqlImportJobs } from '../sql/import-jobs.js';
import { SqlNotifications } from '../sql/notifications.js';
import { operationsOn, writesOf } from '../sql/operations.js';
import { PgPanel } from './panel.js';
import { PgChanges } from './changes.js';
import { PgConnection, type PgPoolClientLike, type PgPoolLike, type PgPreparedQuery, type PgQueryable } from './connection.js';
import { PgDeliveries } from './deliveries.js';
import { PgImages } from './images.js';
import { migrations, statementsOf } from './migrations.js';
import { PgOutbox } from './outbox.js';
import { PgProductSources } from './product-sources.js';
import { PgPublished } from './published.js';
import { PgPublishRuns } from './publish-runs.js';
import { PgTenancy } from './tenancy.js';
import { PgWakeups } from './wakeups.js';
import { PgWebhookEndpoints } from './webhook-endpoints.js';

export type { PgPoolLike } from './connection.js';

const AGGREGATES = [
  PgTenancy,
  SqlCatalogSetup,
  PgProductSources,
  PgImages,
  PgPublished,
  PgChanges,
  PgWebhookEndpoints,
  PgOutbox,
  PgDeliveries,
  SqlNotifications,
  PgPanel,
  SqlImportJobs,
  SqlIdempotencyKeys,
  PgPublishRuns,
] as const;

/** Operations that write: called on the storage itself, each runs as its own transaction. */
const WRITES = writesOf(AGGREGATES);

/** The key of the advisory lock migrations are applied under (any fixed bigint: "cps1"). */
export const MIGRATION_LOCK_KEY = 0x63707331;

/** How often a transaction runs again after a serialization failure or a deadlock before it fails. */
const MAX_ATTEMPTS = 5;

export interface PostgresOptions {
  /** Connections in the pool (default 10). */
  poolSize?: number;
  /** How long a pooled connection may stay idle before it is closed (CPS_DB_POOL_IDLE_MS, default 60 s: longer than the periodic looks). */
  poolIdleMs?: number;
  /** A pool to use instead of one made from the URL (tests: an embedded PostgreSQL adapter). */
  pool?: PgPoolLike;
  /** How long a statement waits for a lock (a row another transaction writes, the migration lock) before it fails (default 30 s). */
  lockTimeoutMs?: number;
}

/** bigint (ids, counts) as a JS number: ids stay far below 2^53. Set on this pool only, not pg's global parsers. */
const INT8: number = pg.types.builtins.INT8;
const types = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary'): unknown =>
    oid === INT8 ? Number : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
};

/** Makes the pool and starts applying migrations; the storage is usable at once (operations wait). */
export function openPostgresStorage(url: string, options: PostgresOptions = {}): PostgresStorage {
  const lockTimeoutMs = options.lockTimeoutMs ?? 30_000;
  const pool =
    options.pool ??
    new pg.Pool({
      connectionString: url,
      max: options.poolSize ?? 10,
      types,
      options: `-c lock_timeout=${lockTimeoutMs}`,
      application_name: 'catalog-publishing-service',
      idleTimeoutMillis: options.poolIdleMs ?? 60_000,
    });
  if (pool instanceof pg.Pool) {
    // An idle client whose connection breaks (a server restart) is dropped from the pool; without a
    // listener, its error event would end the process.
    pool.on('error', () => {});
  }
  // Wake-ups after commit on a dedicated listening connection (not with an injected pool: polling only).
  const wakeups = options.pool
    ? null
    : new PgWakeups(() => new pg.Client({ connectionString: url, application_name: 'catalog-publishing-service' }));
  return new PostgresStorage(pool, wakeups);
}

/** Applies the migrations not applied yet, each in its own transaction, under the advisory lock. */
async function migrate(pool: PgPoolLike): Promise<void> {
  const client = await pool.connect();
  let broken = false;
  try {
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
    try {
      await client.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
        id integer PRIMARY KEY, name text NOT NULL, applied_at text COLLATE "C" NOT NULL)`);
      const applied = new Set((await client.query<{ id: number }>('SELECT id FROM schema_migrations')).rows.map((r) => r.id));
      for (const migration of migrations) {
        if (applied.has(migration.id)) continue;
        await client.query('BEGIN');
        try {
          for (const statement of statementsOf(migration.sql)) await client.query(statement);
          await client.query('INSERT INTO schema_migrations (id, name, applied_at) VALUES ($1, $2, $3)', [
            migration.id,
            migration.name,
            new Date().toISOString(),
          ]);
          await client.query('COMMIT');
        } catch (error) {
          await client.query('ROLLBACK').catch(() => {
            broken = true;
          });
          throw new Error(`PostgreSQL migration ${migration.id} (${migration.name}) failed: ${(error as Error).message}`, { cause: error });
        }
      }
    } finally {
      await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]).catch(() => {
        broken = true;
      });
    }
  } finally {
    client.release(broken);
  }
}

/**
 * The client's queries one after another: the domain may ask a transaction for several reads at
 * once (Promise.all), and a connection runs one query at a time (pg queues them itself, deprecated).
 */
function oneAtATime(client: PgQueryable): PgQueryable {
  let tail: Promise<unknown> = Promise.resolve();
  return {
    query<R extends Record<string, unknown>>(text: string | PgPreparedQuery, values?: unknown[]) {
      const result = tail.then(() => client.query<R>(text, values));
      tail = result.catch(() => undefined);
      return result;
    },
  };
}

const SNAPSHOT = 'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A serialization failure or a deadlock: the transaction did nothing and may run again. */
const isRetryable = (error: unknown) => ['40001', '40P01'].includes((error as { code?: string }).code ?? '');

// Declaration merging: the aggregate operations are installed on each instance in the constructor,
// so the class cannot declare them itself; the interface is how its type says it has them.
/* eslint-disable @typescript-eslint/no-unsafe-declaration-merging, @typescript-eslint/no-empty-object-type -- the operations mixin, above */
export interface PostgresStorage extends StorageOperations {}

export class PostgresStorage implements CatalogStorage {
  /* eslint-enable @typescript-eslint/no-unsafe-declaration-merging, @typescript-eslint/no-empty-object-type */
  readonly concurrentWrites = true;
  private migrating: Promise<void>;
  private closed = false;
  /** Each pooled client's operations, made once per client and mode. */
  private readonly txOperations = new WeakMap<PgQueryable, StorageTx>();
  private readonly snapshotOperations = new WeakMap<PgQueryable, StorageOperations>();
  /** Where every connection's statement durations go (operations/statements.ts). */
  private readonly timing: StatementTiming = { observer: null };

  constructor(
    readonly pool: PgPoolLike,
    private readonly wakeups: PgWakeups | null = null,
  ) {
    this.migrating = this.startMigrating();
    const reader = operationsOn(AGGREGATES, new PgConnection(pool, false, false, this.timing));
    const self = this as unknown as Record<string, unknown>;
    for (const name of Object.keys(reader)) {
      const operation = name as keyof StorageOperations;
      // eslint-disable-next-line @typescript-eslint/unbound-method -- operationsOn binds each operation to its aggregate (sql/operations.ts)
      const read = reader[operation] as (...a: unknown[]) => Promise<unknown>;
      self[name] = WRITES.has(name)
        ? (...args: unknown[]) => this.transaction((tx) => (tx[operation] as (...a: unknown[]) => Promise<unknown>)(...args))
        : async (...args: unknown[]) => {
            await this.whenReady();
            return read(...args);
          };
    }
  }

  /** Settles when the schema is this version's (rejects when migrating failed; the next operation tries again). */
  get ready(): Promise<void> {
    return this.migrating;
  }

  private startMigrating(): Promise<void> {
    const attempt = migrate(this.pool);
    // Handled here so that a failure nobody awaits yet does not end the process; awaiting `ready`
    // or any operation still sees it.
    attempt.catch(() => {});
    return attempt;
  }

  /** Waits for the migrations; after a failed attempt (the database was down), starts another. */
  private async whenReady(): Promise<void> {
    if (this.closed) throw new TypeError('The storage is closed');
    try {
      await this.migrating;
    } catch {
      this.migrating = this.startMigrating();
      await this.migrating;
    }
  }

  async transaction<T>(fn: (tx: StorageTx) => Promise<T>): Promise<T> {
    await this.whenReady();
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.onClient('BEGIN ISOLATION LEVEL READ COMMITTED', (client) =>
          fn(this.operationsOf(client, this.txOperations, true)),
        );
      } catch (error) {
        if (!isRetryable(error) || attempt >= MAX_ATTEMPTS) throw error;
        // Jittered backoff, so that the transactions that collided do not collide again.
        await sleep(Math.random() * 10 * 2 ** attempt);
      }
    }
  }

  async snapshot<T>(fn: (reader: StorageOperations) => Promise<T>): Promise<T> {
    await this.whenReady();
    return this.onClient(SNAPSHOT, (client) => fn(this.operationsOf(client, this.snapshotOperations, false)));
  }

  private operationsOf(client: PgQueryable, cache: WeakMap<PgQueryable, StorageOperations>, write: boolean): StorageOperations {
    let operations = cache.get(client);
    if (!operations) {
      operations = operationsOn(AGGREGATES, new PgConnection(oneAtATime(client), write, true, this.timing));
      cache.set(client, operations);
    }
    return operations;
  }

  /** fn in one transaction on a client of its own: COMMIT when it resolves, ROLLBACK when it rejects. */
  private async onClient<T>(begin: string, fn: (client: PgQueryable) => Promise<T>): Promise<T> {
    const client: PgPoolClientLike = await this.pool.connect();
    let broken = false;
    try {
      await client.query(begin);
      try {
        const result = await fn(client);
        await client.query('COMMIT');
        return result;
      } catch (error) {
        // A client whose ROLLBACK fails (its connection broke) is not given back to the pool.
        await client.query('ROLLBACK').catch(() => {
          broken = true;
        });
        throw error;
      }
    } finally {
      client.release(broken);
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.wakeups?.close();
    await this.migrating.catch(() => {});
    await this.pool.end();
  }

  /** Reports every statement's duration to the observer from now on (null: no more). */
  observeStatements(observer: StatementObserver | null): void {
    this.timing.observer = observer;
  }

  /** LISTEN/NOTIFY: a commit in any process that added work of the topic (storage/postgres/wakeups.ts). */
  onWork(topic: WorkTopic, listener: () => void): () => void {
    return this.wakeups?.subscribe(topic, listener) ?? (() => {});
  }

  /** Whether the listening connection is up: NOTIFYs of every process are heard. */
  wakeupsLive(): boolean {
    return this.wakeups?.live ?? false;
  }

  /** LISTEN/NOTIFY: the changes a commit in any process recorded, by store (storage/postgres/wakeups.ts). */
  onChanges(listener: (stores: ChangedStores) => void): () => void {
    return this.wakeups?.subscribeChanges(listener) ?? (() => {});
  }

  /** Resolves when wake-ups are heard (the listening connection is up), at once without them. */
  async listening(): Promise<void> {
    await this.wakeups?.listening();
  }

  async ping(): Promise<void> {
    if (this.closed) throw new TypeError('The storage is closed');
    await this.pool.query('SELECT 1');
  }

  async missingMigrations(): Promise<number[]> {
    if (this.closed) throw new TypeError('The storage is closed');
    // Read as it is now, without waiting for (or retrying) the migrations: /readyz reports them.
    const known = migrations.map((m) => m.id);
    const table = await this.pool.query<{ present: boolean }>("SELECT to_regclass('schema_migrations') IS NOT NULL AS present");
    if (!table.rows[0]?.present) return known;
    const applied = new Set((await this.pool.query<{ id: number }>('SELECT id FROM schema_migrations')).rows.map((r) => r.id));
    return known.filter((id) => !applied.has(id));
  }

  async operationalCounts(countMax = OPERATIONAL_COUNT_MAX): Promise<OperationalCounts> {
    await this.whenReady();
    return this.onClient(SNAPSHOT, async (client) => {
      const connection = new PgConnection(client, false, true, this.timing, 'storage.operationalCounts');
      const rows = <R extends Record<string, unknown>>(sql: string, params: unknown[] = []) => connection.rows<R>(sql, params);
      const counts: OperationalCounts = {
        endpoints: { active: 0, paused: 0, disabled: 0 },
        outboxDepth: (
          await rows<{ n: number }>(
            'SELECT least(coalesce(sum(product_count), 0), $1)::integer AS n FROM (SELECT product_count FROM webhook_outbox LIMIT $1) AS o',
            [countMax],
          )
        )[0]!.n,
        waitingDeliveries: { pending: 0, failed: 0 },
        oldestWaitingAt: null,
        images: { pending: 0, mirrored: 0, dead: 0 },
        imageOrigins: { failing: 0, down: 0 },
        imagesWaitingOnDownOrigins: 0,
      };
      for (const row of await rows<{ status: 'active'; n: number }>(
        'SELECT status, count(*) AS n FROM webhook_endpoints GROUP BY status',
      )) {
        counts.endpoints[row.status] = row.n;
      }
      for (const status of ['pending', 'failed'] as const) {
        // Endpoint by endpoint from the (endpoint, status) index: the matching rows only, never the
        // other status's backlog nor the delivered history.
        counts.waitingDeliveries[status] = (
          await rows<{ n: number }>(
            `SELECT count(*)::integer AS n FROM (SELECT 1 FROM webhook_endpoints AS e
          CROSS JOIN LATERAL (SELECT 1 FROM webhook_deliveries AS d WHERE d.endpoint_id = e.id AND d.status = $1 LIMIT $2) AS d LIMIT $2) AS w`,
            [status, countMax],
          )
        )[0]!.n;
      }
      // The listed images (what the merchants' summaries count), from the counts kept per merchant
      // and the deltas not folded into them yet (migration 48).
      for (const row of await rows<{ state: 'pending'; n: number }>(
        `SELECT state, sum(n)::integer AS n FROM (SELECT state, n FROM image_state_counts
        UNION ALL SELECT state, n FROM image_state_count_deltas) AS kept GROUP BY state`,
      )) {
        counts.images[row.state] = row.n;
      }
      // Image origins failing and down (a few rows), and the images waiting on the down ones from the
      // (merchant, origin, next attempt) index, each counted up to the bound.
      for (const down of [false, true]) {
        counts.imageOrigins[down ? 'down' : 'failing'] = (
          await rows<{ n: number }>(
            `SELECT count(*)::integer AS n FROM (SELECT 1 FROM image_origins WHERE down_since IS ${down ? 'NOT NULL' : 'NULL'} LIMIT $1) AS o`,
            [countMax],
          )
        )[0]!.n;
      }
      counts.imagesWaitingOnDownOrigins = (
        await rows<{ n: number }>(
          `SELECT count(*)::integer AS n FROM (SELECT 1 FROM image_origins AS o
          CROSS JOIN LATERAL (SELECT 1 FROM image_mirrors AS m
            WHERE m.merchant_id = o.merchant_id AND m.origin = o.origin AND m.state = 'pending' LIMIT $1) AS m
          WHERE o.down_since IS NOT NULL LIMIT $1) AS w`,
          [countMax],
        )
      )[0]!.n;
      // Not yet attempted: a failed delivery waiting for its retry is the receiver's lag, not the
      // dispatcher's (it shows in cps_webhook_deliveries_waiting{status="failed"}).
      // One probe per active endpoint, as oldestWaitingChangeAt (never the whole backlog).
      counts.oldestWaitingAt = (
        await rows<{ at: string | null }>(`SELECT min(at) AS at FROM (
        SELECT (SELECT min(o.created_at) FROM webhook_outbox AS o WHERE o.endpoint_id = e.id) AS at
          FROM webhook_endpoints AS e WHERE e.status = 'active'
        UNION ALL
        SELECT (SELECT min(coalesce(d.oldest_change_at, d.created_at)) FROM webhook_deliveries AS d
            WHERE d.endpoint_id = e.id AND d.status = 'pending' AND d.attempts = 0)
          FROM webhook_endpoints AS e WHERE e.status = 'active') AS waiting`)
      )[0]!.at;
      return counts;
    });
  }
}
