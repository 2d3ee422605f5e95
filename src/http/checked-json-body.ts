// The admin API's JSON request bodies, read once and checked as text before the validator parses
// them (docs/decisions.md#errors-and-bad-input): a leading byte order mark, bytes that are not UTF-8, nesting
// deeper than the configured limit, and strings (member names too) holding a lone surrogate escape
// or U+0000 answer 400 invalid_body naming the problem, so nothing is stored with
// U+FFFD in place of what was sent, and nothing reaches a database that cannot store it.
//
// Registered on the operations that take a JSON body (src/generated/admin-route-facts.ts), before their handlers:
//   app.on('PUT', '/admin/v1/merchants/:merchant_id/products/:product_ref', checkedJsonBody({ maxDepth: 32 }));
import type { MiddlewareHandler } from 'hono';
import { nestsDeeperThan, tooDeepReason } from '../shared/json-limits.js';
import { BOM_REASON, InvalidUtf8Error, decodeUtf8, mayHoldRefusedString, refusedString, startsWithBom } from '../shared/json-text.js';
import { invalidInput } from '../shared/problem.js';
import { bodyPointer } from './validation.js';

export interface CheckedJsonBodyOptions {
  /** Arrays and objects nested deeper than this are refused. */
  maxDepth: number;
}

export function checkedJsonBody({ maxDepth }: CheckedJsonBodyOptions): MiddlewareHandler {
  return async (c, next) => {
    let text: string;
    const bytes = new Uint8Array(await c.req.arrayBuffer());
    if (startsWithBom(bytes)) throw invalidInput('body', [{ name: '/', in: 'body', reason: BOM_REASON }]);
    try {
      text = decodeUtf8(bytes);
    } catch (error) {
      if (error instanceof InvalidUtf8Error) throw invalidInput('body', [{ name: '/', in: 'body', reason: error.reason }]);
      throw error;
    }
    if (nestsDeeperThan(text, maxDepth)) throw invalidInput('body', [{ name: '/', in: 'body', reason: tooDeepReason(maxDepth) }]);
    if (mayHoldRefusedString(text)) {
      // Parsed here only when a surrogate or NUL escape is present; malformed JSON is the validator's to name.
      const refused = parsedOrUndefined(text).map((value) => refusedString(value))[0];
      if (refused) throw invalidInput('body', [{ name: bodyPointer(refused.path), in: 'body', reason: refused.reason }]);
    }
    // The validator's c.req.json() parses this text: the body is read and decoded once.
    // (hono keeps the promise of each body reading in bodyCache; its type names the methods.)
    (c.req.bodyCache as { text?: Promise<string> }).text = Promise.resolve(text);
    return next();
  };
}

function parsedOrUndefined(text: string): unknown[] {
  try {
    return [JSON.parse(text)];
  } catch {
    return [];
  }
}
