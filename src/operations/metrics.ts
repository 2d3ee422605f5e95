// Prometheus metrics (openapi/operations.yaml, getMetrics): what this process did (counters,
// histograms) and the state of the whole service read from the database at scrape time (gauges).
// No label carries a merchant, a key or a URL: cardinality stays bounded and nothing of one
// merchant can be read from them.
import { createRequire } from 'node:module';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { CatalogStorage, OperationalCounts } from '../storage/port.js';
import type { PasswordHashObserver } from '../admin/password-hashing.js';
import type { PublishedReadCacheObserver } from '../catalog/read-cache.js';
import type { CacheEvent } from '../shared/byte-budget-cache.js';
import { EventLoopDelay } from './event-loop-delay.js';
import type { Logger } from './log.js';
import { StatementMetrics, type DrainedStatements, type StatementEngine, type StatementObserver } from './statements.js';

/** What the compression cache (http/coded-body-cache.ts) did: a lookup found (hit) or did not find (miss) coded bytes, an entry was evicted for room, or one stored. */
export type CodedBodyCacheEvent = CacheEvent;

/** What the compression cache reports, with its size after the event; a no-op without metrics. */
export interface CodedBodyCacheObserver {
  observeCodedBodyCache(event: CodedBodyCacheEvent, bytes: number, entries: number): void;
}

/** What a delivery attempt ended in (the `outcome` label). */
export type DeliveryOutcome = 'succeeded' | 'failed' | 'given_up' | 'dropped';

/** What the dispatcher reports; a no-op without metrics. */
export interface DeliveryObserver {
  observeDelivery(outcome: DeliveryOutcome, seconds: number): void;
}

/**
 * How often the event-loop delay is sampled (operations/event-loop-delay.ts): each sample wakes the
 * thread, and at 10 ms those wake-ups were half a serving thread's under load, each waiting for a core.
 */
export const EVENT_LOOP_SAMPLE_MS = 100;

const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
export const PROMETHEUS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

/** prom-client's default metrics, one module each (`collectDefaultMetrics.metricsList`), called as it calls them. */
type DefaultMetric = (registry: Registry, config: object) => void;
const requireDefaultMetric = createRequire(import.meta.url) as (id: string) => DefaultMetric;

/**
 * Process metrics (CPU, RSS, GC, handles) are one set per process, shared by every registry:
 * prom-client's defaults but its event-loop lag, whose own 10 ms sampler would run beside the
 * service's; its `nodejs_eventloop_lag_*` series come from the service's sampler (ServiceMetrics).
 */
let processRegistry: Registry | undefined;
function processMetrics(): Registry {
  if (!processRegistry) {
    processRegistry = new Registry();
    for (const name of collectDefaultMetrics.metricsList) {
      if (name !== 'eventLoopLag') requireDefaultMetric(`prom-client/lib/metrics/${name}`)(processRegistry, {});
    }
  }
  return processRegistry;
}

/** prom-client's event-loop lag gauges by name and help, each a statistic of the service's one sampler. */
const NODE_LOOP_LAG = [
  ['min', 'nodejs_eventloop_lag_min_seconds', 'The minimum recorded event loop delay.'],
  ['max', 'nodejs_eventloop_lag_max_seconds', 'The maximum recorded event loop delay.'],
  ['mean', 'nodejs_eventloop_lag_mean_seconds', 'The mean of the recorded event loop delays.'],
  ['stddev', 'nodejs_eventloop_lag_stddev_seconds', 'The standard deviation of the recorded event loop delays.'],
  ['p50', 'nodejs_eventloop_lag_p50_seconds', 'The 50th percentile of the recorded event loop delays.'],
  ['p90', 'nodejs_eventloop_lag_p90_seconds', 'The 90th percentile of the recorded event loop delays.'],
  ['p99', 'nodejs_eventloop_lag_p99_seconds', 'The 99th percentile of the recorded event loop delays.'],
] as const;

/** The four series of a cache: `<prefix>_lookups_total{result}`, `_evictions_total`, `_bytes`, `_entries`. */
class CacheMetrics {
  private readonly lookups: Counter<'result'>;
  private readonly evictions: Counter;
  private readonly bytes: Gauge;
  private readonly entries: Gauge;

  constructor(registry: Registry, prefix: string, help: { lookups: string; evictions: string; bytes: string; entries: string }) {
    this.lookups = new Counter({
      name: `${prefix}_lookups_total`,
      help: help.lookups,
      labelNames: ['result'] as const,
      registers: [registry],
    });
    this.evictions = new Counter({ name: `${prefix}_evictions_total`, help: help.evictions, registers: [registry] });
    this.bytes = new Gauge({ name: `${prefix}_bytes`, help: help.bytes, registers: [registry] });
    this.entries = new Gauge({ name: `${prefix}_entries`, help: help.entries, registers: [registry] });
    // Both results exist from the start, at 0 (as every labelled series of ServiceMetrics).
    for (const result of ['hit', 'miss'] as const) this.lookups.inc({ result }, 0);
  }

  observe(event: CacheEvent, bytes: number, entries: number): void {
    if (event === 'hit' || event === 'miss') this.lookups.inc({ result: event });
    else if (event === 'evict') this.evictions.inc();
    this.bytes.set(bytes);
    this.entries.set(entries);
  }
}

/**
 * Where a scrape reads the database gauges: `serve`'s worker thread reads them on its own
 * connections (operations/worker-thread.ts), so the serving thread only waits for its answer; by
 * default this process's storage. Given the bound each count stops at (CPS_METRICS_COUNT_MAX).
 */
export type OperationalCountsSource = (countMax: number | undefined) => Promise<OperationalCounts>;

export interface ServiceMetricsOptions {
  /** A statement slower than this is logged at warn (CPS_SLOW_STATEMENT_MS); 0: never. */
  slowStatementMs?: number;
  /** Each database gauge counted up to this many (CPS_METRICS_COUNT_MAX); the storage's bound when unset. */
  countMax?: number;
}

export class ServiceMetrics
  implements DeliveryObserver, CodedBodyCacheObserver, PublishedReadCacheObserver, StatementObserver, PasswordHashObserver
{
  readonly registry = new Registry();
  private readonly requestDuration = new Histogram({
    name: 'cps_http_request_duration_seconds',
    help: 'Time from request to response headers, by route template.',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });
  private readonly rateLimited = new Counter({
    name: 'cps_rate_limited_total',
    help: 'Requests answered 429 by the per-key rate limit.',
    registers: [this.registry],
  });
  private readonly deliveries = new Counter({
    name: 'cps_webhook_deliveries_total',
    help: 'Webhook delivery attempts made by this process, by outcome.',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });
  private readonly deliveryDuration = new Histogram({
    name: 'cps_webhook_delivery_duration_seconds',
    help: 'Time from sending a delivery to the answer or the time-out.',
    labelNames: ['outcome'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });
  private readonly endpoints = new Gauge({
    name: 'cps_webhook_endpoints',
    help: 'Receiver endpoints by health state.',
    labelNames: ['state'] as const,
    registers: [this.registry],
  });
  private readonly outboxDepth = new Gauge({
    name: 'cps_webhook_outbox_depth',
    help: 'Changes recorded for an endpoint and not yet batched into a delivery.',
    registers: [this.registry],
  });
  private readonly waiting = new Gauge({
    name: 'cps_webhook_deliveries_waiting',
    help: 'Deliveries waiting to be sent: pending (first attempt) or failed (waiting for a retry).',
    labelNames: ['status'] as const,
    registers: [this.registry],
  });
  private readonly feedLag = new Gauge({
    name: 'cps_feed_lag_seconds',
    help: 'Age of the oldest change not yet attempted for an active endpoint (0 when none): how far webhook dispatch trails the change feed.',
    registers: [this.registry],
  });
  private readonly images = new Gauge({
    name: 'cps_images',
    help: 'Image source URLs some product still lists, by mirroring state.',
    labelNames: ['state'] as const,
    registers: [this.registry],
  });
  private readonly imageOrigins = new Gauge({
    name: 'cps_image_origins',
    help: 'Image origins (per merchant) failing in a row but not down yet, and down (only probed).',
    labelNames: ['state'] as const,
    registers: [this.registry],
  });
  private readonly imagesWaitingOnDownOrigins = new Gauge({
    name: 'cps_images_waiting_on_down_origins',
    help: 'Pending images whose origin is down: they wait for its probe to succeed, or for their own dead-after time.',
    registers: [this.registry],
  });
  /** Read at scrape time from the live feed (changes/live.ts), once the service has one. */
  private liveConnections: () => number = () => 0;
  private readonly liveFeed = (() => {
    const read = () => this.liveConnections();
    return new Gauge({
      name: 'cps_feed_live_connections',
      help: 'Change feed connections this process holds open: long-polls waiting for a change and event streams.',
      registers: [this.registry],
      collect() {
        this.set(read());
      },
    });
  })();

  private liveWaiting: () => number = () => 0;
  private readonly liveFeedWaiting = (() => {
    const read = () => this.liveWaiting();
    return new Gauge({
      name: 'cps_feed_live_waiting',
      help: 'Of those, the clients waiting for the next change of their store (caught up: each wake-up of the store answers them from one read).',
      registers: [this.registry],
      collect() {
        this.set(read());
      },
    });
  })();

  /** Read at scrape time from the listener's connection cap (http/connection-cap.ts), once there is one. */
  private httpConnections: () => number = () => 0;
  private readonly openConnections = (() => {
    const read = () => this.httpConnections();
    return new Gauge({
      name: 'cps_http_connections',
      help: "Connections this process's listener holds open.",
      registers: [this.registry],
      collect() {
        this.set(read());
      },
    });
  })();
  private readonly refusedConnections = new Counter({
    name: 'cps_http_connections_refused_total',
    help: 'Connections past CPS_MAX_CONNECTIONS refused: answered 503, or closed past the reserve.',
    registers: [this.registry],
  });

  private readonly codedCache = new CacheMetrics(this.registry, 'cps_compression_cache', {
    lookups: 'Compressed JSON reads looked up in the cache of coded bytes, by result: hit (answered from the cache) or miss (coded now).',
    evictions: 'Coded bodies dropped from the cache to stay within CPS_COMPRESSION_CACHE_BYTES.',
    bytes: 'Bytes of coded bodies held by the compression cache.',
    entries: 'Coded bodies held by the compression cache.',
  });
  private readonly readCache = new CacheMetrics(this.registry, 'cps_read_cache', {
    lookups:
      'Page and ?ids= reads looked up in the cache of published bytes, by result: hit (answered from memory) or miss (read from the database).',
    evictions: 'Entries dropped from the read cache to stay within CPS_READ_CACHE_BYTES.',
    bytes: 'Bytes held by the read cache.',
    entries: 'Pages and id lists held by the read cache.',
  });
  private readonly passwordHashesInFlight = new Gauge({
    name: 'cps_password_hashes_in_flight',
    help: "Panel password hashes running on this process's thread pool (at most CPS_PANEL_PASSWORD_HASHES_AT_ONCE).",
    registers: [this.registry],
  });
  private readonly passwordHashesRefused = new Counter({
    name: 'cps_password_hashes_refused_total',
    help: 'Sign-ins, password changes and links refused with 503 because CPS_PANEL_PASSWORD_HASH_QUEUE hashes already waited.',
    registers: [this.registry],
  });

  /** cps_db_statement_duration_seconds{engine,statement}, and the slow-statement log. */
  private readonly statements: StatementMetrics;
  private readonly countMax: number | undefined;
  private countsSource: OperationalCountsSource | undefined;
  /**
   * This process's event loop, sampled every EVENT_LOOP_SAMPLE_MS from the first scrape on; read and
   * cleared at each scrape, so the gauges cover the time since the previous one. A thread or process
   * nobody scrapes (worker threads, a `worker` without its operations port, CLI commands) runs no
   * sampling timer: 100 wake-ups a second each were a third of an idle worker thread's CPU.
   */
  private readonly loopDelay = new EventLoopDelay(EVENT_LOOP_SAMPLE_MS);
  private readonly loopDelayGauges = (['p50', 'p99', 'max'] as const).map(
    (which) =>
      [
        which,
        new Gauge({
          name: `cps_event_loop_delay_${which}_seconds`,
          help: `Event-loop delay of this process since the previous scrape of its /metrics, ${which === 'max' ? 'the longest' : `${which.slice(1)}th percentile`}: how late a timer due every ${EVENT_LOOP_SAMPLE_MS} ms ran (what a request arriving then waited before it was read).`,
          registers: [this.registry],
        }),
      ] as const,
  );

  /** prom-client's `nodejs_eventloop_lag_*` series, from the same window as the cps_ gauges. */
  private readonly nodeLoopLagGauges = NODE_LOOP_LAG.map(
    ([which, name, help]) => [which, new Gauge({ name, help, registers: [this.registry] })] as const,
  );
  /** As prom-client has it: how long a setImmediate queued at a scrape waited, shown by the next scrape. */
  private readonly nodeLoopLag = new Gauge({
    name: 'nodejs_eventloop_lag_seconds',
    help: 'Lag of event loop in seconds.',
    registers: [this.registry],
    collect() {
      const start = process.hrtime.bigint();
      setImmediate(() => this.set(Number(process.hrtime.bigint() - start) / 1e9));
    },
  });

  constructor(
    private readonly storage: CatalogStorage,
    private readonly now: () => Date,
    private readonly logger: Logger,
    options: ServiceMetricsOptions = {},
  ) {
    // Every labelled series exists from the start, at 0: a rate() over a series that appears late misses its first increments.
    for (const outcome of ['succeeded', 'failed', 'given_up', 'dropped'] as const) this.deliveries.inc({ outcome }, 0);
    this.statements = new StatementMetrics(logger, options.slowStatementMs ?? 0);
    this.countMax = options.countMax;
    this.statements.register(this.registry);
  }

  observeStatement(engine: StatementEngine, name: string, ms: number): void {
    this.statements.observeStatement(engine, name, ms);
  }

  /** This process's statement observations since the last drain (a worker thread's, for the serving thread). */
  drainStatements(): DrainedStatements {
    return this.statements.drain();
  }

  /** Statement observations of a worker thread, shown with this thread's. */
  addStatements(drained: DrainedStatements): void {
    this.statements.addDrained(drained);
  }

  /** Whether this process's event loop is being sampled: from its first scrape on. */
  get samplesEventLoop(): boolean {
    return this.loopDelay.running;
  }

  /** Stops sampling the event loop (the service closes). */
  close(): void {
    this.loopDelay.stop();
  }

  /**
   * Where the database gauges are read from at each scrape (undefined: this process's storage, on
   * the thread that answers the scrape).
   */
  readCountsFrom(source: OperationalCountsSource | undefined): void {
    this.countsSource = source;
  }

  /** Where cps_feed_live_connections is read from. */
  countLiveConnections(count: () => number, waiting: () => number = () => 0): void {
    this.liveConnections = count;
    this.liveWaiting = waiting;
  }

  /** Where cps_http_connections is read from. */
  countConnections(connections: { readonly open: number }): void {
    this.httpConnections = () => connections.open;
  }

  observeRefusedConnection(): void {
    this.refusedConnections.inc();
  }

  observeRequest(method: string, route: string, status: number, seconds: number): void {
    this.requestDuration.observe({ method, route, status: String(status) }, seconds);
    if (status === 429) this.rateLimited.inc();
  }

  observeCodedBodyCache(event: CodedBodyCacheEvent, bytes: number, entries: number): void {
    this.codedCache.observe(event, bytes, entries);
  }

  observePublishedReadCache(event: CacheEvent, bytes: number, entries: number): void {
    this.readCache.observe(event, bytes, entries);
  }

  observeDelivery(outcome: DeliveryOutcome, seconds: number): void {
    this.deliveries.inc({ outcome });
    this.deliveryDuration.observe({ outcome }, seconds);
  }

  observePasswordHashesInFlight(running: number): void {
    this.passwordHashesInFlight.set(running);
  }

  observePasswordHashRefused(): void {
    this.passwordHashesRefused.inc();
  }

  /** The exposition: the database gauges are read now, in one snapshot (by the counts' source, when one is set). */
  async exposition(): Promise<string> {
    let counts: OperationalCounts | undefined;
    try {
      counts = await (this.countsSource ? this.countsSource(this.countMax) : this.storage.operationalCounts(this.countMax));
    } catch (error) {
      // A database that cannot answer shows in /readyz; the process metrics still go out.
      this.logger.error({ err: error }, 'reading the operational counts for /metrics failed');
    }
    for (const gauge of [
      this.endpoints,
      this.outboxDepth,
      this.waiting,
      this.feedLag,
      this.images,
      this.imageOrigins,
      this.imagesWaitingOnDownOrigins,
    ])
      gauge.reset();
    if (counts) {
      for (const [state, n] of Object.entries(counts.endpoints)) this.endpoints.set({ state }, n);
      this.outboxDepth.set(counts.outboxDepth);
      for (const [status, n] of Object.entries(counts.waitingDeliveries)) this.waiting.set({ status }, n);
      const lagMs = counts.oldestWaitingAt ? this.now().getTime() - Date.parse(counts.oldestWaitingAt) : 0;
      this.feedLag.set(Math.max(0, lagMs) / 1000);
      for (const [state, n] of Object.entries(counts.images)) this.images.set({ state }, n);
      for (const [state, n] of Object.entries(counts.imageOrigins)) this.imageOrigins.set({ state }, n);
      this.imagesWaitingOnDownOrigins.set(counts.imagesWaitingOnDownOrigins);
    }
    const loopDelay = this.loopDelay.take();
    this.loopDelay.start();
    for (const [which, gauge] of this.loopDelayGauges) gauge.set(loopDelay[which]);
    for (const [which, gauge] of this.nodeLoopLagGauges) gauge.set(loopDelay[which]);
    return `${await this.registry.metrics()}\n${await processMetrics().metrics()}`;
  }
}
