// Money in integer minor units (docs/decisions.md#money): exact decimal arithmetic
// over BigInt rationals, rounded half away from zero only where an amount lands in a currency.
// Minor units stay BigInt up to the written payload: a 40-digit cost converted,
// marked up and given a price ending is published digit for digit, never through a double.

/** ISO 4217 minor-unit exponents that differ from the usual 2. */
const EXPONENT_EXCEPTIONS: Record<string, number> = {
  BIF: 0,
  CLP: 0,
  DJF: 0,
  GNF: 0,
  ISK: 0,
  JPY: 0,
  KMF: 0,
  KRW: 0,
  PYG: 0,
  RWF: 0,
  UGX: 0,
  UYI: 0,
  VND: 0,
  VUV: 0,
  XAF: 0,
  XOF: 0,
  XPF: 0,
  BHD: 3,
  IQD: 3,
  JOD: 3,
  KWD: 3,
  LYD: 3,
  OMR: 3,
  TND: 3,
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

/** One of the merchant's rates: 1 unit of `base` is `rate` units of `quote`. */
export interface ExchangeRate {
  base: string;
  quote: string;
  rate: string;
}

/** One step of a conversion: a merchant's rate, used as stated (base -> quote) or inverted (quote -> base). */
export interface ConversionStep {
  from: string;
  to: string;
  rate: ExchangeRate;
  inverted: boolean;
}

/** How an amount of one currency becomes an amount of another: the steps, and their product as one exact factor. */
export interface Conversion {
  steps: ConversionStep[];
  factor: Ratio;
}

function gcd(a: bigint, b: bigint): bigint {
  let x = a < 0n ? -a : a;
  let y = b;
  while (y !== 0n) [x, y] = [y, x % y];
  return x;
}

/** a × b in lowest terms (a factor composed over many rates stays small). */
function compose(a: Ratio, b: Ratio): Ratio {
  const { n, d } = multiply(a, b);
  const g = gcd(n, d);
  return g > 1n ? { n: n / g, d: d / g } : { n, d };
}

/** Whether two ratios are the same number. */
export function sameRatio(a: Ratio, b: Ratio): boolean {
  return a.n * b.d === b.n * a.d;
}

/** Orders two paths of equal length: fewer inverted rates first, then the currencies passed through, alphabetically. */
function betterPath(a: ConversionStep[], b: ConversionStep[]): boolean {
  const inverted = (steps: ConversionStep[]) => steps.filter((s) => s.inverted).length;
  const byInversions = inverted(a) - inverted(b);
  if (byInversions !== 0) return byInversions < 0;
  for (let i = 0; i < a.length; i++) {
    if (a[i]!.to !== b[i]!.to) return a[i]!.to < b[i]!.to;
  }
  return false;
}

/**
 * The conversion from one currency to another over the merchant's rates (Money: "Exchange rates"),
 * or null when no chain of rates joins them. Each rate converts either way (base -> quote at
 * `rate`, quote -> base at 1/rate). The path with the fewest rates wins, so a rate between the two
 * currencies always wins over a path through a third one; among paths of equal length, the one
 * with fewer inverted rates (so a stated pair beats the inverse of the opposite pair), then the
 * one whose intermediate currencies come first alphabetically (compared step by step). The
 * storage order of the rates never matters. Found breadth-first; the tie-breaks compose, so the
 * best path to each currency extends the best path to the one before it.
 */
export function findConversion(from: string, to: string, rates: readonly ExchangeRate[]): Conversion | null {
  if (from === to) return { steps: [], factor: { n: 1n, d: 1n } };
  const edges = new Map<string, ConversionStep[]>();
  const addEdge = (step: ConversionStep) => {
    const list = edges.get(step.from) ?? [];
    list.push(step);
    edges.set(step.from, list);
  };
  for (const rate of rates) {
    // The admin API refuses these; a rate that cannot be inverted is never a step.
    if (rate.base === rate.quote || parseDecimal(rate.rate).n <= 0n) continue;
    addEdge({ from: rate.base, to: rate.quote, rate, inverted: false });
    addEdge({ from: rate.quote, to: rate.base, rate, inverted: true });
  }
  const best = new Map<string, ConversionStep[]>([[from, []]]);
  let layer = [from];
  while (layer.length > 0 && !best.has(to)) {
    const next = new Map<string, ConversionStep[]>();
    for (const currency of layer) {
      const path = best.get(currency)!;
      for (const step of edges.get(currency) ?? []) {
        if (best.has(step.to)) continue;
        const candidate = [...path, step];
        const current = next.get(step.to);
        if (!current || betterPath(candidate, current)) next.set(step.to, candidate);
      }
    }
    for (const [currency, path] of next) best.set(currency, path);
    layer = [...next.keys()];
  }
  const steps = best.get(to);
  if (!steps) return null;
  let factor: Ratio = { n: 1n, d: 1n };
  for (const step of steps) {
    const rate = parseDecimal(step.rate.rate);
    factor = compose(factor, step.inverted ? { n: rate.d, d: rate.n } : rate);
  }
  return { steps, factor };
}

/**
 * The currencies of `targets` into which some currency of `sources` (the currencies costs are in)
 * converts differently (another factor, or now at all, or no longer) under `after` than under
 * `before`: a changed rate re-prices the stores in these currencies, also where it is only one step
 * of a path.
 */
export function currenciesRepriced(
  before: readonly ExchangeRate[],
  after: readonly ExchangeRate[],
  targets: Iterable<string>,
  sources: Iterable<string>,
): Set<string> {
  const repriced = new Set<string>();
  const costCurrencies = [...sources];
  for (const target of targets) {
    for (const source of costCurrencies) {
      if (source === target) continue;
      const was = findConversion(source, target, before);
      const is = findConversion(source, target, after);
      if ((was === null) !== (is === null) || (was && is && !sameRatio(was.factor, is.factor))) {
        repriced.add(target);
        break;
      }
    }
  }
  return repriced;
}
