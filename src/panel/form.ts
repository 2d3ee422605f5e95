// Reading the panel's url-encoded forms. Each body is parsed once per request (hono caches it), with
// repeated fields kept as lists (the events checkboxes), and checked against the same generated
// schema the admin API uses: the panel adds no second set of rules. A field (its name, its text,
// an uploaded file's name) holding U+0000, or bytes that are not UTF-8 (form-utf8.ts), is refused
// with 400 as the admin API refuses it: no form stores U+FFFD for what was sent, or carries a NUL
// to a database that cannot store it.
import type { Context } from 'hono';
import type { z } from 'zod';
import { NUL_REASON, holdsNul } from '../shared/json-text.js';
import { invalidInput, type InvalidParam } from '../shared/problem.js';
import { fieldNotUtf8 } from './form-utf8.js';
import { plainReason } from './plain-words.js';

export type FormBody = Record<string, string | File | (string | File)[]>;

/** The form of the request (parsed once), or the 400 naming a field that is not UTF-8 or holds U+0000. */
export async function formOf(c: Context): Promise<FormBody> {
  // The raw bytes, read once: hono's parseBody parses the same cached buffer.
  const notUtf8 = fieldNotUtf8(new Uint8Array(await c.req.arrayBuffer()), c.req.header('Content-Type') ?? '');
  if (notUtf8) throw invalidInput('body', [notUtf8]);
  const form = await c.req.parseBody({ all: true });
  const refused = fieldHoldingNul(form);
  if (refused) throw invalidInput('body', [refused]);
  return form;
}

/** A NUL is shown as its escape in the name of the field holding it (the name goes into a page). */
const shown = (name: string) => name.replaceAll('\u0000', '\\u0000');

function fieldHoldingNul(form: FormBody): InvalidParam | undefined {
  for (const [name, value] of Object.entries(form)) {
    if (holdsNul(name)) return { name: shown(name), in: 'body', reason: `(a field name) ${NUL_REASON}` };
    for (const item of Array.isArray(value) ? value : [value]) {
      if (typeof item === 'string' ? holdsNul(item) : holdsNul(item.name)) {
        return { name, in: 'body', reason: typeof item === 'string' ? NUL_REASON : `(the file's name) ${NUL_REASON}` };
      }
    }
  }
  return undefined;
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

/**
 * The input as the schema accepts it, or the 400 problem naming each offending field (as the API
 * does), with the reason in the panel's plain words (plain-words.ts).
 */
export function validated<S extends z.ZodType>(schema: S, input: unknown): z.output<S> {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  const params: InvalidParam[] = result.error.issues.map((issue) => ({
    name: `/${issue.path.map(String).join('/')}`,
    in: 'body',
    reason: plainReason(issue),
  }));
  throw invalidInput('body', params);
}
