// Panel sign-in throttling. Failures are counted per account and source address
// together: failures from one address never lock the account out at another (five wrong admin
// tokens from anywhere used to make the right one answer 429 for everyone). Past the free failures,
// each further attempt of that pair waits longer, doubling from `signInDelaySeconds` up to the
// window. An address failing across many accounts (password spraying) is throttled on its own,
// higher threshold, with the same growing delays; that too holds back only that address.
//
// An attempt is reserved before its check: counted and recorded as a failure in one transaction
// that holds its subjects (storage port, countSignInFailures), so concurrent attempts, in this
// process or another, each see the ones before them and never more pass than the limits allow. The
// check's success forgives the reservation. Addresses count in their canonical spelling.
import type { Config } from '../config.js';
import { canonicalAddress } from '../shared/canonical-address.js';
import { ProblemError } from '../shared/problem.js';
import type { PanelStore, StorageTx } from '../storage/port.js';

/** An e-mail longer than any account's is cut there: the subject stays bounded, whatever is typed. */
const MAX_ACCOUNT_CHARS = 320;

type ThrottleConfig = Pick<
  Config['panel'],
  'signInMaxFailures' | 'signInAddressMaxFailures' | 'signInWindowMinutes' | 'signInDelaySeconds'
>;

type ThrottleStore = Pick<PanelStore, 'clearSignInFailures'> & {
  transaction<T>(fn: (tx: Pick<StorageTx, 'countSignInFailures' | 'recordSignInFailure'>) => Promise<T>): Promise<T>;
};

/** A reserved attempt: recorded as a failure until `succeeded` or `forgive` takes it back. */
export interface SignInAttempt {
  readonly pair: string;
  readonly reserved: readonly number[];
}

export class SignInThrottle {
  constructor(
    private readonly storage: ThrottleStore,
    private readonly config: () => ThrottleConfig,
    private readonly now: () => Date,
  ) {}

  /** `account` is `operator` or the normalized e-mail; `address` the client's, in any spelling. */
  private subjects(account: string, address: string) {
    const canonical = canonicalAddress(address) ?? address;
    return { pair: `account+address:${account.slice(0, MAX_ACCOUNT_CHARS)} ${canonical}`, address: `address:${canonical}` };
  }

  /**
   * Reserves an attempt of this account at this address, recorded as a failure of both; 429 with
   * Retry-After (and nothing recorded) while the pair or the address must wait.
   */
  async reserve(account: string, address: string): Promise<SignInAttempt> {
    const { signInMaxFailures, signInAddressMaxFailures, signInWindowMinutes, signInDelaySeconds } = this.config();
    const windowMs = signInWindowMinutes * 60_000;
    const subjects = this.subjects(account, address);
    return this.storage.transaction(async (tx) => {
      const now = this.now().getTime();
      const failures = await tx.countSignInFailures([subjects.pair, subjects.address], new Date(now - windowMs).toISOString());
      let until = 0;
      for (const [subject, free] of [
        [subjects.pair, signInMaxFailures],
        [subjects.address, signInAddressMaxFailures],
      ] as const) {
        const f = failures.get(subject);
        if (!f || f.count < free) continue;
        // The wait after the last failure doubles with each failure past the free ones, up to the window.
        const waitMs = Math.min(signInDelaySeconds * 1000 * 2 ** Math.min(f.count - free, 30), windowMs);
        until = Math.max(until, Date.parse(f.newest) + waitMs);
      }
      if (until > now) {
        const retryAfter = Math.max(1, Math.ceil((until - now) / 1000));
        throw new ProblemError('rate_limited', `Too many failed sign-ins from this address: try again in ${retryAfter} s.`, undefined, {
          'Retry-After': String(retryAfter),
        });
      }
      const reserved = await tx.recordSignInFailure([subjects.pair, subjects.address], new Date(now).toISOString());
      return { pair: subjects.pair, reserved };
    });
  }

  /** A success forgets the pair's failures and its own reservation (the address's earlier failures stay counted). */
  async succeeded(attempt: SignInAttempt): Promise<void> {
    await this.storage.clearSignInFailures(attempt.pair, attempt.reserved);
  }

  /** An attempt that was never checked (the server was too busy to) is not a failure. */
  async forgive(attempt: SignInAttempt): Promise<void> {
    await this.storage.clearSignInFailures(null, attempt.reserved);
  }
}
