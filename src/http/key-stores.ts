// A key restricted to some stores reads only those (SECURITY.md "Authorization"): a `store` it
// does not have answers 404 store_not_found, exactly as a slug that does not exist, and a request
// without `store` reads the default store only when the key has it. Every read of the public API
// names its store in the `store` query parameter, so one check here covers the products, a
// product, `?ids=`, the prices, the export and the change feed (live or not).
import type { MiddlewareHandler } from 'hono';
import { storeNotFound, type CatalogReads } from '../catalog/reads.js';
import { ProblemError } from '../shared/problem.js';
import type { PublicEnv } from './auth.js';

/**
 * Refuses a store outside the key's; without `store`, names the default store in the request (so
 * the read is of that store even if the default changes meanwhile) or refuses it.
 *
 * @example
 * app.use('/v1/products', keyStores(reads));
 */
export function keyStores(reads: Pick<CatalogReads, 'activeStore'>): MiddlewareHandler<PublicEnv> {
  return async (c, next) => {
    const { stores } = c.var.credential;
    if (stores === null) return next();
    const asked = c.req.query('store');
    if (asked !== undefined) {
      if (!stores.includes(asked)) throw storeNotFound(asked);
      return next();
    }
    const store = await reads.activeStore(c.var.merchantId, undefined);
    if (!stores.includes(store.slug)) {
      throw new ProblemError('store_not_found', `This API key reads only the stores ${stores.join(', ')}: name one as store.`);
    }
    const url = new URL(c.req.url);
    url.searchParams.set('store', store.slug);
    c.req.raw = new Request(url, c.req.raw);
    return next();
  };
}
