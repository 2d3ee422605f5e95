// Wake-ups after commit on PostgreSQL (LISTEN/NOTIFY): a transaction that adds work notifies its
// topic's channel, which PostgreSQL delivers at COMMIT (never for a rollback, once per channel per
// transaction); one dedicated listening connection per storage hands it to the subscribed workers.
// A wake-up only: the dispatcher and the mirror keep polling, so a notification lost while the
// listener reconnects delays work by at most a poll interval (and a reconnect wakes everyone). While
// the connection is up (`live`) idle workers back off their polls (shared/idle-poll.ts); when it
// fails, every worker is woken, and finds it down: it polls at its fast interval until it is back.
import type { ChangedStores, WorkTopic } from '../port.js';
import type { PgConnection } from './connection.js';

const CHANNELS: Record<WorkTopic, string> = { deliveries: 'cps_deliveries', images: 'cps_images', publishing: 'cps_publishing' };
/** The channel a statement notifies with pg_notify when it adds image work. */
export const IMAGE_WORK_CHANNEL = CHANNELS.images;
const TOPICS = new Map(Object.entries(CHANNELS).map(([topic, channel]) => [channel, topic as WorkTopic]));

/** The channel recordChanges notifies, its payload the stores it recorded changes for (changedStoresPayload). */
export const CHANGES_CHANNEL = 'cps_changes';
/** A NOTIFY payload must stay under 8000 bytes: past this, "some stores" ('*'). */
const MAX_PAYLOAD = 7900;

/** The payload of a CHANGES_CHANNEL notification: the distinct store ids, comma-separated, or '*' for too many to list. */
export function changedStoresPayload(storeIds: readonly number[]): string {
  const payload = [...new Set(storeIds)].join(',');
  return payload.length <= MAX_PAYLOAD ? payload : '*';
}

/** The stores a CHANGES_CHANNEL payload names ('any' for '*' or anything unreadable). */
export function changedStoresOf(payload: string | undefined): ChangedStores {
  if (!payload || !/^[0-9]+(,[0-9]+)*$/.test(payload)) return 'any';
  return payload.split(',').map(Number);
}

/** Tells the workers listening on any process that this transaction adds work (delivered at COMMIT). */
export async function notifyWork(c: PgConnection, topic: WorkTopic): Promise<void> {
  await c.run(`NOTIFY ${CHANNELS[topic]}`);
}

/** The part of pg.Client the listener uses. */
export interface ListeningClient {
  connect(): Promise<unknown>;
  query(text: string): Promise<unknown>;
  end(): Promise<void>;
  on(event: 'notification', listener: (message: { channel: string; payload?: string }) => void): unknown;
  on(event: 'error', listener: (error: Error) => void): unknown;
  on(event: 'end', listener: () => void): unknown;
}

export interface WakeupOptions {
  /** First wait before reconnecting after the connection failed; doubles up to maxRetryMs. */
  retryMs?: number;
  maxRetryMs?: number;
  onError?: (error: Error) => void;
}

export class PgWakeups {
  private readonly listeners = new Map<WorkTopic, Set<() => void>>();
  private readonly changeListeners = new Set<(stores: ChangedStores) => void>();
  private client: ListeningClient | null = null;
  private connecting: Promise<void> | null = null;
  private retryTimer: NodeJS.Timeout | null = null;
  private retryMs: number;
  private closed = false;

  constructor(
    /** A new, unconnected client on the database (e.g. `() => new pg.Client({ connectionString })`). */
    private readonly newClient: () => ListeningClient,
    private readonly options: WakeupOptions = {},
  ) {
    this.retryMs = options.retryMs ?? 100;
  }

  /** Subscribes; the listening connection opens with the first subscriber. Returns the unsubscribe. */
  subscribe(topic: WorkTopic, listener: () => void): () => void {
    let set = this.listeners.get(topic);
    if (!set) this.listeners.set(topic, (set = new Set()));
    set.add(listener);
    this.listen();
    return () => {
      set.delete(listener);
    };
  }

  /** Subscribes to the changes recorded in any process (CHANGES_CHANNEL); returns the unsubscribe. */
  subscribeChanges(listener: (stores: ChangedStores) => void): () => void {
    this.changeListeners.add(listener);
    this.listen();
    return () => {
      this.changeListeners.delete(listener);
    };
  }

  /** The listening connection opens with the first subscriber. */
  private listen(): void {
    if (!this.client && !this.connecting && !this.retryTimer && !this.closed) this.connecting = this.connect();
  }

  /** Whether the listening connection is up (LISTENing on every channel). */
  get live(): boolean {
    return this.client !== null && !this.closed;
  }

  /** Resolves when the listening connection is up (tests: a NOTIFY after this is heard). */
  async listening(): Promise<void> {
    while (this.connecting && !this.closed) await this.connecting;
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    await this.connecting;
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => {});
  }

  private async connect(): Promise<void> {
    const client = this.newClient();
    let failed = false;
    const fail = (error: Error) => {
      if (failed) return;
      failed = true;
      const wasLive = this.client === client;
      if (wasLive) this.client = null;
      void client.end().catch(() => {});
      if (this.closed) return;
      this.options.onError?.(error);
      // Not heard any more: the workers that backed off their polls look now and poll fast meanwhile.
      if (wasLive) for (const topic of this.listeners.keys()) this.wake(topic);
      this.retryTimer = setTimeout(() => {
        this.retryTimer = null;
        if (!this.closed) this.connecting = this.connect();
      }, this.retryMs);
      this.retryTimer.unref();
      this.retryMs = Math.min(this.retryMs * 2, this.options.maxRetryMs ?? 5000);
    };
    client.on('error', fail);
    client.on('end', () => fail(new Error('the listening connection ended')));
    client.on('notification', (message) => {
      if (message.channel === CHANGES_CHANNEL) return this.changed(changedStoresOf(message.payload));
      const topic = TOPICS.get(message.channel);
      if (topic) this.wake(topic);
    });
    try {
      await client.connect();
      for (const channel of [...Object.values(CHANNELS), CHANGES_CHANNEL]) await client.query(`LISTEN ${channel}`);
      if (failed) return;
      if (this.closed) {
        await client.end().catch(() => {});
        return;
      }
      this.client = client;
      this.retryMs = this.options.retryMs ?? 100;
      // Whatever was notified while no connection listened: every worker looks once, and so does
      // the live feed at every store it waits for.
      for (const topic of this.listeners.keys()) this.wake(topic);
      this.changed('any');
    } catch (error) {
      fail(error as Error);
    } finally {
      this.connecting = null;
    }
  }

  private changed(stores: ChangedStores): void {
    for (const listener of [...this.changeListeners]) {
      try {
        listener(stores);
      } catch (error) {
        this.options.onError?.(error as Error);
      }
    }
  }

  private wake(topic: WorkTopic): void {
    for (const listener of [...(this.listeners.get(topic) ?? [])]) {
      try {
        listener();
      } catch (error) {
        this.options.onError?.(error as Error);
      }
    }
  }
}
