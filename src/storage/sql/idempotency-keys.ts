// Idempotency keys of the admin API, written once for both engines (dialect.ts): one row per
// (credential, key), claimed by the first request, marked by its write's transaction, and holding
// its answer once given (admin/idempotency-keys.ts).
import type { IdempotencyKeyStore } from '../port.js';
import type { IdempotencyKeyRecord, IdempotentAnswer } from '../../admin/model.js';
import type { Row, SqlConnection } from './dialect.js';

const toRecord = (row: Row): IdempotencyKeyRecord => ({
  credential: row.credential as string,
  key: row.key as string,
  request_hash: (row.request_hash as string | null) ?? null,
  created_at: row.created_at as string,
  expires_at: row.expires_at as string,
  owner: (row.owner as string | null) ?? null,
  leased_until: (row.leased_until as string | null) ?? null,
  write_committed: Boolean(row.write_committed),
  answer:
    row.status === null || row.status === undefined
      ? null
      : { status: Number(row.status), headers: JSON.parse(row.headers as string) as [string, string][], body: row.body as string },
});

export class SqlIdempotencyKeys implements IdempotencyKeyStore {
  static readonly writes = [
    'claimIdempotencyKey',
    'markIdempotentWrite',
    'renewIdempotencyLease',
    'setIdempotentRequestHash',
    'keepIdempotentAnswer',
    'releaseIdempotencyKey',
    'pruneIdempotencyKeys',
  ] as const;

  constructor(private readonly c: SqlConnection) {}

  async idempotencyKey(credential: string, key: string): Promise<IdempotencyKeyRecord | undefined> {
    const row = await this.c.one(
      `SELECT * FROM idempotency_keys WHERE credential = $1 AND key = $2${this.c.locksRows ? ' FOR UPDATE' : ''}`,
      [credential, key],
    );
    return row && toRecord(row);
  }

  async claimIdempotencyKey(
    claim: Pick<IdempotencyKeyRecord, 'credential' | 'key' | 'request_hash' | 'created_at' | 'expires_at' | 'owner' | 'leased_until'>,
    replacing: boolean,
  ): Promise<boolean> {
    const values = [claim.credential, claim.key, claim.request_hash, claim.created_at, claim.expires_at, claim.owner, claim.leased_until];
    if (replacing) {
      const changed = await this.c.run(
        `UPDATE idempotency_keys SET request_hash = $3, created_at = $4, expires_at = $5, owner = $6, leased_until = $7,
          write_committed = ${this.c.dialect.engine === 'sqlite' ? '0' : 'false'}, status = NULL, headers = NULL, body = NULL
        WHERE credential = $1 AND key = $2`,
        values,
      );
      return changed === 1;
    }
    const inserted = await this.c.run(
      `INSERT INTO idempotency_keys (credential, key, request_hash, created_at, expires_at, owner, leased_until)
      VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (credential, key) DO NOTHING`,
      values,
    );
    return inserted === 1;
  }

  async markIdempotentWrite(credential: string, key: string, owner: string): Promise<void> {
    await this.c.run(
      `UPDATE idempotency_keys SET write_committed = ${this.c.dialect.engine === 'sqlite' ? '1' : 'true'}
      WHERE credential = $1 AND key = $2 AND owner = $3`,
      [credential, key, owner],
    );
  }

  async renewIdempotencyLease(credential: string, key: string, owner: string, until: string): Promise<void> {
    await this.c.run('UPDATE idempotency_keys SET leased_until = $4 WHERE credential = $1 AND key = $2 AND owner = $3', [
      credential,
      key,
      owner,
      until,
    ]);
  }

  async setIdempotentRequestHash(credential: string, key: string, owner: string, requestHash: string): Promise<void> {
    await this.c.run('UPDATE idempotency_keys SET request_hash = $4 WHERE credential = $1 AND key = $2 AND owner = $3', [
      credential,
      key,
      owner,
      requestHash,
    ]);
  }

  async keepIdempotentAnswer(credential: string, key: string, owner: string, answer: IdempotentAnswer): Promise<boolean> {
    const changed = await this.c.run(
      `UPDATE idempotency_keys SET status = $4, headers = $5, body = $6, owner = NULL, leased_until = NULL
      WHERE credential = $1 AND key = $2 AND owner = $3`,
      [credential, key, owner, answer.status, JSON.stringify(answer.headers), answer.body],
    );
    return changed === 1;
  }

  async releaseIdempotencyKey(credential: string, key: string, owner: string): Promise<void> {
    await this.c.run('DELETE FROM idempotency_keys WHERE credential = $1 AND key = $2 AND owner = $3', [credential, key, owner]);
  }

  async pruneIdempotencyKeys(expiredBy: string, limit: number): Promise<number> {
    // A batch at a time by the expiry index; a key a running request still holds is left to it.
    return this.c.run(
      `DELETE FROM idempotency_keys WHERE (credential, key) IN (
        SELECT credential, key FROM idempotency_keys WHERE expires_at <= $1 AND (owner IS NULL OR leased_until <= $1) ORDER BY expires_at LIMIT $2)`,
      [expiredBy, limit],
    );
  }
}
