// One error type and one problem+json renderer (RFC 9457; product decisions, "Errors and bad
// input"). Every error response of both APIs goes through here.
import type { components } from '../generated/public-api.js';

export type Problem = components['schemas']['Problem'];
export type ProblemCode = Problem['code'];
export type InvalidParam = NonNullable<Problem['invalid_params']>[number];

const TITLES: Record<ProblemCode, string> = {
  unauthorized: 'Unauthorized',
  forbidden: 'Forbidden',
  not_found: 'Not found',
  store_not_found: 'Store not found',
  invalid_parameter: 'Invalid parameter',
  invalid_body: 'Invalid request body',
  conflict: 'Conflict',
  cursor_expired: 'Cursor expired',
  payload_too_large: 'Payload too large',
  rate_limited: 'Too many requests',
  internal_error: 'Internal server error',
};

const STATUS: Record<ProblemCode, number> = {
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  store_not_found: 404,
  invalid_parameter: 400,
  invalid_body: 400,
  conflict: 409,
  cursor_expired: 410,
  payload_too_large: 413,
  rate_limited: 429,
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
    super(detail);
    this.status = STATUS[code];
  }

  toProblem(instance?: string): Problem {
    return {
      type: `urn:problem:catalog:${this.code}`,
      title: TITLES[this.code],
      status: this.status,
      detail: this.detail,
      code: this.code,
      ...(this.invalidParams?.length ? { invalid_params: this.invalidParams } : {}),
      ...(instance ? { instance } : {}),
    };
  }
}

export function problemResponse(error: ProblemError, instance?: string): Response {
  return new Response(JSON.stringify(error.toProblem(instance)), {
    status: error.status,
    headers: { 'Content-Type': 'application/problem+json', ...error.headers },
  });
}

/** The 400 for a parameter or body that failed validation, naming each offending input. */
export function invalidInput(location: InvalidParam['in'], params: InvalidParam[]): ProblemError {
  const code = location === 'body' ? 'invalid_body' : 'invalid_parameter';
  const detail = params.map((p) => `${p.name} ${p.reason}`).join('; ');
  return new ProblemError(code, detail, params);
}
