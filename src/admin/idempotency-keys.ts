// Idempotency keys of the admin API (docs/admin.md#idempotent-writes), as Stripe's: a credential's
// key is claimed by its first request with the request's hash; the answer that request gets is
// kept with the key for CPS_IDEMPOTENCY_HOURS; the same key and request again replays it, a
// different request with the key is refused (422), and one that comes while the first still runs
// is told so (409). In the database, so every process behind a load balancer sees every key.
//
// A running request holds its key by a lease it renews; a lease that lapsed means its process is
// gone. The key then goes to the next request with it unless a write of the first committed (its
// transaction marks the key): that write is never done again.
import { randomUUID } from 'node:crypto';
import { ProblemError } from '../shared/problem.js';
import { heldCommits, RequestCommits } from '../storage/held-commits.js';
import type { CatalogStorage, StorageOperations } from '../storage/port.js';
import type { IdempotencyKeyRecord, IdempotentAnswer } from './model.js';

/** How long a running request holds its key without renewing it; it renews it every third of that. */
export const IDEMPOTENCY_LEASE_MS = 30_000;
/** Keys deleted per transaction by the pruning. */
export const IDEMPOTENCY_PRUNE_BATCH = 1000;
/** The longest key accepted (Stripe's limit). */
export const MAX_IDEMPOTENCY_KEY_LENGTH = 255;

const HOUR_MS = 60 * 60 * 1000;

/** What a request with an Idempotency-Key does: run (the key is its own now) or replay the kept answer. */
export type IdempotencyStart =
  | { kind: 'run'; owner: string }
  | { kind: 'replay'; answer: IdempotentAnswer }
  /** A kept answer, for a streamed request whose hash is known only once its body was read: compare, then replay. */
  | { kind: 'compare'; answer: IdempotentAnswer; requestHash: string | null };

export const keyInUse = () =>
  new ProblemError(
    'idempotency_key_in_use',
    'A request with this Idempotency-Key is still running. Retry once it has been answered (the retry replays its answer).',
  );
export const keyReused = () =>
  new ProblemError(
    'idempotency_key_reused',
    'This Idempotency-Key was used with a different request (method, path or body). Use a new key for a new request.',
  );
const answerLost = () =>
  new ProblemError(
    'conflict',
    "The first request with this Idempotency-Key was applied, but its process stopped before the answer was kept, so it cannot be replayed; it is not applied again. Read the resource's state, and use a new key for a new request.",
  );

export class IdempotencyKeys {
  constructor(
    private readonly storage: CatalogStorage,
    private readonly now: () => Date,
    private readonly hours: number,
  ) {}

  /**
   * Claims the credential's key for a request with this hash (null: a streamed body, hashed as it is
   * read), or says what to answer instead: a kept answer to replay; 409 while another request holds
   * it; 422 when it was used with another request.
   */
  start(credential: string, key: string, requestHash: string | null): Promise<IdempotencyStart> {
    return this.storage.transaction(async (tx) => {
      const now = this.now();
      const claim = {
        credential,
        key,
        request_hash: requestHash,
        created_at: now.toISOString(),
        expires_at: new Date(now.getTime() + this.hours * HOUR_MS).toISOString(),
        owner: randomUUID(),
        leased_until: new Date(now.getTime() + IDEMPOTENCY_LEASE_MS).toISOString(),
      };
      const existing = await tx.idempotencyKey(credential, key);
      if (!existing) {
        // PostgreSQL: another process's claim of the key committed meanwhile (the insert waited for it).
        if (await tx.claimIdempotencyKey(claim, false)) return { kind: 'run', owner: claim.owner };
        const decided = this.decide((await tx.idempotencyKey(credential, key))!, requestHash, now);
        if (decided === 'take') throw keyInUse();
        return decided;
      }
      const decided = this.decide(existing, requestHash, now);
      if (decided !== 'take') return decided;
      await tx.claimIdempotencyKey(claim, true);
      return { kind: 'run', owner: claim.owner };
    });
  }

  private decide(record: IdempotencyKeyRecord, requestHash: string | null, now: Date): Exclude<IdempotencyStart, { kind: 'run' }> | 'take' {
    const at = now.toISOString();
    const held = record.owner !== null && record.leased_until !== null && record.leased_until > at;
    // Forgotten after CPS_IDEMPOTENCY_HOURS: the key is new again (unless a request still runs with it).
    if (record.expires_at <= at && !held) return 'take';
    const differs = requestHash !== null && record.request_hash !== null && record.request_hash !== requestHash;
    if (record.answer) {
      if (requestHash === null) return { kind: 'compare', answer: record.answer, requestHash: record.request_hash };
      if (differs) throw keyReused();
      return { kind: 'replay', answer: record.answer };
    }
    if (differs) throw keyReused();
    if (held) throw keyInUse();
    // The first request's process is gone: nothing of it committed (do it now), or its write did.
    if (!record.write_committed) return 'take';
    throw answerLost();
  }

  /**
   * Runs the request that holds the key (`work`), each of its write transactions marking the key,
   * then keeps the answer `answered` gives in the transaction of the request's last write, held open
   * for it (storage/held-commits.ts), or in one of its own when none is held. With no answer to keep
   * (a 5xx), or when the last commit fails, the key is forgotten: a retry does the work.
   */
  async run(
    credential: string,
    key: string,
    owner: string,
    work: () => Promise<void>,
    answered: () => Promise<{ answer: IdempotentAnswer; requestHash: string } | null>,
  ): Promise<void> {
    const renewal = setInterval(() => void this.renew(credential, key, owner).catch(() => {}), IDEMPOTENCY_LEASE_MS / 3);
    renewal.unref();
    const request = new RequestCommits((tx) => tx.markIdempotentWrite(credential, key, owner));
    try {
      await heldCommits.run(request, work);
      const kept = await answered();
      if (!kept) {
        await request.close();
        await this.storage.releaseIdempotencyKey(credential, key, owner);
        return;
      }
      const keep = async (tx: StorageOperations) => {
        await tx.setIdempotentRequestHash(credential, key, owner, kept.requestHash);
        await tx.keepIdempotentAnswer(credential, key, owner, kept.answer);
      };
      if (!(await request.end(keep))) await this.storage.transaction(keep);
    } catch (error) {
      await request.close();
      await this.storage.releaseIdempotencyKey(credential, key, owner).catch(() => {});
      throw error;
    } finally {
      clearInterval(renewal);
    }
  }

  /** Renews the owner's lease while its request runs. */
  private renew(credential: string, key: string, owner: string): Promise<void> {
    return this.storage.renewIdempotencyLease(credential, key, owner, new Date(this.now().getTime() + IDEMPOTENCY_LEASE_MS).toISOString());
  }
}

/** Deletes the keys that expired by `now`, a batch per transaction; how many. */
export async function pruneExpiredIdempotencyKeys(
  storage: CatalogStorage,
  now: Date,
  batch = IDEMPOTENCY_PRUNE_BATCH,
  stopped: () => boolean = () => false,
): Promise<number> {
  let deleted = 0;
  for (;;) {
    const pruned = await storage.pruneIdempotencyKeys(now.toISOString(), batch);
    deleted += pruned;
    if (pruned < batch || stopped()) return deleted;
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
}
