// The one error type (RFC 9457; docs/decisions.md#errors-and-bad-input): a failure the caller
// can act on, named by a problem code. Below the domain and free of HTTP frameworks: domain modules
// throw it, and http/errors.ts renders it as problem+json.
import type { components } from '../generated/public-api.js';

export type Problem = components['schemas']['Problem'];
export type ProblemCode = Problem['code'];
export type InvalidParam = NonNullable<Problem['invalid_params']>[number];

const STATUS: Record<ProblemCode, number> = {
  unauthorized: 401,
  forbidden: 403,
  insufficient_scope: 403,
  not_found: 404,
  store_not_found: 404,
  invalid_parameter: 400,
  invalid_body: 400,
  conflict: 409,
  idempotency_key_in_use: 409,
  idempotency_key_reused: 422,
  cursor_expired: 410,
  payload_too_large: 413,
  unsupported_media_type: 415,
  rate_limited: 429,
  service_unavailable: 503,
  internal_error: 500,
};

/** A failure the client can act on; rendered as problem+json by the app's error handler. */
export class ProblemError extends Error {
  readonly status: number;

  constructor(
    readonly code: ProblemCode,
    readonly detail: string,
    readonly invalidParams?: InvalidParam[],
    readonly headers: Record<string, string> = {},
  ) {
    // An answer the caller acts on needs no stack: capturing one cost ~35 µs a refusal, and refusals
    // come by the thousand when a merchant's clients are over a cap. A 500 keeps its stack.
    const stackTraceLimit = Error.stackTraceLimit;
    if (code !== 'internal_error') Error.stackTraceLimit = 0;
    super(detail);
    Error.stackTraceLimit = stackTraceLimit;
    this.status = STATUS[code];
  }
}

/** The 400 for a parameter or body that failed validation, naming each offending input. */
export function invalidInput(location: InvalidParam['in'], params: InvalidParam[]): ProblemError {
  const code = location === 'body' ? 'invalid_body' : 'invalid_parameter';
  const detail = params.map((p) => `${p.name} ${p.reason}`).join('; ');
  return new ProblemError(code, detail, params);
}
