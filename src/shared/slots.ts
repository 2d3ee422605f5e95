// Places of one kind (exports in flight, live change-feed connections) held at once, capped per API
// key, per merchant and per process: one key cannot take its merchant's share, and one merchant
// (whatever its number of keys) cannot take the process's, so another merchant always finds room.
// Over a key's or a merchant's cap: 429 rate_limited (the caller's own use); over the process's:
// 503 service_unavailable (the process is full, whoever asks). Both with Retry-After, spread at
// random over [base, 2 x base] seconds: clients refused together (a thousand streams opened at once)
// would otherwise all come back in the same second, again and again, and every other client's
// requests would wait behind each burst.
//
// @example
// const exports = new Slots({ perKey: 2, perMerchant: 4, perProcess: 16 }, 'exports in flight');
// const release = exports.take({ keyId, merchantId }); // throws the 429 or 503
// ...; release();                                      // once, when the export has ended
import { ProblemError } from './problem.js';

export interface SlotCaps {
  perKey: number;
  perMerchant: number;
  perProcess: number;
}

/** Who takes a place: the API key and its merchant. */
export interface SlotHolder {
  keyId: number | string;
  merchantId: number;
}

export class Slots {
  private readonly byKey = new Map<number | string, number>();
  private readonly byMerchant = new Map<number, number>();
  private total = 0;

  constructor(
    readonly caps: SlotCaps,
    /** What a place is, in the refusals' words: `exports in flight`, `live connections to the change feed`. */
    private readonly what: string,
    /** Seconds a refused client is asked to wait at least (`Retry-After`, up to twice this): about how soon a place frees. */
    private readonly retryAfterSeconds = 1,
    /** Draws from [0, 1) to spread each refusal's `Retry-After` (tests pass a fixed one). */
    private readonly random: () => number = Math.random,
  ) {}

  /** A refusal's `Retry-After`: from retryAfterSeconds to twice it, whole seconds, at random. */
  retryAfter(): number {
    return this.retryAfterSeconds + Math.floor(this.random() * (this.retryAfterSeconds + 1));
  }

  /** Places held now, over every merchant. */
  get held(): number {
    return this.total;
  }

  /** Places the merchant holds now. */
  heldBy(merchantId: number): number {
    return this.byMerchant.get(merchantId) ?? 0;
  }

  /** Takes a place, or throws the refusal (the key's cap first, then the merchant's, then the process's); the returned function gives it back, once. */
  take({ keyId, merchantId }: SlotHolder): () => void {
    const { perKey, perMerchant, perProcess } = this.caps;
    const ofKey = this.byKey.get(keyId) ?? 0;
    if (ofKey >= perKey)
      throw this.refusal('rate_limited', `This API key holds ${ofKey} ${this.what}, the most one key may hold at once (${perKey}).`);
    const ofMerchant = this.heldBy(merchantId);
    if (ofMerchant >= perMerchant) {
      throw this.refusal(
        'rate_limited',
        `Your API keys hold ${ofMerchant} ${this.what}, the most one merchant may hold at once (${perMerchant}).`,
      );
    }
    if (this.total >= perProcess) {
      throw this.refusal('service_unavailable', `This server holds ${this.total} ${this.what}, the most it takes at once (${perProcess}).`);
    }
    this.byKey.set(keyId, ofKey + 1);
    this.byMerchant.set(merchantId, ofMerchant + 1);
    this.total++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.total--;
      decrement(this.byKey, keyId);
      decrement(this.byMerchant, merchantId);
    };
  }

  private refusal(code: 'rate_limited' | 'service_unavailable', detail: string): ProblemError {
    return new ProblemError(code, `${detail} Retry once one of them has ended.`, undefined, {
      'Retry-After': String(this.retryAfter()),
    });
  }
}

function decrement<K>(counts: Map<K, number>, key: K): void {
  const left = (counts.get(key) ?? 1) - 1;
  if (left > 0) counts.set(key, left);
  else counts.delete(key);
}
