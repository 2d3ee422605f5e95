// API keys (docs/decisions.md#api-keys): 32 random bytes, shown once, stored only
// as a SHA-256 hash, compared in constant time, revocable. A key belongs to exactly one merchant.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { OPERATOR, type Actor } from '../admin/audit.js';
import { notFound, type CatalogWrites } from '../catalog/catalog-writes.js';
import { ProblemError, invalidInput } from '../shared/problem.js';
import type { MerchantScope } from '../storage/merchant-scope.js';
import type { TenancyStore } from '../storage/port.js';
import type { ActiveApiKeyRecord, ApiKeyPatch, ApiKeyRecord } from './model.js';
import { SCOPES, type Scope } from './credential.js';

const KEY_PREFIX = 'cps_';
const KEY_SHAPE = /^cps_[A-Za-z0-9_-]{43}$/;

export function hashApiKey(key: string): Buffer {
  return createHash('sha256').update(key).digest();
}

/**
 * What a new key may do: its scopes (default `catalog:read`), the stores it is restricted to
 * (default: every store), and when it stops working (default: never).
 */
export interface ApiKeyGrant {
  scopes?: readonly Scope[] | undefined;
  stores?: readonly string[] | null | undefined;
  expires_at?: string | null | undefined;
  /** The key a roll replaces. */
  rolled_from?: number | undefined;
  /** The web origins whose browser pages may read with the key (CORS; default none). */
  allowed_origins?: readonly string[] | undefined;
}

/** How long a rolled key's old secret may keep working at most (Stripe's roll: up to 7 days). */
export const ROLL_OVERLAP_MAX_MS = 7 * 24 * 3600_000;

/** Whether a key with this expiry is expired at `now` (it stops at its `expires_at`, not a moment later). */
export const isExpired = (expiresAt: string | null, now: Date): boolean => expiresAt !== null && Date.parse(expiresAt) <= now.getTime();

/** An RFC 3339 time of the body as stored (UTC, milliseconds), or a 400 naming it. */
function bodyTime(text: string, name: string): Date {
  const at = new Date(text);
  if (Number.isNaN(at.getTime())) throw invalidInput('body', [{ name, in: 'body', reason: 'must be an RFC 3339 date-time' }]);
  return at;
}

/**
 * The origins as given when each is exactly what a browser sends in `Origin` (a URL's origin: no
 * path, the default port left out, the host in lower case), or a 400 naming those that are not:
 * a key allowing `https://shop.example.com/` would never match a request.
 */
export function checkedOrigins(origins: readonly string[], field = '/allowed_origins'): string[] {
  const wrong = origins
    .map((origin, index) => ({ origin, index }))
    .filter(({ origin }) => {
      try {
        return new URL(origin).origin !== origin;
      } catch {
        return true;
      }
    });
  if (wrong.length) {
    throw invalidInput(
      'body',
      wrong.map(({ origin, index }) => ({
        name: `${field}/${index}`,
        in: 'body' as const,
        reason: `is not an origin as a browser sends it (scheme://host[:port], no path): "${origin}"`,
      })),
    );
  }
  return [...origins];
}

/** Issues a key for the merchant; the plain key is returned here and never again. */
export async function issueApiKey(
  merchant: Pick<MerchantScope, 'insertApiKey'>,
  name: string,
  now: Date,
  grant: ApiKeyGrant = {},
): Promise<ApiKeyRecord & { key: string }> {
  const key = `${KEY_PREFIX}${randomBytes(32).toString('base64url')}`;
  const record = await merchant.insertApiKey({
    name,
    prefix: key.slice(0, 12),
    key_hash: hashApiKey(key),
    created_at: now.toISOString(),
    // In the order of SCOPES, whatever the order asked: the list reads the same for equal keys.
    scopes: SCOPES.filter((scope) => (grant.scopes ?? ['catalog:read']).includes(scope)),
    stores: grant.stores ? [...grant.stores] : null,
    expires_at: grant.expires_at ?? null,
    allowed_origins: [...(grant.allowed_origins ?? [])],
    ...(grant.rolled_from === undefined ? {} : { rolled_from: grant.rolled_from }),
  });
  return { ...record, key };
}

/** A merchant's API keys as the admin API, the CLI and the panel manage them; each change audited. */
export class MerchantApiKeys {
  constructor(
    private readonly writes: CatalogWrites,
    /** This process's API keys (http auth; HeldApiKeys: open streams): a revoked key is forgotten, and its streams ended, at once. */
    private readonly remembered?: Pick<ActiveApiKeys, 'forget' | 'changed'>,
    /** Active keys one merchant may have (CPS_API_KEYS_PER_MERCHANT): caps per merchant then hold whatever its number of keys. */
    private readonly perMerchant = 100,
  ) {}

  async list(merchantId: number): Promise<ApiKeyRecord[]> {
    return (await this.writes.reads(merchantId)).listApiKeys();
  }

  /**
   * A new key for the merchant: the plain key is in this result and never again. Its stores must
   * be the merchant's; a key restricted to stores cannot write the catalog, which every store publishes.
   */
  create(merchantId: number, name: string, actor: Actor = OPERATOR, grant: ApiKeyGrant = {}): Promise<ApiKeyRecord & { key: string }> {
    if (grant.stores && grant.scopes?.includes('catalog:write')) {
      throw invalidInput('body', [
        {
          name: '/scopes',
          in: 'body',
          reason: "cannot hold catalog:write with stores: the catalog is the merchant's, published to every store",
        },
      ]);
    }
    if (grant.expires_at) {
      const expiresAt = bodyTime(grant.expires_at, '/expires_at');
      if (expiresAt <= this.writes.now())
        throw invalidInput('body', [{ name: '/expires_at', in: 'body', reason: 'must be in the future' }]);
      grant = { ...grant, expires_at: expiresAt.toISOString() };
    }
    if (grant.allowed_origins) grant = { ...grant, allowed_origins: checkedOrigins(grant.allowed_origins) };
    return this.writes.write(merchantId, actor, async ({ tx, audit, at }) => {
      if (grant.stores) {
        const known = new Set((await tx.listStores()).map((store) => store.slug));
        const unknown = grant.stores.map((slug, index) => ({ slug, index })).filter(({ slug }) => !known.has(slug));
        if (unknown.length) {
          throw invalidInput(
            'body',
            unknown.map(({ slug, index }) => ({
              name: `/stores/${index}`,
              in: 'body' as const,
              reason: `is not a store of the merchant: "${slug}"`,
            })),
          );
        }
      }
      await this.refuseOverLimit(merchantId, await tx.countActiveApiKeys(at));
      const created = await issueApiKey(tx, name, this.writes.now(), grant);
      const stores = created.stores ? `; stores ${created.stores.join(', ')}` : '';
      const expires = created.expires_at ? `; expires ${created.expires_at}` : '';
      const origins = created.allowed_origins.length ? `; origins ${created.allowed_origins.join(', ')}` : '';
      await audit(
        'api_key.create',
        `key ${created.id} "${created.name}" (${created.prefix}): ${created.scopes.join(', ')}${stores}${expires}${origins}`,
      );
      return created;
    });
  }

  private refuseOverLimit(merchantId: number, active: number): Promise<void> {
    if (active < this.perMerchant) return Promise.resolve();
    throw new ProblemError(
      'conflict',
      `Merchant ${merchantId} has ${active} active API keys, the most a merchant may have (${this.perMerchant}): revoke one it no longer uses first.`,
    );
  }

  /**
   * Rolls a key (Stripe's "roll key"): a new key record with the old one's name, scopes and stores
   * (`rolled_from` naming it), shown once in this result; the old key expires at `oldExpiresAt`,
   * from now up to ROLL_OVERLAP_MAX_MS later (default now), or sooner if it already expires sooner.
   * A new record rather than a new secret on the same one: the audit log and last use then tell
   * which secret an integration still sends. A revoked or expired key is not rolled (409).
   */
  async roll(
    merchantId: number,
    keyId: number,
    actor: Actor = OPERATOR,
    oldExpiresAt?: string | null,
  ): Promise<ApiKeyRecord & { key: string }> {
    const now = this.writes.now();
    const until = oldExpiresAt ? bodyTime(oldExpiresAt, '/expires_at') : now;
    if (until < now || until.getTime() > now.getTime() + ROLL_OVERLAP_MAX_MS) {
      throw invalidInput('body', [{ name: '/expires_at', in: 'body', reason: 'must be from now up to 7 days later' }]);
    }
    const created = await this.writes.write(merchantId, actor, async ({ tx, audit, at }) => {
      // Counted first: the merchant's row is locked, so rolls and creations of its keys run one at a time.
      const active = await tx.countActiveApiKeys(at);
      const old = (await tx.listApiKeys()).find((k) => k.id === keyId);
      if (!old) throw notFound(`API key ${keyId}`);
      if (old.revoked_at !== null || isExpired(old.expires_at, now)) {
        throw new ProblemError(
          'conflict',
          `API key ${keyId} is ${old.revoked_at !== null ? 'revoked' : 'expired'}: issue a new key instead.`,
        );
      }
      await tx.expireApiKey(keyId, until.toISOString());
      // The old key no longer counts once it has expired (a roll that ends it now never hits the limit).
      await this.refuseOverLimit(merchantId, until <= now ? active - 1 : active);
      const rolled = await issueApiKey(tx, old.name, now, {
        scopes: old.scopes,
        stores: old.stores,
        allowed_origins: old.allowed_origins,
        rolled_from: old.id,
      });
      const ends = until <= now ? 'now' : `at ${until.toISOString()}`;
      await audit(
        'api_key.roll',
        `key ${old.id} "${old.name}" (${old.prefix}) rolled into key ${rolled.id} (${rolled.prefix}); key ${old.id} expires ${ends}`,
      );
      return rolled;
    });
    // After the commit: an old key that expires now stops here at once, and its streams end (as a revocation's).
    if (until <= now) this.remembered?.forget(keyId);
    return created;
  }

  /**
   * Changes a key's name or allowed origins (its secret, scopes, stores and expiry stay). This
   * process reads the change at once; others within their key cache (CPS_API_KEY_CACHE_MS).
   */
  async update(merchantId: number, keyId: number, patch: ApiKeyPatch, actor: Actor = OPERATOR): Promise<ApiKeyRecord> {
    const checked: ApiKeyPatch = {
      ...(patch.name === undefined ? {} : { name: patch.name }),
      ...(patch.allowed_origins === undefined ? {} : { allowed_origins: checkedOrigins(patch.allowed_origins) }),
    };
    const updated = await this.writes.write(merchantId, actor, async ({ tx, audit }) => {
      const key = await tx.updateApiKey(keyId, checked);
      if (!key) throw notFound(`API key ${keyId}`);
      const changes = [
        ...(checked.name === undefined ? [] : [`name "${key.name}"`]),
        ...(checked.allowed_origins === undefined ? [] : [`origins ${key.allowed_origins.join(', ') || 'none'}`]),
      ];
      await audit('api_key.update', `key ${key.id} (${key.prefix}): ${changes.join('; ') || 'nothing changed'}`);
      return key;
    });
    // Not forget(): the key stays valid, and its open streams go on.
    this.remembered?.changed(keyId);
    return updated;
  }

  async revoke(merchantId: number, keyId: number, actor: Actor = OPERATOR): Promise<void> {
    await this.writes.write(merchantId, actor, async (write) => {
      if (!(await write.tx.revokeApiKey(keyId, write.at))) throw notFound(`API key ${keyId}`);
      await write.audit('api_key.revoke', `key ${keyId}`);
    });
    // After the commit: a lookup that starts now reads the revocation (and no change after it reaches the key's streams).
    this.remembered?.forget(keyId);
  }
}

/**
 * The active key a presented key is (its id, merchant, scopes and stores), or undefined for a
 * malformed, unknown, revoked or (at `now`) expired key.
 */
export async function activeApiKey(storage: TenancyStore, key: string, now: Date = new Date()): Promise<ActiveApiKeyRecord | undefined> {
  if (!KEY_SHAPE.test(key)) return undefined;
  const presented = hashApiKey(key);
  const found = await storage.findActiveApiKey(presented);
  if (!found || !timingSafeEqual(found.key_hash, presented) || isExpired(found.expires_at, now)) return undefined;
  const { key_hash: _, ...active } = found;
  return active;
}

/** The most active keys one process remembers; past it, the longest remembered is forgotten first. */
const REMEMBERED_KEYS_MAX = 10_000;

/**
 * The active key a presented key is, as this process last read it, for at most `ttlMs`
 * (CPS_API_KEY_CACHE_MS): most requests then need no database round trip for their key. A key
 * revoked through this process (`forget`, called by the admin API's revoke) stops working here at
 * once; revoked by another process (another `serve`, the CLI), it keeps working here for at most
 * ttlMs. Only active keys are remembered: a malformed, unknown or revoked key is looked up each time.
 * ttlMs 0 remembers nothing.
 */
export class ActiveApiKeys {
  /** By the presented key's hash: the key's id and merchant, and until when (ms) they hold. */
  private readonly remembered = new Map<string, { key: ActiveApiKeyRecord; until: number }>();
  /** Counts forget() and changed() calls: a lookup that a revocation overtook is not remembered. */
  private revocations = 0;
  /** Every origin some active key allows, as read last (allowsBrowserOrigin), and until when (ms) it holds. */
  private origins: { read: Promise<Set<string>>; until: number } | undefined;

  constructor(
    private readonly storage: TenancyStore,
    private readonly ttlMs: number,
    private readonly now: () => Date = () => new Date(),
  ) {}

  /** The active key a presented key is (its id, merchant, scopes and stores), or undefined for a malformed, unknown or revoked key. */
  async find(key: string): Promise<ActiveApiKeyRecord | undefined> {
    const now = this.now();
    if (this.ttlMs <= 0) return activeApiKey(this.storage, key, now);
    if (!KEY_SHAPE.test(key)) return undefined;
    const hash = hashApiKey(key).toString('base64');
    const at = now.getTime();
    const known = this.remembered.get(hash);
    if (known && at < known.until) return known.key;
    this.remembered.delete(hash);
    const revocations = this.revocations;
    const found = await activeApiKey(this.storage, key, now);
    if (found && revocations === this.revocations) {
      if (this.remembered.size >= REMEMBERED_KEYS_MAX) this.remembered.delete(this.remembered.keys().next().value!);
      // Remembered no longer than the key lives: an expired key is refused at its time, not a cache period later.
      const expires = found.expires_at === null ? Infinity : Date.parse(found.expires_at);
      this.remembered.set(hash, { key: found, until: Math.min(at + this.ttlMs, expires) });
    }
    return found;
  }

  /** The key was revoked: this process stops accepting it now. */
  forget(keyId: number): void {
    this.changed(keyId);
  }

  /** The key was changed (its origins, say) through this process: its next request reads it again, and so does the next preflight. */
  changed(keyId: number): void {
    this.revocations++;
    for (const [hash, known] of this.remembered) if (known.key.id === keyId) this.remembered.delete(hash);
    this.origins = undefined;
  }

  /**
   * Whether some active key of the deployment allows this origin (a CORS preflight carries no key:
   * http/browser-cors.ts), as this process last read every key's origins, for at most `ttlMs`.
   */
  async allowsBrowserOrigin(origin: string): Promise<boolean> {
    const at = this.now();
    if (!this.origins || at.getTime() >= this.origins.until) {
      const revocations = this.revocations;
      const read = this.storage.browserOrigins(at.toISOString()).then((list) => new Set(list));
      const entry = { read, until: at.getTime() + this.ttlMs };
      // Concurrent preflights share one read; a change meanwhile (changed()) makes the next one read again.
      this.origins = entry;
      read.then(
        () => {
          if (revocations !== this.revocations && this.origins === entry) this.origins = undefined;
        },
        () => {
          if (this.origins === entry) this.origins = undefined;
        },
      );
    }
    return (await this.origins.read).has(origin);
  }
}

/** The merchant a presented key belongs to, or undefined for a malformed, unknown, revoked or expired key. */
export async function merchantForApiKey(storage: TenancyStore, key: string, now?: Date): Promise<number | undefined> {
  return (await activeApiKey(storage, key, now))?.merchant_id;
}
