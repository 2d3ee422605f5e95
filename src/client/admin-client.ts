// The admin client's factory, for merchants' systems (a PIM, an ERP, an integrator's receiver
// manager): openapi-fetch typed on the admin document, with middleware that authenticates with the
// key, sends each body as the media type its operation declares, and gives every write a fresh
// Idempotency-Key; a 429 or 503 with Retry-After is waited out and the same request sent again.
import createClient, { type Middleware } from 'openapi-fetch';
import { ADMIN_ROUTE_FACTS } from '../generated/admin-route-facts.js';
import type { AdminClient, AdminMediaType, AdminPaths } from './admin-types.js';
import { bearerAuth } from './catalog-client.js';
import { retryAfterSeconds, retryingAfter, type RetryAfterOptions } from './retry-after.js';

export interface AdminClientOptions {
  /** Scheme, host and port of the deployment, for example `https://catalog.example.com` (paths carry `/admin/v1`). */
  baseUrl: string;
  /** A merchant API key holding the scopes the calls need (docs/admin.md, "Scopes"), or the operator's admin token. */
  key: string;
  /** A fetch to send requests with (tests, proxies); defaults to the global fetch. */
  fetch?: (request: Request) => Promise<Response>;
  /** Waiting out a `429` or `503` with `Retry-After`; `{ retries: 0 }` hands every one back at once. */
  retry?: RetryAfterOptions;
}

/**
 * An openapi-fetch client for the admin API: every operation of `openapi/admin.yaml`, typed.
 *
 * ```ts
 * const admin = createAdminClient({ baseUrl: 'https://catalog.example.com', key: process.env.CPS_KEY! });
 * const path = { merchant_id: 1, product_ref: 'BP-40' };
 * const product = await unwrap(admin.GET('/admin/v1/merchants/{merchant_id}/products/{product_ref}', { params: { path } }));
 * ```
 */
export function createAdminClient({ baseUrl, key, fetch, retry }: AdminClientOptions): AdminClient {
  const client = createClient<AdminPaths, AdminMediaType>({
    baseUrl,
    fetch: retryingOn429Or503(fetch ?? ((request) => globalThis.fetch(request)), retry),
    bodySerializer: serializeBody,
  });
  client.use(bearerAuth(key), declaredMediaTypes, idempotencyKeys());
  return client;
}

/**
 * A 429 (a rate limit) or a 503 (a process at its limits) that carries `Retry-After` is the
 * service saying it did not do the work and when to come back: wait that long and send the same
 * request again, its Idempotency-Key included. Anything else (another error, such an answer
 * without `Retry-After`, a network error) is handed back as it is.
 */
export function retryingOn429Or503(
  send: (request: Request) => Promise<Response>,
  options: RetryAfterOptions = {},
): (request: Request) => Promise<Response> {
  return retryingAfter(
    send,
    (response) => (response.status === 429 || response.status === 503 ? retryAfterSeconds(response) : undefined),
    options,
  );
}

/** The methods that write, and so carry an Idempotency-Key. */
const WRITES = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/**
 * Every POST, PUT, PATCH and DELETE gets an `Idempotency-Key` of its own (a random UUID), unless
 * the call sets one itself (`headers: { 'Idempotency-Key': … }`, to repeat a write across
 * restarts). Retries send the same request, so the same key: the service answers a repeated
 * write with the first answer instead of doing the work twice.
 */
export function idempotencyKeys(newKey: () => string = () => globalThis.crypto.randomUUID()): Middleware {
  return {
    onRequest({ request }) {
      if (!WRITES.has(request.method) || request.headers.has('Idempotency-Key')) return undefined;
      request.headers.set('Idempotency-Key', newKey());
      return request;
    },
  };
}

/** Each operation's request media types as the document declares them, by `METHOD path`. */
const MEDIA_TYPES = new Map(ADMIN_ROUTE_FACTS.map((facts) => [`${facts.method} ${facts.path}`, facts.mediaTypes]));

/**
 * openapi-fetch labels every body `application/json`; an operation that does not take that (a
 * merge patch, `application/merge-patch+json`; an import, `application/x-ndjson`) gets the first
 * media type it declares instead. A Content-Type the call sets itself is left alone.
 */
const declaredMediaTypes: Middleware = {
  onRequest({ request, schemaPath }) {
    const declared = MEDIA_TYPES.get(`${request.method} ${schemaPath}`);
    if (!declared?.length || request.body === null || request.headers.get('Content-Type') !== 'application/json') return undefined;
    if (declared.includes('application/json')) return undefined;
    request.headers.set('Content-Type', declared[0]!);
    return request;
  },
};

/** A string body (an import's NDJSON) is sent as it is; anything else as JSON. */
function serializeBody(body: unknown): string {
  return typeof body === 'string' ? body : JSON.stringify(body);
}
