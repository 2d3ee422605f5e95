// A request's write transactions, held open until its answer is known, so that the answer commits
// with the write that produced it (http/idempotency.ts keeps an Idempotency-Key's answer so: a
// process killed at any point has either committed both or neither).
//
// Within `heldCommits.run(request, fn)`, each `transaction(fn)` of the wrapped storage runs fn and
// the request's `beforeCommit` step, then hands fn's result to its caller while its COMMIT waits:
// - for the request's end, which writes the answer in it and commits (`request.end(last)`);
// - or for the request's next use of the storage (any operation, read or write): that commits it
//   first, so the request reads what it wrote and one transaction waits at a time, as before;
// - or HOLD_MS at most, so a handler that goes on to something slow never holds the write lock.
// Outside a request (workers, the CLI, the public API) the wrapped storage is the storage itself.
import { AsyncLocalStorage } from 'node:async_hooks';
import type { CatalogStorage, StorageTx } from './port.js';

/** The longest a transaction waits for its request's answer or next storage use before it commits without it. */
export const HOLD_MS = 1000;

type Last = ((tx: StorageTx) => Promise<void>) | null;
interface Held {
  finish: (last: Last) => void;
  committed: Promise<void>;
  timer: NodeJS.Timeout | undefined;
}

/** One request's transactions (see the head of this file). */
export class RequestCommits {
  private held: Held | null = null;
  private open = true;
  /** A held transaction's commit that failed when nobody awaited it: the request fails with it. */
  private failure: Error | null = null;

  /** @param beforeCommit runs in each of the request's write transactions, after its work and before its commit. */
  constructor(private readonly beforeCommit: (tx: StorageTx) => Promise<void>) {}

  get holding(): boolean {
    return this.held !== null;
  }

  get isOpen(): boolean {
    return this.open;
  }

  /** Commits the held transaction now, if any; rejects when its commit failed. */
  async flush(): Promise<void> {
    const held = this.take();
    if (held) {
      held.finish(null);
      await held.committed;
    }
    this.rethrow();
  }

  /**
   * Ends the request: the held transaction, if any, runs `last` and commits (true); false when none
   * was held (the request's writes, if any, committed already). Rejects when a commit failed.
   */
  async end(last: (tx: StorageTx) => Promise<void>): Promise<boolean> {
    this.open = false;
    const held = this.take();
    if (held) {
      held.finish(last);
      await held.committed;
    }
    this.rethrow();
    return held !== null;
  }

  /** Ends the request without an answer to write: what is held commits as it is. */
  async close(): Promise<void> {
    this.open = false;
    await this.flush().catch(() => {});
  }

  async transaction<T>(storage: CatalogStorage, fn: (tx: StorageTx) => Promise<T>): Promise<T> {
    await this.flush();
    return new Promise<T>((resolve, reject) => {
      let wasHeld = false;
      const held: Held = { finish: () => {}, committed: Promise.resolve(), timer: undefined };
      // Outside the request's context: what the engine calls at its commit (workers' wake-ups) is not the request's.
      held.committed = heldCommits.exit(() =>
        storage.transaction(async (tx) => {
          // An engine that runs a transaction again (PostgreSQL, after a deadlock) cannot once its result was handed on.
          if (wasHeld) throw new Error('A held transaction failed at its commit.');
          const result = await fn(tx);
          await this.beforeCommit(tx);
          const last = await new Promise<Last>((finish) => {
            held.finish = finish;
            wasHeld = true;
            this.hold(held);
            resolve(result);
          });
          if (last) await last(tx);
        }),
      );
      held.committed.catch((thrown: unknown) => {
        const error = thrown instanceof Error ? thrown : new Error(String(thrown));
        if (!wasHeld) reject(error);
        else this.failure ??= error;
      });
    });
  }

  private hold(held: Held): void {
    // Two transactions of one request at once (rare): the one held first commits now.
    const other = this.take();
    other?.finish(null);
    held.timer = setTimeout(() => {
      if (this.held === held) void this.flush().catch(() => {});
    }, HOLD_MS);
    held.timer.unref();
    this.held = held;
  }

  private take(): Held | null {
    const held = this.held;
    this.held = null;
    if (held) clearTimeout(held.timer);
    return held;
  }

  private rethrow(): void {
    if (this.failure === null) return;
    const failure = this.failure;
    this.failure = null;
    throw failure;
  }
}

/** The request the current async context serves, if any. */
export const heldCommits = new AsyncLocalStorage<RequestCommits>();

/**
 * The storage as the service's modules use it: inside `heldCommits.run(request, …)` its transactions
 * are the request's (above); elsewhere every operation is the storage's own.
 */
export function withHeldCommits(storage: CatalogStorage): CatalogStorage {
  const own = new Map<PropertyKey, unknown>();
  return new Proxy(storage, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property, target);
      if (typeof value !== 'function') return value;
      const request = heldCommits.getStore();
      if (property === 'transaction' && request?.isOpen) {
        return <T>(fn: (tx: StorageTx) => Promise<T>) => request.transaction(target, fn);
      }
      const call = value as (...args: unknown[]) => unknown;
      if (request?.holding) {
        return (...args: unknown[]) => request.flush().then(() => call.apply(target, args));
      }
      let bound = own.get(property);
      if (bound === undefined) own.set(property, (bound = call.bind(target)));
      return bound;
    },
  });
}
