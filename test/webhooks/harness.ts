// A webhook test world: the real service on a temp SQLite file with a fake clock, a merchant with
// stores and a supplier built over the admin API, real receivers on 127.0.0.1, and a dispatcher
// driven by hand (`deliverDue()` after moving the clock), so retries, backoff and cooldowns take
// no real time.
import { loadConfig, type Config, type ConfigOverrides } from '../../src/config.js';
import type { components } from '../../src/generated/admin-api.js';
import type { Logger } from '../../src/operations/log.js';
import type { CatalogStorage } from '../../src/storage/port.js';
import { AddressGuard } from '../../src/outbound/address-guard.js';
import { WebhookDispatcher } from '../../src/webhooks/dispatcher.js';
import { OwnerNotifier } from '../../src/webhooks/notifier.js';
import { HttpDeliverySender } from '../../src/webhooks/sender.js';
import { adminOk, createMerchant, type MerchantHandle } from '../support/admin-http.js';
import { fakeClock, type FakeClock } from '../support/clock.js';
import { Receiver, type ReceiverOptions } from '../support/receiver.js';
import { startTestService, type TestResponse, type TestService } from '../support/service.js';

export const WEBHOOK_DEFAULTS: Config['webhooks'] = loadConfig({}).webhooks;

export { HOUR, MINUTE, SECOND, fakeClock, type FakeClock } from '../support/clock.js';

export interface Store {
  id: number;
  slug: string;
}

// The admin API's shapes, as the generated types state them.
type AdminSchemas = components['schemas'];
export type Endpoint = AdminSchemas['WebhookEndpoint'];
export type Delivery = AdminSchemas['Delivery'];
export type Attempt = AdminSchemas['Attempt'];
export type Notification = AdminSchemas['Notification'];

export interface WebhookWorld {
  service: TestService;
  clock: FakeClock;
  dispatcher: WebhookDispatcher;
  merchant: MerchantHandle;
  stores: Record<string, Store>;
  /** A receiver on 127.0.0.1 checking deliveries against the fake clock; closed with the world. */
  receiver(options?: ReceiverOptions): Promise<Receiver>;
  /** Registers an endpoint for the receiver over the admin API and hands it the secret. */
  register(receiver: Receiver, body?: Record<string, unknown>): Promise<AdminSchemas['CreatedWebhookEndpoint']>;
  /** Coalesces, then sends every delivery due now (repeating past the concurrency bounds). */
  deliverDue(): Promise<void>;
  /** Moves the clock on, then deliverDue(). */
  after(ms: number): Promise<void>;
  /** Creates or changes a product over the admin API (a new cost is a `price` change, a new title `content`); returns its id. */
  putProduct(ref: string, change?: { cost?: string; title?: string }): Promise<number>;
  deleteProduct(ref: string): Promise<void>;
  endpoint(id: number): Promise<Endpoint>;
  deliveries(endpointId: number, query?: string): Promise<Delivery[]>;
  delivery(endpointId: number, deliveryId: number): Promise<AdminSchemas['DeliveryDetail']>;
  notifications(): Promise<Notification[]>;
  /**
   * POSTs to a bodyless admin operation (test, resend, rotate-secret). The Content-Type header works
   * around the admin API's body-required middleware, which also rejects these (reported).
   */
  post(path: string, body?: unknown): Promise<TestResponse>;
  close(): Promise<void>;
}

export async function startWebhookWorld(
  options: {
    stores?: string[];
    webhooks?: Partial<Config['webhooks']>;
    start?: string;
    /** Other configuration of the service (e.g. `limits.publishChunk`). */
    config?: Omit<ConfigOverrides, 'webhooks'>;
    /** Where the service and the dispatcher log (by default nowhere). */
    logger?: Logger;
    /** The storage the dispatcher uses, made from the service's (a wrapper that fails on purpose). */
    dispatcherStorage?: (storage: CatalogStorage) => CatalogStorage;
  } = {},
): Promise<WebhookWorld> {
  const clock = fakeClock(options.start);
  const webhooks = { ...WEBHOOK_DEFAULTS, allowHosts: ['127.0.0.1'], ...options.webhooks };
  const service = await startTestService({ now: clock.now, config: { ...options.config, webhooks }, logger: options.logger });
  // The dispatcher reports to the service's metrics, as in `serve`.
  const dispatcher = new WebhookDispatcher(options.dispatcherStorage?.(service.storage) ?? service.storage, service.config.webhooks, {
    now: clock.now,
    sender: new HttpDeliverySender(new AddressGuard(['127.0.0.1']), { timeoutMs: service.config.webhooks.timeoutMs }),
    notifier: new OwnerNotifier(service.storage, { url: null, from: 'x' }, clock.now),
    random: () => 0.5,
    logger: options.logger,
    metrics: service.server.metrics,
    // A delivery waiting for its endpoint's rate slot moves the fake clock to it (never back).
    waitUntil: async (at) => {
      if (at.getTime() > clock.ms) clock.advance(at.getTime() - clock.ms);
    },
  });
  const merchant = await createMerchant(service, 'Webhook Outfitters', { owner_emails: ['owner@example.com'] });
  const { base } = merchant;
  const stores: Record<string, Store> = {};
  for (const slug of options.stores ?? ['de', 'pl']) {
    const store = await adminOk(service, 'PUT', `${base}/stores/${slug}`, { name: `Store ${slug}`, locale: 'de-DE', currency: 'EUR' });
    stores[slug] = { id: store.id, slug };
  }
  await adminOk(service, 'PUT', `${base}/suppliers/alpine`, { name: 'Alpine Wholesale AG' });
  // A customer group, so that products have prices (and a new cost is a `price` change).
  await adminOk(service, 'POST', `${base}/customer-groups`, { name: 'retail' }, 201);
  const receivers: Receiver[] = [];

  const world: WebhookWorld = {
    service,
    clock,
    dispatcher,
    merchant,
    stores,
    async receiver(receiverOptions = {}) {
      const receiver = await Receiver.start({ now: clock.now, ...receiverOptions });
      receivers.push(receiver);
      return receiver;
    },
    async register(receiver, body = {}) {
      const created = await adminOk(service, 'POST', `${base}/webhook-endpoints`, { url: receiver.url, ...body }, 201);
      receiver.secret = created.secret;
      return created;
    },
    async deliverDue() {
      await dispatcher.tick();
      while ((await dispatcher.sendDue()) > 0);
    },
    async after(ms) {
      clock.advance(ms);
      await world.deliverDue();
    },
    async putProduct(ref, { cost = '10.00', title = `Produkt ${ref}` } = {}) {
      const product = await adminOk(service, 'PUT', `${base}/products/${ref}`, {
        content: { de: { title, description: null } },
        offers: [{ supplier_ref: 'alpine', quantity: 4, cost, currency: 'EUR' }],
      });
      return product.id;
    },
    async deleteProduct(ref) {
      await adminOk(service, 'DELETE', `${base}/products/${ref}`);
    },
    endpoint: (id) => adminOk(service, 'GET', `${base}/webhook-endpoints/${id}`),
    async deliveries(endpointId, query = '') {
      return (await adminOk(service, 'GET', `${base}/webhook-endpoints/${endpointId}/deliveries?limit=200${query}`)).data;
    },
    delivery: (endpointId, deliveryId) => adminOk(service, 'GET', `${base}/webhook-endpoints/${endpointId}/deliveries/${deliveryId}`),
    async notifications() {
      return (await adminOk(service, 'GET', `${base}/notifications?limit=200`)).data;
    },
    post: (path, body) => service.adminApi('POST', `${base}${path}`, body, { headers: { 'Content-Type': 'application/json' } }),
    async close() {
      await dispatcher.stop();
      await service.close();
      // Closing a receiver throws if it ever got an invalid or unauthentic delivery.
      for (const receiver of receivers) await receiver.close();
    },
  };
  return world;
}

/** An ISO instant `ms` after another. */
export const plus = (iso: string, ms: number) => new Date(Date.parse(iso) + ms).toISOString();
