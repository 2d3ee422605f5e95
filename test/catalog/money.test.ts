// Money in integer minor units (docs/decisions.md#money; docs/domain.md).
import { describe, it, expect } from 'vitest';
import {
  currenciesRepriced,
  currencyExponent,
  formatMinorUnits,
  parseDecimal,
  roundHalfAwayFromZero,
  toMinorUnits,
} from '../../src/catalog/money.js';

describe('ISO 4217 exponent of a currency', () => {
  it.each(
    [
      { currency: 'EUR', exponent: 2 },
      { currency: 'USD', exponent: 2 },
      { currency: 'PLN', exponent: 2 },
      { currency: 'JPY', exponent: 0 },
      { currency: 'KRW', exponent: 0 },
      { currency: 'KWD', exponent: 3 },
      { currency: 'BHD', exponent: 3 },
    ].map(({ currency, exponent }) => [currency, exponent] as [string, number]),
  )('%s has %i decimals', (currency, exponent) => {
    expect(currencyExponent(currency)).toBe(exponent);
  });
});

describe('decimal strings are parsed exactly', () => {
  it.each([
    ['12.345', 12345, 1000],
    ['12.30', 1230, 100],
    ['1500', 1500, 1],
    ['-0.5', -5, 10],
    ['0', 0, 1],
  ] as [string, number, number][])('%s is exactly %i/%i', (text, n, d) => {
    expect(parseDecimal(text)).toEqual({ n: BigInt(n), d: BigInt(d) });
  });

  it.each(['', '1.', '.5', '1,5', '+1', 'abc'])('rejects %j as not a decimal number', (text) => {
    expect(() => parseDecimal(text)).toThrow(RangeError);
  });
});

describe('rounding is half away from zero', () => {
  it.each(
    [
      { amount: '2.5', rounded: 3 },
      { amount: '-2.5', rounded: -3 },
      { amount: '2.4999', rounded: 2 },
      { amount: '-2.4999', rounded: -2 },
      { amount: '3.5', rounded: 4 },
      { amount: '0.5', rounded: 1 },
      { amount: '7', rounded: 7 },
    ].map(({ amount, rounded }) => [amount, rounded] as [string, number]),
  )('%s rounds to %i', (amount, rounded) => {
    expect(roundHalfAwayFromZero(parseDecimal(amount))).toBe(BigInt(rounded));
  });
});

describe('amounts land in the minor units of the currency', () => {
  it.each(
    [
      { amount: '12.30', currency: 'EUR', minor: 1230 },
      { amount: '12.345', currency: 'EUR', minor: 1235 },
      { amount: '12.344', currency: 'EUR', minor: 1234 },
      { amount: '1500', currency: 'JPY', minor: 1500 },
      { amount: '1499.5', currency: 'JPY', minor: 1500 },
      { amount: '12.345', currency: 'KWD', minor: 12345 },
      { amount: '12.3455', currency: 'KWD', minor: 12346 },
      { amount: '-0.005', currency: 'EUR', minor: -1 },
    ].map(({ amount, currency, minor }) => [amount, currency, minor] as [string, string, number]),
  )('%s %s is %i minor units', (amount, currency, minor) => {
    expect(toMinorUnits(parseDecimal(amount), currency)).toBe(BigInt(minor));
  });
});

describe('amounts are formatted with exactly the currency precision', () => {
  it.each(
    [
      { minor: 1230, currency: 'EUR', text: '12.30' },
      { minor: 5, currency: 'EUR', text: '0.05' },
      { minor: 0, currency: 'EUR', text: '0.00' },
      { minor: 8999, currency: 'USD', text: '89.99' },
      { minor: 1500, currency: 'JPY', text: '1500' },
      { minor: 0, currency: 'JPY', text: '0' },
      { minor: 12345, currency: 'KWD', text: '12.345' },
      { minor: 5, currency: 'KWD', text: '0.005' },
      { minor: -5, currency: 'EUR', text: '-0.05' },
    ].map(({ minor, currency, text }) => [minor, currency, text] as [number, string, string]),
  )('%i minor units of %s are written %s', (minor, currency, text) => {
    expect(formatMinorUnits(BigInt(minor), currency)).toBe(text);
    // Still a valid JSON number with the same value.
    expect(JSON.parse(text)).toBe(minor / 10 ** currencyExponent(currency));
  });

  it('writes amounts of 1e21 minor units and more in plain digits, never in exponent notation (found by the contract fuzzer)', () => {
    for (const [minor, currency] of [
      [1e21, 'EUR'],
      [5.602353052172488e22, 'PLN'],
      [1e30, 'JPY'],
      [-1e25, 'KWD'],
    ] as const) {
      const text = formatMinorUnits(BigInt(minor), currency);
      expect(text).toMatch(/^-?[0-9]+(\.[0-9]+)?$/);
      expect(JSON.parse(text)).toBe(minor / 10 ** currencyExponent(currency));
    }
    expect(formatMinorUnits(10n ** 21n, 'EUR')).toBe('10000000000000000000.00');
  });
});

describe('which store currencies a changed rate re-prices (paths through intermediate currencies)', () => {
  const r = (base: string, quote: string, rate: string) => ({ base, quote, rate });
  const BEFORE = [r('USD', 'EUR', '0.9'), r('EUR', 'JPY', '160'), r('EUR', 'PLN', '4.25')];
  const repriced = (after: ReturnType<typeof r>[], sources: string[], targets = ['EUR', 'JPY', 'PLN', 'GBP']) =>
    [...currenciesRepriced(BEFORE, after, targets, sources)].sort();

  it('re-prices a store whose costs reach it through the changed rate, not only the stores in its two currencies', () => {
    // USD costs reach JPY and PLN through USD->EUR.
    expect(repriced([r('USD', 'EUR', '0.8'), BEFORE[1]!, BEFORE[2]!], ['USD'])).toEqual(['EUR', 'JPY', 'PLN']);
  });

  it('re-prices only where a currency costs are in converts differently', () => {
    // EUR->JPY changes USD->JPY and EUR->JPY, nothing into PLN or EUR for USD and EUR costs.
    expect(repriced([BEFORE[0]!, r('EUR', 'JPY', '150'), BEFORE[2]!], ['USD', 'EUR'])).toEqual(['JPY']);
    // With no cost in a currency the change touches, nothing.
    expect(repriced([BEFORE[0]!, r('EUR', 'JPY', '150'), BEFORE[2]!], ['PLN'], ['EUR', 'PLN'])).toEqual([]);
  });

  it('re-prices where a new rate makes a currency reachable, or a shorter path changes the factor', () => {
    expect(repriced([...BEFORE, r('EUR', 'GBP', '0.85')], ['USD'])).toEqual(['GBP']);
    // A direct USD->JPY rate replaces the path through EUR: JPY only.
    expect(repriced([...BEFORE, r('USD', 'JPY', '150')], ['USD'])).toEqual(['JPY']);
    // The same factor by another path re-prices nothing.
    expect(repriced([...BEFORE, r('USD', 'JPY', '144')], ['USD'])).toEqual([]);
  });

  it('re-prices where a deleted rate leaves no path', () => {
    expect(repriced([BEFORE[1]!, BEFORE[2]!], ['USD'])).toEqual(['EUR', 'JPY', 'PLN']);
  });
});
