// The client's factory (spec 5): openapi-fetch typed on the public document, an auth middleware
// and waiting out rate limits (429 + Retry-After).
import createClient, { type Middleware } from 'openapi-fetch';
import type { paths } from '../generated/public-api.js';
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

export interface RateLimitRetryOptions {
  /** Times one request is sent again after a 429 (default 3); then the 429 is returned. */
  retries?: number;
  /** A 429 whose `Retry-After` asks for a longer wait than this is returned at once (default 60). */
  maxWaitSeconds?: number;
  /** How to wait (tests pass a fake clock's); defaults to a timer that the request's abort signal cuts short. */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
}

/** A timer that rejects with the signal's reason as soon as the request is aborted. */
function abortableSleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    // An abort rejects with the signal's reason, as fetch does (the caller's value; an AbortError by default).
    // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- the reason is the caller's, passed on as fetch passes it
    if (signal.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- as above
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

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
 * sync that outruns the bucket slows down instead of failing. Every public operation is a GET, so
 * sending a request again is safe.
 */
export function retryingOn429(
  send: (request: Request) => Promise<Response>,
  options: RateLimitRetryOptions = {},
): (request: Request) => Promise<Response> {
  const { retries = 3, maxWaitSeconds = 60, sleep = abortableSleep } = options;
  return async (request) => {
    for (let attempt = 0; ; attempt++) {
      const response = await send(attempt < retries ? request.clone() : request);
      if (response.status !== 429 || attempt >= retries) return response;
      const header = response.headers.get('Retry-After');
      const seconds = header !== null && /^[0-9]+$/.test(header) ? Number(header) : 1;
      if (seconds > maxWaitSeconds) return response;
      await response.body?.cancel();
      // Cancelling the request (its AbortSignal) ends the wait at once, with the abort's reason.
      await sleep(seconds * 1000, request.signal);
    }
  };
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
