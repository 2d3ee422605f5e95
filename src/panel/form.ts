// Reading the panel's url-encoded forms. Each body is parsed once per request (hono caches it), with
// repeated fields kept as lists (the events checkboxes), and checked against the same generated
// schema the admin API uses: the panel adds no second set of rules.
import type { Context } from 'hono';
import type { z } from 'zod';
import { invalidInput, type InvalidParam } from '../shared/problem.js';

export type FormBody = Record<string, string | File | (string | File)[]>;

export function formOf(c: Context): Promise<FormBody> {
  return c.req.parseBody({ all: true });
}

/** The field's text ('' when absent; the first value when repeated). */
export function field(form: FormBody, name: string): string {
  const value = form[name];
  const first = Array.isArray(value) ? value[0] : value;
  return typeof first === 'string' ? first : '';
}

/** Every text value of a repeated field (checkboxes). */
export function fields(form: FormBody, name: string): string[] {
  const value = form[name];
  return (Array.isArray(value) ? value : value === undefined ? [] : [value]).filter((v): v is string => typeof v === 'string');
}

/** The input as the schema accepts it, or the 400 problem naming each offending field (as the API does). */
export function validated<S extends z.ZodType>(schema: S, input: unknown): z.output<S> {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  const params: InvalidParam[] = result.error.issues.map((issue) => ({
    name: `/${issue.path.map(String).join('/')}`, in: 'body', reason: issue.message,
  }));
  throw invalidInput('body', params);
}
