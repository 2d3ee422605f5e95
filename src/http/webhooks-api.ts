// The admin operations on webhook endpoints, deliveries and notifications (openapi/admin.yaml,
// tags "Webhook endpoints" and "Notifications"). Their scopes (webhooks:read, webhooks:write) are
// checked before them (authorize.ts); here, a key restricted to stores sees and manages only the
// endpoints of those stores: any other endpoint answers 404, exactly like one that does not exist.
import type { OpenAPIHono } from '@hono/zod-openapi';
import type { MiddlewareHandler } from 'hono';
import { notFound } from '../catalog/catalog-writes.js';
import { routes } from '../generated/admin-routes.js';
import { ProblemError } from '../shared/problem.js';
import { actorOf, seesStore, type Credential } from '../tenancy/credential.js';
import type { WebhookEndpoints } from '../webhooks/endpoints.js';
import type { AdminEnv } from './auth.js';
import { documentedRoutes } from './documented-responses.js';

/** 403 unless the credential manages endpoints of the store (null: every store): a store-restricted key names one of its own. */
function assertManagesStore(credential: Credential, store: string | null): void {
  if (seesStore(credential, store)) return;
  const stores = credential.kind === 'key' ? (credential.stores ?? []).join(', ') : '';
  throw new ProblemError('forbidden', `This API key manages only the endpoints of the stores ${stores}: set store to one of them.`);
}

/** 404 for an endpoint of a store the key does not see (so it cannot tell it from one that does not exist). */
const endpointInKeyStores =
  (endpoints: WebhookEndpoints): MiddlewareHandler<AdminEnv> =>
  async (c, next) => {
    const credential = c.var.credential;
    const endpointId = c.req.param('endpoint_id') ?? '';
    if (credential.kind === 'key' && credential.stores !== null && /^[1-9][0-9]{0,15}$/.test(endpointId)) {
      const endpoint = await endpoints.endpoint(credential.merchantId, Number(endpointId));
      if (!seesStore(credential, endpoint.store)) throw notFound(`Webhook endpoint ${endpointId}`);
    }
    return next();
  };

export function registerWebhookRoutes(app: OpenAPIHono<AdminEnv>, endpoints: WebhookEndpoints): void {
  const route = documentedRoutes(app);
  app.use('/admin/v1/merchants/:merchant_id/webhook-endpoints/:endpoint_id', endpointInKeyStores(endpoints));
  app.use('/admin/v1/merchants/:merchant_id/webhook-endpoints/:endpoint_id/*', endpointInKeyStores(endpoints));
  route(routes.listWebhookEndpoints, async (c) => {
    const all = await endpoints.list(c.req.valid('param').merchant_id);
    return c.json({ data: all.filter((endpoint) => seesStore(c.var.credential, endpoint.store)) }, 200);
  });
  route(routes.createWebhookEndpoint, async (c) => {
    const input = c.req.valid('json');
    assertManagesStore(c.var.credential, input.store ?? null);
    return c.json(await endpoints.create(c.req.valid('param').merchant_id, input, actorOf(c.var.credential)), 201);
  });
  route(routes.getWebhookEndpoint, async (c) => {
    const { merchant_id, endpoint_id } = c.req.valid('param');
    return c.json(await endpoints.endpoint(merchant_id, endpoint_id), 200);
  });
  route(routes.updateWebhookEndpoint, async (c) => {
    const { merchant_id, endpoint_id } = c.req.valid('param');
    const input = c.req.valid('json');
    if (input.store !== undefined) assertManagesStore(c.var.credential, input.store);
    return c.json(await endpoints.update(merchant_id, endpoint_id, input, actorOf(c.var.credential)), 200);
  });
  route(routes.deleteWebhookEndpoint, async (c) => {
    const { merchant_id, endpoint_id } = c.req.valid('param');
    await endpoints.delete(merchant_id, endpoint_id, actorOf(c.var.credential));
    return c.body(null, 204);
  });
  route(routes.rotateWebhookSecret, async (c) => {
    const { merchant_id, endpoint_id } = c.req.valid('param');
    return c.json(await endpoints.rotateSecret(merchant_id, endpoint_id, actorOf(c.var.credential)), 200);
  });
  route(routes.confirmWebhookSecret, async (c) => {
    const { merchant_id, endpoint_id } = c.req.valid('param');
    return c.json(await endpoints.confirmSecret(merchant_id, endpoint_id, actorOf(c.var.credential)), 200);
  });
  route(routes.sendTestWebhook, async (c) => {
    const { merchant_id, endpoint_id } = c.req.valid('param');
    return c.json(await endpoints.sendTest(merchant_id, endpoint_id, actorOf(c.var.credential)), 202);
  });
  route(routes.recoverWebhookDeliveries, async (c) => {
    const { merchant_id, endpoint_id } = c.req.valid('param');
    return c.json({ resent: await endpoints.recover(merchant_id, endpoint_id, c.req.valid('json').since, actorOf(c.var.credential)) }, 202);
  });
  route(routes.listWebhookDeliveries, async (c) => {
    const { merchant_id, endpoint_id } = c.req.valid('param');
    const { status, limit, before_id, webhook_id } = c.req.valid('query');
    const filter = { status, limit, beforeId: before_id, webhookId: webhook_id };
    return c.json({ data: await endpoints.deliveries(merchant_id, endpoint_id, filter) }, 200);
  });
  route(routes.getWebhookDelivery, async (c) => {
    const { merchant_id, endpoint_id, delivery_id } = c.req.valid('param');
    return c.json(await endpoints.delivery(merchant_id, endpoint_id, delivery_id), 200);
  });
  route(routes.resendWebhookDelivery, async (c) => {
    const { merchant_id, endpoint_id, delivery_id } = c.req.valid('param');
    return c.json(await endpoints.resend(merchant_id, endpoint_id, delivery_id, actorOf(c.var.credential)), 202);
  });
  route(routes.listNotifications, async (c) => {
    const { merchant_id } = c.req.valid('param');
    // A store-restricted key reads the notifications of the endpoints it sees (and none of the merchant's others).
    const credential = c.var.credential;
    const seen =
      credential.kind === 'key' && credential.stores !== null
        ? new Set((await endpoints.list(merchant_id)).filter((endpoint) => seesStore(credential, endpoint.store)).map((e) => e.id))
        : null;
    // The admin shape of a notification: the merchant is the one in the path.
    const data = (await endpoints.notifications(merchant_id, c.req.valid('query').limit))
      .filter((notification) => seen === null || (notification.endpoint_id !== null && seen.has(notification.endpoint_id)))
      .map(({ merchant_id: _, ...notification }) => notification);
    return c.json({ data }, 200);
  });
}
