// The webhooks' types (spec 3, spec 6): receiver endpoints with their health, deliveries, attempts
// and owners' notifications, as the admin API states them plus what is kept beside them. Types
// only: storage imports these, never the other way round.
import type { components } from '../generated/admin-api.js';
import type { ChangeType } from '../changes/model.js';

type AdminSchemas = components['schemas'];

export type DeliveryStatus = AdminSchemas['DeliveryStatus'];
export type EndpointStatus = AdminSchemas['WebhookEndpoint']['status'];
export type EndpointPayload = AdminSchemas['WebhookEndpoint']['payload'];
export type NotificationKind = AdminSchemas['Notification']['kind'];

/**
 * An endpoint's health record (spec 3), as the state machine in webhooks/health.ts moves it (the
 * API's read-only members are the service's to write).
 */
export type EndpointHealth = {
  -readonly [K in
    | 'status'
    | 'consecutive_failures'
    | 'paused_until'
    | 'disabled_reason'
    | 'last_success_at'
    | 'last_failure_at']: AdminSchemas['WebhookEndpoint'][K];
} & {
  failure_streak_started_at: string | null;
  owners_notified_at: string | null;
};

export interface WebhookEndpointRecord extends EndpointHealth {
  id: number;
  merchant_id: number;
  url: string;
  /** null: every store of the merchant. */
  store_id: number | null;
  events: ChangeType[];
  /** Whether deliveries also carry the Standard Webhooks headers. */
  standard_webhooks: boolean;
  /** `full`: deliveries also carry the changed products as the store publishes them (delivery-body.ts). */
  payload: EndpointPayload;
  /** The most deliveries a second the endpoint receives, across processes; null: no limit. */
  max_per_second: number | null;
  /** The secret that signs; during a rotation, the old one (webhooks/signing.ts, secretsAt). */
  secret: string;
  /** A rotation's new secret: it signs from pending_secret_until on, or once confirmed. */
  pending_secret: string | null;
  /** When the pending secret was made (the rotation). */
  secret_rotated_at: string | null;
  /** The end of the rotation's grace period: until then `secret` signs. */
  pending_secret_until: string | null;
  created_at: string;
}

export type WebhookEndpointInputRecord = Pick<
  WebhookEndpointRecord,
  'merchant_id' | 'url' | 'store_id' | 'events' | 'secret' | 'created_at'
> &
  Partial<Pick<WebhookEndpointRecord, 'standard_webhooks' | 'max_per_second' | 'payload'>>;

export type DeliveryRecord = AdminSchemas['Delivery'];
/**
 * A delivery leased by a claim. `send_at`: for an endpoint with `max_per_second`, the time its
 * attempt may start (the claim reserved that slot of the endpoint's rate); null: at once.
 * `endpoint`: its endpoint as the claim's statement read it, where the engine reads it there
 * (PostgreSQL: no round trip of its own); absent, the dispatcher reads it.
 */
export type ClaimedDelivery = DeliveryRecord & { send_at: string | null; endpoint?: WebhookEndpointRecord };
/**
 * A delivery to insert: a test or a resend says so (`replaced_by` is set later, by its resend).
 * Storage gives it its `webhook_id` and reads the `replaces_webhook_id` of the delivery it replaces.
 */
export type NewDelivery = Omit<DeliveryRecord, 'id' | 'webhook_id' | 'test' | 'replaces' | 'replaced_by' | 'replaces_webhook_id'> &
  Partial<Pick<DeliveryRecord, 'test' | 'replaces'>>;
export type AttemptRecord = AdminSchemas['Attempt'];
/** An attempt to record: the request it sent, when one was signed (read back as null otherwise). */
export type NewAttempt = Omit<AttemptRecord, 'request_url' | 'request_headers'> &
  Partial<Pick<AttemptRecord, 'request_url' | 'request_headers'>>;

/**
 * How an attempt ended, for the success-rate charts: `succeeded` (2xx), `failed` (the receiver
 * answered, but not with a 2xx, or its answer could not be recorded) or `no_response` (a time-out,
 * a refused or blocked connection: no status code).
 */
export type AttemptOutcomeKind = 'succeeded' | 'failed' | 'no_response';

/** An endpoint's attempts of one outcome in one UTC hour (`hour`: `YYYY-MM-DDTHH`). */
export interface AttemptHourRecord {
  hour: string;
  outcome: AttemptOutcomeKind;
  attempts: number;
  latencySumMs: number;
  latencyMaxMs: number;
}
export type NotificationRecord = AdminSchemas['Notification'] & { merchant_id: number };
