// Money stays exact end to end (docs/decisions.md#money): every amount the
// documents accept (decimal strings of up to 40 characters: costs, exchange rates, markups) is
// converted, marked up, given its price ending and written digit for digit. Checked against an
// exact reference written here from the rules, with its own decimal arithmetic, on the payload's
// text (JSON.parse would read the amounts back through a double).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { ExchangeRateRecord, MerchantContext, PricingRuleRecord, ProductRecord, StoreRecord } from '../../src/catalog/model.js';
import { resolveProduct } from '../../src/catalog/resolve.js';

// ---------------------------------------------------------------------------------------------
// The reference: decimals as (digits, scale), rounded half away from zero, formatted by hand.

const EXPONENT: Record<string, number> = { EUR: 2, JPY: 0, KWD: 3 };

/** A decimal string as an integer of its digits and the number of digits after the point. */
function decimal(text: string): { digits: bigint; scale: number } {
  const negative = text.startsWith('-');
  const [whole, fraction = ''] = (negative ? text.slice(1) : text).split('.');
  return { digits: BigInt(`${whole}${fraction}`) * (negative ? -1n : 1n), scale: fraction.length };
}

/** numerator / denominator (denominator > 0) to the nearest integer, halves away from zero. */
function nearest(numerator: bigint, denominator: bigint): bigint {
  const magnitude = numerator < 0n ? -numerator : numerator;
  let quotient = magnitude / denominator;
  if ((magnitude % denominator) * 2n >= denominator) quotient += 1n;
  return numerator < 0n ? -quotient : quotient;
}

const pow10 = (n: number) => 10n ** BigInt(n);

/** A cost of `from` in minor units of `to`: × rate (direct pair) or ÷ rate (inverse pair). */
function referenceCost(cost: string, to: string, conversion: { rate: string; inverse: boolean } | null): bigint {
  const c = decimal(cost);
  const e = EXPONENT[to]!;
  if (!conversion) return nearest(c.digits * pow10(e), pow10(c.scale));
  const r = decimal(conversion.rate);
  return conversion.inverse
    ? nearest(c.digits * pow10(e) * pow10(r.scale), pow10(c.scale) * r.digits)
    : nearest(c.digits * r.digits * pow10(e), pow10(c.scale + r.scale));
}

/** round(base × (100 + percent) / 100) + amount, at least 0, then raised to the price ending. */
function referencePrice(
  base: bigint,
  rule: Pick<PricingRuleRecord, 'markup_percent' | 'markup_amount' | 'price_ending'>,
  currency: string,
): bigint {
  const p = decimal(rule.markup_percent);
  const a = decimal(rule.markup_amount);
  const e = EXPONENT[currency]!;
  let price = nearest(base * (100n * pow10(p.scale) + p.digits), 100n * pow10(p.scale)) + nearest(a.digits * pow10(e), pow10(a.scale));
  if (price < 0n) price = 0n;
  if (rule.price_ending === null || price === 0n) return price;
  const modulus = pow10(String(rule.price_ending).length);
  const ending = BigInt(rule.price_ending);
  const candidate = price - (price % modulus) + ending;
  return candidate >= price ? candidate : candidate + modulus;
}

/** Minor units written as the payload's JSON number: every digit, exactly `exponent` decimals. */
function referenceText(minor: bigint, currency: string): string {
  const e = EXPONENT[currency]!;
  const text = (minor < 0n ? -minor : minor).toString();
  const padded = text.length > e ? text : `${'0'.repeat(e + 1 - text.length)}${text}`;
  const sign = minor < 0n ? '-' : '';
  return e === 0 ? `${sign}${padded}` : `${sign}${padded.slice(0, padded.length - e)}.${padded.slice(padded.length - e)}`;
}

// ---------------------------------------------------------------------------------------------
// Fixtures

function store(currency: string): StoreRecord {
  return {
    id: 1,
    merchant_id: 1,
    slug: 'shop',
    name: 'Shop',
    locale: 'de-DE',
    currency,
    is_default: true,
    active: true,
    exclude_out_of_stock: false,
    catalog_version: 1,
  };
}

function rule(markup: Pick<PricingRuleRecord, 'markup_percent' | 'markup_amount' | 'price_ending'>): PricingRuleRecord {
  return {
    id: 1,
    priority: 2147483647,
    customer_group_id: null,
    store_id: null,
    manufacturer: null,
    min_cost: null,
    max_cost: null,
    is_catch_all: true,
    ...markup,
  };
}

function context(pricingRule: PricingRuleRecord, exchangeRates: ExchangeRateRecord[]): MerchantContext {
  return {
    merchantId: 1,
    skuPattern: null,
    stores: [],
    customerGroups: [{ id: 1, name: 'Retail' }],
    pricingRules: [pricingRule],
    exchangeRates,
    attributeDefinitions: new Map(),
    suppliersByRef: new Map([['north', { id: 1, ref: 'north', name: 'North' }]]),
  };
}

function product(cost: string, currency: string): ProductRecord {
  return {
    id: 7,
    ref: 'P-7',
    source: {
      eans: [],
      manufacturer: null,
      content: { de: { title: 'Zelt', description: null } },
      images: [],
      offers: [{ supplier_ref: 'north', quantity: 3, cost, currency }],
      own_stock: null,
      supplier_attributes: [],
      overrides: {},
      excluded_stores: [],
    },
  };
}

/** The amounts as written in the payload's text, never parsed into numbers. */
function writtenAmounts(payload: string): { base: string; price: string } {
  const match = /"base_cost":(-?[0-9.]+),"computed_price":(-?[0-9.]+),/.exec(payload);
  if (!match) throw new Error(`no prices in ${payload}`);
  return { base: match[1]!, price: match[2]! };
}

// ---------------------------------------------------------------------------------------------
// Amounts the documents accept, weighted towards the boundaries of double precision.

const MAX_DECIMAL = 40; // maxLength of every decimal string in the admin document

/** Decimal strings of up to 40 characters: `^[0-9]+(\.[0-9]+)?$`. */
const costText = fc
  .oneof(
    fc.constantFrom(
      '9999999999999999999999999999999999999999', // the finding: 40 nines
      '999999999999999999999999999999999999.99',
      '0.000000000000000000000000000000000000001',
      '90071992547409.91',
      '90071992547409.93',
      '9007199254740993',
      '9007199254740992.5',
      '18014398509481984.01',
      '100000000000000000000.005',
      '0',
      '0.005',
      '1',
    ),
    fc
      .tuple(fc.stringMatching(/^[1-9][0-9]{0,29}$/), fc.option(fc.stringMatching(/^[0-9]{1,8}$/), { nil: undefined }))
      .map(([whole, fraction]) => (fraction === undefined ? whole : `${whole}.${fraction}`)),
  )
  .filter((text) => text.length <= MAX_DECIMAL);

/** Positive rates of up to 40 characters. */
const rateText = fc.oneof(
  fc.constantFrom(
    '160',
    '0.9',
    '4.25',
    '1.0000000000000000000000000000000000001',
    '9999999999999999999.9999999999999999999',
    '0.0000000000000000000000000000000000007',
    '3',
  ),
  fc
    .tuple(fc.stringMatching(/^[1-9][0-9]{0,12}$/), fc.stringMatching(/^[0-9]{0,12}$/))
    .map(([whole, fraction]) => (fraction ? `${whole}.${fraction}` : whole)),
);

/** Markups `^-?[0-9]+(\.[0-9]+)?$`: discounts down to -100 % and beyond, large surcharges. */
const signedText = (wholeDigits: number) =>
  fc
    .tuple(
      fc.boolean(),
      fc.stringMatching(new RegExp(`^[0-9]{1,${wholeDigits}}$`)),
      fc.option(fc.stringMatching(/^[0-9]{1,6}$/), { nil: undefined }),
    )
    .map(([negative, whole, fraction]) => `${negative ? '-' : ''}${whole}${fraction === undefined ? '' : `.${fraction}`}`);

const markup = fc.record({
  markup_percent: fc.oneof(fc.constantFrom('0', '40', '12.5', '-10', '-100', '33.333333'), signedText(6)),
  markup_amount: fc.oneof(fc.constantFrom('0', '0.50', '-5.00', '100', '0.0005'), signedText(20)),
  price_ending: fc.option(fc.oneof(fc.constantFrom(0, 9, 99, 990, 9999), fc.integer({ min: 0, max: 9999 })), { nil: null }),
});

const currency = fc.constantFrom('EUR', 'JPY', 'KWD');

describe('amounts stay exact from the cost to the written payload', () => {
  it('publishes the 40-digit cost of the finding digit for digit (not 10000000000000000448857126780759167855493.12)', () => {
    const cost = '9999999999999999999999999999999999999999';
    const catchAll = rule({ markup_percent: '40', markup_amount: '0', price_ending: 99 });
    const { payload } = resolveProduct(product(cost, 'EUR'), store('EUR'), context(catchAll, []), new Map());
    expect(writtenAmounts(payload)).toEqual({
      base: '9999999999999999999999999999999999999999.00',
      price: '13999999999999999999999999999999999999998.99',
    });
  });

  it('an offer in the store currency: base cost and computed price equal the exact reference', () => {
    fc.assert(
      fc.property(costText, markup, currency, (cost, m, cur) => {
        const { payload } = resolveProduct(product(cost, cur), store(cur), context(rule(m), []), new Map());
        const base = referenceCost(cost, cur, null);
        expect(writtenAmounts(payload)).toEqual({
          base: referenceText(base, cur),
          price: referenceText(referencePrice(base, m, cur), cur),
        });
      }),
      { numRuns: 500 },
    );
  });

  it('an offer converted with a direct or an inverse exchange rate equals the exact reference', () => {
    fc.assert(
      fc.property(costText, rateText, fc.boolean(), markup, currency, currency, (cost, rate, inverse, m, from, to) => {
        if (from === to) return;
        const pair = inverse ? { base: to, quote: from, rate } : { base: from, quote: to, rate };
        const { payload } = resolveProduct(product(cost, from), store(to), context(rule(m), [pair]), new Map());
        const base = referenceCost(cost, to, { rate, inverse });
        expect(writtenAmounts(payload)).toEqual({ base: referenceText(base, to), price: referenceText(referencePrice(base, m, to), to) });
      }),
      { numRuns: 500 },
    );
  });

  it('amounts around 2^53 minor units keep their last digit', () => {
    for (const [cost, text] of [
      ['90071992547409.93', '90071992547409.93'], // 2^53 + 1 cents: a double reads 90071992547409.92
      ['90071992547409.95', '90071992547409.95'],
      ['9007199254740993', '9007199254740993'], // JPY: 2^53 + 1 yen
    ] as const) {
      const cur = text.includes('.') ? 'EUR' : 'JPY';
      const plain = rule({ markup_percent: '0', markup_amount: '0', price_ending: null });
      const { payload } = resolveProduct(product(cost, cur), store(cur), context(plain, []), new Map());
      expect(writtenAmounts(payload)).toEqual({ base: text, price: text });
    }
  });
});
