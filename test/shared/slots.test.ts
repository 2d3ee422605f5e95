// Places capped per key, per merchant and per process (src/shared/slots.ts): which cap refuses,
// and the refusal's Retry-After, spread so clients refused together do not come back together.
import { describe, expect, it } from 'vitest';
import { ProblemError } from '../../src/shared/problem.js';
import { Slots } from '../../src/shared/slots.js';

const refusalOf = (take: () => unknown): ProblemError => {
  try {
    take();
  } catch (error) {
    if (error instanceof ProblemError) return error;
    throw error;
  }
  throw new Error('the place was given');
};

describe('Slots', () => {
  it('refuses past the key cap (429), then the merchant cap (429), then the process cap (503), and gives places back once', () => {
    const slots = new Slots({ perKey: 1, perMerchant: 2, perProcess: 3 }, 'things');
    const first = slots.take({ keyId: 1, merchantId: 1 });
    expect(refusalOf(() => slots.take({ keyId: 1, merchantId: 1 })).status).toBe(429);
    slots.take({ keyId: 2, merchantId: 1 });
    expect(refusalOf(() => slots.take({ keyId: 3, merchantId: 1 })).detail).toContain('one merchant');
    slots.take({ keyId: 4, merchantId: 2 });
    expect(refusalOf(() => slots.take({ keyId: 5, merchantId: 3 })).status).toBe(503);
    first();
    first();
    expect(slots.held).toBe(2);
    slots.take({ keyId: 5, merchantId: 3 });
  });

  it('spreads Retry-After over [base, 2 x base] whole seconds, so a thousand clients refused at once come back over several seconds', () => {
    const draws = [0, 0.2, 0.5, 0.99];
    const slots = new Slots({ perKey: 0, perMerchant: 0, perProcess: 0 }, 'things', 5, () => draws.shift()!);
    const seconds = [1, 2, 3, 4].map(() => refusalOf(() => slots.take({ keyId: 1, merchantId: 1 })).headers['Retry-After']);
    expect(seconds).toEqual(['5', '6', '8', '10']);
    const spread = new Slots({ perKey: 0, perMerchant: 0, perProcess: 0 }, 'things', 5);
    const told = new Set(Array.from({ length: 1000 }, () => spread.retryAfter()));
    expect(Math.min(...told)).toBe(5);
    expect(Math.max(...told)).toBe(10);
    expect(told.size).toBe(6);
  });

  it('gives a refusal no stack (it is an answer, not a fault); an internal error keeps its stack', () => {
    expect(new ProblemError('rate_limited', 'slow down').stack).not.toMatch(/\n\s+at /);
    expect(new ProblemError('internal_error', 'broken').stack).toMatch(/\n\s+at /);
  });
});
