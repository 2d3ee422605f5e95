// A product's source as the merchant sends it (spec 2.1): the admin API's input with every optional
// part filled in, and the checks of what it refers to (suppliers, stores) and of its size.
import type { components } from '../generated/admin-api.js';
import type { InvalidParam } from '../shared/problem.js';
import type { MerchantScope } from '../storage/merchant-scope.js';
import type { ProductSourceDocument } from './model.js';

/** A product source as the admin API accepts it: every part but the ref is optional. */
export interface ProductSourceInput {
  eans?: string[];
  manufacturer?: string | null;
  content?: Record<string, { title?: string | null; description?: string | null }>;
  images?: { url: string }[];
  offers?: ProductSourceDocument['offers'];
  own_stock?: { quantity: number; cost?: string | null; currency?: string | null } | null;
  supplier_attributes?: ProductSourceDocument['supplier_attributes'];
  overrides?: Record<string, string>;
  excluded_stores?: string[];
}

/** One checked line of an import: a product to upsert or delete (with its line number in the file). */
export type ProductOperation =
  | { op: 'upsert_product'; ref: string; source: ProductSourceDocument; line?: number }
  | { op: 'delete_product'; ref: string; line?: number };

/** A product's source with each image's mirroring state, as the admin API shows it (generated). */
export type ProductSourceView = components['schemas']['ProductSource'];

export function normalizeSource(input: ProductSourceInput): ProductSourceDocument {
  return {
    eans: input.eans ?? [],
    manufacturer: input.manufacturer ?? null,
    content: Object.fromEntries(
      Object.entries(input.content ?? {}).map(([locale, c]) => [locale, { title: c.title ?? null, description: c.description ?? null }]),
    ),
    images: (input.images ?? []).map(({ url }) => ({ url })),
    offers: input.offers ?? [],
    own_stock: input.own_stock
      ? { quantity: input.own_stock.quantity, cost: input.own_stock.cost ?? null, currency: input.own_stock.currency ?? null }
      : null,
    supplier_attributes: input.supplier_attributes ?? [],
    overrides: input.overrides ?? {},
    excluded_stores: input.excluded_stores ?? [],
  };
}

/** Sources already written as JSON (sourceJson), each written once however often it is asked for. */
const writtenSources = new WeakMap<ProductSourceDocument, string>();

/**
 * The source as JSON, written once per source object: an import checks its size, stages it and
 * stores it from the same text (the object must not change after it is first written).
 */
export function sourceJson(source: ProductSourceDocument): string {
  let json = writtenSources.get(source);
  if (json === undefined) {
    json = JSON.stringify(source);
    writtenSources.set(source, json);
  }
  return json;
}

/**
 * The operations as one JSON array, as JSON.stringify writes it but an operation a line (JSON text
 * never holds a raw line feed), each upsert's source from sourceJson (not written again).
 */
export function operationsJson(operations: readonly ProductOperation[]): string {
  const parts = operations.map((operation) =>
    operation.op === 'upsert_product'
      ? `${upsertPrefix(operation.ref)}${sourceJson(operation.source)}${upsertSuffix(operation.line)}`
      : JSON.stringify(operation),
  );
  return `[${parts.join(',\n')}]`;
}

const upsertPrefix = (ref: string) => `{"op":"upsert_product","ref":${JSON.stringify(ref)},"source":`;
const upsertSuffix = (line: number | undefined) => (line === undefined ? '}' : `,"line":${line}}`);

/**
 * The operations of operationsJson's text, each upsert's source with its text as written there
 * (sourceJson gives it without writing the source again: JSON.stringify of what JSON.parse read
 * from JSON.stringify's text is that text).
 */
export function parseOperations(json: string): ProductOperation[] {
  const operations = JSON.parse(json) as ProductOperation[];
  const lines = json.split('\n');
  // A text written an operation a line (one written otherwise is parsed alone).
  if (lines.length !== operations.length) return operations;
  for (const [index, operation] of operations.entries()) {
    if (operation.op !== 'upsert_product') continue;
    const line = lines[index]!;
    // `[op,`, `op,`, `op]` or `[op]`: the operation's text ends a character before its line.
    const start = index === 0 ? 1 : 0;
    const end = line.length - 1;
    const prefix = upsertPrefix(operation.ref);
    const suffix = upsertSuffix(operation.line);
    if (line.startsWith(prefix, start) && line.endsWith(suffix, end)) {
      writtenSources.set(operation.source, line.slice(start + prefix.length, end - suffix.length));
    }
  }
  return operations;
}

/** The suppliers and stores a product source may name, loaded once per request or import. */
export interface SourceReferences {
  suppliers: Set<string>;
  stores: Set<string>;
}

/** The suppliers and stores the merchant's sources may name. */
export async function sourceReferences(merchant: MerchantScope): Promise<SourceReferences> {
  const { suppliers, stores } = await merchant.sourceReferenceNames();
  return { suppliers: new Set(suppliers), stores: new Set(stores) };
}

/** Problems with a source's references to suppliers and stores (JSON pointers under `base`). */
export function sourceProblems(references: SourceReferences, source: ProductSourceDocument, base = ''): InvalidParam[] {
  const { suppliers, stores } = references;
  const problems: InvalidParam[] = [];
  const seen = new Set<string>();
  source.offers.forEach((offer, i) => {
    if (!suppliers.has(offer.supplier_ref))
      problems.push({ name: `${base}/offers/${i}/supplier_ref`, in: 'body', reason: `unknown supplier "${offer.supplier_ref}"` });
    if (seen.has(offer.supplier_ref))
      problems.push({ name: `${base}/offers/${i}/supplier_ref`, in: 'body', reason: 'one offer per supplier' });
    seen.add(offer.supplier_ref);
  });
  const seenValues = new Set<string>();
  source.supplier_attributes.forEach((value, i) => {
    if (!suppliers.has(value.supplier_ref))
      problems.push({
        name: `${base}/supplier_attributes/${i}/supplier_ref`,
        in: 'body',
        reason: `unknown supplier "${value.supplier_ref}"`,
      });
    const pair = `${value.supplier_ref}\u0000${value.key}`;
    if (seenValues.has(pair))
      problems.push({ name: `${base}/supplier_attributes/${i}/key`, in: 'body', reason: 'one value per supplier and key' });
    seenValues.add(pair);
  });
  source.eans.forEach((ean, i) => {
    if (source.eans.indexOf(ean) !== i) problems.push({ name: `${base}/eans/${i}`, in: 'body', reason: 'is listed twice' });
  });
  source.excluded_stores.forEach((slug, i) => {
    if (!stores.has(slug)) problems.push({ name: `${base}/excluded_stores/${i}`, in: 'body', reason: `unknown store "${slug}"` });
  });
  const own = source.own_stock;
  if (own && (own.cost === null) !== (own.currency === null)) {
    problems.push({ name: `${base}/own_stock`, in: 'body', reason: 'cost and currency are given together' });
  }
  return problems;
}
