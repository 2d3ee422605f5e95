// What the panel's route handlers share: the signed-in principal, the merchant of the URL, and the
// domain errors a form shows on itself rather than on an error page.
import type { Context } from 'hono';
import { ProblemError } from '../shared/problem.js';
import type { PanelSession } from '../admin/accounts.js';
import { merchantIdOf } from './merchant-scope.js';
import type { PanelEnv } from './session.js';

export type PanelContext = Context<PanelEnv>;

/** The session of a route behind signedIn() or merchantScope(). */
export function sessionOf(c: PanelContext): PanelSession {
  const session = c.get('session');
  if (!session) throw new ProblemError('unauthorized', 'Sign in first.');
  return session;
}

export function merchantOf(c: PanelContext): number {
  return merchantIdOf(c.req.param('merchantId'));
}

/**
 * Runs a form's one domain call. A 400 or 409 problem comes back as the form's error (shown on the
 * form's page after a redirect: refusals.ts); anything else goes on to the panel's error page.
 */
export async function formAction<T>(
  action: () => Promise<T>,
): Promise<{ ok: T; error?: undefined } | { ok?: undefined; error: ProblemError }> {
  try {
    return { ok: await action() };
  } catch (error) {
    if (error instanceof ProblemError && (error.status === 400 || error.status === 409)) return { error };
    throw error;
  }
}

/** The id of a resource in the URL; 404 for anything but a positive integer. */
export function idParam(c: PanelContext, name: string, what: string): number {
  const raw = c.req.param(name) ?? '';
  if (!/^[0-9]{1,15}$/.test(raw) || Number(raw) < 1) throw new ProblemError('not_found', `${what} ${raw} does not exist.`);
  return Number(raw);
}
