// When each API key was last used, without a write per request. A process writes a
// key's use at most once per interval (CPS_API_KEY_LAST_USED_SECONDS), and the write itself is
// skipped by the database when another process recorded one within the interval, so a key's row is
// written about once per interval however many requests and processes use it. The write runs
// after the request's key check, in the background: a request never waits for it, and a failed
// one is logged and tried again with the key's next use.
import { silentLogger, type Logger } from '../operations/log.js';
import type { TenancyStore } from '../storage/port.js';

/** The most keys one process remembers a write for; past it, the longest remembered is forgotten first. */
const REMEMBERED_KEYS_MAX = 10_000;

export class ApiKeyUses {
  /** By key id: when (ms) this process last wrote, or tried to write, the key's use. */
  private readonly written = new Map<number, number>();
  private readonly pending = new Set<Promise<void>>();

  constructor(
    private readonly storage: Pick<TenancyStore, 'recordApiKeyUse'>,
    /** At most one write per key per this long (ms). */
    private readonly intervalMs: number,
    private readonly now: () => Date = () => new Date(),
    private readonly logger: Logger = silentLogger,
  ) {}

  /** A request came with the key: records the use unless this process did within the interval. */
  used(keyId: number): void {
    const at = this.now();
    const last = this.written.get(keyId);
    if (last !== undefined && at.getTime() - last < this.intervalMs) return;
    this.written.delete(keyId);
    if (this.written.size >= REMEMBERED_KEYS_MAX) this.written.delete(this.written.keys().next().value!);
    this.written.set(keyId, at.getTime());
    const unlessAfter = new Date(at.getTime() - this.intervalMs).toISOString();
    const writing = this.storage
      .recordApiKeyUse(keyId, at.toISOString(), unlessAfter)
      .then(() => undefined)
      .catch((error: unknown) => {
        // The next use tries again.
        if (this.written.get(keyId) === at.getTime()) this.written.delete(keyId);
        this.logger.warn({ err: error, api_key_id: keyId }, "recording an API key's last use failed");
      })
      .finally(() => this.pending.delete(writing));
    this.pending.add(writing);
  }

  /** Waits for the writes under way (before storage closes). */
  async flush(): Promise<void> {
    await Promise.all(this.pending);
  }
}
