// The bytes export spools (spool.ts) keep in temporary files, counted per merchant and per process
// against their caps (CPS_EXPORT_SPOOL_BYTES_PER_MERCHANT, _PER_PROCESS), so stalled clients cannot
// pile files up on disk: while a budget is full a new export is refused (429 for the merchant's,
// 503 for the process's) and a running one stops reading its snapshot until bytes are taken.
// A file's bytes count from when they are handed to it until its client has read it empty or the
// export ended.
//
// @example
// const budget = new SpoolBudget({ perMerchant: 128 << 20, perProcess: 512 << 20 });
// budget.admit(merchantId);                        // throws the 429 or 503
// const spool = new Spool(memoryBytes, dir, budget.account(merchantId));
import { ProblemError } from '../shared/problem.js';

export interface SpoolCaps {
  perMerchant: number;
  perProcess: number;
}

/** One export's share of the budget: what its file holds, counted for its merchant and the process. */
export interface SpoolAccount {
  /** Bytes handed to the file. */
  add(bytes: number): void;
  /** Bytes the file no longer holds (read empty, or closed). */
  remove(bytes: number): void;
  /** True while the merchant's or the process's files hold their cap or more. */
  readonly full: boolean;
  /** Resolves at the next removal of bytes anywhere in the process (then look at `full` again), or when the signal aborts. */
  freed(signal: AbortSignal): Promise<void>;
}

export class SpoolBudget {
  private total = 0;
  private readonly byMerchant = new Map<number, number>();
  private waiting = new Set<() => void>();

  constructor(readonly caps: SpoolCaps) {}

  /** Bytes in every export's file now. */
  get bytes(): number {
    return this.total;
  }

  /** Throws the refusal of a new export while the merchant's files or the process's are full. */
  admit(merchantId: number): void {
    const ofMerchant = this.byMerchant.get(merchantId) ?? 0;
    if (ofMerchant >= this.caps.perMerchant) {
      throw refusal(
        'rate_limited',
        `Your exports hold ${ofMerchant} bytes in temporary files, the most one merchant may (${this.caps.perMerchant}).`,
      );
    }
    if (this.total >= this.caps.perProcess) {
      throw refusal(
        'service_unavailable',
        `Exports hold ${this.total} bytes in temporary files on this server, the most it takes (${this.caps.perProcess}).`,
      );
    }
  }

  account(merchantId: number): SpoolAccount {
    const held = () => this.byMerchant.get(merchantId) ?? 0;
    const full = () => this.total >= this.caps.perProcess || held() >= this.caps.perMerchant;
    return {
      add: (bytes) => {
        this.total += bytes;
        this.byMerchant.set(merchantId, held() + bytes);
      },
      remove: (bytes) => {
        if (bytes <= 0) return;
        this.total -= bytes;
        const left = held() - bytes;
        if (left > 0) this.byMerchant.set(merchantId, left);
        else this.byMerchant.delete(merchantId);
        this.wakeAll();
      },
      get full() {
        return full();
      },
      freed: (signal) =>
        new Promise<void>((resolve) => {
          const done = () => {
            this.waiting.delete(done);
            signal.removeEventListener('abort', done);
            resolve();
          };
          if (signal.aborted) return resolve();
          this.waiting.add(done);
          signal.addEventListener('abort', done, { once: true });
        }),
    };
  }

  private wakeAll(): void {
    const waiting = this.waiting;
    this.waiting = new Set();
    for (const wake of waiting) wake();
  }
}

function refusal(code: 'rate_limited' | 'service_unavailable', detail: string): ProblemError {
  return new ProblemError(code, `${detail} Retry once their clients have read them.`, undefined, { 'Retry-After': '1' });
}
