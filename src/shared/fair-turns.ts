// Work that runs one piece at a time, merchants in turn, in slices of the event loop: pieces run
// back to back for at most `sliceMs` of one turn of the loop, then the loop turns (I/O that arrived
// meanwhile, another merchant's request, runs) before the next slice. One merchant's many clients
// (100 change-feed streams catching up on a re-pricing, say) wait for each other, not for the other
// merchants, and what arrives meanwhile waits at most a slice, not behind all of them; a thousand
// small pieces (one change for each of 1,000 long-polls) still cost a few turns of the loop, not a
// thousand.
//
// @example
// const turns = new FairTurns(2);
// const result = await turns.run(merchantId, () => readWindow());
export class FairTurns {
  /** Waiting pieces by merchant, merchants in the order their turn comes (a Map keeps insertion order). */
  private readonly waiting = new Map<number, (() => void)[]>();
  private busy = false;
  /** When the current slice began (performance.now()); -1 between slices. */
  private sliceStarted = -1;

  /**
   * @param sliceMs how long pieces may run back to back before the event loop turns (0: it turns after every piece).
   * @param now the clock slices are measured on, in milliseconds (tests pass their own).
   */
  constructor(
    private readonly sliceMs = 0,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Pieces waiting now, over every merchant. */
  get queued(): number {
    let count = 0;
    for (const queue of this.waiting.values()) count += queue.length;
    return count;
  }

  /** Runs `piece` once it is the merchant's turn; rejects as it does. */
  async run<T>(merchantId: number, piece: () => Promise<T>): Promise<T> {
    await this.turn(merchantId);
    if (this.sliceStarted < 0) this.sliceStarted = this.now();
    try {
      return await piece();
    } finally {
      if (this.now() - this.sliceStarted < this.sliceMs) this.next();
      else {
        // The slice is spent: the next piece starts after the event loop has turned.
        this.sliceStarted = -1;
        setImmediate(() => this.next());
      }
    }
  }

  private turn(merchantId: number): Promise<void> | void {
    if (!this.busy) {
      this.busy = true;
      return;
    }
    return new Promise<void>((resolve) => {
      const queue = this.waiting.get(merchantId);
      if (queue) queue.push(resolve);
      else this.waiting.set(merchantId, [resolve]);
    });
  }

  /** Hands the turn to the next merchant's oldest piece; that merchant goes to the end of the line. */
  private next(): void {
    const first = this.waiting.entries().next();
    if (first.done) {
      this.busy = false;
      this.sliceStarted = -1;
      return;
    }
    const [merchantId, queue] = first.value;
    const resolve = queue.shift()!;
    this.waiting.delete(merchantId);
    if (queue.length > 0) this.waiting.set(merchantId, queue);
    resolve();
  }
}
