// Receiver endpoints as operators manage them (docs/webhooks.md#endpoints): registration with a signing
// secret shown once, rotation with a grace period, scope and event filters, re-enabling, and the operator tools —
// attempt log, resend, test event, recovery of failed deliveries since a time.
import { isDeepStrictEqual } from 'node:util';
import { ProblemError, invalidInput, type InvalidParam } from '../shared/problem.js';
import type { components } from '../generated/admin-api.js';
import type { CatalogStorage, StorageOperations, StorageTx } from '../storage/port.js';
import { scopeToMerchant, type MerchantScope } from '../storage/merchant-scope.js';
import type { AttemptRecord, DeliveryRecord, DeliveryStatus, EndpointPayload, NotificationRecord, WebhookEndpointRecord } from './model.js';
import type { ChangeType } from '../changes/model.js';
import type { AddressGuard } from '../outbound/address-guard.js';
import { WEBHOOK_EVENTS } from '../generated/public-webhooks.js';
import { audit, OPERATOR, type Actor } from '../admin/audit.js';
import { carriesProducts, deliveryBody, publishedById } from './delivery-body.js';
import { attemptStatsRange, attemptWindows, type AttemptWindow } from './attempt-stats.js';
import { conditionsEnded, healthState } from './health.js';
import { newSigningSecret, secretsAt, suitsStandardWebhooks } from './signing.js';

/** The events an endpoint subscribes to: the document's `webhooks:` section, in its order. */
export const EVENTS: readonly ChangeType[] = WEBHOOK_EVENTS;

export interface EndpointInput {
  url?: string;
  store?: string | null;
  events?: ChangeType[];
  /** Also send the Standard Webhooks headers. */
  standard_webhooks?: boolean;
  /** `full`: deliveries also carry the changed products. */
  payload?: EndpointPayload;
  /** The most deliveries a second (null: no limit). */
  max_per_second?: number | null;
  /** `disabled` only as the endpoint's own status (a document from GET sent back): it changes nothing. */
  status?: 'active' | 'paused' | 'disabled';
}

type EndpointView = components['schemas']['WebhookEndpoint'];
type CreatedEndpointView = components['schemas']['CreatedWebhookEndpoint'];
type DeliveryDetailView = components['schemas']['DeliveryDetail'];

const prefixOf = (secret: string) => secret.slice(0, 12);

/** The admin shape of an endpoint at `now`: never a secret itself, only prefixes. */
async function endpointView(reader: StorageOperations, endpoint: WebhookEndpointRecord, now: Date): Promise<EndpointView> {
  const store =
    endpoint.store_id === null
      ? null
      : ((await scopeToMerchant(reader, endpoint.merchant_id).listStores()).find((s) => s.id === endpoint.store_id)?.slug ?? null);
  const { signing, pending } = secretsAt(endpoint, now);
  return {
    id: endpoint.id,
    url: endpoint.url,
    store,
    events: endpoint.events,
    standard_webhooks: endpoint.standard_webhooks,
    payload: endpoint.payload,
    max_per_second: endpoint.max_per_second,
    status: endpoint.status,
    health: healthState(endpoint),
    failing_since: endpoint.consecutive_failures > 0 ? endpoint.failure_streak_started_at : null,
    consecutive_failures: endpoint.consecutive_failures,
    paused_until: endpoint.paused_until,
    disabled_reason: endpoint.disabled_reason,
    last_success_at: endpoint.last_success_at,
    last_failure_at: endpoint.last_failure_at,
    secret_prefix: prefixOf(signing),
    secret_rotation: pending && {
      new_secret_prefix: prefixOf(pending.secret),
      rotated_at: pending.rotatedAt,
      pending_until: pending.until,
    },
    created_at: endpoint.created_at,
  };
}

/** The shape shown once, at creation and rotation: the view and the new secret itself. */
async function createdView(
  reader: StorageOperations,
  endpoint: WebhookEndpointRecord,
  secret: string,
  now: Date,
): Promise<CreatedEndpointView> {
  return { ...(await endpointView(reader, endpoint, now)), secret };
}

/** Events listed in the spec's order: price, content, removed. */
const inSpecOrder = (events: readonly ChangeType[]) => EVENTS.filter((e) => events.includes(e));

const notFound = (what: string) => new ProblemError('not_found', `${what} does not exist.`);

export class WebhookEndpoints {
  constructor(
    private readonly storage: CatalogStorage,
    private readonly guard: AddressGuard,
    private readonly now: () => Date,
    /** How long the old secret keeps signing after a rotation (config webhooks.secretGraceHours). */
    private readonly secretGraceHours: number,
    /** The bound on a full delivery's body (config webhooks.fullPayloadBytes), for the body a delivery shows. */
    private readonly fullPayloadBytes = 256 * 1024,
  ) {}

  /** The merchant (404 otherwise): its scope on `reader`. */
  private async merchant(reader: StorageOperations, merchantId: number): Promise<MerchantScope> {
    const merchant = scopeToMerchant(reader, merchantId);
    if (!(await merchant.getMerchant())) throw notFound(`Merchant ${merchantId}`);
    return merchant;
  }

  private async endpointIn(reader: StorageOperations, merchantId: number, endpointId: number): Promise<WebhookEndpointRecord> {
    const endpoint = await (await this.merchant(reader, merchantId)).findWebhookEndpoint(endpointId);
    if (!endpoint) throw notFound(`Webhook endpoint ${endpointId}`);
    return endpoint;
  }

  endpoint(merchantId: number, endpointId: number): Promise<EndpointView> {
    return this.storage.snapshot(async (reader) => endpointView(reader, await this.endpointIn(reader, merchantId, endpointId), this.now()));
  }

  list(merchantId: number): Promise<EndpointView[]> {
    return this.storage.snapshot(async (reader) => {
      const merchant = await this.merchant(reader, merchantId);
      const now = this.now();
      return Promise.all((await merchant.listWebhookEndpoints()).map((e) => endpointView(reader, e, now)));
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
      storeId = input.store === null ? null : (await scopeToMerchant(tx, merchantId).findStore(input.store))?.id;
      if (storeId === undefined) problems.push({ name: '/store', in: 'body', reason: `unknown store "${input.store}"` });
    }
    input.events?.forEach((event, i) => {
      if (input.events!.indexOf(event) !== i) problems.push({ name: `/events/${i}`, in: 'body', reason: 'is listed twice' });
    });
    if (problems.length) throw invalidInput('body', problems);
    return storeId;
  }

  /** Registers an endpoint; its signing secret is in this result and never again. Audited as done by `actor`. */
  create(merchantId: number, input: EndpointInput, actor: Actor = OPERATOR): Promise<CreatedEndpointView> {
    return this.storage.transaction(async (tx) => {
      const merchant = await this.merchant(tx, merchantId);
      const storeId = await this.validate(tx, merchantId, input);
      const now = this.now();
      const secret = newSigningSecret();
      const created = await createdView(
        tx,
        await merchant.createWebhookEndpoint({
          url: input.url!,
          store_id: storeId ?? null,
          events: inSpecOrder(input.events ?? EVENTS),
          standard_webhooks: input.standard_webhooks ?? false,
          payload: input.payload ?? 'thin',
          max_per_second: input.max_per_second ?? null,
          secret,
          created_at: now.toISOString(),
        }),
        secret,
        now,
      );
      const options = [
        created.standard_webhooks && 'Standard Webhooks headers',
        created.payload === 'full' && 'full payloads',
        created.max_per_second !== null && `at most ${created.max_per_second}/s`,
      ]
        .filter(Boolean)
        .join(', ');
      await audit(
        tx,
        merchantId,
        actor,
        'endpoint.create',
        `endpoint ${created.id} ${created.url} (${created.store ?? 'all stores'}: ${created.events.join(', ')}${options ? `; ${options}` : ''})`,
        now,
      );
      return created;
    });
  }

  /**
   * Changes an endpoint's URL, store, events or status; audited as done by `actor`: a change of
   * the status alone as `endpoint.pause` or `endpoint.enable`, anything else as `endpoint.update`.
   */
  update(merchantId: number, endpointId: number, change: EndpointInput, actor: Actor = OPERATOR): Promise<EndpointView> {
    return this.storage.transaction(async (tx) => {
      const endpoint = await this.endpointIn(tx, merchantId, endpointId);
      // A merge patch states the document wanted: `paused` or `disabled` as the endpoint has it
      // already changes nothing (an automatic pause is not turned into a pause by hand); `active`
      // keeps its meaning of re-enabling, which resets the failure count.
      const unchangedStatus = change.status === endpoint.status && change.status !== 'active';
      const input: EndpointInput = { ...change, status: unchangedStatus ? undefined : change.status };
      if (input.status === 'disabled') {
        throw invalidInput('body', [
          { name: '/status', in: 'body', reason: "must be active or paused: only a receiver's 410 Gone disables an endpoint" },
        ]);
      }
      const storeId = await this.validate(tx, merchantId, input);
      if (input.standard_webhooks === true && !endpoint.standard_webhooks) {
        // The newest secret signs the Standard Webhooks scheme: a rotation's pending one, else the current one.
        const newest = endpoint.pending_secret ?? endpoint.secret;
        if (!suitsStandardWebhooks(newest)) {
          throw new ProblemError(
            'conflict',
            `Webhook endpoint ${endpointId}'s secret (${prefixOf(newest)}…) was issued before Standard ` +
              'Webhooks were supported and holds "-" or "_", which their libraries cannot decode. Rotate the secret first, then turn them on.',
          );
        }
      }
      const before = await endpointView(tx, endpoint, this.now());
      await tx.updateWebhookEndpoint(endpoint.id, {
        ...(input.url !== undefined ? { url: input.url } : {}),
        ...(storeId !== undefined ? { store_id: storeId } : {}),
        ...(input.events !== undefined ? { events: inSpecOrder(input.events) } : {}),
        ...(input.standard_webhooks !== undefined ? { standard_webhooks: input.standard_webhooks } : {}),
        ...(input.payload !== undefined ? { payload: input.payload } : {}),
        ...(input.max_per_second !== undefined ? { max_per_second: input.max_per_second } : {}),
        // Re-enabling clears the health record: the operator vouches for the receiver.
        ...(input.status === 'active'
          ? ({
              status: 'active',
              consecutive_failures: 0,
              failure_streak_started_at: null,
              paused_until: null,
              disabled_reason: null,
            } as const)
          : {}),
        // Paused by hand: no cooldown ends it (paused_until null); only re-enabling does.
        ...(input.status === 'paused' ? ({ status: 'paused', paused_until: null } as const) : {}),
      });
      const dropped = input.status === 'paused' ? await tx.dropPendingDeliveries(endpoint.id) : 0;
      const updated = (await tx.getWebhookEndpoint(endpoint.id))!;
      // A re-enable ends what the owners were told (failing, paused, disabled).
      const ended = conditionsEnded(endpoint, updated);
      if (ended.length > 0) await tx.endNotifications(endpoint.id, ended, this.now().toISOString());
      const after = await endpointView(tx, updated, this.now());
      // An empty PATCH, or one sending the values the endpoint has: nothing happened, nothing is audited.
      if (dropped === 0 && isDeepStrictEqual(endpoint, updated)) return after;
      const changes = [
        before.url !== after.url && `URL ${after.url}`,
        before.store !== after.store && `store ${after.store ?? 'all stores'}`,
        before.events.join() !== after.events.join() && `events ${after.events.join(', ')}`,
        before.standard_webhooks !== after.standard_webhooks && `Standard Webhooks headers ${after.standard_webhooks ? 'on' : 'off'}`,
        before.payload !== after.payload && `payload ${after.payload}`,
        before.max_per_second !== after.max_per_second &&
          `rate ${after.max_per_second === null ? 'unlimited' : `at most ${after.max_per_second}/s`}`,
        input.status !== undefined && `status ${input.status}`,
      ].filter((change): change is string => typeof change === 'string');
      const statusOnly =
        input.status !== undefined &&
        input.url === undefined &&
        input.store === undefined &&
        input.events === undefined &&
        input.standard_webhooks === undefined &&
        input.payload === undefined &&
        input.max_per_second === undefined;
      const action = statusOnly ? (input.status === 'paused' ? 'endpoint.pause' : 'endpoint.enable') : 'endpoint.update';
      await audit(
        tx,
        merchantId,
        actor,
        action,
        `endpoint ${endpoint.id} ${statusOnly ? after.url : changes.join('; ') || 'unchanged'}`,
        this.now(),
      );
      return after;
    });
  }

  /**
   * A new secret, shown once (docs/decisions.md#signing-secrets: the old secret keeps signing for the grace
   * period or until the merchant confirms the new one). A rotation during a grace period replaces
   * the pending secret and restarts the grace period; the old secret keeps signing. Recorded in
   * the merchant's audit log as done by `actor`.
   */
  rotateSecret(merchantId: number, endpointId: number, actor: Actor): Promise<CreatedEndpointView> {
    return this.storage.transaction(async (tx) => {
      const endpoint = await this.endpointIn(tx, merchantId, endpointId);
      const now = this.now();
      // A rotation whose grace period has ended signs already: it is the old secret of this one.
      const { signing } = secretsAt(endpoint, now);
      const secret = newSigningSecret();
      const until = new Date(now.getTime() + this.secretGraceHours * 3600_000);
      await tx.updateWebhookEndpoint(
        endpoint.id,
        this.secretGraceHours === 0
          ? { secret, pending_secret: null, secret_rotated_at: null, pending_secret_until: null }
          : { secret: signing, pending_secret: secret, secret_rotated_at: now.toISOString(), pending_secret_until: until.toISOString() },
      );
      const rotated = (await tx.getWebhookEndpoint(endpoint.id))!;
      const detail =
        this.secretGraceHours === 0
          ? `new secret ${prefixOf(secret)}… signs now`
          : `new secret ${prefixOf(secret)}… signs from ${until.toISOString()}; ${prefixOf(signing)}… signs until then`;
      await this.audit(tx, merchantId, actor, 'endpoint.rotate_secret', `endpoint ${endpoint.id} ${endpoint.url}: ${detail}`, now);
      return createdView(tx, rotated, secret, now);
    });
  }

  /** Ends a pending rotation now: its new secret signs from here on. 409 when none is pending. */
  confirmSecret(merchantId: number, endpointId: number, actor: Actor): Promise<EndpointView> {
    return this.storage.transaction(async (tx) => {
      const endpoint = await this.endpointIn(tx, merchantId, endpointId);
      const now = this.now();
      const { signing, pending } = secretsAt(endpoint, now);
      if (!pending) {
        throw new ProblemError(
          'conflict',
          `Webhook endpoint ${endpointId} has no secret rotation pending: its secret (${prefixOf(signing)}…) signs already. Rotate the secret first.`,
        );
      }
      await tx.updateWebhookEndpoint(endpoint.id, {
        secret: pending.secret,
        pending_secret: null,
        secret_rotated_at: null,
        pending_secret_until: null,
      });
      await this.audit(
        tx,
        merchantId,
        actor,
        'endpoint.confirm_secret',
        `endpoint ${endpoint.id} ${endpoint.url}: ${prefixOf(pending.secret)}… signs now instead of ${prefixOf(signing)}…`,
        now,
      );
      return endpointView(tx, (await tx.getWebhookEndpoint(endpoint.id))!, now);
    });
  }

  private audit(
    tx: StorageTx,
    merchantId: number,
    actor: Actor,
    action: 'endpoint.rotate_secret' | 'endpoint.confirm_secret',
    detail: string,
    at: Date,
  ): Promise<void> {
    return audit(tx, merchantId, actor, action, detail, at);
  }

  delete(merchantId: number, endpointId: number, actor: Actor = OPERATOR): Promise<void> {
    return this.storage.transaction(async (tx) => {
      const endpoint = await this.endpointIn(tx, merchantId, endpointId);
      await tx.deleteWebhookEndpoint(endpoint.id);
      await audit(tx, merchantId, actor, 'endpoint.delete', `endpoint ${endpoint.id} ${endpoint.url}`, this.now());
    });
  }

  private newDelivery(
    tx: StorageTx,
    endpoint: WebhookEndpointRecord,
    from: Pick<DeliveryRecord, 'event' | 'store_id' | 'product_ids'>,
    kind: { test: boolean; replaces: number | null },
  ): Promise<DeliveryRecord> {
    const at = this.now().toISOString();
    return tx.insertDelivery({
      endpoint_id: endpoint.id,
      event: from.event,
      store_id: from.store_id,
      product_ids: from.product_ids,
      occurred_at: null,
      status: 'pending',
      attempts: 0,
      next_attempt_at: at,
      created_at: at,
      ...kind,
    });
  }

  /**
   * A resend (docs/decisions.md#webhook-delivery: a new delivery that names the one it replaces). An original still
   * waiting for a retry is dropped, so the receiver gets the payload once; one that succeeded
   * keeps its status (the receiver gets it twice).
   */
  private async resendIn(tx: StorageTx, endpoint: WebhookEndpointRecord, original: DeliveryRecord): Promise<DeliveryRecord> {
    const resent = await this.newDelivery(tx, endpoint, original, { test: original.test, replaces: original.id });
    await tx.replaceDelivery(original.id, resent.id);
    return resent;
  }

  /** Test, resend and recover send at once, so they need an endpoint that is active. */
  private async activeEndpoint(tx: StorageTx, merchantId: number, endpointId: number): Promise<WebhookEndpointRecord> {
    const endpoint = await this.endpointIn(tx, merchantId, endpointId);
    if (endpoint.status !== 'active') {
      // Plain words: the panel shows this beside the button that failed.
      throw new ProblemError('conflict', `Webhook endpoint ${endpointId} is ${endpoint.status}: enable it again first.`);
    }
    return endpoint;
  }

  /**
   * A test: a real-shaped `content` delivery for one product of the merchant (the spec has no test
   * event), marked `test` in the delivery log.
   */
  sendTest(merchantId: number, endpointId: number, actor: Actor = OPERATOR): Promise<DeliveryRecord> {
    return this.storage.transaction(async (tx) => {
      const endpoint = await this.activeEndpoint(tx, merchantId, endpointId);
      const merchant = scopeToMerchant(tx, merchantId);
      const product = (await merchant.productsAfter(0, 1))[0];
      const storeId = endpoint.store_id ?? (await merchant.findDefaultStore())?.id ?? null;
      const delivery = await this.newDelivery(
        tx,
        endpoint,
        { event: 'content', store_id: storeId, product_ids: [product?.id ?? 1] },
        { test: true, replaces: null },
      );
      await audit(tx, merchantId, actor, 'endpoint.send_test', `endpoint ${endpoint.id}: delivery ${delivery.id}`, this.now());
      return delivery;
    });
  }

  private async deliveryIn(reader: StorageOperations, merchantId: number, endpointId: number, deliveryId: number): Promise<DeliveryRecord> {
    const endpoint = await this.endpointIn(reader, merchantId, endpointId);
    const delivery = await reader.getDelivery(deliveryId);
    if (!delivery || delivery.endpoint_id !== endpoint.id) throw notFound(`Delivery ${deliveryId}`);
    return delivery;
  }

  /**
   * One delivery with the exact body it sends and every attempt made so far, oldest first, each
   * with the request it sent (admin `DeliveryDetail`). The body is the dispatcher's own: every
   * attempt sends the same spec fields, `occurred_at` being fixed at the first; a full delivery's
   * products are as the store publishes them now, as the next attempt would read them.
   */
  delivery(merchantId: number, endpointId: number, deliveryId: number): Promise<DeliveryDetailView> {
    return this.storage.snapshot(async (reader) => {
      const delivery = await this.deliveryIn(reader, merchantId, endpointId, deliveryId);
      const endpoint = await this.endpointIn(reader, merchantId, endpointId);
      const full =
        endpoint.payload === 'full' && carriesProducts(delivery)
          ? {
              published: publishedById(
                (
                  await reader.publishedPayloadsByIds(
                    delivery.store_id,
                    [...new Set(delivery.product_ids)].sort((a, b) => a - b),
                  )
                ).bytes,
              ),
              maxBytes: this.fullPayloadBytes,
            }
          : undefined;
      const payload = delivery.occurred_at === null ? null : deliveryBody(delivery, delivery.occurred_at, full);
      const attempts: AttemptRecord[] = await reader.listAttempts(delivery.id);
      return { ...delivery, attempts, body: payload?.ok ? payload.body : null };
    });
  }

  deliveries(
    merchantId: number,
    endpointId: number,
    filter: { status?: DeliveryStatus; limit: number; beforeId?: number; webhookId?: string },
  ): Promise<DeliveryRecord[]> {
    return this.storage.snapshot(async (reader) =>
      reader.listDeliveries((await this.endpointIn(reader, merchantId, endpointId)).id, filter),
    );
  }

  /**
   * Re-sends one delivery as a new delivery with the same event, store and products, naming it in
   * `replaces`; the original names the resend in `replaced_by` and, when it was waiting for a
   * retry, is dropped.
   */
  resend(merchantId: number, endpointId: number, deliveryId: number, actor: Actor = OPERATOR): Promise<DeliveryRecord> {
    return this.storage.transaction(async (tx) => {
      const delivery = await this.deliveryIn(tx, merchantId, endpointId, deliveryId);
      const resent = await this.resendIn(tx, await this.activeEndpoint(tx, merchantId, endpointId), delivery);
      await audit(tx, merchantId, actor, 'endpoint.resend', `endpoint ${endpointId}: delivery ${delivery.id} as ${resent.id}`, this.now());
      return resent;
    });
  }

  /**
   * Re-sends every failed, given-up or dropped delivery of the endpoint created since a time that
   * was not re-sent already, each as resend() does (a failed original stops retrying).
   */
  recover(merchantId: number, endpointId: number, since: string, actor: Actor = OPERATOR): Promise<number> {
    return this.storage.transaction(async (tx) => {
      const endpoint = await this.activeEndpoint(tx, merchantId, endpointId);
      const from = new Date(since).toISOString();
      const unsuccessful = await tx.unsuccessfulDeliveriesSince(endpoint.id, from);
      for (const delivery of unsuccessful) await this.resendIn(tx, endpoint, delivery);
      await audit(
        tx,
        merchantId,
        actor,
        'endpoint.recover',
        `endpoint ${endpoint.id}: ${unsuccessful.length} deliveries since ${from}`,
        this.now(),
      );
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
    return (await this.merchant(this.storage, merchantId)).oldestWaitingChangeAt();
  }

  /**
   * The endpoint's attempts over the last 24 hours and 7 days, per bucket and outcome, with their
   * latency: one statement over the attempt log's (endpoint, at) index.
   */
  attemptStats(merchantId: number, endpointId: number): Promise<AttemptWindow[]> {
    return this.storage.snapshot(async (reader) => {
      const endpoint = await this.endpointIn(reader, merchantId, endpointId);
      const now = this.now();
      const { from, to } = attemptStatsRange(now);
      return attemptWindows(await reader.attemptsPerHour(endpoint.id, from, to), now);
    });
  }

  /** The merchant's most recent notifications, newest first. */
  async notifications(merchantId: number, limit: number): Promise<NotificationRecord[]> {
    return (await this.merchant(this.storage, merchantId)).listNotifications(limit);
  }
}
