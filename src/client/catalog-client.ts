// The client's factory (spec 5): openapi-fetch typed on the public document, an auth middleware
// and waiting out rate limits (429 + Retry-After).
import createClient, { type Middleware } from 'openapi-fetch';
import type { paths } from '../generated/public-api.js';
import { retryAfterSeconds, retryingAfter, type RetryAfterOptions } from './retry-after.js';
import type { CatalogClient, ClientMediaType } from './types.js';

export interface CatalogClientOptions {
  /** Scheme, host and port of the deployment, for example `https://catalog.example.com` (paths carry `/v1`). */
  baseUrl: string;
  apiKey: string;
  /** A fetch to send requests with (tests, proxies); defaults to the global fetch. */
  fetch?: (request: Request) => Promise<Response>;
  /** Waiting out `429 rate_limited` answers; `{ retries: 0 }` hands every 429 back at once. */
  rateLimit?: RateLimitRetryOptions;
}

/** Waiting out `429 rate_limited`: `retries` (default 3), `maxWaitSeconds` (default 60), `sleep`. */
export type RateLimitRetryOptions = RetryAfterOptions;

/** An openapi-fetch client for the public API that authenticates every request with the API key. */
export function createCatalogClient({ baseUrl, apiKey, fetch, rateLimit }: CatalogClientOptions): CatalogClient {
  const client = createClient<paths, ClientMediaType>({
    baseUrl,
    fetch: retryingOn429(fetch ?? ((request) => globalThis.fetch(request)), rateLimit),
  });
  client.use(bearerAuth(apiKey));
  return client;
}

/**
 * The public API limits each key to a token bucket (`RateLimit-Policy`); an empty bucket answers
 * 429 with `Retry-After` in seconds. The client waits that long and sends the request again, so a
 * sync that outruns the bucket slows down instead of failing (a 429 without `Retry-After`: 1 s).
 * Every public operation is a GET, so sending a request again is safe.
 */
export function retryingOn429(
  send: (request: Request) => Promise<Response>,
  options: RateLimitRetryOptions = {},
): (request: Request) => Promise<Response> {
  return retryingAfter(send, (response) => (response.status === 429 ? (retryAfterSeconds(response) ?? 1) : undefined), options);
}

/** spec 5, rule 1: every request carries `Authorization: Bearer <API_KEY>`. */
export function bearerAuth(apiKey: string): Middleware {
  return {
    onRequest({ request }) {
      request.headers.set('Authorization', `Bearer ${apiKey}`);
      return request;
    },
  };
}
