// Password hashing with a bounded share of libuv's thread pool (4 threads unless UV_THREADPOOL_SIZE
// says otherwise), which compression (zlib), file work and DNS share: at most `atOnce` hashes run at
// once, at most `queue` more wait their turn, and any further one is refused at once (503 with
// Retry-After), so a flood of sign-ins never holds the pool's other users back.
//
//   const hasher = new PasswordHasher(() => ({ atOnce: 1, queue: 16 }));
//   if (await hasher.verify(password, user.password_hash)) …
import { randomBytes, scrypt as scryptCallback, timingSafeEqual, type ScryptOptions } from 'node:crypto';
import { ProblemError } from '../shared/problem.js';

/** scrypt: N = 2^15 (32 MiB), r = 8, p = 1; the parameters are stored with each hash. */
const SCRYPT = { N: 32768, r: 8, p: 1, maxmem: 64 * 1024 * 1024 };

/** Verified against when the account does not exist, so that answers take the same time. */
export const DUMMY_HASH = 'scrypt$32768$8$1$AAAAAAAAAAAAAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA';

export interface PasswordHashLimits {
  /** Hashes running at once (CPS_PASSWORD_HASHES_AT_ONCE). */
  atOnce: number;
  /** Hashes waiting for a turn beyond those (CPS_PASSWORD_HASH_QUEUE). */
  queue: number;
}

/** What the hasher reports (operations/metrics.ts); a no-op without metrics. */
export interface PasswordHashObserver {
  /** Hashes running now, after one started or ended. */
  observePasswordHashesInFlight(running: number): void;
  /** A hash refused because as many as the limits allow were running and waiting. */
  observePasswordHashRefused(): void;
}

function scrypt(password: string, salt: Buffer, keylen: number, options: ScryptOptions): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    scryptCallback(password, salt, keylen, options, (error, key) => (error ? reject(error) : resolve(key))),
  );
}

export class PasswordHasher {
  private running = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(
    private readonly limits: () => PasswordHashLimits,
    private readonly observer?: PasswordHashObserver,
  ) {}

  /** `scrypt$N$r$p$salt$hash`, base64url. */
  async hash(password: string): Promise<string> {
    const salt = randomBytes(16);
    const key = await this.turn(() => scrypt(password, salt, 32, SCRYPT));
    return ['scrypt', SCRYPT.N, SCRYPT.r, SCRYPT.p, salt.toString('base64url'), key.toString('base64url')].join('$');
  }

  async verify(password: string, stored: string): Promise<boolean> {
    const [scheme, N, r, p, salt, hash] = stored.split('$');
    if (scheme !== 'scrypt' || !salt || !hash) return false;
    const expected = Buffer.from(hash, 'base64url');
    const options = { N: Number(N), r: Number(r), p: Number(p), maxmem: SCRYPT.maxmem };
    const key = await this.turn(() => scrypt(password, Buffer.from(salt, 'base64url'), expected.length, options));
    return timingSafeEqual(key, expected);
  }

  /** Runs `work` when fewer than `atOnce` run; waits in a bounded queue; refuses (503) past it. */
  private async turn<T>(work: () => Promise<T>): Promise<T> {
    const { atOnce, queue } = this.limits();
    if (this.running >= atOnce) {
      if (this.waiting.length >= queue) {
        this.observer?.observePasswordHashRefused();
        throw new ProblemError(
          'service_unavailable',
          'The server is checking as many passwords as it can: try again in a moment.',
          undefined,
          {
            'Retry-After': '1',
          },
        );
      }
      // The hash that ends hands its turn over: `running` stays counted for this one.
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    } else {
      this.running++;
    }
    this.observer?.observePasswordHashesInFlight(this.running);
    try {
      return await work();
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.running--;
      this.observer?.observePasswordHashesInFlight(this.running);
    }
  }
}
