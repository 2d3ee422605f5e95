// Rate limiting (docs/decisions.md#rate-limits): a token bucket per API key on /v1, and per
// credential on /admin/v1 (the admin token, each merchant API key), in memory, advertised with the
// RateLimit-Policy and RateLimit fields of draft-ietf-httpapi-ratelimit-headers-10 and answered 429
// with Retry-After when empty.
import type { Context, Env, MiddlewareHandler } from 'hono';
import type { AdminEnv, PublicEnv } from './auth.js';
import { answerHeader } from './direct-answer.js';
import { ProblemError } from '../shared/problem.js';

export interface RateLimitSettings {
  /** Capacity of each key's bucket: requests a key may send at once. */
  burst: number;
  /** Tokens added per second: the sustained rate. */
  perSecond: number;
}

export interface RateLimitDecision {
  allowed: boolean;
  /** Whole requests left in the bucket after this one. */
  remaining: number;
  /** Seconds until the bucket is full again (the draft's `t`). */
  resetSeconds: number;
  /** Seconds until the next request is allowed; 0 when this one was. */
  retryAfterSeconds: number;
}

interface Bucket {
  tokens: number;
  updatedMs: number;
}

/** Token buckets by key; time comes from the injected clock, so tests need no sleeps. */
export class TokenBucketLimiter {
  private readonly buckets = new Map<string | number, Bucket>();
  private takesSinceSweep = 0;

  constructor(
    readonly settings: RateLimitSettings,
    private readonly now: () => Date = () => new Date(),
  ) {
    if (!(settings.burst > 0 && settings.perSecond > 0)) throw new Error('a rate limit needs a burst and a rate above 0');
  }

  /** The policy as the draft's RateLimit-Policy item: quota `q` per window `w` (the time to refill a whole bucket). */
  get policyHeader(): string {
    return `"default";q=${this.settings.burst};w=${Math.ceil(this.settings.burst / this.settings.perSecond)}`;
  }

  /** Takes one token from the key's bucket when there is one; a refused request takes nothing. */
  take(key: string | number): RateLimitDecision {
    const { burst, perSecond } = this.settings;
    const nowMs = this.now().getTime();
    const bucket = this.buckets.get(key) ?? { tokens: burst, updatedMs: nowMs };
    // A clock that steps back refills nothing (and never drains).
    bucket.tokens = Math.min(burst, bucket.tokens + (Math.max(0, nowMs - bucket.updatedMs) / 1000) * perSecond);
    bucket.updatedMs = Math.max(bucket.updatedMs, nowMs);
    const allowed = bucket.tokens >= 1;
    if (allowed) bucket.tokens -= 1;
    this.buckets.set(key, bucket);
    if (++this.takesSinceSweep >= 10_000) this.sweep(nowMs);
    return {
      allowed,
      remaining: Math.floor(bucket.tokens),
      resetSeconds: Math.ceil((burst - bucket.tokens) / perSecond),
      retryAfterSeconds: allowed ? 0 : Math.max(1, Math.ceil((1 - bucket.tokens) / perSecond)),
    };
  }

  /** Seconds until the key's bucket holds a token again, without taking one; 0 when it holds one now. */
  waitSeconds(key: string | number): number {
    const bucket = this.buckets.get(key);
    if (!bucket) return 0;
    const { burst, perSecond } = this.settings;
    const tokens = Math.min(burst, bucket.tokens + (Math.max(0, this.now().getTime() - bucket.updatedMs) / 1000) * perSecond);
    return tokens >= 1 ? 0 : Math.max(1, Math.ceil((1 - tokens) / perSecond));
  }

  /** Gives back the token a request took when it was refused after all (the live feed's per-key cap): it counts as throttled. */
  refund(key: string | number): void {
    const bucket = this.buckets.get(key);
    if (bucket) bucket.tokens = Math.min(this.settings.burst, bucket.tokens + 1);
  }

  /** A bucket that has refilled completely is the same as none: forget it (bounds memory). */
  private sweep(nowMs: number): void {
    this.takesSinceSweep = 0;
    const { burst, perSecond } = this.settings;
    for (const [key, bucket] of this.buckets) {
      if (bucket.tokens + ((nowMs - bucket.updatedMs) / 1000) * perSecond >= burst) this.buckets.delete(key);
    }
  }
}

/** The RateLimit field (draft-ietf-httpapi-ratelimit-headers-10): remaining `r`, seconds to full `t`. */
export function rateLimitHeaders(limiter: TokenBucketLimiter, decision: RateLimitDecision): Record<string, string> {
  return {
    'RateLimit-Policy': limiter.policyHeader,
    RateLimit: `"default";r=${decision.remaining};t=${decision.resetSeconds}`,
  };
}

/**
 * After apiKeyAuth: one token per request from the bucket of the request's API key. Every response
 * to an authenticated request carries the policy and the bucket's state; an empty bucket answers
 * 429 `rate_limited` with Retry-After.
 */
export function rateLimit(limiter: TokenBucketLimiter): MiddlewareHandler<PublicEnv> {
  return limitedBy(limiter, (c: Context<PublicEnv>) => c.var.apiKeyId, 'requests for this API key');
}

/**
 * After adminAuth: the same per credential of the admin API, in buckets of their own (the admin
 * token's, each key's: a key's admin requests do not spend its /v1 bucket). A panel session is not
 * limited here: the panel is a page a person clicks through.
 */
export function adminRateLimit(limiter: TokenBucketLimiter): MiddlewareHandler<AdminEnv> {
  return limitedBy(
    limiter,
    (c: Context<AdminEnv>) => {
      const credential = c.var.credential;
      return credential.kind === 'key' ? `key:${credential.id}` : credential.kind === 'user' ? `user:${credential.userId}` : 'operator';
    },
    'admin API requests for this credential',
  );
}

function limitedBy<E extends Env>(
  limiter: TokenBucketLimiter,
  bucketOf: (c: Context<E>) => string | number,
  what: string,
): MiddlewareHandler<E> {
  return async (c, next) => {
    const decision = limiter.take(bucketOf(c));
    const headers = rateLimitHeaders(limiter, decision);
    if (!decision.allowed) {
      throw new ProblemError(
        'rate_limited',
        `Too many ${what}: ${limiter.settings.burst} at once and ${limiter.settings.perSecond} per second. Retry after ${decision.retryAfterSeconds} s.`,
        undefined,
        { ...headers, 'Retry-After': String(decision.retryAfterSeconds) },
      );
    }
    for (const [name, value] of Object.entries(headers)) answerHeader(c, name, value);
    await next();
  };
}
