// Re-publishing a whole catalog, a chunk per transaction. A change of an exchange rate,
// a pricing rule, a customer group, the merchant's SKU pattern or a store's settings can change
// every payload of the merchant: at 1M products that is 3M payloads and, with 20 endpoints, 11M
// outbox rows. In one transaction that held SQLite's write lock for 200 s (no mirror or delivery
// could record anything meanwhile) and its COMMIT stalled the service for 5 s. So the write
// commits with a *run* (storage: publish_runs), and the run re-publishes CPS_PUBLISH_CHUNK products
// per transaction, each chunk moving the run's position with it. Readers meanwhile see some
// products re-published and others not yet, each product whole (its payload and its change commit
// together). The caller waits until the run has ended. Who drives it: the caller's process, or,
// when `serve` runs its workers in a thread (CPS_WORKERS=thread, the default), that thread: the run
// is recorded held by no one, the commit wakes the thread's `follow`, and the request's event loop
// only looks every WAIT_POLL_MS whether the run has ended (it drives the run itself should no one
// take it within HAND_OFF_WAIT_MS). A run whose process stopped (SIGTERM between two chunks, a
// crash) is resumed from its position by the next process that looks (`resumeStalled`: at start,
// on a wake-up, and every half of CPS_PUBLISH_RUN_LEASE_MS, how long a driver holds its run past
// each chunk). An NDJSON import is applied the same way (admin/import-jobs.ts): its checked
// operations are staged with a run whose chunks are the import's, applied by `ImportRunSteps`.
import { randomUUID } from 'node:crypto';
import { silentLogger, type Logger } from '../operations/log.js';
import { ProblemError } from '../shared/problem.js';
import type { CatalogStorage, PublishRunRecord, StorageTx } from '../storage/port.js';
import { scopeToMerchant } from '../storage/merchant-scope.js';
import { RELEASED_PUBLISH_RUN } from '../storage/records.js';
import type { CatalogPublisher, PublishSummary } from './publish.js';

/** How often a caller whose run another driver drives looks whether it has ended. */
const WAIT_POLL_MS = 50;
/** A run handed off that no one has taken after this long is driven by its caller. */
const HAND_OFF_WAIT_MS = 1000;

/** What a run of an import does (admin/import-jobs.ts gives it): the catalog's writes live there. */
export interface ImportRunSteps {
  /** Applies the job's next staged chunk in tx; false when none was left (and the job is finished in tx). */
  applyNext(tx: StorageTx, run: PublishRunRecord): Promise<boolean>;
  /** Ends the job as failed by `error` (its own transaction), with the run and the chunks left. */
  fail(run: PublishRunRecord, error: unknown): Promise<void>;
  /** Ends the jobs whose process stopped before their file was staged (nothing applied); returns them. */
  interruptAbandoned(): Promise<{ id: number; merchant_id: number; lines_read: number }[]>;
}

/** Thrown to the caller whose run was given up because the service stopped: the next process resumes it. */
export class StoppedMidRun extends ProblemError {}

export class PublishRuns {
  /** This process's drivers: a run is held by the token of the process that drives it. */
  private readonly driver = randomUUID();
  private readonly driving = new Set<Promise<unknown>>();
  private stopping = false;
  private log: Logger = silentLogger;
  /**
   * Runs are left to this process's worker thread (`serve` with CPS_WORKERS=thread sets it): begin()
   * records them held by no one, and complete() waits for the thread to drive them.
   */
  handOff = false;
  /** How runs of imports apply their chunks (admin/import-jobs.ts sets it). */
  importSteps: ImportRunSteps | null = null;
  /** Whether this process's runs are driven here: not handed off, or handed off to this process's own `follow`. */
  get drivenHere(): boolean {
    return !this.handOff || this.following;
  }
  private following = false;

  constructor(
    private readonly storage: CatalogStorage,
    private readonly publisher: CatalogPublisher,
    private readonly now: () => Date,
    /** A driver holds its run this long past each chunk; a run held by no one longer is resumed by another. */
    private readonly leaseMs = 60_000,
  ) {}

  private leaseFrom(at: Date): string {
    return new Date(at.getTime() + this.leaseMs).toISOString();
  }

  /**
   * Records a run of the merchant's stores (null: all) in the write's transaction, held by this
   * process (or by no one, handed off); with `importJobId`, a run that applies that job's staged chunks.
   */
  begin(tx: StorageTx, merchantId: number, storeIds: number[] | null, importJobId: number | null = null): Promise<PublishRunRecord> {
    const now = this.now();
    return tx.insertPublishRun({
      merchant_id: merchantId,
      store_ids: storeIds,
      after_product_id: 0,
      import_job_id: importJobId,
      driver: this.handOff ? '' : this.driver,
      leased_until: this.handOff ? RELEASED_PUBLISH_RUN : this.leaseFrom(now),
      created_at: now.toISOString(),
    });
  }

  /**
   * Re-publishes the run's products a chunk per transaction until none is left, then ends the run.
   * Resolves when the run has ended (also when another driver took it over and ended it).
   */
  complete(run: PublishRunRecord): Promise<void> {
    const driving = run.driver === this.driver ? this.drive(run) : this.awaitEnd(run);
    const tracked = driving.catch(() => undefined);
    this.driving.add(tracked);
    void tracked.finally(() => this.driving.delete(tracked));
    return driving;
  }

  /** Waits until another driver has ended the run; drives it here if no one holds it (any longer). */
  private async awaitEnd(run: PublishRunRecord): Promise<void> {
    const handedOffAt = Date.now();
    for (;;) {
      if (this.stopping) throw stoppedMidRun(run);
      const current = await this.storage.publishRun(run.id);
      if (!current) return;
      const now = this.now();
      const unheld = current.leased_until < now.toISOString();
      if (unheld && (current.leased_until !== RELEASED_PUBLISH_RUN || Date.now() - handedOffAt >= HAND_OFF_WAIT_MS)) {
        const taken = await this.storage.takePublishRun(run.id, this.driver, this.leaseFrom(now), now.toISOString());
        if (taken) {
          await this.drive(taken);
          return;
        }
      }
      await new Promise((resolve) => setTimeout(resolve, WAIT_POLL_MS));
    }
  }

  private async drive(run: PublishRunRecord): Promise<void> {
    const summary: PublishSummary = { resolved: 0, changes: 0 };
    for (;;) {
      if (this.stopping) {
        // Given up at once, so the next process resumes it without waiting for the hold to end.
        await this.storage.releasePublishRun(run.id, this.driver).catch(() => undefined);
        throw stoppedMidRun(run);
      }
      const step = await this.storage
        .transaction(async (tx): Promise<'ended' | 'taken' | 'moved' | 'failed'> => {
          const current = await tx.publishRun(run.id);
          if (!current) return 'ended' as const;
          if (current.driver !== this.driver) return 'taken' as const;
          if (current.import_job_id !== null) return this.applyImportChunk(tx, current);
          const last = await this.publisher.publishAfter(
            tx,
            scopeToMerchant(tx, current.merchant_id),
            current.store_ids,
            current.after_product_id,
            summary,
          );
          if (last === null) {
            await tx.deletePublishRun(run.id);
            return 'ended' as const;
          }
          await tx.updatePublishRun(run.id, { after_product_id: last, leased_until: this.leaseFrom(this.now()) });
          return 'moved' as const;
        })
        .catch(async (error: unknown) => {
          // A chunk of an import that cannot be applied (a supplier deleted since the file was
          // checked) ends the import, rather than being tried again by every process that resumes it.
          if (run.import_job_id === null || !this.importSteps) throw error;
          if (!(error instanceof ProblemError))
            this.log.error({ err: error, run: run.id, import_job: run.import_job_id }, 'an import chunk failed: the import stops');
          await this.importSteps.fail(run, error);
          return 'failed' as const;
        });
      if (step === 'ended' || step === 'failed') return;
      if (step === 'taken') {
        // Another process resumed it (this one held it past its lease): it ends it.
        await this.awaitEnd(run);
        return;
      }
    }
  }

  /** One chunk of an import's run; a chunk that cannot be applied ends the import as failed. */
  private async applyImportChunk(tx: StorageTx, run: PublishRunRecord): Promise<'ended' | 'moved'> {
    if (!this.importSteps) throw new Error('a run of an import, but no import steps were given');
    if (!(await this.importSteps.applyNext(tx, run))) {
      await tx.deletePublishRun(run.id);
      return 'ended';
    }
    await tx.updatePublishRun(run.id, { after_product_id: run.after_product_id + 1, leased_until: this.leaseFrom(this.now()) });
    return 'moved';
  }

  /** Takes the runs whose driver stopped and drives them to their end; returns how many it took. */
  async resumeStalled(limit = 10): Promise<number> {
    if (this.stopping) return 0;
    for (const job of (await this.importSteps?.interruptAbandoned()) ?? []) {
      this.log.warn(
        { merchant_id: job.merchant_id, import_job: job.id, lines_read: job.lines_read },
        'an import was interrupted while checking its file (its process stopped); nothing of it was applied',
      );
    }
    const now = this.now();
    let taken = 0;
    for (const stalled of await this.storage.stalledPublishRuns(now.toISOString(), limit)) {
      const run = await this.storage.takePublishRun(stalled.id, this.driver, this.leaseFrom(now), now.toISOString());
      if (!run) continue;
      taken++;
      if (stalled.leased_until !== RELEASED_PUBLISH_RUN || stalled.driver !== '') {
        this.log.info(
          { merchant_id: run.merchant_id, run: run.id, after_product_id: run.after_product_id, import_job: run.import_job_id ?? undefined },
          run.import_job_id === null ? 'resuming an interrupted re-publishing' : 'resuming an interrupted import',
        );
      }
      void this.complete(run).then(
        () => this.log.debug({ merchant_id: run.merchant_id, run: run.id }, 're-publishing completed'),
        (error: unknown) =>
          this.log.error({ err: error, merchant_id: run.merchant_id, run: run.id }, 'resuming a re-publishing failed (tried again later)'),
      );
    }
    return taken;
  }

  /**
   * Drives the runs no one holds: looks now, whenever the storage tells of a run held by no one
   * (a hand-off, in any process on PostgreSQL), and every intervalMs; logs what it resumes.
   * Returns a stop function.
   */
  follow(logger: Logger, intervalMs = this.leaseMs / 2): () => void {
    this.log = logger.child({ component: 'publish-runs' });
    this.following = true;
    const look = () =>
      void this.resumeStalled().catch((error: unknown) => this.log.error({ err: error }, 'looking for re-publishing to drive failed'));
    look();
    const timer = setInterval(look, intervalMs);
    timer.unref();
    const unsubscribe = this.storage.onWork?.('publishing', look);
    return () => {
      this.following = false;
      clearInterval(timer);
      unsubscribe?.();
    };
  }

  /** Resolves when the runs this process drives now have ended (or failed). */
  async drained(): Promise<void> {
    await Promise.all(this.driving);
  }

  /** Stops driving after the chunks in progress (each run given up for the next process); waits for them. */
  async stop(): Promise<void> {
    this.stopping = true;
    await Promise.all(this.driving);
  }
}

function stoppedMidRun(run: PublishRunRecord): StoppedMidRun {
  if (run.import_job_id !== null) {
    return new StoppedMidRun(
      'internal_error',
      'The service stopped while applying the import. The chunks applied so far stay applied; ' +
        'the rest is applied when the service runs again (the import job shows its progress).',
    );
  }
  return new StoppedMidRun(
    'internal_error',
    'The service stopped while re-publishing the catalog after this change. The change is saved; ' +
      'the products not yet re-published are re-published when the service runs again.',
  );
}
