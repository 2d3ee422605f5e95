// The endpoints' health written in one statement, shared by the endpoints' own update and the
// recording of delivery outcomes.
import type { WebhookEndpointHealthRecord } from '../port.js';

/**
 * The endpoints' health, one row each, in id order (as every other writer locks several
 * endpoints); its parameters from `$first` on (healthParams). Run alone (updateWebhookEndpointsHealth)
 * or as a step of recording attempts' outcomes.
 */
export const HEALTH_UPDATE = (first: number) => {
  const p = (n: number) => `$${first + n}`;
  return `UPDATE webhook_endpoints AS e SET status = h.status, consecutive_failures = h.consecutive_failures,
        failure_streak_started_at = h.failure_streak_started_at, paused_until = h.paused_until, owners_notified_at = h.owners_notified_at,
        disabled_reason = h.disabled_reason, last_success_at = h.last_success_at, last_failure_at = h.last_failure_at
      FROM (SELECT * FROM unnest(${p(0)}::bigint[], ${p(1)}::text[], ${p(2)}::integer[], ${p(3)}::text[], ${p(4)}::text[], ${p(5)}::text[], ${p(6)}::text[], ${p(7)}::text[], ${p(8)}::text[])
        AS h(id, status, consecutive_failures, failure_streak_started_at, paused_until, owners_notified_at, disabled_reason, last_success_at, last_failure_at)
        ORDER BY id) AS h
      WHERE e.id = h.id`;
};

export function healthParams(updates: { id: number; health: WebhookEndpointHealthRecord }[]): unknown[] {
  if (new Set(updates.map((u) => u.id)).size !== updates.length) throw new TypeError('updateWebhookEndpointsHealth: ids must be distinct');
  const sorted = [...updates].sort((a, b) => a.id - b.id);
  const column = <K extends keyof WebhookEndpointHealthRecord>(key: K) => sorted.map((u) => u.health[key]);
  return [
    sorted.map((u) => u.id),
    column('status'),
    column('consecutive_failures'),
    column('failure_streak_started_at'),
    column('paused_until'),
    column('owners_notified_at'),
    column('disabled_reason'),
    column('last_success_at'),
    column('last_failure_at'),
  ];
}
