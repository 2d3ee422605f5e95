// Work that runs one piece at a time, merchants in turn, with the event loop free between two
// pieces: one merchant's many clients (100 change-feed streams catching up on a re-pricing, say)
// wait for each other, not for the other merchants, and requests arriving meanwhile are answered
// between two pieces instead of behind all of them.
//
// @example
// const turns = new FairTurns();
// const result = await turns.run(merchantId, () => readWindow());
export class FairTurns {
  /** Waiting pieces by merchant, merchants in the order their turn comes (a Map keeps insertion order). */
  private readonly waiting = new Map<number, (() => void)[]>();
  private busy = false;

  /** Pieces waiting now, over every merchant. */
  get queued(): number {
    let count = 0;
    for (const queue of this.waiting.values()) count += queue.length;
    return count;
  }

  /** Runs `piece` once it is the merchant's turn; rejects as it does. */
  async run<T>(merchantId: number, piece: () => Promise<T>): Promise<T> {
    await this.turn(merchantId);
    try {
      return await piece();
    } finally {
      // The next piece starts after the event loop has turned: I/O that arrived meanwhile goes first.
      setImmediate(() => this.next());
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
      return;
    }
    const [merchantId, queue] = first.value;
    const resolve = queue.shift()!;
    this.waiting.delete(merchantId);
    if (queue.length > 0) this.waiting.set(merchantId, queue);
    resolve();
  }
}
