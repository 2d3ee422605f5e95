// Turns a failed zod validation of @hono/zod-openapi into the 400 problem naming the parameter.
import type { Hook } from '@hono/zod-openapi';
import type { Context, Env } from 'hono';
import { invalidInput, type InvalidParam } from '../shared/problem.js';
import { problemResponse } from './errors.js';

const LOCATIONS: Record<string, InvalidParam['in']> = {
  query: 'query',
  param: 'path',
  header: 'header',
  json: 'body',
  form: 'body',
};

interface ZodIssueLike {
  path: PropertyKey[];
  message: string;
  code?: string;
  keys?: string[];
}

type ValidationResult = Parameters<Hook<unknown, Env, string, unknown>>[0];

/** The defaultHook of every OpenAPIHono app (generic in the app's env): bad input never reaches a handler. */
export function validationHook<E extends Env>(result: ValidationResult, c: Context<E>): Response | undefined {
  if (result.success) return;
  const location = LOCATIONS[result.target] ?? 'body';
  return problemResponse(invalidInput(location, invalidParams(location, result.error)), new URL(c.req.url).pathname);
}

/** What a failed zod validation names: each offending input, a body's members by JSON Pointer. */
export function invalidParams(location: InvalidParam['in'], error: unknown): InvalidParam[] {
  const issues = (error as { issues: ZodIssueLike[] }).issues;
  return issues.flatMap((issue): InvalidParam[] => {
    if (issue.code === 'unrecognized_keys' && issue.keys) {
      return issue.keys.map((key) => ({ name: pointer(location, [...issue.path, key]), in: location, reason: 'is not a known field' }));
    }
    return [{ name: pointer(location, issue.path), in: location, reason: issue.message }];
  });
}

function pointer(location: InvalidParam['in'], path: PropertyKey[]): string {
  if (location !== 'body') return String(path[0] ?? '');
  return bodyPointer(path);
}

/** The JSON Pointer of a member of the body, as `invalid_params` names it (`/offers/0/cost`). */
export function bodyPointer(path: PropertyKey[]): string {
  return `/${path.map((p) => String(p).replace(/~/g, '~0').replace(/\//g, '~1')).join('/')}`;
}
