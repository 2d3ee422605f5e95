// Resolution of one product for one store: spec 2.1-2.3 with docs/decisions.md#resolution.
// Pure functions: no storage, no HTTP. The publisher (catalog/publish.ts) runs them on writes.
import { hash as oneShotHash } from 'node:crypto';
import {
  currencyExponent,
  findConversion,
  formatMinorUnits,
  multiply,
  parseDecimal,
  roundHalfAwayFromZero,
  toMinorUnits,
  type Conversion,
  type Ratio,
} from './money.js';
import type {
  CustomerGroupRecord,
  ExchangeRateRecord,
  ExclusionReason,
  ImageMirrorRecord,
  MerchantContext,
  OfferSource,
  PricingRuleRecord,
  ProductRecord,
  StoreRecord,
} from './model.js';

/** A conversion with its factor into minor units of the target currency (amount × toMinor, rounded once). */
type MinorConversion = Conversion & { toMinor: Ratio };

/** The conversions found per set of rates (one per merchant context), by "from>to". */
const conversionsByRates = new WeakMap<readonly ExchangeRateRecord[], Map<string, MinorConversion | null>>();

/** conversionBetween with the factor into the target's minor units, found once per context. */
function minorConversion(from: string, to: string, context: Pick<MerchantContext, 'exchangeRates'>): MinorConversion | null {
  let found = conversionsByRates.get(context.exchangeRates);
  if (!found) conversionsByRates.set(context.exchangeRates, (found = new Map<string, MinorConversion | null>()));
  const key = `${from}>${to}`;
  let conversion = found.get(key);
  if (conversion === undefined) {
    const plain = findConversion(from, to, context.exchangeRates);
    conversion = plain && { ...plain, toMinor: multiply(plain.factor, { n: 10n ** BigInt(currencyExponent(to)), d: 1n }) };
    found.set(key, conversion);
  }
  return conversion;
}

/** The conversion between two currencies over the context's rates (money.ts findConversion), found once per context. */
export function conversionBetween(from: string, to: string, context: Pick<MerchantContext, 'exchangeRates'>): Conversion | null {
  return minorConversion(from, to, context);
}

/**
 * Converts a decimal amount of `from` into minor units of `to`, or null when no chain of the
 * merchant's rates joins them: the amount times the path's exact factor, rounded once, half away
 * from zero, in `to` (never in an intermediate currency).
 */
export function convertToMinorUnits(
  amount: string,
  from: string,
  to: string,
  context: Pick<MerchantContext, 'exchangeRates'>,
): bigint | null {
  const conversion = minorConversion(from, to, context);
  if (!conversion) return null;
  // The same exact value as toMinorUnits(amount × factor, to): the factor is scaled once per context.
  return roundHalfAwayFromZero(multiply(parseDecimal(amount), conversion.toMinor));
}

/** An offer usable in the store: its cost converted to the store currency. */
export interface PricedOffer {
  supplierId: number;
  quantity: number;
  costMinor: bigint;
  offer: OfferSource;
}

/** Offers whose supplier is known and whose cost converts to the store currency. */
export function pricedOffers(product: ProductRecord, store: StoreRecord, context: MerchantContext): PricedOffer[] {
  const priced: PricedOffer[] = [];
  for (const offer of product.source.offers) {
    const supplier = context.suppliersByRef.get(offer.supplier_ref);
    if (!supplier) continue;
    const costMinor = convertToMinorUnits(offer.cost, offer.currency, store.currency, context);
    if (costMinor === null) continue;
    priced.push({ supplierId: supplier.id, quantity: offer.quantity, costMinor, offer });
  }
  return priced;
}

/** -1, 0 or 1 as a is below, equal to or above b. */
const compareMinor = (a: bigint, b: bigint): number => (a < b ? -1 : a > b ? 1 : 0);

function offerOrder(a: PricedOffer, b: PricedOffer): number {
  return compareMinor(a.costMinor, b.costMinor) || b.quantity - a.quantity || a.supplierId - b.supplierId;
}

/**
 * Best supplier: the in-stock offer with the lowest cost; ties go to the larger quantity, then
 * the lower supplier id. With no offer in stock, the lowest-cost offer (same ties).
 */
export function bestSupplierOffer(offers: PricedOffer[]): PricedOffer | null {
  // One pass: the first in offerOrder among those in stock, else among all.
  let best: PricedOffer | null = null;
  let bestInStock: PricedOffer | null = null;
  for (const offer of offers) {
    if (best === null || offerOrder(offer, best) < 0) best = offer;
    if (offer.quantity > 0 && (bestInStock === null || offerOrder(offer, bestInStock) < 0)) bestInStock = offer;
  }
  return bestInStock ?? best;
}

/** spec 2.1 stock rules 1-3. */
export function sellableStock(product: ProductRecord, best: PricedOffer | null): number {
  const supplierQuantity = best?.quantity ?? 0;
  const own = product.source.own_stock;
  return own ? own.quantity + supplierQuantity : supplierQuantity;
}

/** Base cost in store minor units: the best offer's cost, else own stock's cost, else 0. */
export function baseCost(product: ProductRecord, best: PricedOffer | null, store: StoreRecord, context: MerchantContext): bigint {
  if (best) return best.costMinor;
  const own = product.source.own_stock;
  if (own?.cost != null && own.currency != null) {
    return convertToMinorUnits(own.cost, own.currency, store.currency, context) ?? 0n;
  }
  return 0n;
}

/** A rule's decimals parsed once per rule record (a context's rules price every product of a chunk). */
interface ParsedRule {
  minCost: Ratio | null;
  maxCost: Ratio | null;
  /** 1 + markup_percent / 100. */
  factor: Ratio;
  markupAmount: Ratio;
}

const parsedRules = new WeakMap<PricingRuleRecord, ParsedRule>();

function parsedRule(rule: PricingRuleRecord): ParsedRule {
  let parsed = parsedRules.get(rule);
  if (!parsed) {
    const percent = parseDecimal(rule.markup_percent);
    parsed = {
      minCost: rule.min_cost === null ? null : parseDecimal(rule.min_cost),
      maxCost: rule.max_cost === null ? null : parseDecimal(rule.max_cost),
      factor: { n: percent.d * 100n + percent.n, d: percent.d * 100n },
      markupAmount: parseDecimal(rule.markup_amount),
    };
    parsedRules.set(rule, parsed);
  }
  return parsed;
}

/** Sign of (minor units of `currency`) - (decimal bound), exactly: a bound is never rounded. */
function compareWithBound(minor: bigint, { n, d }: Ratio, currency: string): number {
  const left = minor * d;
  const right = n * 10n ** BigInt(currencyExponent(currency));
  return left < right ? -1 : left > right ? 1 : 0;
}

function ruleMatches(
  rule: PricingRuleRecord,
  groupId: number,
  store: StoreRecord,
  manufacturer: string | null,
  baseMinor: bigint,
): boolean {
  if (rule.customer_group_id !== null && rule.customer_group_id !== groupId) return false;
  if (rule.store_id !== null && rule.store_id !== store.id) return false;
  if (rule.manufacturer !== null && rule.manufacturer !== manufacturer) return false;
  if (rule.min_cost === null && rule.max_cost === null) return true;
  // Inclusive bounds compared exactly: 1501 JPY is above a max_cost of 1500.5.
  const { minCost, maxCost } = parsedRule(rule);
  if (minCost !== null && compareWithBound(baseMinor, minCost, store.currency) < 0) return false;
  if (maxCost !== null && compareWithBound(baseMinor, maxCost, store.currency) > 0) return false;
  return true;
}

/** The first rule, by priority then id, that matches; the catch-all guarantees one exists. */
export function applicablePricingRule(
  rules: PricingRuleRecord[],
  groupId: number,
  store: StoreRecord,
  manufacturer: string | null,
  baseMinor: bigint,
): PricingRuleRecord {
  for (const rule of rules) if (ruleMatches(rule, groupId, store, manufacturer, baseMinor)) return rule;
  throw new Error('no pricing rule matched: the catch-all rule is missing');
}

/** Raises a price to the next amount whose last digits are `ending` (e.g. 99 -> x.99). */
export function applyPriceEnding(priceMinor: bigint, ending: number | null): bigint {
  // A zero price (nothing to price) stays zero rather than becoming 0.99.
  if (ending === null || priceMinor === 0n) return priceMinor;
  const modulus = 10n ** BigInt(String(ending).length);
  const candidate = priceMinor - (priceMinor % modulus) + BigInt(ending);
  return candidate >= priceMinor ? candidate : candidate + modulus;
}

/** computed = round(base × (1 + markup%/100)) + markup amount, never negative, then the ending. */
export function computedPrice(baseMinor: bigint, rule: PricingRuleRecord, currency: string): bigint {
  const { factor, markupAmount } = parsedRule(rule);
  const marked = multiply({ n: baseMinor, d: 1n }, factor);
  const withAmount = roundHalfAwayFromZero(marked) + toMinorUnits(markupAmount, currency);
  return applyPriceEnding(withAmount > 0n ? withAmount : 0n, rule.price_ending);
}

/** Title and description for the store's locale exactly, else for its language (de-DE -> de), per field. */
export function localizedContent(product: ProductRecord, locale: string): { title: string | null; description: string | null } {
  const content = product.source.content;
  const exact = content[locale];
  const language = content[locale.split('-')[0] ?? locale];
  return {
    title: exact?.title ?? language?.title ?? null,
    description: exact?.description ?? language?.description ?? null,
  };
}

function localizedLabel(labels: Record<string, string>, locale: string): string | undefined {
  return labels[locale] ?? labels[locale.split('-')[0] ?? locale];
}

/** Merchant overrides win over the best supplier's values, which win over other suppliers'. */
export function resolvedAttributes(
  product: ProductRecord,
  best: PricedOffer | null,
  store: StoreRecord,
  context: MerchantContext,
): { key: string; label: string; value: string }[] {
  const supplied = product.source.supplier_attributes;
  const values = new Map<string, string>();
  if (supplied.length > 0) {
    const bySupplier = supplied.length === 1 ? supplied : [...supplied].sort(supplierAttributeOrder(best?.offer.supplier_ref, context));
    for (const { key, value } of bySupplier) if (!values.has(key)) values.set(key, value);
  }
  for (const [key, value] of Object.entries(product.source.overrides)) values.set(key, value);
  const attributes: { key: string; label: string; value: string }[] = [];
  for (const key of [...values.keys()].sort()) {
    const definition = context.attributeDefinitions.get(key);
    const name = (definition && localizedLabel(definition.labels, store.locale)) ?? key;
    const label = definition?.unit ? `${name} (${definition.unit})` : name;
    attributes.push({ key, label, value: values.get(key)! });
  }
  return attributes;
}

/** Supplier attributes' order: the best supplier's first, then by supplier id (an unknown supplier last). */
function supplierAttributeOrder(
  bestSupplierRef: string | undefined,
  context: MerchantContext,
): (a: { supplier_ref: string }, b: { supplier_ref: string }) => number {
  const supplierId = (ref: string) => context.suppliersByRef.get(ref)?.id ?? Number.MAX_SAFE_INTEGER;
  return (a, b) => {
    const aBest = a.supplier_ref === bestSupplierRef ? 0 : 1;
    const bBest = b.supplier_ref === bestSupplierRef ? 0 : 1;
    return aBest - bBest || supplierId(a.supplier_ref) - supplierId(b.supplier_ref);
  };
}

/** spec 2.1 image rules: mirrored -> hosted copy, not mirrored -> source URL, dead -> omitted. */
export function resolvedImages(product: ProductRecord, mirrors: Map<string, ImageMirrorRecord>): string[] {
  const urls: string[] = [];
  for (const { url } of product.source.images) {
    const mirror = mirrors.get(url);
    if (mirror?.state === 'dead') continue;
    urls.push(mirror?.state === 'mirrored' && mirror.mirrored_url ? mirror.mirrored_url : url);
  }
  return urls;
}

/** The merchant's SKU pattern filled in; null without a pattern or when a token has no value. */
export function exportedSku(pattern: string | null, product: ProductRecord): string | null {
  if (!pattern) return null;
  // The pattern split once (per pattern text): literal text at even indexes, token names at odd ones.
  const parts = patternParts(pattern);
  let sku = parts[0]!;
  for (let i = 1; i < parts.length; i += 2) {
    const value = skuToken(parts[i]!, product);
    if (value === null || value === undefined || value === '') return null;
    sku += value + parts[i + 1]!;
  }
  return sku;
}

const SKU_TOKEN = /\{([a-z_]+)\}/;
const splitPatterns = new Map<string, string[]>();

function patternParts(pattern: string): string[] {
  let parts = splitPatterns.get(pattern);
  if (!parts) {
    parts = pattern.split(SKU_TOKEN);
    // A bounded memo: a merchant has one pattern, a process a few.
    if (splitPatterns.size >= 1000) splitPatterns.clear();
    splitPatterns.set(pattern, parts);
  }
  return parts;
}

function skuToken(token: string, product: ProductRecord): string | null | undefined {
  switch (token) {
    case 'id':
      return String(product.id);
    case 'ref':
      return product.ref;
    case 'ean':
      return product.source.eans[0] ?? null;
    case 'manufacturer':
      return product.source.manufacturer;
    default:
      return undefined;
  }
}

/**
 * Exclusion reasons, first match wins: manual, missing_title, no_offers, out_of_stock.
 * `offers` are the offers usable in the store: one that cannot be converted is ignored there.
 */
export function exclusionReason(
  product: ProductRecord,
  store: StoreRecord,
  title: string | null,
  stock: number,
  offers: PricedOffer[],
): ExclusionReason | null {
  if (product.source.excluded_stores.includes(store.slug)) return 'manual';
  if (!title) return 'missing_title';
  if (offers.length === 0 && !product.source.own_stock) return 'no_offers';
  if (stock === 0 && store.exclude_out_of_stock) return 'out_of_stock';
  return null;
}

/** A product resolved for a store: the payload bytes served as they are, and what changed. */
export interface ResolvedProduct {
  productId: number;
  /** JSON of the Product (spec 2.1) with amounts at the currency's exact precision. */
  payload: string;
  /** Hash of the `prices` part: a different value is a `price` change. */
  priceHash: string;
  /** Hash of every other field: a different value is a `content` change. */
  contentHash: string;
  /** The payload's exclusion_reason (null: not excluded), kept beside it by the storage. */
  exclusionReason: ExclusionReason | null;
  /** The payload's sku and ean, kept beside it by the storage (PostgreSQL) without parsing it again. */
  sku: string | null;
  ean: string | null;
}

// One-shot (no Hash object per call): the same digest as createHash('sha1').update(text).digest('base64url'), in half the time.
const hash = (text: string) => oneShotHash('sha1', text, 'base64url');

/** The choices resolution makes for a product in a store, before they are written as a payload. */
interface Decisions {
  offers: PricedOffer[];
  best: PricedOffer | null;
  stock: number;
  content: { title: string | null; description: string | null };
  reason: ExclusionReason | null;
  baseMinor: bigint;
  /** Per customer group, in the context's order: the pricing rule applied and the price it gives. */
  prices: { group: CustomerGroupRecord; rule: PricingRuleRecord; priceMinor: bigint }[];
}

/** The one place resolution decides: resolveProduct writes these, explainResolution shows them. */
function decide(product: ProductRecord, store: StoreRecord, context: MerchantContext): Decisions {
  const offers = pricedOffers(product, store, context);
  const best = bestSupplierOffer(offers);
  const stock = sellableStock(product, best);
  const content = localizedContent(product, store.locale);
  const reason = exclusionReason(product, store, content.title, stock, offers);
  const baseMinor = baseCost(product, best, store, context);
  const prices: Decisions['prices'] = [];
  for (const group of context.customerGroups) {
    const rule = applicablePricingRule(context.pricingRules, group.id, store, product.source.manufacturer, baseMinor);
    prices.push({ group, rule, priceMinor: computedPrice(baseMinor, rule, store.currency) });
  }
  return { offers, best, stock, content, reason, baseMinor, prices };
}

export function resolveProduct(
  product: ProductRecord,
  store: StoreRecord,
  context: MerchantContext,
  mirrors: Map<string, ImageMirrorRecord>,
): ResolvedProduct {
  const { best, stock, content, reason, baseMinor, prices: decided } = decide(product, store, context);
  const title = content.title;
  const base = formatMinorUnits(baseMinor, store.currency);
  const currency = JSON.stringify(store.currency);
  let pricesJson = '[';
  for (const [index, { group, rule, priceMinor }] of decided.entries()) {
    const price = formatMinorUnits(priceMinor, store.currency);
    // Built by hand so amounts keep the currency's exact precision (12.30, not 12.3).
    pricesJson +=
      `${index === 0 ? '' : ','}{"customer_group_id":${group.id},"customer_group":${JSON.stringify(group.name)},` +
      `"base_cost":${base},"computed_price":${price},"currency":${currency},"applied_rule_id":${rule.id}}`;
  }
  pricesJson += ']';
  const sku = exportedSku(context.skuPattern, product);
  const ean = product.source.eans[0] ?? null;
  const head = JSON.stringify({
    id: product.id,
    sku,
    ean,
    title,
    description: content.description,
    manufacturer: product.source.manufacturer,
    images: resolvedImages(product, mirrors),
    store: store.slug,
    excluded: reason !== null,
    exclusion_reason: reason,
    attributes: resolvedAttributes(product, best, store, context),
  });
  const contentJson = `${head.slice(0, -1)},"stock":${stock}}`;
  return {
    productId: product.id,
    payload: `${head.slice(0, -1)},"prices":${pricesJson},"stock":${stock}}`,
    priceHash: hash(pricesJson),
    contentHash: hash(contentJson),
    exclusionReason: reason,
    sku,
    ean,
  };
}

/** Why an offer plays no part in a store: its supplier is unknown, or its cost has no rate to the store currency. */
export type IgnoredOfferReason = 'unknown_supplier' | 'no_exchange_rate';

/**
 * Why a product resolved as it did in a store (docs/panel.md#pages, "Catalog": the chosen supplier and the
 * applied pricing rule): the same decisions resolveProduct writes into the payload, which this
 * never changes. Amounts are in the store currency at its exact precision, as in the payload.
 */
export interface ResolutionExplanation {
  store: Pick<StoreRecord, 'id' | 'slug' | 'name' | 'currency' | 'active'>;
  /** The best supplier offer (spec 2.1), or null when no offer is usable in the store. */
  chosenSupplier: {
    supplierRef: string;
    supplierName: string;
    quantity: number;
    /** The offer's cost converted to the store currency. */
    cost: string;
    /** in_stock: the lowest cost among the offers in stock; none_in_stock: no offer has stock, the lowest cost of all. */
    why: 'in_stock' | 'none_in_stock';
  } | null;
  /** Every offer usable in the store, in the order they are ranked (cost, then quantity, then supplier id). */
  rankedOffers: { supplierRef: string; quantity: number; cost: string }[];
  ignoredOffers: { supplierRef: string; reason: IgnoredOfferReason }[];
  /** The base cost, and where it comes from (spec 2.2). */
  baseCost: { amount: string; from: 'chosen_offer' | 'own_stock' | 'none' };
  stock: { own: number; supplier: number; sellable: number };
  exclusionReason: ExclusionReason | null;
  /** Per customer group: the pricing rule applied (the payload's applied_rule_id) and the price it gives. */
  prices: { customerGroupId: number; customerGroup: string; rule: PricingRuleRecord; computedPrice: string }[];
}

export function explainResolution(product: ProductRecord, store: StoreRecord, context: MerchantContext): ResolutionExplanation {
  const { offers, best, stock, reason, baseMinor, prices } = decide(product, store, context);
  const amount = (minor: bigint) => formatMinorUnits(minor, store.currency);
  const usable = new Set(offers.map((o) => o.offer));
  const supplierNames = new Map([...context.suppliersByRef.values()].map((s) => [s.ref, s.name]));
  const own = product.source.own_stock;
  // Own stock's cost counts only when it converts to the store currency (baseCost).
  const ownCosted =
    own?.cost != null && own.currency != null && convertToMinorUnits(own.cost, own.currency, store.currency, context) !== null;
  return {
    store: { id: store.id, slug: store.slug, name: store.name, currency: store.currency, active: store.active },
    chosenSupplier: best && {
      supplierRef: best.offer.supplier_ref,
      supplierName: supplierNames.get(best.offer.supplier_ref) ?? best.offer.supplier_ref,
      quantity: best.quantity,
      cost: amount(best.costMinor),
      why: best.quantity > 0 ? 'in_stock' : 'none_in_stock',
    },
    rankedOffers: [...offers]
      .sort(offerOrder)
      .map((o) => ({ supplierRef: o.offer.supplier_ref, quantity: o.quantity, cost: amount(o.costMinor) })),
    ignoredOffers: product.source.offers
      .filter((o) => !usable.has(o))
      .map((o) => ({
        supplierRef: o.supplier_ref,
        reason: context.suppliersByRef.has(o.supplier_ref) ? ('no_exchange_rate' as const) : ('unknown_supplier' as const),
      })),
    baseCost: { amount: amount(baseMinor), from: best ? 'chosen_offer' : ownCosted ? 'own_stock' : 'none' },
    stock: { own: own?.quantity ?? 0, supplier: best?.quantity ?? 0, sellable: stock },
    exclusionReason: reason,
    prices: prices.map(({ group, rule, priceMinor }) => ({
      customerGroupId: group.id,
      customerGroup: group.name,
      rule,
      computedPrice: amount(priceMinor),
    })),
  };
}
