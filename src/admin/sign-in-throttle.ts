// Panel sign-in throttling. Failures are counted per account and source address
// together: failures from one address never lock the account out at another (five wrong admin
// tokens from anywhere used to make the right one answer 429 for everyone). Past the free failures,
// each further attempt of that pair waits longer, doubling from `signInDelaySeconds` up to the
// window. An address failing across many accounts (password spraying) is throttled on its own,
// higher threshold, with the same growing delays; that too holds back only that address.
// The failures are in the database, so every process counts them.
import type { Config } from '../config.js';
import { ProblemError } from '../shared/problem.js';
import type { PanelStore } from '../storage/port.js';

/** An e-mail longer than any account's is cut there: the subject stays bounded, whatever is typed. */
const MAX_ACCOUNT_CHARS = 320;

type ThrottleConfig = Pick<
  Config['panel'],
  'signInMaxFailures' | 'signInAddressMaxFailures' | 'signInWindowMinutes' | 'signInDelaySeconds'
>;

export class SignInThrottle {
  constructor(
    private readonly storage: Pick<PanelStore, 'recordSignInFailure' | 'countSignInFailures' | 'clearSignInFailures'>,
    private readonly config: () => ThrottleConfig,
    private readonly now: () => Date,
  ) {}

  /** `account` is `operator` or the normalized e-mail; `address` the client's. */
  private subjects(account: string, address: string) {
    return { pair: `account+address:${account.slice(0, MAX_ACCOUNT_CHARS)} ${address}`, address: `address:${address}` };
  }

  /** 429 with Retry-After while this account at this address (or this address at all) must wait. */
  async check(account: string, address: string): Promise<void> {
    const { signInMaxFailures, signInAddressMaxFailures, signInWindowMinutes, signInDelaySeconds } = this.config();
    const windowMs = signInWindowMinutes * 60_000;
    const now = this.now().getTime();
    const subjects = this.subjects(account, address);
    const failures = await this.storage.countSignInFailures([subjects.pair, subjects.address], new Date(now - windowMs).toISOString());
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
    if (until <= now) return;
    const retryAfter = Math.max(1, Math.ceil((until - now) / 1000));
    throw new ProblemError('rate_limited', `Too many failed sign-ins from this address: try again in ${retryAfter} s.`, undefined, {
      'Retry-After': String(retryAfter),
    });
  }

  async failed(account: string, address: string): Promise<void> {
    const subjects = this.subjects(account, address);
    await this.storage.recordSignInFailure([subjects.pair, subjects.address], this.now().toISOString());
  }

  /** A success forgets the pair's failures (the address's stay counted). */
  async succeeded(account: string, address: string): Promise<void> {
    await this.storage.clearSignInFailures(this.subjects(account, address).pair);
  }
}
