// Money in integer minor units (product decisions, "Resolution rules"; docs/DOMAIN.md).
import { describe, it, expect } from 'vitest';
import {
  currencyExponent, formatMinorUnits, parseDecimal, roundHalfAwayFromZero, toMinorUnits,
} from '../../src/catalog/money.js';

describe('ISO 4217 exponent of a currency', () => {
  it.each([
    { currency: 'EUR', exponent: 2 },
    { currency: 'USD', exponent: 2 },
    { currency: 'PLN', exponent: 2 },
    { currency: 'JPY', exponent: 0 },
    { currency: 'KRW', exponent: 0 },
    { currency: 'KWD', exponent: 3 },
    { currency: 'BHD', exponent: 3 },
  ])('$currency has $exponent decimals', ({ currency, exponent }) => {
    expect(currencyExponent(currency)).toBe(exponent);
  });
});

describe('decimal strings are parsed exactly', () => {
  it.each([
    { text: '12.345', value: 12.345 },
    { text: '12.30', value: 12.3 },
    { text: '1500', value: 1500 },
    { text: '-0.5', value: -0.5 },
    { text: '0', value: 0 },
  ])('$text', ({ text, value }) => {
    const { n, d } = parseDecimal(text);
    expect(Number(n) / Number(d)).toBe(value);
  });

  it.each(['', '1.', '.5', '1,5', '+1', 'abc'])('rejects %j as not a decimal number', (text) => {
    expect(() => parseDecimal(text)).toThrow(RangeError);
  });
});

describe('rounding is half away from zero', () => {
  it.each([
    { amount: '2.5', rounded: 3n },
    { amount: '-2.5', rounded: -3n },
    { amount: '2.4999', rounded: 2n },
    { amount: '-2.4999', rounded: -2n },
    { amount: '3.5', rounded: 4n },
    { amount: '0.5', rounded: 1n },
    { amount: '7', rounded: 7n },
  ])('$amount rounds to $rounded', ({ amount, rounded }) => {
    expect(roundHalfAwayFromZero(parseDecimal(amount))).toBe(rounded);
  });
});

describe('amounts land in the minor units of the currency', () => {
  it.each([
    { amount: '12.30', currency: 'EUR', minor: 1230 },
    { amount: '12.345', currency: 'EUR', minor: 1235 },
    { amount: '12.344', currency: 'EUR', minor: 1234 },
    { amount: '1500', currency: 'JPY', minor: 1500 },
    { amount: '1499.5', currency: 'JPY', minor: 1500 },
    { amount: '12.345', currency: 'KWD', minor: 12345 },
    { amount: '12.3455', currency: 'KWD', minor: 12346 },
    { amount: '-0.005', currency: 'EUR', minor: -1 },
  ])('$amount $currency is $minor minor units', ({ amount, currency, minor }) => {
    expect(toMinorUnits(parseDecimal(amount), currency)).toBe(minor);
  });
});

describe('amounts are formatted with exactly the currency precision', () => {
  it.each([
    { minor: 1230, currency: 'EUR', text: '12.30' },
    { minor: 5, currency: 'EUR', text: '0.05' },
    { minor: 0, currency: 'EUR', text: '0.00' },
    { minor: 8999, currency: 'USD', text: '89.99' },
    { minor: 1500, currency: 'JPY', text: '1500' },
    { minor: 0, currency: 'JPY', text: '0' },
    { minor: 12345, currency: 'KWD', text: '12.345' },
    { minor: 5, currency: 'KWD', text: '0.005' },
    { minor: -5, currency: 'EUR', text: '-0.05' },
  ])('$minor minor units of $currency are written $text', ({ minor, currency, text }) => {
    expect(formatMinorUnits(minor, currency)).toBe(text);
    // Still a valid JSON number with the same value.
    expect(JSON.parse(text)).toBe(minor / 10 ** currencyExponent(currency));
  });
});
