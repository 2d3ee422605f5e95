// Wake-ups after commit on PostgreSQL (LISTEN/NOTIFY): a transaction that adds work notifies its
// topic's channel, which PostgreSQL delivers at COMMIT (never for a rollback, once per channel per
// transaction); one dedicated listening connection per storage hands it to the subscribed workers.
// A wake-up only: the dispatcher and the mirror keep polling, so a notification lost while the
// listener reconnects delays work by at most a poll interval (and a reconnect wakes everyone).
import type { WorkTopic } from '../port.js';
import type { PgConnection } from './connection.js';

const CHANNELS: Record<WorkTopic, string> = { deliveries: 'cps_deliveries', images: 'cps_images', publishing: 'cps_publishing' };
/** The channel a statement notifies with pg_notify when it adds image work. */
export const IMAGE_WORK_CHANNEL = CHANNELS.images;
const TOPICS = new Map(Object.entries(CHANNELS).map(([topic, channel]) => [channel, topic as WorkTopic]));

/** Tells the workers listening on any process that this transaction adds work (delivered at COMMIT). */
export async function notifyWork(c: PgConnection, topic: WorkTopic): Promise<void> {
  await c.run(`NOTIFY ${CHANNELS[topic]}`);
}

/** The part of pg.Client the listener uses. */
export interface ListeningClient {
  connect(): Promise<unknown>;
  query(text: string): Promise<unknown>;
  end(): Promise<void>;
  on(event: 'notification', listener: (message: { channel: string }) => void): unknown;
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
    if (!this.client && !this.connecting && !this.retryTimer && !this.closed) this.connecting = this.connect();
    return () => { set.delete(listener); };
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
      if (this.client === client) this.client = null;
      void client.end().catch(() => {});
      if (this.closed) return;
      this.options.onError?.(error);
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
      const topic = TOPICS.get(message.channel);
      if (topic) this.wake(topic);
    });
    try {
      await client.connect();
      for (const channel of Object.values(CHANNELS)) await client.query(`LISTEN ${channel}`);
      if (failed) return;
      if (this.closed) {
        await client.end().catch(() => {});
        return;
      }
      this.client = client;
      this.retryMs = this.options.retryMs ?? 100;
      // Whatever was notified while no connection listened: every worker looks once.
      for (const topic of this.listeners.keys()) this.wake(topic);
    } catch (error) {
      fail(error as Error);
    } finally {
      this.connecting = null;
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
