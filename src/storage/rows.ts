// Row-to-record mappings both engines share: the columns are the same on SQLite and PostgreSQL; only
// booleans come back differently (SQLite 0/1, PostgreSQL true/false), which `flag` reads.
import type { AttemptRecord, DeliveryRecord, WebhookEndpointRecord } from '../webhooks/model.js';
import type { MerchantRecord } from '../tenancy/model.js';
import type { PricingRuleRecord, StoreRecord } from '../catalog/model.js';

export type Row = Record<string, unknown>;

/** A boolean column as either engine returns it. */
export const flag = (value: unknown): boolean => value === true || value === 1;

export const toStore = (r: Row): StoreRecord => ({
  id: r.id as number,
  merchant_id: r.merchant_id as number,
  slug: r.slug as string,
  name: r.name as string,
  locale: r.locale as string,
  currency: r.currency as string,
  is_default: flag(r.is_default),
  active: flag(r.active),
  exclude_out_of_stock: flag(r.exclude_out_of_stock),
  catalog_version: r.catalog_version as number,
});

export const toMerchant = (r: Row): MerchantRecord => ({
  id: r.id as number,
  name: r.name as string,
  sku_pattern: (r.sku_pattern as string | null) ?? null,
  owner_emails: JSON.parse(r.owner_emails as string) as string[],
  created_at: r.created_at as string,
});

export const toPricingRule = (r: Row): PricingRuleRecord => ({
  id: r.id as number,
  priority: r.priority as number,
  customer_group_id: (r.customer_group_id as number | null) ?? null,
  store_id: (r.store_id as number | null) ?? null,
  manufacturer: (r.manufacturer as string | null) ?? null,
  min_cost: (r.min_cost as string | null) ?? null,
  max_cost: (r.max_cost as string | null) ?? null,
  markup_percent: r.markup_percent as string,
  markup_amount: r.markup_amount as string,
  price_ending: (r.price_ending as number | null) ?? null,
  is_catch_all: flag(r.is_catch_all),
});

export const toEndpoint = (r: Row): WebhookEndpointRecord => ({
  ...(r as unknown as WebhookEndpointRecord),
  events: JSON.parse(r.events as string) as WebhookEndpointRecord['events'],
  standard_webhooks: flag(r.standard_webhooks),
  max_per_second: (r.max_per_second as number | null) ?? null,
});

/** The endpoint's columns an update may set. */
export const ENDPOINT_FIELDS = [
  'url',
  'store_id',
  'events',
  'standard_webhooks',
  'payload',
  'max_per_second',
  'secret',
  'pending_secret',
  'secret_rotated_at',
  'pending_secret_until',
  'status',
  'consecutive_failures',
  'failure_streak_started_at',
  'paused_until',
  'owners_notified_at',
  'disabled_reason',
  'last_success_at',
  'last_failure_at',
] as const;

/** The record (the admin API's shape): bookkeeping columns such as oldest_change_at stay in storage. */
export const toDelivery = ({ oldest_change_at: _bookkeeping, leased_until: _lease, ...r }: Row): DeliveryRecord => ({
  ...(r as unknown as DeliveryRecord),
  product_ids: JSON.parse(r.product_ids as string) as DeliveryRecord['product_ids'],
  test: flag(r.test),
  replaces: (r.replaces as number | null) ?? null,
  replaced_by: (r.replaced_by as number | null) ?? null,
  replaces_webhook_id: (r.replaces_webhook_id as string | null) ?? null,
});

/** The delivery's columns an update may set, and those a record is read from. */
export const DELIVERY_FIELDS = [
  'event',
  'store_id',
  'product_ids',
  'occurred_at',
  'status',
  'attempts',
  'next_attempt_at',
  'created_at',
] as const;
export const DELIVERY_COLUMNS = `id, webhook_id, endpoint_id, ${DELIVERY_FIELDS.join(', ')}, test, replaces, replaced_by, replaces_webhook_id`;

/** An attempt's columns, as listAttempts reads them (toAttempt). */
export const ATTEMPT_COLUMNS = 'at, status_code, error, latency_ms, response_snippet, request_url, request_headers';

export const toAttempt = (r: Row): AttemptRecord => ({
  ...(r as unknown as AttemptRecord),
  request_url: (r.request_url as string | null) ?? null,
  request_headers:
    r.request_headers === null || r.request_headers === undefined
      ? null
      : (JSON.parse(r.request_headers as string) as AttemptRecord['request_headers']),
});

/** The UTC hour an ISO instant falls in, as the attempt counts key it (migration 36): `YYYY-MM-DDTHH`. */
export const hourOf = (iso: string): string => iso.slice(0, 13);

/**
 * A waiting delivery's ids with `offered` added, up to `batchSize` in all, sorted as a delivery's
 * ids are: `carried`, the offered ids it now carries (ones it held already included); `added`,
 * whether any was new.
 */
export function fillIds(
  ids: readonly number[],
  offered: readonly number[],
  batchSize: number,
): { ids: number[]; carried: number[]; added: boolean } {
  const held = new Set(ids);
  const carried: number[] = [];
  let added = false;
  for (const id of offered) {
    if (held.has(id)) {
      carried.push(id);
    } else if (held.size < batchSize) {
      held.add(id);
      carried.push(id);
      added = true;
    }
  }
  return { ids: [...held].sort((a, b) => a - b), carried, added };
}
