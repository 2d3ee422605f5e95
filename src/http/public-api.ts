// The public read API (spec 4.1-4.3): each handler reads validated input, calls one catalog
// read, and returns the stored payload bytes as they are (with an ETag, or 304 when unchanged).
import { OpenAPIHono } from '@hono/zod-openapi';
import { CatalogReads, clampPerPage, toPublicStore } from '../catalog/reads.js';
import type { StoreRecord } from '../catalog/model.js';
import { routes } from '../generated/public-routes.js';
import type { CatalogStorage } from '../storage/port.js';
import { apiKeyAuth, type PublicEnv } from './auth.js';
import { problemResponse, renderError } from './errors.js';
import { ProblemError, invalidInput } from '../shared/problem.js';
import { readChangeFeed } from '../changes/feed.js';
import { validationHook } from './validation.js';
import { CONTENT_TYPE_OF, MEDIA_KEY, type MediaStore } from '../images/media-store.js';
import { conditionalJson, etagMatches } from './conditional.js';
import { rateLimit, type TokenBucketLimiter } from './rate-limit.js';

const JSON_TYPE = { 'Content-Type': 'application/json' };
const DATA_OPEN = Buffer.from('{"data":[');
const DATA_OPEN_SINGLE = Buffer.from('{"data":');
const OBJECT_CLOSE = Buffer.from('}');

function storeOrNotFound(reads: CatalogReads, merchantId: number, slug: string | undefined): StoreRecord {
  const store = reads.findActiveStore(merchantId, slug);
  if (store) return store;
  throw slug === undefined
    ? new ProblemError('store_not_found', 'The merchant has no active default store.')
    : new ProblemError('store_not_found', `No active store with slug "${slug}".`);
}

export interface PublicApiOptions {
  media?: MediaStore;
  reads?: CatalogReads;
  /** Per-key token buckets on /v1; without one, requests are not limited. */
  rateLimiter?: TokenBucketLimiter;
}

export function publicApi(storage: CatalogStorage, feedWindow: number, options: PublicApiOptions = {}) {
  const { media, reads = new CatalogReads(storage), rateLimiter } = options;
  const app = new OpenAPIHono<PublicEnv>({ defaultHook: validationHook });
  app.onError(renderError);
  app.use('/v1/*', apiKeyAuth(storage));
  if (rateLimiter) app.use('/v1/*', rateLimit(rateLimiter));

  // Mirrored images (spec 2.1 image rules): public, content-addressed, cacheable forever.
  app.openapi(routes.getMedia, async (c) => {
    const { key } = c.req.valid('param');
    const bytes = media ? await media.get(key) : undefined;
    if (!bytes) throw new ProblemError('not_found', `No media file ${key}.`);
    const etag = `"${MEDIA_KEY.exec(key)![1]}"`;
    const headers = { ETag: etag, 'Cache-Control': 'public, max-age=31536000, immutable' };
    if (etagMatches(c.req.valid('header')['if-none-match'], etag)) return c.body(null, 304, headers);
    const contentType = CONTENT_TYPE_OF[key.split('.')[1]!]!;
    return c.body(new Uint8Array(bytes), 200, { ...headers, 'Content-Type': contentType, 'Content-Length': String(bytes.length) }) as never;
  }, (result, c) => {
    // Any malformed key names no file: 404, like an unknown one (openapi: getMedia).
    if (!result.success) return problemResponse(new ProblemError('not_found', 'No such media file.'), c.req.path);
    return undefined;
  });

  app.openapi(routes.listProducts, (c) => {
    const query = c.req.valid('query');
    if (query.ids) {
      const paging = ['page', 'per_page', 'after_id'].filter((name) => c.req.query(name) !== undefined);
      if (paging.length) {
        throw invalidInput('query', paging.map((name) => ({ name, in: 'query' as const, reason: 'cannot be combined with ids' })));
      }
      const ids = [...new Set(query.ids)];
      const store = storeOrNotFound(reads, c.var.merchantId, query.store);
      const found = reads.productsByIds(store, ids);
      const meta = { current_page: 1, per_page: ids.length, last_page: 1, total: found.count };
      const tail = `],"store":${JSON.stringify(store.slug)},"meta":${JSON.stringify(meta)}}`;
      return conditionalJson(c, Buffer.concat([DATA_OPEN, found.bytes, Buffer.from(tail)])) as never;
    }
    if (query.after_id !== undefined && c.req.query('page') !== undefined) {
      throw invalidInput('query', [{ name: 'page', in: 'query', reason: 'cannot be combined with after_id' }]);
    }
    const { store, page } = reads.consistent(() => {
      const store = storeOrNotFound(reads, c.var.merchantId, query.store);
      const perPage = clampPerPage(query.per_page);
      return {
        store,
        page: query.after_id === undefined
          ? reads.productPage(store, query.page, perPage)
          : reads.productPageAfter(store, query.after_id, perPage),
      };
    });
    // The stored payload bytes go out as they are, framed by the page envelope; the ETag is
    // computed over the rows' stored hashes and the envelope rather than the ~155 KB of bytes.
    const tail = Buffer.from(`],"store":${JSON.stringify(store.slug)},"meta":${JSON.stringify(page.meta)}}`);
    return conditionalJson(c, Buffer.concat([DATA_OPEN, page.data, tail]), Buffer.concat([page.digests, tail])) as never;
  });

  app.openapi(routes.getProduct, (c) => {
    const { id } = c.req.valid('param');
    const store = storeOrNotFound(reads, c.var.merchantId, c.req.valid('query').store);
    const payload = reads.product(store, id);
    // spec 4.2: outside the merchant's catalog (including another merchant's id) is 404.
    if (payload === undefined) throw new ProblemError('not_found', `Product ${id} is not in the catalog.`);
    return conditionalJson(c, Buffer.concat([DATA_OPEN_SINGLE, payload, OBJECT_CLOSE])) as never;
  });

  app.openapi(routes.listPrices, (c) => {
    const query = c.req.valid('query');
    const store = storeOrNotFound(reads, c.var.merchantId, query.store);
    const prices = reads.pricesByIds(store, [...new Set(query.ids)]);
    const tail = `],"store":${JSON.stringify(store.slug)}}`;
    return c.body(Buffer.concat([DATA_OPEN, prices, Buffer.from(tail)]), 200, JSON_TYPE) as never;
  });

  app.openapi(routes.listChanges, (c) => {
    const query = c.req.valid('query');
    // spec 4.4 cursor rule 1: the two halves travel together.
    if (query.since === undefined && c.req.query('since_id') !== undefined) {
      throw invalidInput('query', [{ name: 'since_id', in: 'query', reason: 'must be sent together with since' }]);
    }
    const store = storeOrNotFound(reads, c.var.merchantId, query.store);
    const window = readChangeFeed(storage, store, { since: query.since, sinceId: query.since_id }, feedWindow);
    return c.json({ ...window, store: store.slug }, 200);
  });

  app.openapi(routes.listStores, (c) => {
    const stores = { data: reads.activeStores(c.var.merchantId).map(toPublicStore) };
    return conditionalJson(c, Buffer.from(JSON.stringify(stores))) as never;
  });

  return app;
}
