// Refuses a panel request whose address (path or query) holds U+0000, percent-encoded as %00 (issue
// 21.9): a search for it would reach the database, which cannot compare text holding it.
//
//   panel.use('*', nulFreeAddress());
import type { MiddlewareHandler } from 'hono';
import { NUL_REASON } from '../shared/json-text.js';
import { ProblemError } from '../shared/problem.js';

export function nulFreeAddress(): MiddlewareHandler {
  return async (c, next) => {
    // A NUL reaches an address only as %00 (`%2500` is the text "%00", which is fine).
    if (c.req.url.includes('%00')) {
      throw new ProblemError('invalid_parameter', `The address ${NUL_REASON}.`, [{ name: 'url', in: 'query', reason: NUL_REASON }]);
    }
    return next();
  };
}
