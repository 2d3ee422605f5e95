// Bulk NDJSON import (admin `importProducts`, CLI `import`): one operation per line. The whole
// file is validated first; a bad line rejects the import with every problem listed and nothing
// applied. A valid file is applied in chunks, each chunk one transaction with its publishing.
import { z } from '@hono/zod-openapi';
import { fastParseProductSourceInput } from '../generated/admin-fast-parse.js';
import { ProductSourceInputSchema, ProductSourceSchema } from '../generated/admin-routes.js';
import type { ProductSourceDocument } from '../catalog/model.js';
import { nestsDeeperThan, tooDeepReason } from '../shared/json-limits.js';
import { InvalidUtf8Error, decodeUtf8, mayHoldRefusedString, refusedString } from '../shared/json-text.js';
import { ProblemError, type InvalidParam } from '../shared/problem.js';
import type { CatalogAdmin } from './catalog-admin.js';
import { normalizeSource } from '../catalog/product-sources.js';
import { yieldToOthers } from '../shared/cooperative.js';

const ImportLineSchema = z.discriminatedUnion('op', [
  z.strictObject({ op: z.literal('upsert_product'), product: ProductSourceInputSchema.extend({ ref: ProductSourceSchema.shape.ref }) }),
  z.strictObject({ op: z.literal('delete_product'), ref: ProductSourceSchema.shape.ref }),
]);

type ImportLine = z.output<typeof ImportLineSchema>;

/**
 * An upsert line ImportLineSchema surely accepts, as it gives it, checked by the generated
 * parser (no zod: a few µs a line instead of ~13); undefined for any other line, which zod checks
 * (its issues are the line's problems).
 */
function fastImportLine(json: unknown): { success: true; data: ImportLine } | undefined {
  if (typeof json !== 'object' || json === null) return undefined;
  const line = json as Record<string, unknown>;
  if (line.op !== 'upsert_product') return undefined;
  for (const key in line) if (key !== 'op' && key !== 'product') return undefined;
  const product = fastParseProductSourceInput(line.product);
  // The line's product must name its ref (optional in the source's input schema).
  if (product?.ref === undefined) return undefined;
  return { success: true, data: { op: 'upsert_product', product: product as typeof product & { ref: string } } };
}

/** A checked line: what it does, and its number in the file. */
type Operation = ({ op: 'upsert_product'; ref: string; source: ProductSourceDocument } | { op: 'delete_product'; ref: string }) & {
  line: number;
};

/** At most this many problems are listed in one rejection. */
const MAX_LISTED_PROBLEMS = 100;

export interface ImportResult {
  lines: number;
  upserted: number;
  deleted: number;
}

export interface ImportOptions {
  chunkSize?: number;
  /** Lines nested deeper than this are refused before they are parsed (the admin API's JSON depth limit). */
  maxJsonDepth?: number;
  /** Told how many lines are read and checked so far, every few dozen lines and once at the end; awaited. */
  onLinesRead?: (lines: number) => void | Promise<void>;
  /** Told the operations to apply once every line is checked; awaited. */
  onStart?: (operations: number) => void | Promise<void>;
  /** Told the operations applied after each committed chunk; awaited. */
  onProgress?: (applied: number) => void | Promise<void>;
}

function pointer(path: PropertyKey[]): string {
  return path.length ? `/${path.map(String).join('/')}` : '';
}

/** A line's problem reason: the JSON Pointer of the offending member first, when there is one. */
const located = (at: string, reason: string) => (at ? `${at}: ${reason}` : reason);

/** An NDJSON file: its text, or its bytes as they arrive (a request body, a file stream). */
export type NdjsonSource = string | AsyncIterable<Uint8Array>;

/** A non-blank line with its 1-based number: its text, or why its bytes are not UTF-8. */
type NdjsonLine = { number: number; line: string; invalid?: undefined } | { number: number; line?: undefined; invalid: string };

/**
 * The lines of a byte stream, split at LF bytes (never inside a UTF-8 sequence) and each decoded
 * strictly: a line that is not UTF-8 is reported with its number, the others still
 * checked. Only the first line may start with a byte order mark.
 */
async function* byteLines(bytes: AsyncIterable<Uint8Array>): AsyncGenerator<NdjsonLine> {
  let number = 0;
  let pending: Uint8Array[] = [];
  const decoded = (parts: Uint8Array[]): NdjsonLine => {
    number++;
    const line = parts.length === 1 ? parts[0]! : Buffer.concat(parts);
    try {
      return { number, line: decodeUtf8(line, { ignoreBOM: number > 1 }) };
    } catch (error) {
      if (error instanceof InvalidUtf8Error) return { number, invalid: error.reason };
      throw error;
    }
  };
  for await (const chunk of bytes) {
    let start = 0;
    for (let end = chunk.indexOf(0x0a); end >= 0; end = chunk.indexOf(0x0a, start)) {
      pending.push(chunk.subarray(start, end));
      yield decoded(pending);
      pending = [];
      start = end + 1;
    }
    if (start < chunk.length) pending.push(chunk.subarray(start));
  }
  yield decoded(pending);
}

/** The non-blank lines of an NDJSON source with their 1-based numbers, as they arrive. */
async function* ndjsonLines(source: NdjsonSource): AsyncGenerator<NdjsonLine> {
  const lines = typeof source === 'string' ? source.split('\n').map((line, i): NdjsonLine => ({ number: i + 1, line })) : byteLines(source);
  for await (const entry of lines) {
    if (entry.invalid !== undefined) yield entry;
    else if (entry.line.trim()) yield { number: entry.number, line: entry.line.trim() };
  }
}

/** Lines checked between two progress reports (onLinesRead). */
const PARSE_STEP = 32;

/**
 * Parses and checks every line; throws the 400 problem listing each bad line. A big file is
 * checked a line at a time, offering the event loop to other requests after each line: once the
 * check has held it for CPS_WRITE_SLICE_MS (shared/cooperative.ts), the requests and timers
 * waiting meanwhile run before the next line.
 */
export async function parseImport(
  admin: CatalogAdmin,
  merchantId: number,
  source: NdjsonSource,
  maxJsonDepth = Infinity,
  onLinesRead?: ImportOptions['onLinesRead'],
): Promise<Operation[]> {
  const operations: Operation[] = [];
  await checkImport(
    admin,
    merchantId,
    source,
    (operation) => {
      operations.push(operation);
    },
    maxJsonDepth,
    onLinesRead,
  );
  return operations;
}

/**
 * parseImport, each checked operation handed to `take` as its line is read (in line order; once a
 * line is bad, the later ones are still checked but no longer taken: the file throws once every
 * line is checked, whatever was taken): the import job stages them a chunk at a time, so a big
 * file's parsed lines never pile up in memory (they would outlive the young generation, and a
 * collection of the whole heap would trace them). `take` may return a promise (awaited before the
 * next line). `yieldNow` is awaited after every line (shared/cooperative.ts's yieldToOthers: it lets
 * other work run once the slice is used up). Returns the number of operations.
 */
export async function checkImport(
  admin: CatalogAdmin,
  merchantId: number,
  source: NdjsonSource,
  take: (operation: Operation) => void | Promise<void>,
  maxJsonDepth = Infinity,
  onLinesRead?: ImportOptions['onLinesRead'],
  yieldNow: () => Promise<void> = yieldToOthers,
): Promise<number> {
  const problems: InvalidParam[] = [];
  let operations = 0;
  const references = await admin.sourceReferences(admin.storage, merchantId);
  let counted = 0;
  let read = 0;
  const taken = async (operation: Operation) => {
    operations++;
    if (problems.length === 0) await take(operation);
  };
  for await (const { number, line, invalid } of ndjsonLines(source)) {
    // After every line, other requests get their turn once the slice is used up (a line is a few
    // to tens of microseconds: 32 lines past the slice were up to a millisecond and more).
    if (counted > 0) await yieldNow();
    // Every PARSE_STEP lines checked: tell the progress.
    if (counted > 0 && counted % PARSE_STEP === 0) await onLinesRead?.(read);
    counted++;
    read = number;
    const name = `line ${number}`;
    if (invalid !== undefined) {
      problems.push({ name, in: 'body', reason: invalid });
      continue;
    }
    if (nestsDeeperThan(line, maxJsonDepth)) {
      problems.push({ name, in: 'body', reason: tooDeepReason(maxJsonDepth) });
      continue;
    }
    let json: unknown;
    try {
      json = JSON.parse(line);
    } catch (error) {
      problems.push({ name, in: 'body', reason: `not valid JSON: ${(error as Error).message}` });
      continue;
    }
    // A lone surrogate or U+0000 anywhere in the line: refused before the schema.
    const refused = mayHoldRefusedString(line) ? refusedString(json) : null;
    if (refused) {
      problems.push({ name, in: 'body', reason: located(pointer(refused.path), refused.reason) });
      continue;
    }
    const parsed = fastImportLine(json) ?? ImportLineSchema.safeParse(json);
    if (!parsed.success) {
      for (const issue of parsed.error.issues) problems.push({ name, in: 'body', reason: located(pointer(issue.path), issue.message) });
      continue;
    }
    if (parsed.data.op === 'delete_product') {
      await taken({ op: 'delete_product', ref: parsed.data.ref, line: number });
      continue;
    }
    const { ref, ...input } = parsed.data.product;
    const source = normalizeSource(input);
    for (const problem of [...admin.sourceLimitProblems(source, '/product'), ...admin.sourceProblems(references, source, '/product')]) {
      problems.push({ name, in: 'body', reason: located(problem.name, problem.reason) });
    }
    await taken({ op: 'upsert_product', ref, source, line: number });
  }
  await onLinesRead?.(read);
  if (problems.length) {
    const listed = problems.slice(0, MAX_LISTED_PROBLEMS);
    const more = problems.length > listed.length ? ` (first ${listed.length} of ${problems.length} listed)` : '';
    const badLines = new Set(problems.map((p) => p.name)).size;
    throw new ProblemError('invalid_body', `${badLines} of ${counted} lines are invalid${more}; nothing was applied.`, listed);
  }
  return operations;
}

/**
 * Applies a checked file chunk by chunk, each chunk one transaction with its publishing: a crash
 * keeps the chunks committed before it (an import commits chunk by chunk: docs/architecture.md#big-writes-do-not-stall-reads).
 */
export async function importNdjson(
  admin: CatalogAdmin,
  merchantId: number,
  source: NdjsonSource,
  options: ImportOptions = {},
): Promise<ImportResult> {
  await admin.merchant(merchantId);
  const operations = await parseImport(admin, merchantId, source, options.maxJsonDepth, options.onLinesRead);
  const chunkSize = options.chunkSize ?? 1000;
  await options.onStart?.(operations.length);
  const result = { lines: operations.length, upserted: 0, deleted: 0 };
  for (let i = 0; i < operations.length; i += chunkSize) {
    let applied: Awaited<ReturnType<CatalogAdmin['applyProductBatch']>>;
    try {
      applied = await admin.applyProductBatch(merchantId, operations.slice(i, i + chunkSize));
    } catch (error) {
      // The chunks before this one are committed: say exactly which lines they were.
      const note = appliedLines(i, operations[i]?.line, operations.at(-1)?.line ?? 0);
      if (error instanceof ProblemError) throw new ProblemError(error.code, `${error.detail} ${note}`, error.invalidParams, error.headers);
      throw new ProblemError('internal_error', `The import stopped on an unexpected error. ${note}`);
    }
    result.upserted += applied.upserted;
    result.deleted += applied.deleted;
    await options.onProgress?.(Math.min(operations.length, i + chunkSize));
  }
  return result;
}

/**
 * Which lines of a file an import that stopped part-way applied: every line before
 * the first operation it did not apply (blank lines apply nothing), none from it on. `applied`
 * counts the operations applied, `stoppedAt` is the line of the first one not applied (undefined
 * when none was left) and `lastLine` the file's last line.
 */
export function appliedLines(applied: number, stoppedAt: number | undefined, lastLine: number): string {
  const operations = `${applied} ${applied === 1 ? 'operation' : 'operations'}`;
  if (stoppedAt === undefined) return `Every line was applied (${operations}).`;
  if (applied === 0) return 'No line was applied.';
  const done = stoppedAt > 2 ? `Lines 1-${stoppedAt - 1} were applied` : 'Line 1 was applied';
  const rest = stoppedAt < lastLine ? `lines ${stoppedAt}-${lastLine} were not` : `line ${stoppedAt} was not`;
  return `${done} (${operations}); ${rest}.`;
}
