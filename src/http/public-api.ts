// The public read API (spec 4.1-4.3): each handler reads validated input, calls one catalog
// read, and returns the stored payload bytes as they are (with an ETag, or 304 when unchanged).
import { OpenAPIHono } from '@hono/zod-openapi';
import { clampPerPage, KEY_MATCHES_MAX, toPublicStore } from '../catalog/reads.js';
import { routes } from '../generated/public-routes.js';
import type { Service } from '../service.js';
import { apiKeyAuth, invalidApiKey, type PublicEnv } from './auth.js';
import { problemResponse, renderError } from './errors.js';
import { ProblemError, invalidInput } from '../shared/problem.js';
import type { ServerResponse } from 'node:http';
import { readChangeFeed } from '../changes/feed.js';
import type { LiveRequest } from '../changes/live.js';
import { answerDirectly } from './direct-answer.js';
import { changeEventStream, changePageBody, changePageJson, wantsEventStream } from './live-feed.js';
import { feedCursor } from './feed-cursor.js';
import { validationHook } from './validation.js';
import { keyStores } from './key-stores.js';
import { CONTENT_TYPE_OF, MEDIA_KEY, type MediaStore } from '../images/media-store.js';
import { sniffImageType } from '../images/sniff.js';

/**
 * A page's payloads and the digests its ETag is computed over, cut down to `fields` when given: the
 * projection (remembered with bytes the read cache holds), and the digests with the fields named
 * after them, so that each set of fields has its own tag.
 */
function payloadsIn(fields: SparseFields | undefined, data: Uint8Array, digests: Uint8Array, kept: boolean): [Uint8Array, Uint8Array] {
  if (!fields) return [data, digests];
  return [projectedPayloads(data, fields, kept), Buffer.concat([digests, Buffer.from(`\nfields=${fields.key}`)])];
}

/** Which products a read names: by id, or by SKU or EAN (exact values); each value once. */
type ProductLookup = { name: 'ids'; ids: number[] } | { name: 'sku' | 'ean'; values: string[] };

/** The one of `ids`, `sku` and `ean` a query gives (undefined when none); two or three answer 400 naming each. */
function productLookup(query: { ids?: number[]; sku?: string[]; ean?: string[] }): ProductLookup | undefined {
  const given = (['ids', 'sku', 'ean'] as const).filter((name) => query[name] !== undefined);
  if (given.length > 1) {
    throw invalidInput(
      'query',
      given.map((name) => ({
        name,
        in: 'query' as const,
        reason: `cannot be combined with ${given.filter((other) => other !== name).join(' or ')}`,
      })),
    );
  }
  if (query.ids) return { name: 'ids', ids: [...new Set(query.ids)] };
  if (query.sku) return { name: 'sku', values: [...new Set(query.sku)] };
  if (query.ean) return { name: 'ean', values: [...new Set(query.ean)] };
  return undefined;
}

/**
 * On every media response: no browser guesses another type than the one sent, and
 * should a copy be opened as a document it runs nothing, loads nothing and is framed by no one.
 */
export const MEDIA_SAFETY_HEADERS = {
  'X-Content-Type-Options': 'nosniff',
  'Content-Security-Policy': "default-src 'none'; img-src 'self'; style-src 'unsafe-inline'; sandbox; frame-ancestors 'none'",
} as const;
import { etagMatches } from './conditional.js';
import { rateLimit, type TokenBucketLimiter } from './rate-limit.js';
import type { components } from '../generated/public-api.js';
import { JsonItems, jsonBytesOf } from '../shared/json-bytes.js';
import { assembledPage } from './assembled-pages.js';
import { conditionalJsonBytes, conditionalJsonPage, documentedRoutes, jsonPage } from './documented-responses.js';
import { SnapshotExports } from '../catalog/snapshot-export.js';
import { projectedPayloads, SparseFields } from '../catalog/sparse-fields.js';
import { productExport } from './snapshot-export.js';

type Schemas = components['schemas'];

// The stored payloads are resolveProduct's JSON of a Product (catalog/resolve.ts), served as they are.
const storedProduct = (bytes: Uint8Array) => jsonBytesOf<Schemas['Product']>(bytes);
// A price read is the `id` and `prices` of each stored payload (storage: publishedPricesByIds).
const storedPrices = (bytes: Uint8Array) => new JsonItems<Schemas['ProductPrices']>(bytes);

export interface PublicApiOptions {
  media?: MediaStore;
  /** Per-key token buckets on /v1; without one, requests are not limited. */
  rateLimiter?: TokenBucketLimiter;
}

export function publicApi(
  service: Pick<Service, 'storage' | 'reads' | 'config' | 'apiKeys' | 'heldApiKeys' | 'apiKeyUses' | 'liveFeed' | 'logger' | 'now'>,
  options: PublicApiOptions = {},
) {
  const { storage, reads, apiKeys, heldApiKeys, apiKeyUses, liveFeed, now } = service;
  const feedWindow = service.config.changes.feedWindow;
  const { media, rateLimiter } = options;
  const app = new OpenAPIHono<PublicEnv>({ defaultHook: validationHook });
  app.onError(renderError);
  app.use('/v1/*', apiKeyAuth(apiKeys, apiKeyUses));
  if (rateLimiter) app.use('/v1/*', rateLimit(rateLimiter));
  // A store-restricted key: every read that takes a store (all but /v1/stores, which lists only the key's).
  for (const path of ['/v1/products', '/v1/products/*', '/v1/prices', '/v1/changes']) app.use(path, keyStores(reads));
  const route = documentedRoutes(app);
  const snapshotExport = productExport(new SnapshotExports(storage, service.config.exports), service.config.exports);

  // Mirrored images (spec 2.1 image rules): public, content-addressed, cacheable forever.
  route(
    routes.getMedia,
    async (c) => {
      const { key } = c.req.valid('param');
      const bytes = media ? await media.get(key) : undefined;
      const contentType = CONTENT_TYPE_OF[key.split('.')[1]!]!;
      // A copy is served only as the type its bytes are (one mirrored before the mirror
      // checked them, HTML labelled image/png say, is not served at all).
      if (!bytes || sniffImageType(bytes) !== contentType) throw new ProblemError('not_found', `No media file ${key}.`);
      const etag = `"${MEDIA_KEY.exec(key)![1]}"`;
      const headers = { ETag: etag, 'Cache-Control': 'public, max-age=31536000, immutable', ...MEDIA_SAFETY_HEADERS };
      if (etagMatches(c.req.valid('header')['if-none-match'], etag)) return c.body(null, 304, headers);
      return c.body(new Uint8Array(bytes), 200, { ...headers, 'Content-Type': contentType, 'Content-Length': String(bytes.length) });
    },
    (result, c) => {
      // Any malformed key names no file: 404, like an unknown one (openapi: getMedia).
      if (!result.success) return problemResponse(new ProblemError('not_found', 'No such media file.'), c.req.path);
      return undefined;
    },
  );

  route(routes.listProducts, async (c) => {
    const query = c.req.valid('query');
    const fields = SparseFields.of(query.fields);
    const lookup = productLookup(query);
    if (lookup) {
      const paging = ['page', 'per_page', 'after_id'].filter((name) => c.req.query(name) !== undefined);
      if (paging.length) {
        throw invalidInput(
          'query',
          paging.map((name) => ({ name, in: 'query' as const, reason: `cannot be combined with ${lookup.name}` })),
        );
      }
      const { store, bytes, digests, count, kept } =
        lookup.name === 'ids'
          ? await reads.productsByIds(c.var.merchantId, query.store, lookup.ids)
          : await reads.productsByKeys(c.var.merchantId, query.store, { field: lookup.name, values: lookup.values });
      // As a page: the ETag over the rows' stored hashes and the envelope. per_page: the most the request could answer.
      const perPage = lookup.name === 'ids' ? lookup.ids.length : KEY_MATCHES_MAX;
      const meta = { current_page: 1, per_page: perPage, last_page: 1, total: count };
      const page = assembledPage(...payloadsIn(fields, bytes, digests, kept), { store: store.slug, meta }, kept);
      return conditionalJsonBytes(c, page.body, page);
    }
    if (query.after_id !== undefined && c.req.query('page') !== undefined) {
      throw invalidInput('query', [{ name: 'page', in: 'query', reason: 'cannot be combined with after_id' }]);
    }
    const { store, page } = await reads.productPage(c.var.merchantId, query.store, {
      page: query.page,
      afterId: query.after_id,
      perPage: clampPerPage(query.per_page),
    });
    // The stored payload bytes go out as they are, framed by the page envelope; the ETag is
    // computed over the rows' stored hashes and the envelope rather than the ~155 KB of bytes.
    const answer = assembledPage(
      ...payloadsIn(fields, page.data, page.digests, page.kept),
      { store: store.slug, meta: page.meta },
      page.kept,
    );
    return conditionalJsonBytes(c, answer.body, answer);
  });

  // Before getProduct: `export` is not a product id.
  route(routes.exportProducts, (c) => {
    const query = c.req.valid('query');
    return snapshotExport(c, query.store, c.req.valid('header')['if-none-match'], SparseFields.of(query.fields));
  });

  route(routes.getProduct, async (c) => {
    const query = c.req.valid('query');
    const payload = await reads.product(c.var.merchantId, query.store, c.req.valid('param').id);
    const fields = SparseFields.of(query.fields);
    // The ETag is computed over the bytes sent: it varies with the fields.
    return conditionalJsonPage<Schemas['ProductResponse']>(c, { data: storedProduct(fields ? fields.project(payload) : payload) });
  });

  route(routes.listPrices, async (c) => {
    const query = c.req.valid('query');
    const lookup = productLookup(query);
    if (!lookup) throw invalidInput('query', [{ name: 'ids', in: 'query', reason: 'is required (or sku, or ean)' }]);
    const { store, bytes } =
      lookup.name === 'ids'
        ? await reads.pricesByIds(c.var.merchantId, query.store, lookup.ids)
        : await reads.pricesByKeys(c.var.merchantId, query.store, { field: lookup.name, values: lookup.values });
    return jsonPage<Schemas['PriceList']>(c, { data: storedPrices(bytes), store: store.slug });
  });

  route(routes.listChanges, async (c) => {
    const query = c.req.valid('query');
    const cursor = feedCursor(query, c.req.query('since_id') !== undefined, c.req.valid('header')['last-event-id']);
    // The live feed, as a stream (Server-Sent Events) or a long-poll (wait=N).
    const live: LiveRequest = { merchantId: c.var.merchantId, keyId: c.var.apiKeyId, store: query.store, cursor, signal: c.req.raw.signal };
    if (wantsEventStream(c.req.header('Accept'))) {
      // Held from before the first read: a revocation while it opens ends it too (tenancy/held-api-keys.ts).
      const hold = heldApiKeys.hold(c.var.apiKeyId);
      const stream = await refundWhenCapped(c.var.apiKeyId, liveFeed.openStream(live)).catch((error: unknown) => {
        hold.release();
        throw error;
      });
      const outgoing = (c.env as { outgoing?: ServerResponse } | undefined)?.outgoing;
      const body = changeEventStream(stream, {
        limiter: rateLimiter,
        keyId: c.var.apiKeyId,
        log: service.logger,
        unsent: { outgoing, max: service.config.unsentBytesMax, stallMs: service.config.changes.streamStallTimeoutMs },
        hold,
        retryMs: service.config.changes.streamRetryMs,
      });
      return c.body(body, 200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache', 'X-Accel-Buffering': 'no' });
    }
    if (query.wait > 0) {
      // A long-poll whose key is revoked while it waits stops waiting and answers 401, not its window.
      const hold = heldApiKeys.hold(c.var.apiKeyId);
      const waiting = { ...live, signal: AbortSignal.any([c.req.raw.signal, hold.signal]) };
      const page = await refundWhenCapped(c.var.apiKeyId, liveFeed.waitForChanges(waiting, query.wait)).finally(() => hold.release());
      if (hold.signal.aborted) throw invalidApiKey();
      // The window a look answered every waiting client with, serialized (and coded) once for all
      // of them, and written on each client's connection without a Response (direct-answer.ts).
      const answer =
        (await answerDirectly(c, changePageBody(page), {
          date: () => now().toUTCString(),
          minBytes: service.config.compressionMinBytes,
          unsentBytesMax: service.config.unsentBytesMax,
        })) ?? c.body(changePageJson(page), 200, { 'Content-Type': 'application/json' });
      return answer;
    }
    const window = await readChangeFeed(storage, c.var.merchantId, query.store, cursor, feedWindow);
    return c.json(window, 200);
  });

  /** A live connection refused by a cap (429 for the key or merchant, 503 for the process) takes nothing from the bucket. */
  async function refundWhenCapped<T>(keyId: number, opened: Promise<T>): Promise<T> {
    try {
      return await opened;
    } catch (error) {
      if (error instanceof ProblemError && (error.code === 'rate_limited' || error.code === 'service_unavailable'))
        rateLimiter?.refund(keyId);
      throw error;
    }
  }

  route(routes.listStores, async (c) => {
    const { stores: keyStoreSlugs } = c.var.credential;
    const stores = (await reads.activeStores(c.var.merchantId))
      .filter((store) => keyStoreSlugs === null || keyStoreSlugs.includes(store.slug))
      .map(toPublicStore);
    return conditionalJsonPage<Schemas['StoreList']>(c, { data: stores });
  });

  return app;
}
