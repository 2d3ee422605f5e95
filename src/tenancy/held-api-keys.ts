// The API keys this process's open streams and long-polls hold (docs/decisions.md#api-keys): a key
// revoked (or rolled to end now) through this process ends them at once; revoked elsewhere (another
// `serve` on the same database, the CLI), or expired, they end at the next re-check, one batched lookup of every held key at least
// every CPS_API_KEY_CACHE_MS. The database is the one channel every process shares.
import type { TenancyStore } from '../storage/port.js';
import type { ActiveApiKeys } from './api-keys.js';

/** One open stream's or long-poll's hold on its key: `signal` aborts once the key is revoked, expired or gone. */
export interface KeyHold {
  readonly signal: AbortSignal;
  /** The stream or long-poll ended: its key is no longer re-checked for it (once; later calls do nothing). */
  release(): void;
}

/** What is logged when a re-check fails (the holds stay; the next re-check looks again). */
export interface HeldApiKeysLog {
  warn(details: object, message: string): void;
}

/** The shortest re-check interval: with CPS_API_KEY_CACHE_MS 0 (no key remembered) held keys are re-checked this often. */
export const KEY_RECHECK_MIN_MS = 100;

/**
 * The keys held by open live connections, by id. `hold(keyId)` for each stream or long-poll;
 * `forget(keyId)` when this process revokes a key (it also forgets the remembered key: ActiveApiKeys);
 * a timer, running only while something is held, re-checks every held key in one lookup.
 */
export class HeldApiKeys {
  private readonly held = new Map<number, Set<AbortController>>();
  private timer: NodeJS.Timeout | null = null;
  private checking = false;
  private isClosed = false;
  /** The re-check's interval: CPS_API_KEY_CACHE_MS, at least KEY_RECHECK_MIN_MS. */
  readonly recheckMs: number;
  /** Re-checks run so far (each one lookup); tests read it. */
  checks = 0;

  constructor(
    private readonly storage: Pick<TenancyStore, 'activeApiKeyIds'>,
    /** This process's remembered keys: a key found revoked is forgotten there too, so a reconnect gets 401 at once. */
    private readonly remembered: Pick<ActiveApiKeys, 'forget' | 'changed'>,
    apiKeyCacheMs: number,
    private readonly log?: HeldApiKeysLog,
    /** The service's clock: a key whose expiry has passed is no longer active. */
    private readonly now: () => Date = () => new Date(),
  ) {
    this.recheckMs = Math.max(apiKeyCacheMs, KEY_RECHECK_MIN_MS);
  }

  /** Keys held now (by at least one open stream or long-poll). */
  get keys(): number {
    return this.held.size;
  }

  /** Holds the key for one stream or long-poll until `release()`; its signal aborts when the key is revoked. */
  hold(keyId: number): KeyHold {
    const holder = new AbortController();
    let holders = this.held.get(keyId);
    if (!holders) this.held.set(keyId, (holders = new Set()));
    holders.add(holder);
    this.startChecking();
    const held = holders;
    return {
      signal: holder.signal,
      release: () => {
        if (!held.delete(holder)) return;
        if (held.size === 0 && this.held.get(keyId) === held) this.held.delete(keyId);
        if (this.held.size === 0) this.stopChecking();
      },
    };
  }

  /** The key was revoked: this process stops accepting it, and its open streams and long-polls end now. */
  forget(keyId: number): void {
    this.remembered.forget(keyId);
    const holders = this.held.get(keyId);
    if (!holders) return;
    this.held.delete(keyId);
    if (this.held.size === 0) this.stopChecking();
    for (const holder of holders) holder.abort();
  }

  /** The key was changed, not revoked: this process reads it again on its next request; its streams go on. */
  changed(keyId: number): void {
    this.remembered.changed(keyId);
  }

  /** Stops re-checking (shutdown: the live feed ends the streams and long-polls itself). */
  close(): void {
    this.isClosed = true;
    this.stopChecking();
  }

  /** One lookup of every held key; each one no longer active is forgotten (revocation never undoes: no race with new holds). */
  async recheck(): Promise<void> {
    if (this.checking || this.held.size === 0) return;
    this.checking = true;
    this.checks++;
    const keyIds = [...this.held.keys()];
    try {
      const active = new Set(await this.storage.activeApiKeyIds(keyIds, this.now().toISOString()));
      for (const keyId of keyIds) if (!active.has(keyId)) this.forget(keyId);
    } catch (error) {
      this.log?.warn(
        { err: error, keys: keyIds.length },
        'API keys: re-checking the keys of open streams failed (the next re-check looks again)',
      );
    } finally {
      this.checking = false;
    }
  }

  private startChecking(): void {
    if (this.timer || this.isClosed) return;
    this.timer = setInterval(() => void this.recheck(), this.recheckMs);
    this.timer.unref();
  }

  private stopChecking(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }
}
