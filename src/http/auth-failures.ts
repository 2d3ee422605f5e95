// Wrong admin tokens and keys, throttled per client address (SECURITY.md "Admin API"): each
// address may fail CPS_ADMIN_AUTH_MAX_FAILURES times at once, then once more every window / max
// (a token bucket of failures, in memory, per process). While an address has none left, every
// request from it answers 429 with Retry-After before its token is even compared, so guessing
// gains nothing by sending the right token among the wrong ones. Addresses are canonical
// (clientAddressReader: shared/canonical-address.ts), so no spelling of an address escapes it.
//
//   const failures = new AuthFailureThrottle(config.adminAuthFailures, now);
//   failures.check(address);          // 429 while the address must wait
//   if (!valid) failures.failed(address);
import type { Config } from '../config.js';
import { ProblemError } from '../shared/problem.js';
import { TokenBucketLimiter } from './rate-limit.js';

export class AuthFailureThrottle {
  private readonly failures: TokenBucketLimiter;

  constructor(settings: Config['adminAuthFailures'], now: () => Date) {
    this.failures = new TokenBucketLimiter({ burst: settings.max, perSecond: settings.max / (settings.windowMinutes * 60) }, now);
  }

  /** 429 `rate_limited` with Retry-After while the address has used up its failures. */
  check(address: string): void {
    const wait = this.failures.waitSeconds(address);
    if (wait === 0) return;
    throw new ProblemError('rate_limited', `Too many failed authentications from this address: try again in ${wait} s.`, undefined, {
      'Retry-After': String(wait),
    });
  }

  /** The address sent a wrong token or key. */
  failed(address: string): void {
    this.failures.take(address);
  }
}
