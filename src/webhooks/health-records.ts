// An endpoint's health as its record holds it: the state machine's policy from the settings, its
// input read from a record, and the owners' notifications a transition ends, in its transaction.
import type { Config } from '../config.js';
import type { StorageTx } from '../storage/port.js';
import { conditionsEnded, type EndpointHealth, type HealthPolicy } from './health.js';
import type { WebhookEndpointRecord } from './model.js';

export function healthPolicy(config: Config['webhooks']): HealthPolicy {
  return {
    notifyAfterFailures: config.notifyAfterFailures,
    renotifyAfterMs: config.renotifyHours * 3600_000,
    pauseAfterFailures: config.pauseAfterFailures,
    pauseMinStreakMs: config.pauseMinStreakMinutes * 60_000,
    cooldownMs: config.cooldownMinutes * 60_000,
  };
}

/** The health state machine's input, as the endpoint's record holds it. */
export const healthOf = (e: WebhookEndpointRecord): EndpointHealth => ({
  status: e.status,
  consecutive_failures: e.consecutive_failures,
  failure_streak_started_at: e.failure_streak_started_at,
  paused_until: e.paused_until,
  owners_notified_at: e.owners_notified_at,
  disabled_reason: e.disabled_reason,
  last_success_at: e.last_success_at,
  last_failure_at: e.last_failure_at,
});

/** The owners' notifications whose condition a health transition ended end with it, in its transaction. */
export async function endConditions(tx: StorageTx, endpoint: WebhookEndpointRecord, after: EndpointHealth, at: Date): Promise<void> {
  const ended = conditionsEnded(healthOf(endpoint), after);
  if (ended.length > 0) await tx.endNotifications(endpoint.id, ended, at.toISOString());
}
