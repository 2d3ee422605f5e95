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

/** Appends `value` as a link of `kind` unless the list has it already (a source's lists are short). */
function addLink(links: [ProductLinkKind, string][], kind: ProductLinkKind, value: string): void {
  for (const [k, v] of links) if (k === kind && v === value) return;
  links.push([kind, value]);
}

/** Links a source may list at most for linkPairs' linear checks of what it has (a few, as a rule). */
const FEW_LINKS = 24;

const split = (key: LinkKey): [ProductLinkKind, string] => {
  const space = key.indexOf(' ');
  return [key.slice(0, space) as ProductLinkKind, key.slice(space + 1)];
};

/** productLinks' links as [kind, value] pairs, in the same order: without a string per link when they are few. */
function linkPairs(source: ProductSourceDocument | null): [ProductLinkKind, string][] {
  const links: [ProductLinkKind, string][] = [];
  if (!source) return links;
  const listed =
    (source.images?.length ?? 0) +
    (source.excluded_stores?.length ?? 0) +
    2 * (source.offers?.length ?? 0) +
    (source.supplier_attributes?.length ?? 0) +
    1;
  if (listed > FEW_LINKS) return [...productLinks(source)].map(split);
  for (const image of source.images ?? []) addLink(links, 'image', image.url);
  for (const slug of source.excluded_stores ?? []) addLink(links, 'excluded_store', slug);
  for (const offer of source.offers ?? []) addLink(links, 'supplier', offer.supplier_ref);
  for (const value of source.supplier_attributes ?? []) addLink(links, 'supplier', value.supplier_ref);
  for (const offer of source.offers ?? []) addLink(links, 'currency', offer.currency);
  if (source.own_stock?.currency) addLink(links, 'currency', source.own_stock.currency);
  return links;
}

/** Whether `links` holds [kind, value]. */
function hasLink(links: readonly (readonly [string, string])[], kind: string, value: string): boolean {
  for (const [k, v] of links) if (k === kind && v === value) return true;
  return false;
}

/** What changes in a product's links when its source goes from `before` (stored links) to `after`. */
export function diffProductLinks(before: Iterable<[string, string]>, after: ProductSourceDocument | null): ProductLinkDiff {
  const next = linkPairs(after);
  const previous = [...before];
  if (next.length > FEW_LINKS || previous.length > FEW_LINKS) return diffManyLinks(previous, next);
  const diff: ProductLinkDiff = { added: [], removed: [], addedImages: [], removedImages: [] };
  for (const link of next) {
    if (previous.length > 0 && hasLink(previous, link[0], link[1])) continue;
    diff.added.push(link);
    if (link[0] === 'image') diff.addedImages.push(link[1]);
  }
  for (const [kind, value] of previous) {
    if (hasLink(next, kind, value)) continue;
    diff.removed.push([kind as ProductLinkKind, value]);
    if (kind === 'image') diff.removedImages.push(value);
  }
  return diff;
}

/** diffProductLinks of many links: by set membership of `${kind} ${value}` keys. */
function diffManyLinks(before: [string, string][], after: [ProductLinkKind, string][]): ProductLinkDiff {
  const previous = new Set<LinkKey>(before.map(([kind, value]) => `${kind} ${value}`));
  const next = new Set<LinkKey>(after.map(([kind, value]) => `${kind} ${value}`));
  const diff: ProductLinkDiff = { added: [], removed: [], addedImages: [], removedImages: [] };
  for (const link of after) {
    if (previous.has(`${link[0]} ${link[1]}`)) continue;
    diff.added.push(link);
    if (link[0] === 'image') diff.addedImages.push(link[1]);
  }
  for (const [kind, value] of before) {
    if (next.has(`${kind} ${value}`)) continue;
    diff.removed.push([kind as ProductLinkKind, value]);
    if (kind === 'image') diff.removedImages.push(value);
  }
  return diff;
}
