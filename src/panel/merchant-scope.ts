// Tenant isolation for /panel/merchants/:merchantId/*: the operator may act within any merchant,
// a merchant user only within their own. Anything else answers 404, as if it did not exist.
//
//   panel.use('/merchants/:merchantId/*', merchantScope(accounts));
import type { MiddlewareHandler } from 'hono';
import { ProblemError } from '../shared/problem.js';
import type { PanelAccounts } from '../admin/accounts.js';
import type { PanelEnv } from './session.js';

/** The merchant id of a panel URL (404 for anything but a positive integer). */
export function merchantIdOf(raw: string | undefined): number {
  const id = Number(raw);
  if (!/^[0-9]{1,15}$/.test(raw ?? '') || id < 1) throw new ProblemError('not_found', `Merchant ${raw} does not exist.`);
  return id;
}

export function merchantScope(accounts: () => PanelAccounts): MiddlewareHandler<PanelEnv> {
  return async (c, next) => {
    const session = c.get('session');
    if (!session) return c.redirect('/panel/login', 303);
    accounts().assertMerchant(session.principal, merchantIdOf(c.req.param('merchantId')));
    await next();
  };
}
