// The workers of `serve` in threads of their own (CPS_WORKERS=thread, the default): the
// webhook dispatcher, the image mirror and retention in one, the publish runs of merchant-wide
// re-publishing that requests hand off in another (a re-pricing has a core's worth of work of its
// own); their statements, their re-publishing and their coalescing never hold the event loop that
// answers requests. The thread opens its own connections
// to the same database (SQLite: WAL readers never wait for its writes; PostgreSQL: its own pool)
// and reports to the serving thread what /metrics shows: its delivery attempts (gathered for up to
// DELIVERIES_EVERY_MS, a message per batch rather than per attempt), its statement timings every second, and (SQLite) the stores its commits recorded changes for, which wake the
// change feed's waiting clients (changes/live.ts). Commits that add work wake the threads whose
// workers take it at once: the serving thread's, and (SQLite, whose commits tell only the
// listeners of the connection that made them) each thread's own, which the serving thread passes on
// to the other threads (an import applied by the publishing thread wakes the mirror and the
// dispatcher of the workers thread). PostgreSQL's NOTIFY reaches every thread anyway: the serving
// thread listens only while its live feed has clients, and then hears the threads' NOTIFY. One thread also reads /metrics' database
// gauges for each scrape (storage `operationalCounts`, a few statements on a snapshot: on SQLite
// they held the serving loop for milliseconds per scrape, tens at a million products); the serving
// thread reads them itself while no thread runs. A thread that
// dies is started again after RESTART_DELAY_MS; `stop()` lets it finish what it holds (the
// dispatcher's and the mirror's own stop) before it ends.
import { Worker } from 'node:worker_threads';
import type { Service } from '../service.js';
import type { ChangedStores, OperationalCounts, WorkTopic } from '../storage/port.js';
import type { DeliveryOutcome } from './metrics.js';
import type { DrainedStatements } from './statements.js';

/** Messages between the serving thread and the worker thread. */
export type ToWorkerThread =
  | { type: 'work'; topic: WorkTopic }
  /** Read /metrics' database gauges, each counted up to countMax (the storage's bound when unset). */
  | { type: 'counts'; id: number; countMax?: number }
  | { type: 'stop' };
export type FromWorkerThread =
  | { type: 'started' }
  /** Delivery attempts' outcomes and durations (seconds) since the last such message, in the order they ended. */
  | { type: 'deliveries'; outcomes: DeliveryOutcome[]; seconds: number[] }
  | { type: 'statements'; drained: DrainedStatements }
  /** The thread committed changes of these stores (SQLite: its commits wake only its own listeners). */
  | { type: 'changes'; stores: ChangedStores }
  /** The thread committed work of this kind (SQLite): the serving thread wakes the other threads with it. */
  | { type: 'work'; topic: WorkTopic }
  /** The answer to a `counts` message: the counts, or why they could not be read. */
  | { type: 'counts'; id: number; counts?: OperationalCounts; error?: string }
  | { type: 'stopped' };

/** What the thread runs (workerData). */
export interface WorkerThreadData {
  dispatcher: boolean;
  mirror: boolean;
  /** Drives the publish runs requests hand off (catalog/publish-runs.ts `follow`). */
  publishing: boolean;
  /** Deletes expired changes (changes/retention.ts). */
  pruning: boolean;
  /** Reads /metrics' database gauges for the serving thread's scrapes (one thread of a process). */
  counts?: boolean;
  /** Names the thread in its log lines. */
  name: string;
}

const RESTART_DELAY_MS = 1000;

/** The kinds of work a commit can add (storage onWork), each told across threads. */
export const WORK_TOPICS: readonly WorkTopic[] = ['deliveries', 'images', 'publishing'];

/** The process's worker threads running now: work one of them commits wakes the others. */
const running = new Set<Worker>();

export interface WorkerThread {
  /** Resolves once the thread runs its workers. */
  started: Promise<void>;
  /** The workers take no new work and finish what they hold; then the thread ends. */
  stop(): Promise<void>;
}

/**
 * The thread: its entry compiled beside this file (dist/), or, running from source under tsx, its
 * TypeScript source with tsx's loader registered in the thread first (a thread gets no loader of
 * the thread that started it).
 */
function newThread(data: WorkerThreadData): Worker {
  if (!import.meta.url.endsWith('.ts')) return new Worker(new URL('./worker-thread-entry.js', import.meta.url), { workerData: data });
  const source = new URL('./worker-thread-entry.ts', import.meta.url).href;
  return new Worker(`import('tsx/esm/api').then(({ register }) => { register(); return import(${JSON.stringify(source)}); });`, {
    eval: true,
    workerData: data,
  });
}

export function startWorkerThread(service: Service, data: WorkerThreadData): WorkerThread {
  const log = service.logger.child({ component: 'worker-thread', thread: data.name });
  let worker: Worker | null = null;
  let stopping = false;
  let markStarted: () => void = () => {};
  const started = new Promise<void>((resolve) => {
    markStarted = resolve;
  });
  let stopped: () => void = () => {};
  let answering = false;
  // Scrapes waiting for the thread's counts, by message id; read on this thread should the thread end first.
  const countsAsked = new Map<number, { countMax: number | undefined; resolve: (counts: Promise<OperationalCounts>) => void }>();
  let nextCountsId = 0;
  const countHere = (countMax: number | undefined) => service.storage.operationalCounts(countMax);
  const countsEnded = () => {
    for (const [id, asked] of countsAsked) {
      countsAsked.delete(id);
      asked.resolve(countHere(asked.countMax));
    }
  };
  if (data.counts)
    service.metrics.readCountsFrom((countMax) => {
      const thread = worker;
      if (!thread || !answering || stopping) return countHere(countMax);
      return new Promise<OperationalCounts>((resolve) => {
        const id = ++nextCountsId;
        countsAsked.set(id, { countMax, resolve: (counts) => resolve(counts) });
        thread.postMessage({ type: 'counts', id, ...(countMax === undefined ? {} : { countMax }) } satisfies ToWorkerThread);
      });
    });

  const spawn = () => {
    const thread = newThread(data);
    worker = thread;
    running.add(thread);
    thread.on('message', (message: FromWorkerThread) => {
      if (message.type === 'started') {
        log.info({ workers: Object.keys(data).filter((key) => data[key as keyof WorkerThreadData] === true) }, 'worker thread started');
        answering = true;
        markStarted();
      } else if (message.type === 'deliveries') {
        for (const [i, outcome] of message.outcomes.entries()) service.metrics.observeDelivery(outcome, message.seconds[i]!);
      } else if (message.type === 'statements') service.metrics.addStatements(message.drained);
      else if (message.type === 'changes') service.liveFeed.wake(message.stores);
      else if (message.type === 'work') {
        for (const other of running)
          if (other !== thread) other.postMessage({ type: 'work', topic: message.topic } satisfies ToWorkerThread);
      } else if (message.type === 'counts') {
        const asked = countsAsked.get(message.id);
        countsAsked.delete(message.id);
        asked?.resolve(message.counts ? Promise.resolve(message.counts) : Promise.reject(new Error(message.error)));
      } else if (message.type === 'stopped') stopped();
    });
    thread.on('error', (error) => log.error({ err: error }, 'the worker thread failed'));
    thread.on('exit', (code) => {
      worker = null;
      running.delete(thread);
      answering = false;
      countsEnded();
      if (stopping) {
        stopped();
        return;
      }
      log.error({ exit_code: code }, `the worker thread ended: starting it again in ${RESTART_DELAY_MS} ms`);
      setTimeout(() => {
        if (!stopping) spawn();
      }, RESTART_DELAY_MS).unref();
    });
  };
  spawn();

  // The serving thread's commits that add work (an import, an endpoint resent) wake the thread's
  // workers. SQLite only: on PostgreSQL the thread hears every NOTIFY itself, and a LISTEN here would
  // wake the serving event loop (and the thread a second time) at every commit of every process.
  const unsubscribe = service.config.databaseUrl
    ? []
    : WORK_TOPICS.map((topic) =>
        service.storage.onWork?.(topic, () => worker?.postMessage({ type: 'work', topic } satisfies ToWorkerThread)),
      );

  return {
    started,
    async stop() {
      stopping = true;
      if (data.counts) service.metrics.readCountsFrom(undefined);
      countsEnded();
      for (const off of unsubscribe) off?.();
      const thread = worker;
      if (!thread) return;
      const done = new Promise<void>((resolve) => {
        stopped = resolve;
      });
      thread.postMessage({ type: 'stop' } satisfies ToWorkerThread);
      await done;
      await thread.terminate();
    },
  };
}
