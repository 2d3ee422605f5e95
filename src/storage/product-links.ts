// What a product's source refers to, kept as rows (product_links) in the source's own transaction
// on every engine, so that "which products show this image / exclude this store / buy from this
// supplier / bill in this currency" is an index range, never a parse of every source of the catalog
// (docs/architecture.md#every-statement-bounded).
import type { ProductSourceDocument } from '../catalog/model.js';

export type ProductLinkKind = 'image' | 'excluded_store' | 'supplier' | 'currency';

/** `${kind} ${value}`: one link of a product, as a set member. */
type LinkKey = string;

export interface ProductLinkDiff {
  /** [kind, value] pairs the new source adds. */
  added: [ProductLinkKind, string][];
  /** [kind, value] pairs the new source no longer lists. */
  removed: [ProductLinkKind, string][];
  /** Image URLs added and removed (the mirror's `listed` counts follow them). */
  addedImages: string[];
  removedImages: string[];
}

/**
 * The distinct links of a source: its image URLs, the stores it is excluded from, the suppliers of
 * its offers and supplier attributes, and the currencies of its offers and own stock's cost (which
 * stores a changed exchange rate can re-price: migration 33).
 */
export function productLinks(source: ProductSourceDocument | null): Set<LinkKey> {
  const links = new Set<LinkKey>();
  if (!source) return links;
  for (const image of source.images ?? []) links.add(`image ${image.url}`);
  for (const slug of source.excluded_stores ?? []) links.add(`excluded_store ${slug}`);
  for (const offer of source.offers ?? []) links.add(`supplier ${offer.supplier_ref}`);
  for (const value of source.supplier_attributes ?? []) links.add(`supplier ${value.supplier_ref}`);
  for (const offer of source.offers ?? []) links.add(`currency ${offer.currency}`);
  if (source.own_stock?.currency) links.add(`currency ${source.own_stock.currency}`);
  return links;
}

const split = (key: LinkKey): [ProductLinkKind, string] => {
  const space = key.indexOf(' ');
  return [key.slice(0, space) as ProductLinkKind, key.slice(space + 1)];
};

/** What changes in a product's links when its source goes from `before` (stored links) to `after`. */
export function diffProductLinks(before: Iterable<[string, string]>, after: ProductSourceDocument | null): ProductLinkDiff {
  const next = productLinks(after);
  const previous = new Set<LinkKey>();
  for (const [kind, value] of before) previous.add(`${kind} ${value}`);
  const diff: ProductLinkDiff = { added: [], removed: [], addedImages: [], removedImages: [] };
  for (const key of next) {
    if (previous.has(key)) continue;
    const link = split(key);
    diff.added.push(link);
    if (link[0] === 'image') diff.addedImages.push(link[1]);
  }
  for (const key of previous) {
    if (next.has(key)) continue;
    const link = split(key);
    diff.removed.push(link);
    if (link[0] === 'image') diff.removedImages.push(link[1]);
  }
  return diff;
}
