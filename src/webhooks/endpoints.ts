// Receiver endpoints as operators manage them (docs/WEBHOOKS.md): registration with a signing
// secret shown once, rotation, scope and event filters, re-enabling, and the operator tools —
// attempt log, resend, test event, recovery of failed deliveries since a time.
import { ProblemError, invalidInput, type InvalidParam } from '../shared/problem.js';
import type {
  CatalogStorage, ChangeType, DeliveryRecord, DeliveryStatus, WebhookEndpointRecord,
} from '../storage/port.js';
import type { AddressGuard } from '../outbound/address-guard.js';
import { newSigningSecret } from './signing.js';

export const EVENTS: readonly ChangeType[] = ['price', 'content', 'removed'];

export interface EndpointInput {
  url?: string;
  store?: string | null;
  events?: ChangeType[];
  status?: 'active';
}

/** The admin shape of an endpoint: never the secret itself, only its prefix. */
export function endpointView(storage: CatalogStorage, endpoint: WebhookEndpointRecord) {
  const store = endpoint.store_id === null
    ? null
    : storage.listStores(endpoint.merchant_id).find((s) => s.id === endpoint.store_id)?.slug ?? null;
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

/** Events listed in the spec's order: price, content, removed. */
const inSpecOrder = (events: readonly ChangeType[]) => EVENTS.filter((e) => events.includes(e));

const notFound = (what: string) => new ProblemError('not_found', `${what} does not exist.`);

export class WebhookEndpoints {
  constructor(
    private readonly storage: CatalogStorage,
    private readonly guard: AddressGuard,
    private readonly now: () => Date,
  ) {}

  private merchant(merchantId: number): void {
    if (!this.storage.getMerchant(merchantId)) throw notFound(`Merchant ${merchantId}`);
  }

  endpoint(merchantId: number, endpointId: number): WebhookEndpointRecord {
    this.merchant(merchantId);
    const endpoint = this.storage.getWebhookEndpoint(endpointId, merchantId);
    if (!endpoint) throw notFound(`Webhook endpoint ${endpointId}`);
    return endpoint;
  }

  list(merchantId: number): WebhookEndpointRecord[] {
    this.merchant(merchantId);
    return this.storage.listWebhookEndpoints(merchantId);
  }

  /** Checks an input; returns the store id it names (null: all stores, undefined: not given). */
  private validate(merchantId: number, input: EndpointInput): number | null | undefined {
    const problems: InvalidParam[] = [];
    if (input.url !== undefined) {
      const problem = this.guard.urlProblem(input.url);
      if (problem) problems.push({ name: '/url', in: 'body', reason: problem });
    }
    let storeId: number | null | undefined;
    if (input.store !== undefined) {
      storeId = input.store === null ? null : this.storage.findStore(merchantId, input.store)?.id;
      if (storeId === undefined) problems.push({ name: '/store', in: 'body', reason: `unknown store "${input.store}"` });
    }
    input.events?.forEach((event, i) => {
      if (input.events!.indexOf(event) !== i) problems.push({ name: `/events/${i}`, in: 'body', reason: 'is listed twice' });
    });
    if (problems.length) throw invalidInput('body', problems);
    return storeId;
  }

  create(merchantId: number, input: EndpointInput): WebhookEndpointRecord {
    this.merchant(merchantId);
    const storeId = this.validate(merchantId, input);
    return this.storage.createWebhookEndpoint({
      merchant_id: merchantId, url: input.url!, store_id: storeId ?? null, events: inSpecOrder(input.events ?? EVENTS),
      secret: newSigningSecret(), created_at: this.now().toISOString(),
    });
  }

  update(merchantId: number, endpointId: number, input: EndpointInput): WebhookEndpointRecord {
    const endpoint = this.endpoint(merchantId, endpointId);
    const storeId = this.validate(merchantId, input);
    this.storage.updateWebhookEndpoint(endpoint.id, {
      ...(input.url !== undefined ? { url: input.url } : {}),
      ...(storeId !== undefined ? { store_id: storeId } : {}),
      ...(input.events !== undefined ? { events: inSpecOrder(input.events) } : {}),
      // Re-enabling clears the health record: the operator vouches for the receiver.
      ...(input.status === 'active' ? {
        status: 'active', consecutive_failures: 0, failure_streak_started_at: null, paused_until: null, disabled_reason: null,
      } as const : {}),
    });
    return this.storage.getWebhookEndpoint(endpoint.id)!;
  }

  /** A new secret, shown once; the old one stops signing at once. */
  rotateSecret(merchantId: number, endpointId: number): WebhookEndpointRecord {
    const endpoint = this.endpoint(merchantId, endpointId);
    this.storage.updateWebhookEndpoint(endpoint.id, { secret: newSigningSecret() });
    return this.storage.getWebhookEndpoint(endpoint.id)!;
  }

  delete(merchantId: number, endpointId: number): void {
    this.storage.deleteWebhookEndpoint(this.endpoint(merchantId, endpointId).id);
  }

  private newDelivery(endpoint: WebhookEndpointRecord, from: Pick<DeliveryRecord, 'event' | 'store_id' | 'product_ids'>): DeliveryRecord {
    const at = this.now().toISOString();
    return this.storage.insertDelivery({
      endpoint_id: endpoint.id, event: from.event, store_id: from.store_id, product_ids: from.product_ids,
      occurred_at: null, status: 'pending', attempts: 0, next_attempt_at: at, created_at: at,
    });
  }

  /** Test, resend and recover send at once, so they need an endpoint that is active. */
  private activeEndpoint(merchantId: number, endpointId: number): WebhookEndpointRecord {
    const endpoint = this.endpoint(merchantId, endpointId);
    if (endpoint.status !== 'active') {
      throw new ProblemError('conflict', `Webhook endpoint ${endpointId} is ${endpoint.status}: re-enable it (PATCH status=active) first.`);
    }
    return endpoint;
  }

  /** A test: a real-shaped `content` delivery for one product of the merchant (the spec has no test event). */
  sendTest(merchantId: number, endpointId: number): DeliveryRecord {
    const endpoint = this.activeEndpoint(merchantId, endpointId);
    const product = this.storage.productsAfter(merchantId, 0, 1)[0];
    const storeId = endpoint.store_id ?? this.storage.findDefaultStore(merchantId)?.id ?? null;
    return this.newDelivery(endpoint, { event: 'content', store_id: storeId, product_ids: [product?.id ?? 1] });
  }

  delivery(merchantId: number, endpointId: number, deliveryId: number): DeliveryRecord {
    const endpoint = this.endpoint(merchantId, endpointId);
    const delivery = this.storage.getDelivery(deliveryId);
    if (!delivery || delivery.endpoint_id !== endpoint.id) throw notFound(`Delivery ${deliveryId}`);
    return delivery;
  }

  deliveries(merchantId: number, endpointId: number, filter: { status?: DeliveryStatus; limit: number; beforeId?: number }): DeliveryRecord[] {
    return this.storage.listDeliveries(this.endpoint(merchantId, endpointId).id, filter);
  }

  /** Re-sends one delivery as a new delivery with the same event, store and products. */
  resend(merchantId: number, endpointId: number, deliveryId: number): DeliveryRecord {
    const delivery = this.delivery(merchantId, endpointId, deliveryId);
    return this.newDelivery(this.activeEndpoint(merchantId, endpointId), delivery);
  }

  /** Re-sends every failed, given-up or dropped delivery of the endpoint created since a time. */
  recover(merchantId: number, endpointId: number, since: string): number {
    const endpoint = this.activeEndpoint(merchantId, endpointId);
    return this.storage.transaction(() => {
      // The originals stay as they are (a failed one keeps its own retries).
      const unsuccessful = this.storage.unsuccessfulDeliveriesSince(endpoint.id, new Date(since).toISOString());
      for (const delivery of unsuccessful) this.newDelivery(endpoint, delivery);
      return unsuccessful.length;
    });
  }
}
