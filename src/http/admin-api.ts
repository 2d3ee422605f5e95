// The admin API (openapi/admin.yaml): each handler reads validated input, calls one CatalogAdmin
// operation, and returns the admin shape of its result. Who may call which operation is decided
// before it (auth.ts, authorize.ts, from the generated route facts); writes are audited as the
// request's credential (`c.var.credential`: the operator or a merchant API key).
import { OpenAPIHono } from '@hono/zod-openapi';
import type { MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { ADMIN_API_ACTOR } from '../admin/import-jobs.js';
import type { StoreRecord } from '../catalog/model.js';
import { ADMIN_ROUTE_FACTS } from '../generated/admin-route-facts.js';
import { routes } from '../generated/admin-routes.js';
import type { ApiKeyRecord } from '../tenancy/model.js';
import type { ImportJobRecord } from '../admin/model.js';
import { adminAuth, type AdminEnv } from './auth.js';
import { authorizeOperation } from './authorize.js';
import { AuthFailureThrottle } from './auth-failures.js';
import { clientAddressReader } from './client-address.js';
import { adminRateLimit, TokenBucketLimiter } from './rate-limit.js';
import { actorOf } from '../tenancy/credential.js';
import { actorName } from '../admin/audit.js';
import { renderError } from './errors.js';
import { ProblemError, invalidInput } from '../shared/problem.js';
import { validationHook } from './validation.js';
import { checkedJsonBody } from './checked-json-body.js';
import { registerWebhookRoutes } from './webhooks-api.js';
import { closeWhenBodyUnread } from './close-when-body-unread.js';
import { idempotency } from './idempotency.js';
import { documentedRoutes } from './documented-responses.js';
import { mergedDocument, patchMediaType } from './merge-patch.js';
import type { Service } from '../service.js';
import type { PanelUser } from '../admin/accounts.js';

/** The methods whose operations take an Idempotency-Key. */
const WRITE_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

const adminStore = ({ merchant_id: _m, catalog_version: _v, ...store }: StoreRecord) => store;
const apiKey = ({ merchant_id: _m, ...key }: ApiKeyRecord) => key;
const importJob = ({ merchant_id: _m, ...job }: ImportJobRecord) => job;

// The bodies a PUT is checked by (generated from admin.yaml): a merge patch's result is checked by the same.
const PUT_STORE = routes.upsertStore.request.body.content['application/json'].schema;
const PUT_PRICING_RULE = routes.updatePricingRule.request.body.content['application/json'].schema;
const PUT_PRODUCT = routes.upsertProduct.request.body.content['application/json'].schema;

/** Whether the request asks for an asynchronous answer (RFC 7240 `Prefer: respond-async`). */
const prefersAsync = (prefer: string | undefined) =>
  (prefer ?? '').split(',').some((p) => p.split(';')[0]!.trim().toLowerCase() === 'respond-async');

const tooLarge = (limit: number) => (): never => {
  throw new ProblemError('payload_too_large', `The request body exceeds the limit of ${limit} bytes.`);
};

// Every JSON request body is required (admin.yaml): without a Content-Type the validator would
// read a missing body as `{}`, and a PUT would reset a whole document to its defaults.
const jsonBodyRequired: MiddlewareHandler = async (c, next) => {
  if (!c.req.header('Content-Type')) {
    throw invalidInput('body', [{ name: '/', in: 'body', reason: 'is required: send JSON with Content-Type: application/json' }]);
  }
  return next();
};

export function adminApi({
  admin,
  imports,
  accounts,
  endpoints,
  config,
  apiKeys,
  apiKeyUses,
  idempotencyKeys,
  now,
}: Pick<Service, 'admin' | 'imports' | 'accounts' | 'endpoints' | 'config' | 'apiKeys' | 'apiKeyUses' | 'idempotencyKeys' | 'now'>) {
  const app = new OpenAPIHono<AdminEnv>({ defaultHook: validationHook });
  app.onError(renderError);
  app.use('/admin/v1/*', closeWhenBodyUnread);
  // Who the request is (wrong tokens counted per client address), then its credential's bucket.
  const failures = {
    throttle: new AuthFailureThrottle(config.adminAuthFailures, now),
    addressOf: clientAddressReader(config.trustedProxies),
  };
  app.use('/admin/v1/*', adminAuth(config.adminToken, apiKeys, apiKeyUses, failures));
  app.use('/admin/v1/*', adminRateLimit(new TokenBucketLimiter(config.adminRateLimit, now)));

  // Each operation's body checks, wired by the facts generated from admin.yaml, before its handler:
  // the size limit of its kind (413), then for JSON a required body and the checks on its raw text
  // (UTF-8, depth, lone surrogates: the decoded text is cached, so the body is read once). A body
  // sent to an operation that takes none (test, resend, rotate-secret) is never read: no limit, no 413.
  // Then, on every write, its Idempotency-Key (idempotency.ts): a body refused by the checks is not kept.
  const checkedJson = checkedJsonBody({ maxDepth: config.limits.maxJsonDepth });
  for (const operation of ADMIN_ROUTE_FACTS) {
    // Who may call it (its security requirements), before its body is read.
    app.on(operation.method, [operation.routerPath], authorizeOperation(operation));
    const checks: MiddlewareHandler[] = [];
    if (operation.bodyLimit !== null) {
      const maxSize = config.limits[operation.bodyLimit];
      checks.push(bodyLimit({ maxSize, onError: tooLarge(maxSize) }));
      // A merge patch's media type is checked first (415 with Accept-Patch), before its body is read.
      if (operation.mediaTypes.includes('application/merge-patch+json')) checks.unshift(patchMediaType(operation.mediaTypes));
      if (operation.body === 'json') checks.push(...(operation.bodyRequired ? [jsonBodyRequired] : []), checkedJson);
    }
    if (WRITE_METHODS.has(operation.method)) checks.push(idempotency(idempotencyKeys, operation.body));
    if (checks.length > 0) app.on(operation.method, [operation.routerPath], ...checks);
  }

  const route = documentedRoutes(app);

  // Merchants and keys
  route(routes.listMerchants, async (c) => c.json({ data: await admin.listMerchants() }, 200));
  route(routes.createMerchant, async (c) => c.json(await admin.createMerchant(c.req.valid('json'), actorOf(c.var.credential)), 201));
  route(routes.getMerchant, async (c) => c.json(await admin.merchant(c.req.valid('param').merchant_id), 200));
  route(routes.updateMerchant, async (c) =>
    c.json(await admin.updateMerchant(c.req.valid('param').merchant_id, c.req.valid('json'), actorOf(c.var.credential)), 200),
  );
  route(routes.listApiKeys, async (c) => c.json({ data: (await admin.listApiKeys(c.req.valid('param').merchant_id)).map(apiKey) }, 200));
  route(routes.createApiKey, async (c) => {
    const { name, scopes, stores, expires_at, allowed_origins } = c.req.valid('json');
    const { key, ...record } = await admin.createApiKey(c.req.valid('param').merchant_id, name, actorOf(c.var.credential), {
      scopes,
      stores,
      expires_at,
      allowed_origins,
    });
    return c.json({ ...apiKey(record), key }, 201);
  });
  route(routes.updateApiKey, async (c) => {
    const { merchant_id, key_id } = c.req.valid('param');
    return c.json(apiKey(await admin.updateApiKey(merchant_id, key_id, c.req.valid('json'), actorOf(c.var.credential))), 200);
  });
  route(routes.rollApiKey, async (c) => {
    const { merchant_id, key_id } = c.req.valid('param');
    const { key, ...record } = await admin.rollApiKey(merchant_id, key_id, actorOf(c.var.credential), c.req.valid('json').expires_at);
    return c.json({ ...apiKey(record), key }, 201);
  });
  route(routes.revokeApiKey, async (c) => {
    const { merchant_id, key_id } = c.req.valid('param');
    await admin.revokeApiKey(merchant_id, key_id, actorOf(c.var.credential));
    return c.body(null, 204);
  });

  // Panel users and the audit log: the admin token acts as the operator (a key reaches only the
  // audit log, of its own merchant, authorized before the handler).
  const operator = { kind: 'operator' } as const;
  const panelUser = ({ merchant_id: _m, ...user }: PanelUser) => user;
  route(routes.listPanelUsers, async (c) =>
    c.json({ data: (await accounts.listUsers(operator, c.req.valid('param').merchant_id)).map(panelUser) }, 200),
  );
  route(routes.invitePanelUser, async (c) => {
    const { token, ...invitation } = await accounts.invite(operator, c.req.valid('param').merchant_id, c.req.valid('json'));
    return c.json({ ...invitation, link: `${config.publicBaseUrl}/panel/invitations/${token}` }, 201);
  });
  route(routes.removePanelUser, async (c) => {
    const { merchant_id, user_id } = c.req.valid('param');
    await accounts.removeUser(operator, merchant_id, user_id);
    return c.body(null, 204);
  });
  route(routes.resetPanelUserPassword, async (c) => {
    const { merchant_id, user_id } = c.req.valid('param');
    // The operator's reset: the link is in the answer (accounts.ts gives an owner none).
    const { id, token, email, expires_at } = await accounts.requestPasswordReset(operator, merchant_id, user_id);
    return c.json({ id, email, link: accounts.linkUrl(token!), expires_at }, 201);
  });
  route(routes.listPanelInvitations, async (c) =>
    c.json({ data: await accounts.listPendingLinks(operator, c.req.valid('param').merchant_id) }, 200),
  );
  route(routes.revokePanelInvitation, async (c) => {
    const { merchant_id, invitation_id } = c.req.valid('param');
    await accounts.revokeLink(operator, merchant_id, invitation_id);
    return c.body(null, 204);
  });
  route(routes.listAuditLog, async (c) => {
    const { limit, api_key_id } = c.req.valid('query');
    return c.json({ data: await accounts.auditLog(operator, c.req.valid('param').merchant_id, limit, api_key_id) }, 200);
  });

  // Stores
  route(routes.listMerchantStores, async (c) =>
    c.json({ data: (await admin.listStores(c.req.valid('param').merchant_id)).map(adminStore) }, 200),
  );
  route(routes.upsertStore, async (c) => {
    const { merchant_id, slug } = c.req.valid('param');
    return c.json(adminStore(await admin.upsertStore(merchant_id, slug, c.req.valid('json'), actorOf(c.var.credential))), 200);
  });
  route(routes.patchStore, async (c) => {
    const { merchant_id, slug } = c.req.valid('param');
    const patch = c.req.valid('json');
    // Merged into the store as the list shows it, then checked as a PUT of it would be.
    const edit = (current: StoreRecord) => mergedDocument(PUT_STORE, adminStore(current), patch);
    return c.json(adminStore(await admin.upsertStore(merchant_id, slug, edit, actorOf(c.var.credential))), 200);
  });
  route(routes.deleteStore, async (c) => {
    const { merchant_id, slug } = c.req.valid('param');
    await admin.deleteStore(merchant_id, slug, actorOf(c.var.credential));
    return c.body(null, 204);
  });

  // Customer groups
  route(routes.listCustomerGroups, async (c) => c.json({ data: await admin.listCustomerGroups(c.req.valid('param').merchant_id) }, 200));
  route(routes.createCustomerGroup, async (c) =>
    c.json(await admin.createCustomerGroup(c.req.valid('param').merchant_id, c.req.valid('json').name, actorOf(c.var.credential)), 201),
  );
  route(routes.updateCustomerGroup, async (c) => {
    const { merchant_id, group_id } = c.req.valid('param');
    return c.json(await admin.updateCustomerGroup(merchant_id, group_id, c.req.valid('json').name, actorOf(c.var.credential)), 200);
  });
  route(routes.deleteCustomerGroup, async (c) => {
    const { merchant_id, group_id } = c.req.valid('param');
    await admin.deleteCustomerGroup(merchant_id, group_id, actorOf(c.var.credential));
    return c.body(null, 204);
  });

  // Exchange rates
  route(routes.listExchangeRates, async (c) => c.json({ data: await admin.listExchangeRates(c.req.valid('param').merchant_id) }, 200));
  route(routes.upsertExchangeRate, async (c) => {
    const { merchant_id, base, quote } = c.req.valid('param');
    return c.json(
      await admin.upsertExchangeRate(merchant_id, { base, quote, rate: c.req.valid('json').rate }, actorOf(c.var.credential)),
      200,
    );
  });
  route(routes.deleteExchangeRate, async (c) => {
    const { merchant_id, base, quote } = c.req.valid('param');
    await admin.deleteExchangeRate(merchant_id, base, quote, actorOf(c.var.credential));
    return c.body(null, 204);
  });

  // Pricing rules
  route(routes.listPricingRules, async (c) => c.json({ data: await admin.listPricingRules(c.req.valid('param').merchant_id) }, 200));
  route(routes.createPricingRule, async (c) =>
    c.json(await admin.createPricingRule(c.req.valid('param').merchant_id, c.req.valid('json'), actorOf(c.var.credential)), 201),
  );
  route(routes.updatePricingRule, async (c) => {
    const { merchant_id, rule_id } = c.req.valid('param');
    return c.json(await admin.updatePricingRule(merchant_id, rule_id, c.req.valid('json'), actorOf(c.var.credential)), 200);
  });
  route(routes.patchPricingRule, async (c) => {
    const { merchant_id, rule_id } = c.req.valid('param');
    const patch = c.req.valid('json');
    return c.json(
      await admin.updatePricingRule(
        merchant_id,
        rule_id,
        (current) => mergedDocument(PUT_PRICING_RULE, current, patch),
        actorOf(c.var.credential),
      ),
      200,
    );
  });
  route(routes.deletePricingRule, async (c) => {
    const { merchant_id, rule_id } = c.req.valid('param');
    await admin.deletePricingRule(merchant_id, rule_id, actorOf(c.var.credential));
    return c.body(null, 204);
  });

  // Suppliers and attribute definitions
  route(routes.listSuppliers, async (c) => c.json({ data: await admin.listSuppliers(c.req.valid('param').merchant_id) }, 200));
  route(routes.upsertSupplier, async (c) => {
    const { merchant_id, supplier_ref } = c.req.valid('param');
    return c.json(await admin.upsertSupplier(merchant_id, supplier_ref, c.req.valid('json').name, actorOf(c.var.credential)), 200);
  });
  route(routes.deleteSupplier, async (c) => {
    const { merchant_id, supplier_ref } = c.req.valid('param');
    await admin.deleteSupplier(merchant_id, supplier_ref, actorOf(c.var.credential));
    return c.body(null, 204);
  });
  route(routes.listAttributeDefinitions, async (c) =>
    c.json({ data: await admin.listAttributeDefinitions(c.req.valid('param').merchant_id) }, 200),
  );
  route(routes.upsertAttributeDefinition, async (c) => {
    const { merchant_id, key } = c.req.valid('param');
    return c.json(await admin.upsertAttributeDefinition(merchant_id, { key, ...c.req.valid('json') }, actorOf(c.var.credential)), 200);
  });
  route(routes.deleteAttributeDefinition, async (c) => {
    const { merchant_id, key } = c.req.valid('param');
    await admin.deleteAttributeDefinition(merchant_id, key, actorOf(c.var.credential));
    return c.body(null, 204);
  });

  // Products and the bulk import
  route(routes.getProductSource, async (c) => {
    const { merchant_id, product_ref } = c.req.valid('param');
    return c.json(await admin.productSource(merchant_id, product_ref), 200);
  });
  route(routes.upsertProduct, async (c) => {
    const { merchant_id, product_ref } = c.req.valid('param');
    const { created: _created, ...source } = await admin.upsertProduct(
      merchant_id,
      product_ref,
      c.req.valid('json'),
      actorOf(c.var.credential),
    );
    return c.json(source, 200);
  });
  route(routes.patchProduct, async (c) => {
    const { merchant_id, product_ref } = c.req.valid('param');
    const patch = c.req.valid('json');
    // Merged into the document GET shows, then checked as a PUT of it would be (read-only members ignored).
    const { created: _created, ...source } = await admin.editProduct(
      merchant_id,
      product_ref,
      (current) => mergedDocument(PUT_PRODUCT, current, patch),
      actorOf(c.var.credential),
    );
    return c.json(source, 200);
  });
  route(routes.deleteProduct, async (c) => {
    const { merchant_id, product_ref } = c.req.valid('param');
    await admin.deleteProduct(merchant_id, product_ref, actorOf(c.var.credential));
    return c.body(null, 204);
  });
  route(routes.listProductSources, async (c) => {
    const { merchant_id } = c.req.valid('param');
    return c.json(await admin.listProducts(merchant_id, c.req.valid('query'), config.limits.productListScan), 200);
  });
  route(routes.importProducts, async (c) => {
    const { merchant_id } = c.req.valid('param');
    // The body is read as it arrives (bodyLimit has checked its length), decoded and parsed a bounded piece at a time.
    const body = c.req.raw.body ?? (async function* () {})();
    // Recorded as an import job (the panel lists it with its outcome); the answer waits for the end,
    // or, asked to respond asynchronously, for the file to be checked and staged.
    const actor = actorOf(c.var.credential);
    const startedBy = c.var.credential.kind === 'key' ? actorName(actor) : ADMIN_API_ACTOR;
    const { job, done, staged } = await imports.start(merchant_id, startedBy, null, body, actor);
    if (prefersAsync(c.req.header('Prefer'))) {
      await staged;
      c.header('Location', `/admin/v1/merchants/${merchant_id}/imports/${job.id}`);
      c.header('Preference-Applied', 'respond-async');
      return c.json(importJob(await imports.job(merchant_id, job.id)), 202);
    }
    return c.json(await done, 200);
  });
  route(routes.listImportJobs, async (c) => {
    const { merchant_id } = c.req.valid('param');
    const { limit, before_id } = c.req.valid('query');
    return c.json({ data: (await imports.recent(merchant_id, limit, before_id)).map(importJob) }, 200);
  });
  route(routes.getImportJob, async (c) => {
    const { merchant_id, import_id } = c.req.valid('param');
    return c.json(importJob(await imports.job(merchant_id, import_id)), 200);
  });

  // Image mirroring progress
  route(routes.getImageMirroring, async (c) => c.json(await admin.imageMirroring(c.req.valid('param').merchant_id), 200));
  route(routes.retryDeadImages, async (c) =>
    c.json({ retried: await admin.retryDeadImages(c.req.valid('param').merchant_id, actorOf(c.var.credential)) }, 200),
  );

  registerWebhookRoutes(app, endpoints);
  return app;
}
