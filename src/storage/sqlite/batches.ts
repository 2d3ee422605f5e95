// Rows written a batch a statement on SQLite: a statement per row costs better-sqlite3's call, the
// statement's timing and a step of the VM's setup for each row (~3-5 µs); a multi-row VALUES list
// of bound parameters costs them once per batch (no JSON to write and parse, as json_each would).
import { yieldToOthers } from '../../shared/cooperative.js';

/**
 * Rows a statement, at most: bounded so a statement stays a short step of the event loop (a few
 * hundred µs) and its parameters far below SQLite's limit (32,766).
 */
export const ROWS_PER_STATEMENT = 64;

/**
 * `rows` rows as batches of ROWS_PER_STATEMENT, then the rest in batches of halving powers of two:
 * at most eight sizes of statement are ever prepared for any count. Lets others run between batches.
 */
export async function inBatches(rows: number, write: (from: number, count: number) => void | Promise<void>): Promise<void> {
  let from = 0;
  for (let size = ROWS_PER_STATEMENT; size >= 1; size >>= 1) {
    while (rows - from >= size) {
      if (from > 0) await yieldToOthers();
      await write(from, size);
      from += size;
      if (size < ROWS_PER_STATEMENT) break;
    }
  }
}

/** `count` rows of `columns` question marks: `(?, ?), (?, ?)`. */
export function valueRows(count: number, columns: number): string {
  const row = `(${Array.from({ length: columns }, () => '?').join(', ')})`;
  return Array.from({ length: count }, () => row).join(', ');
}
