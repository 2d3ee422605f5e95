// The admin operations on webhook endpoints, deliveries and notifications (openapi/admin.yaml,
// tags "Webhook endpoints" and "Notifications").
import type { OpenAPIHono } from '@hono/zod-openapi';
import { routes } from '../generated/admin-routes.js';
import type { WebhookEndpoints } from '../webhooks/endpoints.js';
import { documentedRoutes } from './documented-responses.js';
import { principalName } from '../admin/accounts.js';

const OPERATOR = principalName({ kind: 'operator' });

export function registerWebhookRoutes(app: OpenAPIHono, endpoints: WebhookEndpoints): void {
  const route = documentedRoutes(app);
  route(routes.listWebhookEndpoints, async (c) => c.json({ data: await endpoints.list(c.req.valid('param').merchant_id) }, 200));
  route(routes.createWebhookEndpoint, async (c) =>
    c.json(await endpoints.create(c.req.valid('param').merchant_id, c.req.valid('json'), OPERATOR), 201),
  );
  route(routes.getWebhookEndpoint, async (c) => {
    const { merchant_id, endpoint_id } = c.req.valid('param');
    return c.json(await endpoints.endpoint(merchant_id, endpoint_id), 200);
  });
  route(routes.updateWebhookEndpoint, async (c) => {
    const { merchant_id, endpoint_id } = c.req.valid('param');
    return c.json(await endpoints.update(merchant_id, endpoint_id, c.req.valid('json'), OPERATOR), 200);
  });
  route(routes.deleteWebhookEndpoint, async (c) => {
    const { merchant_id, endpoint_id } = c.req.valid('param');
    await endpoints.delete(merchant_id, endpoint_id, OPERATOR);
    return c.body(null, 204);
  });
  // The admin token acts as the operator in the audit log (as the panel's operator does).
  route(routes.rotateWebhookSecret, async (c) => {
    const { merchant_id, endpoint_id } = c.req.valid('param');
    return c.json(await endpoints.rotateSecret(merchant_id, endpoint_id, OPERATOR), 200);
  });
  route(routes.confirmWebhookSecret, async (c) => {
    const { merchant_id, endpoint_id } = c.req.valid('param');
    return c.json(await endpoints.confirmSecret(merchant_id, endpoint_id, OPERATOR), 200);
  });
  route(routes.sendTestWebhook, async (c) => {
    const { merchant_id, endpoint_id } = c.req.valid('param');
    return c.json(await endpoints.sendTest(merchant_id, endpoint_id, OPERATOR), 202);
  });
  route(routes.recoverWebhookDeliveries, async (c) => {
    const { merchant_id, endpoint_id } = c.req.valid('param');
    return c.json({ resent: await endpoints.recover(merchant_id, endpoint_id, c.req.valid('json').since, OPERATOR) }, 202);
  });
  route(routes.listWebhookDeliveries, async (c) => {
    const { merchant_id, endpoint_id } = c.req.valid('param');
    const { status, limit, before_id } = c.req.valid('query');
    return c.json({ data: await endpoints.deliveries(merchant_id, endpoint_id, { status, limit, beforeId: before_id }) }, 200);
  });
  route(routes.getWebhookDelivery, async (c) => {
    const { merchant_id, endpoint_id, delivery_id } = c.req.valid('param');
    return c.json(await endpoints.delivery(merchant_id, endpoint_id, delivery_id), 200);
  });
  route(routes.resendWebhookDelivery, async (c) => {
    const { merchant_id, endpoint_id, delivery_id } = c.req.valid('param');
    return c.json(await endpoints.resend(merchant_id, endpoint_id, delivery_id, OPERATOR), 202);
  });
  route(routes.listNotifications, async (c) => {
    const { merchant_id } = c.req.valid('param');
    // The admin shape of a notification: the merchant is the one in the path.
    const data = (await endpoints.notifications(merchant_id, c.req.valid('query').limit)).map(
      ({ merchant_id: _, ...notification }) => notification,
    );
    return c.json({ data }, 200);
  });
}
