// Stalled clients cannot pile spooled exports up on disk: the bytes in export
// spool files count per merchant and per process (http/spool-budget.ts); while a budget is full, a
// new export is refused (429 for the merchant's, 503 for the process's) and the producer of a
// running one waits in room() until its client takes bytes. Real temporary files.
import os from 'node:os';
import { describe, expect, it } from 'vitest';
import { Spool } from '../../src/http/spool.js';
import { SpoolBudget } from '../../src/http/spool-budget.js';
import { ProblemError } from '../../src/shared/problem.js';

const KIB = 1024;
const CHUNK = 64 * KIB;

/** Pushes `chunks` chunks as the export does: each after room() resolves. Resolves once all are pushed. */
async function produce(spool: Spool, chunks: number): Promise<void> {
  for (let i = 0; i < chunks; i++) {
    await spool.room();
    spool.push(new Uint8Array(CHUNK).fill(i % 251));
  }
  spool.end();
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 50));

function refusal(fn: () => void): ProblemError | undefined {
  try {
    fn();
  } catch (error) {
    if (error instanceof ProblemError) return error;
    throw error;
  }
  return undefined;
}

describe('the spool budget', () => {
  it('keeps the files of clients that do not read within the caps, refuses new exports while full, and lets a producer go on as its client reads', async () => {
    const budget = new SpoolBudget({ perMerchant: 256 * KIB, perProcess: 448 * KIB });
    const first = new Spool(16 * KIB, os.tmpdir(), budget.account(1));
    const client = first.stream();
    let firstDone = false;
    const firstProducer = produce(first, 40).then(() => (firstDone = true));
    await settle();
    // 40 chunks (2.5 MiB) to push: the file holds the merchant's cap (at most one chunk past it) and the producer waits.
    expect(firstDone).toBe(false);
    expect(budget.bytes).toBeGreaterThanOrEqual(256 * KIB);
    expect(budget.bytes).toBeLessThanOrEqual(256 * KIB + CHUNK);
    expect(refusal(() => budget.admit(1))).toMatchObject({ status: 429, code: 'rate_limited', headers: { 'Retry-After': '1' } });
    expect(refusal(() => budget.admit(2))).toBeUndefined();

    // Another merchant fills the rest of the process's budget: now everyone is refused with 503.
    const second = new Spool(16 * KIB, os.tmpdir(), budget.account(2));
    const secondClient = second.stream();
    void produce(second, 40);
    await settle();
    expect(budget.bytes).toBeLessThanOrEqual(448 * KIB + CHUNK);
    expect(refusal(() => budget.admit(3))).toMatchObject({ status: 503, code: 'service_unavailable', headers: { 'Retry-After': '1' } });

    // The first client reads: its producer goes on to the end, and every byte arrives in order.
    const received = Buffer.from(await new Response(client).arrayBuffer());
    await firstProducer;
    expect(received.length).toBe(40 * CHUNK);
    for (let i = 0; i < 40; i++) expect([received[i * CHUNK], received[(i + 1) * CHUNK - 1]]).toEqual([i % 251, i % 251]);
    // The second client leaves: its file's bytes are given back.
    await secondClient.cancel();
    await settle();
    expect(budget.bytes).toBe(0);
    expect(refusal(() => budget.admit(1))).toBeUndefined();
  });
});
