// A worker thread of `serve` (operations/worker-thread.ts): the dispatcher, the mirror and the feed's
// retention (the `workers` thread), or the publish runs the serving thread hands off (the
// `publishing` thread), on connections of their own, reporting deliveries and statement timings to
// the serving thread, and reading /metrics' database gauges for its scrapes.
import { parentPort, workerData } from 'node:worker_threads';
import { loadConfig } from '../config.js';
import { schedulePruning } from '../changes/retention.js';
import { createService, openStorage } from '../service.js';
import type { CatalogStorage, WorkTopic } from '../storage/port.js';
import { createLogger } from './log.js';
import { lowerPriority } from './thread-priority.js';
import type { DeliveryOutcome } from './metrics.js';
import { type FromWorkerThread, type ToWorkerThread, WORK_TOPICS, type WorkerThreadData } from './worker-thread.js';

/** How often the statement timings go to the serving thread's /metrics. */
const STATEMENTS_EVERY_MS = 1000;

/**
 * How long the delivery attempts' outcomes gather before they go to the serving thread's /metrics
 * in one message: a message per attempt cost the thread about as much as the attempt's signing.
 */
const DELIVERIES_EVERY_MS = 100;

const port = parentPort!;
const data = workerData as WorkerThreadData;
const post = (message: FromWorkerThread) => port.postMessage(message);
const config = loadConfig(process.env);
const logger = createLogger(config.operations).child({ thread: data.name });

lowerPriority(config.workerNice, logger);

/**
 * The storage, whose work listeners the serving thread's commits call too: SQLite tells only the
 * listeners of the storage that committed.
 */
function wakeable(storage: CatalogStorage): { storage: CatalogStorage; wake: (topic: WorkTopic) => void } {
  const listeners = new Map<WorkTopic, Set<() => void>>();
  const onWork = (topic: WorkTopic, listener: () => void) => {
    const own = storage.onWork?.(topic, listener);
    let set = listeners.get(topic);
    if (!set) listeners.set(topic, (set = new Set()));
    set.add(listener);
    return () => {
      own?.();
      set.delete(listener);
    };
  };
  const wrapped = new Proxy(storage, {
    get(target, property, receiver) {
      if (property === 'onWork') return onWork;
      const value = Reflect.get(target, property, receiver) as unknown;
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
  return {
    storage: wrapped,
    wake: (topic) => {
      for (const listener of [...(listeners.get(topic) ?? [])]) listener();
    },
  };
}

const own = openStorage(config, logger);
const { storage, wake } = wakeable(own);
let outcomes: DeliveryOutcome[] = [];
let durations: number[] = [];
let deliveriesTimer: NodeJS.Timeout | null = null;
const flushDeliveries = () => {
  if (deliveriesTimer) clearTimeout(deliveriesTimer);
  deliveriesTimer = null;
  if (outcomes.length === 0) return;
  post({ type: 'deliveries', outcomes, seconds: durations });
  outcomes = [];
  durations = [];
};
const service = createService(config, {
  logger,
  storage,
  deliveries: {
    observeDelivery: (outcome, seconds) => {
      outcomes.push(outcome);
      durations.push(seconds);
      deliveriesTimer ??= setTimeout(flushDeliveries, DELIVERIES_EVERY_MS);
    },
  },
});
// The change feed's clients wait in the serving thread: it hears of this thread's commits from here
// on SQLite (a storage tells only its own listeners), through its own LISTEN on PostgreSQL.
const stopTellingChanges = config.databaseUrl
  ? () => {}
  : (storage.onChanges?.((stores) => post({ type: 'changes', stores })) ?? (() => {}));
// Work this thread's commits add wakes the other threads' workers through the serving thread
// (SQLite; PostgreSQL's NOTIFY reaches them): the storage's own listeners, not the wrapped ones, so
// a wake-up passed on to this thread is not sent back.
const stopTellingWork = config.databaseUrl
  ? () => {}
  : (() => {
      const offs = WORK_TOPICS.map((topic) => own.onWork?.(topic, () => post({ type: 'work', topic })));
      return () => {
        for (const off of offs) off?.();
      };
    })();
const flush = () => post({ type: 'statements', drained: service.metrics.drainStatements() });
const timer = setInterval(flush, STATEMENTS_EVERY_MS);

port.on('message', (message: ToWorkerThread) => {
  if (message.type === 'work') wake(message.topic);
  else if (message.type === 'counts') {
    const { id } = message;
    service.storage.operationalCounts(message.countMax).then(
      (counts) => post({ type: 'counts', id, counts }),
      (error: unknown) => post({ type: 'counts', id, error: error instanceof Error ? error.message : String(error) }),
    );
  } else if (message.type === 'stop') {
    clearInterval(timer);
    stopTellingChanges();
    stopTellingWork();
    stopFollowing();
    stopPruning();
    void service.close().finally(() => {
      flushDeliveries();
      flush();
      post({ type: 'stopped' });
    });
  }
});

if (data.dispatcher) service.dispatcher.start();
if (data.mirror) service.mirror.start();
// The serving thread's requests hand their publish runs to this thread, and so do stopped processes.
const stopFollowing = data.publishing ? service.admin.publishRuns.follow(logger) : () => {};
// The feed's retention: expired changes deleted a batch per transaction.
const stopPruning = data.pruning
  ? schedulePruning(
      service.storage,
      service.now,
      config.changes.retentionDays,
      config.changes.pruneIntervalSeconds,
      logger,
      config.changes.pruneBatch,
    )
  : () => {};
post({ type: 'started' });
