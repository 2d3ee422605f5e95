// Coalescing (spec 3): the outbox's changes become deliveries, batched per endpoint, event kind and
// store for up to coalesceMs or batchSize product ids, whichever comes first, a pass at a time.
import type { Config } from '../config.js';
import type { CatalogStorage, StorageTx } from '../storage/port.js';
import type { OutboxEntry, OutboxWindowGroup } from '../storage/records.js';
import { onChange } from './health.js';
import { endConditions, healthOf } from './health-records.js';
import type { WebhookEndpointRecord } from './model.js';

/** A delivery a coalescing pass makes, with when the oldest change it carries was recorded. */
type CoalescedDelivery = Parameters<StorageTx['insertCoalescedDeliveries']>[0][number];

/**
 * A coalescing pass takes at most this many batches' worth of the oldest outbox rows (batchSize
 * each). A pass costs ~8 round trips on PostgreSQL whatever its size: at 20 a backlog cost 0.4 of
 * them a delivery, as many as the claims and records together.
 */
export const OUTBOX_WINDOW_BATCHES = 64;

/**
 * Coalescing passes of a running dispatcher start at most this often: a tenth of the coalescing
 * window (`CPS_WEBHOOK_COALESCE_MS`), at most 100 ms. A batch is sent this much later at worst.
 */
export function coalescePassGapMs(coalesceMs: number): number {
  return Math.min(100, coalesceMs / 10);
}

/** The dispatcher's coalescing passes (WebhookDispatcher.coalesce). */
export class OutboxCoalescer {
  /** Whether the last pass saw outbox rows (a batch waiting for its time is work in progress). */
  outboxSeen = false;

  constructor(
    private readonly storage: CatalogStorage,
    private readonly config: Config['webhooks'],
    private readonly now: () => Date,
    /** True once the dispatcher stops: no further pass of a call. */
    private readonly stopping: () => boolean,
  ) {}

  /**
   * Coalescing: changes of one event kind for one endpoint and store are batched for up to
   * coalesceMs or batchSize product ids, whichever comes first. Returns the deliveries created.
   */
  async coalesce(): Promise<number> {
    // A pass (one transaction) takes the oldest OUTBOX_WINDOW rows of the outbox, never
    // the whole backlog (a re-pricing with many endpoints writes millions); passes follow each other,
    // the event loop free between two, while they create deliveries and find the window full.
    const window = OUTBOX_WINDOW_BATCHES * this.config.batchSize;
    let created = 0;
    // The passes of one call each start after the window of the pass before: rows a pass left (a busy
    // endpoint, a batch waiting for its time) wait for the next call, and a pass never walks again
    // what the passes before it deleted (on PostgreSQL, index entries of dead rows until a vacuum).
    let afterId = 0;
    for (;;) {
      const now = this.now();
      const pass = await this.storage.transaction(async (tx) => {
        // The window read once; the rows batched go in one statement.
        const groups = await tx.outboxWindow(window, afterId);
        this.outboxSeen = groups.length > 0;
        for (const group of groups) afterId = Math.max(afterId, group.rows.at(-1)!.id);
        const taken: number[] = [];
        const trimmed: { id: number; productIds: number[] }[] = [];
        // Each endpoint read (PostgreSQL: its pass lock taken) once a pass, for all of its groups.
        const endpoints = new Map<number, WebhookEndpointRecord | 'busy' | undefined>();
        const due: OutboxWindowGroup[] = [];
        for (const group of groups) if (await this.dueGroup(tx, group, now, endpoints)) due.push(group);
        // The rows of every due group held in one statement, and their deliveries inserted in one:
        // on PostgreSQL each is a round trip, and a pass has a few groups per endpoint.
        const held = await this.holdRows(tx, due);
        const deliveries: CoalescedDelivery[] = [];
        for (const group of due) await this.coalesceGroup(tx, group, held.get(group)!, now, taken, trimmed, endpoints, deliveries);
        await tx.insertCoalescedDeliveries(deliveries);
        await tx.deleteOutboxRows(taken);
        await tx.trimOutboxRows(trimmed);
        return { made: deliveries.length, full: groups.reduce((rows, group) => rows + group.count, 0) >= window };
      });
      created += pass.made;
      if (!pass.full || pass.made === 0 || this.stopping()) return created;
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }

  /**
   * Whether the group's batch is due (its time is up, or it has a batch's worth) and its endpoint
   * not busy; reads the endpoint (PostgreSQL: takes its pass lock) once a pass, into `endpoints`.
   */
  private async dueGroup(
    tx: StorageTx,
    group: OutboxWindowGroup,
    now: Date,
    endpoints: Map<number, WebhookEndpointRecord | 'busy' | undefined>,
  ): Promise<boolean> {
    const waitedMs = now.getTime() - Date.parse(group.oldestAt);
    if (waitedMs < this.config.coalesceMs && group.count < this.config.batchSize) return false;
    if (!endpoints.has(group.endpointId)) endpoints.set(group.endpointId, await tx.coalescingEndpoint(group.endpointId));
    // Busy (PostgreSQL: a drop of its pending deliveries under way, or a paused endpoint's row held
    // by an attempt's health update or another pass): its rows wait for the next pass.
    return endpoints.get(group.endpointId) !== 'busy';
  }

  /**
   * The due groups' rows of the window that no other coalescer took meanwhile, held to the pass's
   * end, with the products they carry now (another coalescer may have trimmed one), by group.
   */
  private async holdRows(tx: StorageTx, groups: OutboxWindowGroup[]): Promise<Map<OutboxWindowGroup, OutboxEntry[]>> {
    const held = new Map((await tx.holdOutboxRows(groups.flatMap((group) => group.rows))).map((row) => [row.id, row]));
    return new Map(groups.map((group) => [group, group.rows.flatMap((row) => held.get(row.id) ?? [])]));
  }

  /**
   * Adds the group's due deliveries to `deliveries`; the ids of the rows they took (or that no
   * endpoint wants) go into `taken`, the rows of which they took only some products into `trimmed`
   * with the rest.
   */
  private async coalesceGroup(
    tx: StorageTx,
    group: OutboxWindowGroup,
    /** The group's rows this pass holds (holdRows). */
    rows: OutboxEntry[],
    now: Date,
    taken: number[],
    trimmed: { id: number; productIds: number[] }[],
    /** The endpoints this pass has read, by id: what the pass holds and has written of each is as read here. */
    endpoints: Map<number, WebhookEndpointRecord | 'busy' | undefined>,
    deliveries: CoalescedDelivery[],
  ): Promise<void> {
    const timeIsUp = now.getTime() - Date.parse(group.oldestAt) >= this.config.coalesceMs;
    const endpoint = endpoints.get(group.endpointId);
    if (rows.length === 0 || endpoint === 'busy') return;
    if (!endpoint) {
      for (const row of rows) taken.push(row.id);
      return;
    }
    // spec 3: a change after the cooldown resumes a paused endpoint; during it, nothing is sent:
    // the changes become `dropped` deliveries, which an operator can recover.
    const { health, deliver } = onChange(healthOf(endpoint), now);
    if (health.status !== endpoint.status) {
      await tx.updateWebhookEndpoint(endpoint.id, health);
      await endConditions(tx, endpoint, health, now);
      endpoints.set(endpoint.id, { ...endpoint, ...health });
    }
    // An endpoint with a rate has deliveries waiting for their turn; the changes go
    // into the newest of them first, up to batchSize ids, so a storm arrives as few full ones.
    const filled = new Set<number>();
    if (endpoint.max_per_second !== null && deliver) {
      const offered = [...new Set(rows.flatMap((r) => r.productIds))];
      for (const id of await tx.fillWaitingDelivery(group, offered, this.config.batchSize)) filled.add(id);
    }
    const batches: { productIds: number[]; oldestAt: string }[] = [];
    let current = { productIds: [] as number[], ids: new Set<number>(), oldestAt: '' };
    // Per row, the products that went into the batch still open (the one that may wait for more).
    const open = new Map<number, number[]>();
    for (const row of rows) {
      for (const productId of row.productIds) {
        if (filled.has(productId)) continue;
        if (!current.ids.has(productId)) {
          if (current.productIds.length === this.config.batchSize) {
            batches.push(current);
            current = { productIds: [], ids: new Set(), oldestAt: '' };
            open.clear();
          }
          current.productIds.push(productId);
          current.ids.add(productId);
        }
        // Rows come in arrival order: the first of a batch is its oldest change.
        if (!current.oldestAt) current.oldestAt = row.createdAt;
        let rest = open.get(row.id);
        if (!rest) open.set(row.id, (rest = []));
        rest.push(productId);
      }
    }
    // A partial batch waits for more ids until its time is up: its rows keep its products.
    if (current.productIds.length === this.config.batchSize || (timeIsUp && current.productIds.length > 0)) {
      batches.push(current);
      open.clear();
    }
    const createdAt = now.toISOString();
    deliveries.push(
      ...batches.map(
        (batch): CoalescedDelivery => ({
          delivery: {
            endpoint_id: endpoint.id,
            event: group.event,
            store_id: group.storeId,
            product_ids: batch.productIds.sort((a, b) => a - b),
            occurred_at: null,
            status: deliver ? 'pending' : 'dropped',
            attempts: 0,
            next_attempt_at: deliver ? createdAt : null,
            created_at: createdAt,
          },
          oldestChangeAt: batch.oldestAt,
        }),
      ),
    );
    // The batched rows are deleted (or trimmed to what waits) in the pass's transaction: together
    // with their deliveries or not at all.
    for (const row of rows) {
      const rest = open.get(row.id);
      if (!rest) taken.push(row.id);
      else if (rest.length < row.productIds.length) trimmed.push({ id: row.id, productIds: rest });
    }
  }
}
