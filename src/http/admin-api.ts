// The admin API (openapi/admin.yaml): each handler reads validated input, calls one CatalogAdmin
// operation, and returns the admin shape of its result.
import type { IncomingMessage } from 'node:http';
import { OpenAPIHono } from '@hono/zod-openapi';
import type { MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { issueApiKey } from '../admin/api-keys.js';
import type { CatalogAdmin } from '../admin/catalog-admin.js';
import { importNdjson } from '../admin/import.js';
import type { ProductRecord, StoreRecord } from '../catalog/model.js';
import type { Config } from '../config.js';
import adminDocument from '../generated/admin-openapi.json' with { type: 'json' };
import { routes } from '../generated/admin-routes.js';
import type { ApiKeyRecord } from '../storage/port.js';
import { adminTokenAuth } from './auth.js';
import { renderError } from './errors.js';
import { nestsDeeperThan, tooDeepReason } from '../shared/json-limits.js';
import { ProblemError, invalidInput } from '../shared/problem.js';
import { validationHook } from './validation.js';
import { registerWebhookRoutes } from './webhooks-api.js';
import { retryDeadImages } from '../images/mirror.js';
import { AddressGuard } from '../outbound/address-guard.js';
import { WebhookEndpoints } from '../webhooks/endpoints.js';

const adminStore = ({ merchant_id: _m, catalog_version: _v, ...store }: StoreRecord) => store;
const apiKey = ({ merchant_id: _m, ...key }: ApiKeyRecord) => key;

function productSource(admin: CatalogAdmin, merchantId: number, product: ProductRecord) {
  const mirrors = admin.storage.imageMirrors(merchantId, product.source.images.map((i) => i.url));
  return {
    id: product.id,
    ref: product.ref,
    ...product.source,
    images: product.source.images.map(({ url }) => ({
      url, state: mirrors.get(url)?.state ?? 'pending', mirrored_url: mirrors.get(url)?.mirrored_url ?? null,
    })),
  };
}

const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH']);

/**
 * A response sent before the request body was read to its end (a bad token, 413, a bad path
 * parameter) closes the connection: @hono/node-server would otherwise stall draining the unread
 * body and reset the connection 500 ms later, failing the client's next request on it.
 */
const closeWhenBodyUnread: MiddlewareHandler = async (c, next) => {
  await next();
  const incoming = (c.env as { incoming?: IncomingMessage } | undefined)?.incoming;
  const hasBody = Number(c.req.header('Content-Length') ?? 0) > 0 || c.req.header('Transfer-Encoding') !== undefined;
  if (incoming && hasBody && !incoming.readableEnded) c.res.headers.set('Connection', 'close');
};

const tooLarge = (limit: number) => (): never => {
  throw new ProblemError('payload_too_large', `The request body exceeds the limit of ${limit} bytes.`);
};

/** The operations of the admin document whose request body is JSON, as (method, path pattern). */
type RequestBody = { $ref?: string; content?: Record<string, unknown> };
const requestBodies = (adminDocument.components as { requestBodies?: Record<string, RequestBody> }).requestBodies ?? {};
const resolveBody = (body: RequestBody): RequestBody => (body.$ref ? requestBodies[body.$ref.split('/').pop()!] ?? {} : body);
const JSON_BODY_OPERATIONS = Object.entries(adminDocument.paths as Record<string, Record<string, { requestBody?: RequestBody }>>)
  .flatMap(([template, item]) => Object.entries(item)
    .filter(([, operation]) => operation?.requestBody && 'application/json' in (resolveBody(operation.requestBody).content ?? {}))
    .map(([method]) => ({ method: method.toUpperCase(), pattern: new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+')}$`) })));

function takesJsonBody(method: string, path: string): boolean {
  return JSON_BODY_OPERATIONS.some((o) => o.method === method && o.pattern.test(path));
}

export function adminApi(admin: CatalogAdmin, config: Config) {
  const app = new OpenAPIHono({ defaultHook: validationHook });
  app.onError(renderError);
  app.use('/admin/v1/*', closeWhenBodyUnread);
  app.use('/admin/v1/*', adminTokenAuth(config.adminToken));
  app.use('/admin/v1/merchants/:merchant_id/imports', bodyLimit({ maxSize: config.limits.importBodyBytes, onError: tooLarge(config.limits.importBodyBytes) }));
  app.use('/admin/v1/*', async (c, next) => {
    // A body sent to an operation that takes none is never read: no limit, and no 413 (admin.yaml).
    if (c.req.path.endsWith('/imports') || !takesJsonBody(c.req.method, c.req.path)) return next();
    return bodyLimit({ maxSize: config.limits.adminBodyBytes, onError: tooLarge(config.limits.adminBodyBytes) })(c, next);
  });

  // Every JSON request body is required (admin.yaml): without a Content-Type the validator would
  // read a missing body as `{}`, and a PUT would reset a whole document to its defaults.
  // Operations without a request body (test, resend, rotate-secret) take none.
  app.use('/admin/v1/*', async (c, next) => {
    if (BODY_METHODS.has(c.req.method) && takesJsonBody(c.req.method, c.req.path) && !c.req.header('Content-Type')) {
      throw invalidInput('body', [{ name: '/', in: 'body', reason: 'is required: send JSON with Content-Type: application/json' }]);
    }
    return next();
  });

  // The JSON depth limit, checked on the raw text before the validator parses it (the text is
  // cached, so it is read once).
  app.use('/admin/v1/*', async (c, next) => {
    if (BODY_METHODS.has(c.req.method) && takesJsonBody(c.req.method, c.req.path)
      && nestsDeeperThan(await c.req.text(), config.limits.maxJsonDepth)) {
      throw invalidInput('body', [{ name: '/', in: 'body', reason: tooDeepReason(config.limits.maxJsonDepth) }]);
    }
    return next();
  });

  // Merchants and keys
  app.openapi(routes.listMerchants, (c) => c.json({ data: admin.storage.listMerchants() }, 200));
  app.openapi(routes.createMerchant, (c) => c.json(admin.createMerchant(c.req.valid('json')), 201));
  app.openapi(routes.getMerchant, (c) => c.json(admin.merchant(c.req.valid('param').merchant_id), 200));
  app.openapi(routes.updateMerchant, (c) => c.json(admin.updateMerchant(c.req.valid('param').merchant_id, c.req.valid('json')), 200));
  app.openapi(routes.listApiKeys, (c) => {
    const { merchant_id } = c.req.valid('param');
    admin.merchant(merchant_id);
    return c.json({ data: admin.storage.listApiKeys(merchant_id).map(apiKey) }, 200);
  });
  app.openapi(routes.createApiKey, (c) => {
    const { merchant_id } = c.req.valid('param');
    admin.merchant(merchant_id);
    const { key, ...record } = issueApiKey(admin.storage, merchant_id, c.req.valid('json').name, admin.now());
    return c.json({ ...apiKey(record), key }, 201);
  });
  app.openapi(routes.revokeApiKey, (c) => {
    const { merchant_id, key_id } = c.req.valid('param');
    admin.merchant(merchant_id);
    if (!admin.storage.revokeApiKey(merchant_id, key_id, admin.now().toISOString())) {
      throw new ProblemError('not_found', `API key ${key_id} does not exist.`);
    }
    return c.body(null, 204);
  });

  // Stores
  app.openapi(routes.listMerchantStores, (c) => {
    const { merchant_id } = c.req.valid('param');
    admin.merchant(merchant_id);
    return c.json({ data: admin.storage.listStores(merchant_id).map(adminStore) }, 200);
  });
  app.openapi(routes.upsertStore, (c) => {
    const { merchant_id, slug } = c.req.valid('param');
    return c.json(adminStore(admin.upsertStore(merchant_id, slug, c.req.valid('json'))), 200);
  });
  app.openapi(routes.deleteStore, (c) => {
    const { merchant_id, slug } = c.req.valid('param');
    admin.deleteStore(merchant_id, slug);
    return c.body(null, 204);
  });

  // Customer groups
  app.openapi(routes.listCustomerGroups, (c) => {
    const { merchant_id } = c.req.valid('param');
    admin.merchant(merchant_id);
    return c.json({ data: admin.storage.listCustomerGroups(merchant_id) }, 200);
  });
  app.openapi(routes.createCustomerGroup, (c) =>
    c.json(admin.createCustomerGroup(c.req.valid('param').merchant_id, c.req.valid('json').name), 201));
  app.openapi(routes.updateCustomerGroup, (c) => {
    const { merchant_id, group_id } = c.req.valid('param');
    return c.json(admin.updateCustomerGroup(merchant_id, group_id, c.req.valid('json').name), 200);
  });
  app.openapi(routes.deleteCustomerGroup, (c) => {
    const { merchant_id, group_id } = c.req.valid('param');
    admin.deleteCustomerGroup(merchant_id, group_id);
    return c.body(null, 204);
  });

  // Exchange rates
  app.openapi(routes.listExchangeRates, (c) => {
    const { merchant_id } = c.req.valid('param');
    admin.merchant(merchant_id);
    return c.json({ data: admin.storage.listExchangeRates(merchant_id) }, 200);
  });
  app.openapi(routes.upsertExchangeRate, (c) => {
    const { merchant_id, base, quote } = c.req.valid('param');
    return c.json(admin.upsertExchangeRate(merchant_id, { base, quote, rate: c.req.valid('json').rate }), 200);
  });
  app.openapi(routes.deleteExchangeRate, (c) => {
    const { merchant_id, base, quote } = c.req.valid('param');
    admin.deleteExchangeRate(merchant_id, base, quote);
    return c.body(null, 204);
  });

  // Pricing rules
  app.openapi(routes.listPricingRules, (c) => {
    const { merchant_id } = c.req.valid('param');
    admin.merchant(merchant_id);
    return c.json({ data: admin.storage.listPricingRules(merchant_id) }, 200);
  });
  app.openapi(routes.createPricingRule, (c) =>
    c.json(admin.createPricingRule(c.req.valid('param').merchant_id, c.req.valid('json')), 201));
  app.openapi(routes.updatePricingRule, (c) => {
    const { merchant_id, rule_id } = c.req.valid('param');
    return c.json(admin.updatePricingRule(merchant_id, rule_id, c.req.valid('json')), 200);
  });
  app.openapi(routes.deletePricingRule, (c) => {
    const { merchant_id, rule_id } = c.req.valid('param');
    admin.deletePricingRule(merchant_id, rule_id);
    return c.body(null, 204);
  });

  // Suppliers and attribute definitions
  app.openapi(routes.listSuppliers, (c) => {
    const { merchant_id } = c.req.valid('param');
    admin.merchant(merchant_id);
    return c.json({ data: admin.storage.listSuppliers(merchant_id) }, 200);
  });
  app.openapi(routes.upsertSupplier, (c) => {
    const { merchant_id, supplier_ref } = c.req.valid('param');
    return c.json(admin.upsertSupplier(merchant_id, supplier_ref, c.req.valid('json').name), 200);
  });
  app.openapi(routes.deleteSupplier, (c) => {
    const { merchant_id, supplier_ref } = c.req.valid('param');
    admin.deleteSupplier(merchant_id, supplier_ref);
    return c.body(null, 204);
  });
  app.openapi(routes.listAttributeDefinitions, (c) => {
    const { merchant_id } = c.req.valid('param');
    admin.merchant(merchant_id);
    return c.json({ data: admin.storage.listAttributeDefinitions(merchant_id) }, 200);
  });
  app.openapi(routes.upsertAttributeDefinition, (c) => {
    const { merchant_id, key } = c.req.valid('param');
    return c.json(admin.upsertAttributeDefinition(merchant_id, { key, ...c.req.valid('json') }), 200);
  });
  app.openapi(routes.deleteAttributeDefinition, (c) => {
    const { merchant_id, key } = c.req.valid('param');
    admin.deleteAttributeDefinition(merchant_id, key);
    return c.body(null, 204);
  });

  // Products and the bulk import
  app.openapi(routes.getProductSource, (c) => {
    const { merchant_id, product_ref } = c.req.valid('param');
    return c.json(productSource(admin, merchant_id, admin.product(merchant_id, product_ref)), 200);
  });
  app.openapi(routes.upsertProduct, (c) => {
    const { merchant_id, product_ref } = c.req.valid('param');
    return c.json(productSource(admin, merchant_id, admin.upsertProduct(merchant_id, product_ref, c.req.valid('json'))), 200);
  });
  app.openapi(routes.deleteProduct, (c) => {
    const { merchant_id, product_ref } = c.req.valid('param');
    admin.deleteProduct(merchant_id, product_ref);
    return c.body(null, 204);
  });
  app.openapi(routes.importProducts, async (c) => {
    const { merchant_id } = c.req.valid('param');
    return c.json(importNdjson(admin, merchant_id, await c.req.text(), { chunkSize: config.limits.publishChunk, maxJsonDepth: config.limits.maxJsonDepth }), 200);
  });

  // Image mirroring progress
  app.openapi(routes.getImageMirroring, (c) => {
    const { merchant_id } = c.req.valid('param');
    admin.merchant(merchant_id);
    const deadImages = admin.storage.deadImages(merchant_id, 100)
      .map(({ url, last_error, first_failure_at, updated_at }) => ({ url, last_error, first_failure_at, updated_at }));
    return c.json({ ...admin.storage.imageStateCounts(merchant_id), dead_images: deadImages }, 200);
  });
  app.openapi(routes.retryDeadImages, (c) => {
    const { merchant_id } = c.req.valid('param');
    admin.merchant(merchant_id);
    return c.json({ retried: retryDeadImages(admin.storage, merchant_id, admin.now(), config.limits.publishChunk) }, 200);
  });

  registerWebhookRoutes(app, new WebhookEndpoints(admin.storage, new AddressGuard(config.webhooks.allowHosts), admin.now), admin.storage);
  return app;
}
