// The merchant's product list (admin listProductSources), the same on every engine: an
// engine reads one bounded window of products in ref order, each marked whether it matches the
// filters; this turns the window into the page and where the next one starts.
import type { ProductListPage, ProductListQuery } from './records.js';

/** A product of the window an engine read, and whether the filters keep it. */
export interface ProductListRow {
  id: number;
  ref: string;
  updated_at: string;
  matches: boolean | number;
}

/** Past every ref the documents allow (`[A-Za-z0-9._:-]`, all below `~` in byte order): a prefix's upper bound. */
export const PAST_EVERY_REF_CHARACTER = '~';

/** Whether the query filters anything (else the window is the page plus one, to know whether more follow). */
export function filtered(query: ProductListQuery): boolean {
  return query.updatedSince !== null || query.excludedFromStore !== null;
}

/** How many products the engine's window reads. */
export function windowSize(query: ProductListQuery): number {
  return filtered(query) ? Math.max(query.scan, query.limit) : query.limit + 1;
}

export function productListPage(rows: ProductListRow[], query: ProductListQuery): ProductListPage {
  const full = rows.length === windowSize(query);
  const products: ProductListPage['products'] = [];
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i]!;
    if (!row.matches) continue;
    products.push({ id: Number(row.id), ref: row.ref, updated_at: row.updated_at });
    if (products.length === query.limit) return { products, nextAfter: i < rows.length - 1 || full ? row.ref : null };
  }
  return { products, nextAfter: full ? rows[rows.length - 1]!.ref : null };
}
