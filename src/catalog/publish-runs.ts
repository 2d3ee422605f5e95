// Re-publishing a whole catalog, a chunk per transaction (issue 20). A change of an exchange rate,
// a pricing rule, a customer group, the merchant's SKU pattern or a store's settings can change
// every payload of the merchant: at 1M products that is 3M payloads and, with 20 endpoints, 11M
// outbox rows. In one transaction that held SQLite's write lock for 200 s (no mirror or delivery
// could record anything meanwhile) and its COMMIT stalled the service for 5 s. So the write
// commits with a *run* (storage: publish_runs), and the run re-publishes CPS_PUBLISH_CHUNK products
// per transaction, each chunk moving the run's position with it. Readers meanwhile see some
// products re-published and others not yet, each product whole (its payload and its change commit
// together). The caller waits until the run has ended; a run whose process stopped (SIGTERM
// between two chunks, a crash) is resumed from its position by the next process that looks
// (`resumeStalled`, run by `serve` and `worker` at start and every half of CPS_PUBLISH_RUN_LEASE_MS,
// how long a driver holds its run past each chunk).
import { randomUUID } from 'node:crypto';
import { silentLogger, type Logger } from '../operations/log.js';
import { ProblemError } from '../shared/problem.js';
import type { CatalogStorage, PublishRunRecord, StorageTx } from '../storage/port.js';
import type { CatalogPublisher, PublishSummary } from './publish.js';

/** How often a caller whose run another driver took over looks whether it has ended. */
const TAKEN_OVER_POLL_MS = 250;

export class PublishRuns {
  /** This process's drivers: a run is held by the token of the process that drives it. */
  private readonly driver = randomUUID();
  private readonly driving = new Set<Promise<unknown>>();
  private stopping = false;
  private log: Logger = silentLogger;

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

  /** Records a run of the merchant's stores (null: all) in the write's transaction, held by this process. */
  begin(tx: StorageTx, merchantId: number, storeIds: number[] | null): Promise<PublishRunRecord> {
    const now = this.now();
    return tx.insertPublishRun({
      merchant_id: merchantId, store_ids: storeIds, after_product_id: 0, driver: this.driver, leased_until: this.leaseFrom(now),
      created_at: now.toISOString(),
    });
  }

  /**
   * Re-publishes the run's products a chunk per transaction until none is left, then ends the run.
   * Resolves when the run has ended (also when another driver took it over and ended it).
   */
  complete(run: PublishRunRecord): Promise<PublishSummary> {
    const driving = this.drive(run);
    const tracked = driving.catch(() => undefined);
    this.driving.add(tracked);
    void tracked.finally(() => this.driving.delete(tracked));
    return driving;
  }

  private async drive(run: PublishRunRecord): Promise<PublishSummary> {
    const summary: PublishSummary = { resolved: 0, changes: 0 };
    for (;;) {
      if (this.stopping) {
        // Given up at once, so the next process resumes it without waiting for the hold to end.
        await this.storage.releasePublishRun(run.id, this.driver).catch(() => undefined);
        throw new ProblemError('internal_error', 'The service stopped while re-publishing the catalog after this change. The change is saved; '
          + 'the products not yet re-published are re-published when the service runs again.');
      }
      const step = await this.storage.transaction(async (tx) => {
        const current = await tx.publishRun(run.id);
        if (!current) return 'ended' as const;
        if (current.driver !== this.driver) return 'taken' as const;
        const last = await this.publisher.publishAfter(tx, current.merchant_id, current.store_ids, current.after_product_id, summary);
        if (last === null) {
          await tx.deletePublishRun(run.id);
          return 'ended' as const;
        }
        await tx.updatePublishRun(run.id, { after_product_id: last, leased_until: this.leaseFrom(this.now()) });
        return 'moved' as const;
      });
      if (step === 'ended') return summary;
      if (step === 'taken') {
        // Another process resumed it (this one held it past its lease): it ends it.
        while (await this.storage.publishRun(run.id) && !this.stopping) await new Promise((resolve) => setTimeout(resolve, TAKEN_OVER_POLL_MS));
        return summary;
      }
    }
  }

  /** Takes the runs whose driver stopped and drives them to their end; returns how many it took. */
  async resumeStalled(limit = 10): Promise<number> {
    if (this.stopping) return 0;
    const now = this.now();
    let taken = 0;
    for (const stalled of await this.storage.stalledPublishRuns(now.toISOString(), limit)) {
      const run = await this.storage.takePublishRun(stalled.id, this.driver, this.leaseFrom(now), now.toISOString());
      if (!run) continue;
      taken++;
      this.log.info({ merchant_id: run.merchant_id, run: run.id, after_product_id: run.after_product_id }, 'resuming an interrupted re-publishing');
      void this.complete(run).then(
        (summary) => this.log.info({ merchant_id: run.merchant_id, run: run.id, resolved: summary.resolved }, 'interrupted re-publishing completed'),
        (error: unknown) => this.log.error({ err: error, merchant_id: run.merchant_id, run: run.id }, 'resuming a re-publishing failed (tried again later)'),
      );
    }
    return taken;
  }

  /** Looks for stalled runs now and every intervalMs, logging what it resumes; returns a stop function. */
  schedule(logger: Logger, intervalMs = this.leaseMs / 2): () => void {
    this.log = logger.child({ component: 'publish-runs' });
    const look = () => void this.resumeStalled().catch((error: unknown) => this.log.error({ err: error }, 'looking for interrupted re-publishing failed'));
    look();
    const timer = setInterval(look, intervalMs);
    timer.unref();
    return () => clearInterval(timer);
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
