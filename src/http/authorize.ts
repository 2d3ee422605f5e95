// Who may call an admin operation, from the facts generated out of admin.yaml's security
// requirements (src/generated/admin-route-facts.ts: `scope`): no route checks a scope itself.
// The operator may call every operation. A merchant API key may call an operation that names a
// scope, for its own merchant only (another merchant's id answers 404 exactly as a missing one),
// and only with that scope (403 insufficient_scope); an operation naming none is the operator's.
import type { MiddlewareHandler } from 'hono';
import { notFound } from '../catalog/catalog-writes.js';
import type { RouteFacts } from '../generated/admin-route-facts.js';
import { ProblemError } from '../shared/problem.js';
import { grants } from '../tenancy/credential.js';
import { insufficientScope, type AdminEnv } from './auth.js';

/**
 * The check of one operation, registered on its method and path before its body is read.
 *
 * @example
 * for (const operation of ADMIN_ROUTE_FACTS) app.on(operation.method, [operation.routerPath], authorizeOperation(operation));
 */
export function authorizeOperation(operation: Pick<RouteFacts, 'scope'>): MiddlewareHandler<AdminEnv> {
  const { scope } = operation;
  return async (c, next) => {
    const credential = c.var.credential;
    if (credential.kind === 'operator') return next();
    if (credential.kind !== 'key' || scope === null) {
      throw new ProblemError('forbidden', "This operation is the operator's: an API key cannot perform it.");
    }
    // Before the scope: a key learns nothing of another merchant, not even which scopes it would need there.
    const merchantId = c.req.param('merchant_id') ?? '';
    if (!/^[0-9]{1,16}$/.test(merchantId) || Number(merchantId) !== credential.merchantId) throw notFound(`Merchant ${merchantId}`);
    if (!grants(credential.scopes, scope)) throw insufficientScope(scope);
    return next();
  };
}
