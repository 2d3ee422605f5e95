// Catch-up reads take turns (shared/fair-turns.ts): one at a time, merchants in turn, the event
// loop turning between two, so one merchant's many streams behind its store wait for each other and
// not the other merchants, and what arrived meanwhile runs between two reads.
import { describe, expect, it } from 'vitest';
import { FairTurns } from '../../src/shared/fair-turns.js';

describe('FairTurns', () => {
  it("runs one piece at a time, merchants in turn: another merchant's piece goes ahead of the first merchant's queue", async () => {
    const turns = new FairTurns();
    const order: string[] = [];
    let running = 0;
    let most = 0;
    const piece = (name: string) => async () => {
      running++;
      most = Math.max(most, running);
      order.push(name);
      await new Promise((resolve) => setImmediate(resolve));
      running--;
      return name;
    };
    const pieces = [
      ...['a1', 'a2', 'a3', 'a4'].map((name) => turns.run(1, piece(name))),
      turns.run(2, piece('b1')),
      turns.run(2, piece('b2')),
      turns.run(3, piece('c1')),
    ];
    expect(await Promise.all(pieces)).toEqual(['a1', 'a2', 'a3', 'a4', 'b1', 'b2', 'c1']);
    expect(most).toBe(1);
    // Merchant 1 asked four times first; merchants 2 and 3 did not wait for all four.
    expect(order).toEqual(['a1', 'a2', 'b1', 'c1', 'a3', 'b2', 'a4']);
    expect(turns.queued).toBe(0);
  });

  it('lets the event loop turn between two pieces, and goes on after a piece fails', async () => {
    const turns = new FairTurns();
    const order: string[] = [];
    const first = turns.run(1, async () => {
      order.push('first');
      setImmediate(() => order.push('arrived meanwhile'));
      throw new Error('read failed');
    });
    const second = turns.run(1, async () => void order.push('second'));
    await expect(first).rejects.toThrow('read failed');
    await second;
    expect(order).toEqual(['first', 'arrived meanwhile', 'second']);
  });

  it('runs pieces back to back within a slice, then lets the event loop turn before the next slice', async () => {
    let clock = 0;
    const turns = new FairTurns(5, () => clock);
    const order: string[] = [];
    setImmediate(() => order.push('arrived meanwhile'));
    // Ten pieces of 1 ms on the clock: five fit in a slice of 5 ms, then the loop turns.
    await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        turns.run(1, async () => {
          clock += 1;
          order.push(`piece ${i}`);
        }),
      ),
    );
    expect(order).toEqual([
      ...Array.from({ length: 5 }, (_, i) => `piece ${i}`),
      'arrived meanwhile',
      ...Array.from({ length: 5 }, (_, i) => `piece ${i + 5}`),
    ]);
  });

  it('with a slice of 0, lets the event loop turn after every piece', async () => {
    const turns = new FairTurns(0);
    const order: string[] = [];
    setImmediate(() => order.push('arrived meanwhile'));
    await Promise.all([1, 2, 3].map((i) => turns.run(1, async () => void order.push(`piece ${i}`))));
    expect(order).toEqual(['piece 1', 'arrived meanwhile', 'piece 2', 'piece 3']);
  });
});
