// Error responses of the public API as one error type (spec 7; every error body is a Problem).
import type { components } from '../generated/public-api.js';

export type Problem = components['schemas']['Problem'];

/** An error response of the catalog API: its HTTP status and its problem+json body. Branch on `problem.code`. */
export class CatalogApiError extends Error {
  override readonly name = 'CatalogApiError';
  readonly status: number;
  readonly problem: Problem;

  constructor(status: number, problem: Problem) {
    super(`${status} ${problem.code}: ${problem.detail}`);
    this.status = status;
    this.problem = problem;
  }

  /** The error for an error response whose body openapi-fetch has already read (`error`). */
  static from(response: Response, body: unknown): CatalogApiError {
    if (isProblem(body)) return new CatalogApiError(response.status, body);
    // Not problem+json, so not an answer of the service (a proxy's error page, say): report it as
    // internal_error rather than guess, so that a caller never mistakes a proxy's 404 for `not_found`.
    const detail = typeof body === 'string' && body ? body.slice(0, 200) : `HTTP ${response.status} ${response.statusText}`.trim();
    return new CatalogApiError(response.status, {
      type: 'about:blank',
      title: 'Unexpected response',
      status: response.status,
      detail,
      code: 'internal_error',
    });
  }
}

function isProblem(body: unknown): body is Problem {
  return (
    typeof body === 'object' && body !== null && typeof (body as Problem).code === 'string' && typeof (body as Problem).status === 'number'
  );
}

/** The shape every openapi-fetch call resolves to. */
export interface FetchResult<T> {
  data?: T;
  error?: unknown;
  response: Response;
}

/**
 * The `data` of a successful openapi-fetch result; throws CatalogApiError for an error response.
 * `const { data: stores } = await unwrap(client.GET('/v1/stores'))`
 */
export async function unwrap<T>(result: FetchResult<T> | Promise<FetchResult<T>>): Promise<T> {
  const { data, error, response } = await result;
  if (!response.ok) throw CatalogApiError.from(response, error);
  return data as T;
}
