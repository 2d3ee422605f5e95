// The admin operations on webhook endpoints, deliveries and notifications (openapi/admin.yaml,
// tags "Webhook endpoints" and "Notifications").
import type { OpenAPIHono } from '@hono/zod-openapi';
import { routes } from '../generated/admin-routes.js';
import type { CatalogStorage } from '../storage/port.js';
import { endpointView, type WebhookEndpoints } from '../webhooks/endpoints.js';

export function registerWebhookRoutes(app: OpenAPIHono, endpoints: WebhookEndpoints, storage: CatalogStorage): void {
  const view = (e: Parameters<typeof endpointView>[1]) => endpointView(storage, e);
  const created = (e: Parameters<typeof endpointView>[1]) => ({ ...view(e), secret: e.secret });

  app.openapi(routes.listWebhookEndpoints, (c) =>
    c.json({ data: endpoints.list(c.req.valid('param').merchant_id).map(view) }, 200));
  app.openapi(routes.createWebhookEndpoint, (c) =>
    c.json(created(endpoints.create(c.req.valid('param').merchant_id, c.req.valid('json'))), 201));
  app.openapi(routes.getWebhookEndpoint, (c) => {
    const { merchant_id, endpoint_id } = c.req.valid('param');
    return c.json(view(endpoints.endpoint(merchant_id, endpoint_id)), 200);
  });
  app.openapi(routes.updateWebhookEndpoint, (c) => {
    const { merchant_id, endpoint_id } = c.req.valid('param');
    return c.json(view(endpoints.update(merchant_id, endpoint_id, c.req.valid('json'))), 200);
  });
  app.openapi(routes.deleteWebhookEndpoint, (c) => {
    const { merchant_id, endpoint_id } = c.req.valid('param');
    endpoints.delete(merchant_id, endpoint_id);
    return c.body(null, 204);
  });
  app.openapi(routes.rotateWebhookSecret, (c) => {
    const { merchant_id, endpoint_id } = c.req.valid('param');
    return c.json(created(endpoints.rotateSecret(merchant_id, endpoint_id)), 200);
  });
  app.openapi(routes.sendTestWebhook, (c) => {
    const { merchant_id, endpoint_id } = c.req.valid('param');
    return c.json(endpoints.sendTest(merchant_id, endpoint_id), 202);
  });
  app.openapi(routes.recoverWebhookDeliveries, (c) => {
    const { merchant_id, endpoint_id } = c.req.valid('param');
    return c.json({ resent: endpoints.recover(merchant_id, endpoint_id, c.req.valid('json').since) }, 202);
  });
  app.openapi(routes.listWebhookDeliveries, (c) => {
    const { merchant_id, endpoint_id } = c.req.valid('param');
    const { status, limit, before_id } = c.req.valid('query');
    return c.json({ data: endpoints.deliveries(merchant_id, endpoint_id, { status, limit, beforeId: before_id }) }, 200);
  });
  app.openapi(routes.getWebhookDelivery, (c) => {
    const { merchant_id, endpoint_id, delivery_id } = c.req.valid('param');
    const delivery = endpoints.delivery(merchant_id, endpoint_id, delivery_id);
    return c.json({ ...delivery, attempts: storage.listAttempts(delivery.id) }, 200);
  });
  app.openapi(routes.resendWebhookDelivery, (c) => {
    const { merchant_id, endpoint_id, delivery_id } = c.req.valid('param');
    return c.json(endpoints.resend(merchant_id, endpoint_id, delivery_id), 202);
  });
  app.openapi(routes.listNotifications, (c) => {
    const { merchant_id } = c.req.valid('param');
    endpoints.list(merchant_id);
    // The admin shape of a notification: the merchant is the one in the path.
    const data = storage.listNotifications(merchant_id, c.req.valid('query').limit).map(({ merchant_id: _, ...notification }) => notification);
    return c.json({ data }, 200);
  });
}
