// Money in integer minor units (product decisions, "Resolution rules"): exact decimal arithmetic
// over BigInt rationals, rounded half away from zero only where an amount lands in a currency.
// Minor units stay BigInt up to the written payload (issue 13.7): a 40-digit cost converted,
// marked up and given a price ending is published digit for digit, never through a double.

/** ISO 4217 minor-unit exponents that differ from the usual 2. */
const EXPONENT_EXCEPTIONS: Record<string, number> = {
  BIF: 0, CLP: 0, DJF: 0, GNF: 0, ISK: 0, JPY: 0, KMF: 0, KRW: 0, PYG: 0, RWF: 0, UGX: 0,
  UYI: 0, VND: 0, VUV: 0, XAF: 0, XOF: 0, XPF: 0,
  BHD: 3, IQD: 3, JOD: 3, KWD: 3, LYD: 3, OMR: 3, TND: 3,
};

/** ISO 4217 exponent of a currency: 2 unless listed otherwise. */
export function currencyExponent(currency: string): number {
  return EXPONENT_EXCEPTIONS[currency] ?? 2;
}

/** An exact rational number n/d with d > 0. */
export interface Ratio {
  n: bigint;
  d: bigint;
}

const DECIMAL = /^(-?)([0-9]+)(?:\.([0-9]+))?$/;

/** Parses a decimal string such as "12.345" exactly. */
export function parseDecimal(text: string): Ratio {
  const m = DECIMAL.exec(text);
  if (!m) throw new RangeError(`not a decimal number: ${text}`);
  const fraction = m[3] ?? '';
  const n = BigInt(`${m[2]}${fraction}`) * (m[1] === '-' ? -1n : 1n);
  return { n, d: 10n ** BigInt(fraction.length) };
}

export function multiply(a: Ratio, b: Ratio): Ratio {
  return { n: a.n * b.n, d: a.d * b.d };
}

export function divide(a: Ratio, b: Ratio): Ratio {
  if (b.n === 0n) throw new RangeError('division by zero');
  const sign = b.n < 0n ? -1n : 1n;
  return { n: a.n * b.d * sign, d: a.d * b.n * sign };
}

/** Rounds n/d to an integer, half away from zero. */
export function roundHalfAwayFromZero({ n, d }: Ratio): bigint {
  const negative = n < 0n;
  const abs = negative ? -n : n;
  const rounded = (abs * 2n + d) / (2n * d);
  return negative ? -rounded : rounded;
}

/** A decimal amount of `currency` in its minor units, e.g. ("12.345", "EUR") -> 1235n. */
export function toMinorUnits(amount: Ratio, currency: string): bigint {
  const scaled = multiply(amount, { n: 10n ** BigInt(currencyExponent(currency)), d: 1n });
  return roundHalfAwayFromZero(scaled);
}

/**
 * Formats minor units as a JSON number literal with exactly the currency's precision:
 * 1230n EUR -> "12.30", 1500n JPY -> "1500", 12345n KWD -> "12.345". Every digit is written
 * (never exponent notation), however large the amount.
 */
export function formatMinorUnits(minor: bigint, currency: string): string {
  const exponent = currencyExponent(currency);
  const sign = minor < 0n ? '-' : '';
  const digits = (minor < 0n ? -minor : minor).toString().padStart(exponent + 1, '0');
  if (exponent === 0) return `${sign}${digits}`;
  return `${sign}${digits.slice(0, -exponent)}.${digits.slice(-exponent)}`;
}
