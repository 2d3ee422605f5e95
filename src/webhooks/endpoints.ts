// Receiver endpoints as operators manage them (docs/WEBHOOKS.md): registration with a signing
// secret shown once, rotation, scope and event filters, re-enabling, and the operator tools —
// attempt log, resend, test event, recovery of failed deliveries since a time.
import { ProblemError, invalidInput, type InvalidParam } from '../shared/problem.js';
import type { components } from '../generated/admin-api.js';
import type {
  AttemptRecord, CatalogStorage, ChangeType, DeliveryRecord, DeliveryStatus, NotificationRecord, StorageOperations, StorageTx,
  WebhookEndpointRecord,
} from '../storage/port.js';
import type { AddressGuard } from '../outbound/address-guard.js';
import { WEBHOOK_EVENTS } from '../generated/public-webhooks.js';
import { newSigningSecret } from './signing.js';

/** The events an endpoint subscribes to: the document's `webhooks:` section, in its order. */
export const EVENTS: readonly ChangeType[] = WEBHOOK_EVENTS;

export interface EndpointInput {
  url?: string;
  store?: string | null;
  events?: ChangeType[];
  status?: 'active' | 'paused';
}

type EndpointView = components['schemas']['WebhookEndpoint'];
type CreatedEndpointView = components['schemas']['CreatedWebhookEndpoint'];

/** The admin shape of an endpoint: never the secret itself, only its prefix. */
async function endpointView(reader: StorageOperations, endpoint: WebhookEndpointRecord): Promise<EndpointView> {
  const store = endpoint.store_id === null
    ? null
    : (await reader.listStores(endpoint.merchant_id)).find((s) => s.id === endpoint.store_id)?.slug ?? null;
  return {
    id: endpoint.id,
    url: endpoint.url,
    store,
    events: endpoint.events,
    status: endpoint.status,
    consecutive_failures: endpoint.consecutive_failures,
    paused_until: endpoint.paused_until,
    disabled_reason: endpoint.disabled_reason,
    last_success_at: endpoint.last_success_at,
    last_failure_at: endpoint.last_failure_at,
    secret_prefix: endpoint.secret.slice(0, 12),
    created_at: endpoint.created_at,
  };
}

/** The shape shown once, at creation and rotation: the view and the secret itself. */
async function createdView(reader: StorageOperations, endpoint: WebhookEndpointRecord): Promise<CreatedEndpointView> {
  return { ...await endpointView(reader, endpoint), secret: endpoint.secret };
}

/** Events listed in the spec's order: price, content, removed. */
const inSpecOrder = (events: readonly ChangeType[]) => EVENTS.filter((e) => events.includes(e));

const notFound = (what: string) => new ProblemError('not_found', `${what} does not exist.`);

export class WebhookEndpoints {
  constructor(
    private readonly storage: CatalogStorage,
    private readonly guard: AddressGuard,
    private readonly now: () => Date,
  ) {}

  private async merchant(reader: StorageOperations, merchantId: number): Promise<void> {
    if (!await reader.getMerchant(merchantId)) throw notFound(`Merchant ${merchantId}`);
  }

  private async endpointIn(reader: StorageOperations, merchantId: number, endpointId: number): Promise<WebhookEndpointRecord> {
    await this.merchant(reader, merchantId);
    const endpoint = await reader.getWebhookEndpoint(endpointId, merchantId);
    if (!endpoint) throw notFound(`Webhook endpoint ${endpointId}`);
    return endpoint;
  }

  endpoint(merchantId: number, endpointId: number): Promise<EndpointView> {
    return this.storage.snapshot(async (reader) => endpointView(reader, await this.endpointIn(reader, merchantId, endpointId)));
  }

  list(merchantId: number): Promise<EndpointView[]> {
    return this.storage.snapshot(async (reader) => {
      await this.merchant(reader, merchantId);
      return Promise.all((await reader.listWebhookEndpoints(merchantId)).map((e) => endpointView(reader, e)));
    });
  }

  /** Checks an input; returns the store id it names (null: all stores, undefined: not given). */
  private async validate(tx: StorageTx, merchantId: number, input: EndpointInput): Promise<number | null | undefined> {
    const problems: InvalidParam[] = [];
    if (input.url !== undefined) {
      const problem = this.guard.urlProblem(input.url);
      if (problem) problems.push({ name: '/url', in: 'body', reason: problem });
    }
    let storeId: number | null | undefined;
    if (input.store !== undefined) {
      storeId = input.store === null ? null : (await tx.findStore(merchantId, input.store))?.id;
      if (storeId === undefined) problems.push({ name: '/store', in: 'body', reason: `unknown store "${input.store}"` });
    }
    input.events?.forEach((event, i) => {
      if (input.events!.indexOf(event) !== i) problems.push({ name: `/events/${i}`, in: 'body', reason: 'is listed twice' });
    });
    if (problems.length) throw invalidInput('body', problems);
    return storeId;
  }

  /** Registers an endpoint; its signing secret is in this result and never again. */
  create(merchantId: number, input: EndpointInput): Promise<CreatedEndpointView> {
    return this.storage.transaction(async (tx) => {
      await this.merchant(tx, merchantId);
      const storeId = await this.validate(tx, merchantId, input);
      return createdView(tx, await tx.createWebhookEndpoint({
        merchant_id: merchantId, url: input.url!, store_id: storeId ?? null, events: inSpecOrder(input.events ?? EVENTS),
        secret: newSigningSecret(), created_at: this.now().toISOString(),
      }));
    });
  }

  update(merchantId: number, endpointId: number, input: EndpointInput): Promise<EndpointView> {
    return this.storage.transaction(async (tx) => {
      const endpoint = await this.endpointIn(tx, merchantId, endpointId);
      const storeId = await this.validate(tx, merchantId, input);
      await tx.updateWebhookEndpoint(endpoint.id, {
        ...(input.url !== undefined ? { url: input.url } : {}),
        ...(storeId !== undefined ? { store_id: storeId } : {}),
        ...(input.events !== undefined ? { events: inSpecOrder(input.events) } : {}),
        // Re-enabling clears the health record: the operator vouches for the receiver.
        ...(input.status === 'active' ? {
          status: 'active', consecutive_failures: 0, failure_streak_started_at: null, paused_until: null, disabled_reason: null,
        } as const : {}),
        // Paused by hand: no cooldown ends it (paused_until null); only re-enabling does.
        ...(input.status === 'paused' ? { status: 'paused', paused_until: null } as const : {}),
      });
      if (input.status === 'paused') await tx.dropPendingDeliveries(endpoint.id);
      return endpointView(tx, (await tx.getWebhookEndpoint(endpoint.id))!);
    });
  }

  /** A new secret, shown once; the old one stops signing at once. */
  rotateSecret(merchantId: number, endpointId: number): Promise<CreatedEndpointView> {
    return this.storage.transaction(async (tx) => {
      const endpoint = await this.endpointIn(tx, merchantId, endpointId);
      await tx.updateWebhookEndpoint(endpoint.id, { secret: newSigningSecret() });
      return createdView(tx, (await tx.getWebhookEndpoint(endpoint.id))!);
    });
  }

  delete(merchantId: number, endpointId: number): Promise<void> {
    return this.storage.transaction(async (tx) => {
      await tx.deleteWebhookEndpoint((await this.endpointIn(tx, merchantId, endpointId)).id);
    });
  }

  private newDelivery(tx: StorageTx, endpoint: WebhookEndpointRecord, from: Pick<DeliveryRecord, 'event' | 'store_id' | 'product_ids'>): Promise<DeliveryRecord> {
    const at = this.now().toISOString();
    return tx.insertDelivery({
      endpoint_id: endpoint.id, event: from.event, store_id: from.store_id, product_ids: from.product_ids,
      occurred_at: null, status: 'pending', attempts: 0, next_attempt_at: at, created_at: at,
    });
  }

  /** Test, resend and recover send at once, so they need an endpoint that is active. */
  private async activeEndpoint(tx: StorageTx, merchantId: number, endpointId: number): Promise<WebhookEndpointRecord> {
    const endpoint = await this.endpointIn(tx, merchantId, endpointId);
    if (endpoint.status !== 'active') {
      throw new ProblemError('conflict', `Webhook endpoint ${endpointId} is ${endpoint.status}: re-enable it (PATCH status=active) first.`);
    }
    return endpoint;
  }

  /** A test: a real-shaped `content` delivery for one product of the merchant (the spec has no test event). */
  sendTest(merchantId: number, endpointId: number): Promise<DeliveryRecord> {
    return this.storage.transaction(async (tx) => {
      const endpoint = await this.activeEndpoint(tx, merchantId, endpointId);
      const product = (await tx.productsAfter(merchantId, 0, 1))[0];
      const storeId = endpoint.store_id ?? (await tx.findDefaultStore(merchantId))?.id ?? null;
      return this.newDelivery(tx, endpoint, { event: 'content', store_id: storeId, product_ids: [product?.id ?? 1] });
    });
  }

  private async deliveryIn(reader: StorageOperations, merchantId: number, endpointId: number, deliveryId: number): Promise<DeliveryRecord> {
    const endpoint = await this.endpointIn(reader, merchantId, endpointId);
    const delivery = await reader.getDelivery(deliveryId);
    if (!delivery || delivery.endpoint_id !== endpoint.id) throw notFound(`Delivery ${deliveryId}`);
    return delivery;
  }

  /** One delivery with every attempt made so far, oldest first (admin `DeliveryDetail`). */
  delivery(merchantId: number, endpointId: number, deliveryId: number): Promise<Omit<DeliveryRecord, 'attempts'> & { attempts: AttemptRecord[] }> {
    return this.storage.snapshot(async (reader) => {
      const delivery = await this.deliveryIn(reader, merchantId, endpointId, deliveryId);
      return { ...delivery, attempts: await reader.listAttempts(delivery.id) };
    });
  }

  deliveries(merchantId: number, endpointId: number, filter: { status?: DeliveryStatus; limit: number; beforeId?: number }): Promise<DeliveryRecord[]> {
    return this.storage.snapshot(async (reader) => reader.listDeliveries((await this.endpointIn(reader, merchantId, endpointId)).id, filter));
  }

  /** Re-sends one delivery as a new delivery with the same event, store and products. */
  resend(merchantId: number, endpointId: number, deliveryId: number): Promise<DeliveryRecord> {
    return this.storage.transaction(async (tx) => {
      const delivery = await this.deliveryIn(tx, merchantId, endpointId, deliveryId);
      return this.newDelivery(tx, await this.activeEndpoint(tx, merchantId, endpointId), delivery);
    });
  }

  /** Re-sends every failed, given-up or dropped delivery of the endpoint created since a time. */
  recover(merchantId: number, endpointId: number, since: string): Promise<number> {
    return this.storage.transaction(async (tx) => {
      const endpoint = await this.activeEndpoint(tx, merchantId, endpointId);
      // The originals stay as they are (a failed one keeps its own retries).
      const unsuccessful = await tx.unsuccessfulDeliveriesSince(endpoint.id, new Date(since).toISOString());
      for (const delivery of unsuccessful) await this.newDelivery(tx, endpoint, delivery);
      return unsuccessful.length;
    });
  }

  /**
   * When the oldest change not yet attempted for one of the merchant's active endpoints was
   * recorded (null: none waiting): the merchant's own part of the deployment-wide
   * cps_feed_lag_seconds, from one storage query scoped to the merchant. A pending delivery counts
   * from the oldest change it carries.
   */
  async oldestWaitingChange(merchantId: number): Promise<string | null> {
    await this.merchant(this.storage, merchantId);
    return this.storage.oldestWaitingChangeAt(merchantId);
  }

  /** The merchant's most recent notifications, newest first. */
  async notifications(merchantId: number, limit: number): Promise<NotificationRecord[]> {
    await this.merchant(this.storage, merchantId);
    return this.storage.listNotifications(merchantId, limit);
  }
}
