// The bounds of one product's source (docs/decisions.md#product-limits): counts of
// overrides, supplier attributes, images, offers and content locales, and the bytes of the source
// as JSON, each configurable (config/settings.ts). A source above one is refused with 400 naming the
// limit where it is validated (the admin API's PUT, each line of an import, before anything is
// applied), so no product's payload, and no page of them, grows without bound.
import type { ProductSourceDocument } from './model.js';
import { sourceJson } from './product-sources.js';
import { settingDefault, type SettingName } from '../config/settings.js';
import type { InvalidParam } from '../shared/problem.js';

export interface ProductLimits {
  /** Bytes of a product's source document as JSON (UTF-8), as stored and published from. */
  maxProductBytes: number;
  /** Members of `overrides`. */
  maxProductOverrides: number;
  /** Items of `supplier_attributes`. */
  maxProductSupplierAttributes: number;
  /** Items of `images`. */
  maxProductImages: number;
  /** Items of `offers`. */
  maxProductOffers: number;
  /** Members of `content` (locales and languages). */
  maxProductLocales: number;
}

/**
 * Each limit's setting (config/settings.ts, with its default). The defaults are several times what
 * real catalogs use (a laptop's data sheet has 200-400 attributes; shops show 5-20 images; EU-wide
 * catalogs carry 24-40 locales), and a source of 512 KiB holds 24 locales of 10 KB descriptions,
 * 1,000 attributes and 100 images with room to spare (docs/configuration.md#product-limits).
 */
export const PRODUCT_LIMIT_SETTINGS = {
  maxProductBytes: 'CPS_MAX_PRODUCT_BYTES',
  maxProductOverrides: 'CPS_MAX_PRODUCT_OVERRIDES',
  maxProductSupplierAttributes: 'CPS_MAX_PRODUCT_SUPPLIER_ATTRIBUTES',
  maxProductImages: 'CPS_MAX_PRODUCT_IMAGES',
  maxProductOffers: 'CPS_MAX_PRODUCT_OFFERS',
  maxProductLocales: 'CPS_MAX_PRODUCT_LOCALES',
} as const satisfies Record<keyof ProductLimits, SettingName>;

/** Every limit at its default. */
export const DEFAULT_PRODUCT_LIMITS = Object.fromEntries(
  Object.entries(PRODUCT_LIMIT_SETTINGS).map(([name, setting]) => [name, settingDefault(setting)]),
) as unknown as ProductLimits;

/** The counted parts of a source: its member, what is counted, and the limit. */
const COUNTED: { member: keyof ProductSourceDocument; what: string; limit: Exclude<keyof ProductLimits, 'maxProductBytes'> }[] = [
  { member: 'content', what: 'locales', limit: 'maxProductLocales' },
  { member: 'images', what: 'images', limit: 'maxProductImages' },
  { member: 'offers', what: 'offers', limit: 'maxProductOffers' },
  { member: 'supplier_attributes', what: 'supplier attributes', limit: 'maxProductSupplierAttributes' },
  { member: 'overrides', what: 'overrides', limit: 'maxProductOverrides' },
];

/**
 * The limits a normalized source exceeds, as problems named by JSON Pointer under `base` (`''`
 * for a request body, `/product` in an import line), each reason naming the limit and its setting.
 */
export function productLimitProblems(source: ProductSourceDocument, limits: ProductLimits, base = ''): InvalidParam[] {
  const problems: InvalidParam[] = [];
  for (const { member, what, limit } of COUNTED) {
    const value = source[member] as object;
    const count = Array.isArray(value) ? value.length : Object.keys(value).length;
    if (count > limits[limit]) {
      problems.push({
        name: `${base}/${member}`,
        in: 'body',
        reason: `has ${count} ${what}: a product has at most ${limits[limit]} (${PRODUCT_LIMIT_SETTINGS[limit]})`,
      });
    }
  }
  const bytes = Buffer.byteLength(sourceJson(source), 'utf8');
  if (bytes > limits.maxProductBytes) {
    problems.push({
      name: base || '/',
      in: 'body',
      reason: `is ${bytes} bytes as JSON: a product's source is at most ${limits.maxProductBytes} bytes (${PRODUCT_LIMIT_SETTINGS.maxProductBytes})`,
    });
  }
  return problems;
}
