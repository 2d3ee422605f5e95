// One attempt of a claimed delivery: its turn of the endpoint's rate, its body checked, signed and
// sent, and its outcome handed to the recorder, then counted and logged.
import type { Logger } from '../operations/log.js';
import type { DeliveryObserver } from '../operations/metrics.js';
import { wholeSecondIso } from '../shared/time.js';
import { slotInterval } from '../storage/delivery-turns.js';
import type { SentRequest } from './attempt-record.js';
import type { AttemptRecorder } from './attempt-recorder.js';
import { carriesProducts, deliveryBody, publishedById, type FullProducts } from './delivery-body.js';
import type { ClaimedDelivery, WebhookEndpointRecord } from './model.js';
import type { DeliverySender, SendResult } from './sender.js';
import { secretsAt, signedHeaders } from './signing.js';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** The dispatcher's attempts (WebhookDispatcher.send). */
export class DeliveryAttempts {
  /** When this process last started an attempt to each rate-limited endpoint (ms on deps.now). */
  private readonly lastStartByEndpoint = new Map<number, number>();

  constructor(
    private readonly deps: {
      now: () => Date;
      sender: DeliverySender;
      metrics?: DeliveryObserver;
      waitUntil?: (at: Date) => Promise<void>;
      /**
       * For endpoints with `payload: full`: the store's published payloads of the listed products,
       * ascending, joined by commas (PublishedStore.publishedPayloadsByIds), and the bound on a body.
       */
      published?: { read: (storeId: number, productIds: number[]) => Promise<Uint8Array>; maxBytes: number };
    },
    private readonly recorder: AttemptRecorder,
    private readonly log: Logger,
  ) {}

  async run(
    delivery: ClaimedDelivery,
    endpointRead: Promise<WebhookEndpointRecord | undefined>,
    /** Called when the receiver answered 2xx, before the outcome is recorded. */
    succeeded: () => void,
  ): Promise<void> {
    const endpoint = await endpointRead;
    // Paused or disabled since the claim: the lease runs out and the delivery waits for the endpoint.
    if (!endpoint || endpoint.status !== 'active') return;
    // The slot of the endpoint's rate the claim reserved for this attempt, and no
    // sooner than a slot's length after this process's last start for the endpoint (a send that
    // started late must not bunch with the next one on time).
    if (delivery.send_at !== null && endpoint.max_per_second !== null) {
      const interval = slotInterval(endpoint.max_per_second);
      // Waited for again when another attempt to the endpoint started meanwhile (it moves the
      // earliest start on); otherwise this one's turn has come, however late its timer fired.
      // Nothing runs between the last check and the start.
      for (;;) {
        const last = this.lastStartByEndpoint.get(endpoint.id);
        const at = Math.max(Date.parse(delivery.send_at), last === undefined ? 0 : last + interval);
        if (at <= this.deps.now().getTime()) break;
        await (this.deps.waitUntil?.(new Date(at)) ?? sleep(at - this.deps.now().getTime()));
        if (this.lastStartByEndpoint.get(endpoint.id) === last) break;
      }
      this.lastStartByEndpoint.set(endpoint.id, this.deps.now().getTime());
    }
    // A full delivery's products as the store publishes them now: read again by every attempt.
    const full = endpoint.payload === 'full' ? await this.fullProducts(delivery) : undefined;
    const now = this.deps.now();
    const payload = deliveryBody(delivery, delivery.occurred_at ?? wholeSecondIso(now), full);
    if (!payload.ok) return this.recorder.giveUpInvalid(delivery, endpoint, payload.errors, now);
    const { body } = payload;
    const { signing, pending } = secretsAt(endpoint, now);
    const headers = signedHeaders(
      {
        signing,
        pending: pending?.secret,
        webhookId: delivery.webhook_id,
        replaces: delivery.replaces_webhook_id,
        standardWebhooks: endpoint.standard_webhooks,
        test: delivery.test,
      },
      body,
      now,
    );
    const request: SentRequest = { url: endpoint.url, headers };
    this.recorder.awaiting(endpoint.id);
    let result: SendResult;
    try {
      result = await this.deps.sender.send(request.url, request.headers, body, endpoint.id);
    } finally {
      this.recorder.responded(endpoint.id);
    }
    const at = this.deps.now();
    if (result.error === null) succeeded();
    const outcome = await this.recorder.record(delivery, endpoint, request, result, at);
    if (!outcome) return;
    this.deps.metrics?.observeDelivery(outcome, result.latencyMs / 1000);
    // Never the URL (it may carry the receiver's own token) nor the secret: the ids lead to both.
    const fields = {
      delivery_id: delivery.id,
      endpoint_id: endpoint.id,
      merchant_id: endpoint.merchant_id,
      event: delivery.event,
      attempt: delivery.attempts + 1,
      outcome,
      status_code: result.statusCode,
      latency_ms: result.latencyMs,
    };
    if (outcome === 'succeeded') this.log.debug(fields, 'webhook delivered');
    else this.log.warn({ ...fields, error: result.error }, 'webhook delivery failed');
  }

  /** The products a full delivery carries, or undefined when it carries ids only (a `removed`). */
  private async fullProducts(delivery: ClaimedDelivery): Promise<FullProducts | undefined> {
    const published = this.deps.published;
    if (!published || !carriesProducts(delivery)) return undefined;
    const ids = [...new Set(delivery.product_ids)].sort((a, b) => a - b);
    return { published: publishedById(await published.read(delivery.store_id, ids)), maxBytes: published.maxBytes };
  }
}
