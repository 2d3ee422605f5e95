// Receiver endpoint health (spec 3), with the thresholds of docs/decisions.md#endpoint-health as configuration:
// every failed attempt counts; after repeated failures the owners are notified (once per streak,
// again at most every renotify period); after sustained failures (a count spanning a minimum
// time) the endpoint pauses for a cooldown; the next change after the cooldown resumes it; one
// 2xx clears everything. Pure functions over the endpoint's health record.

import type { EndpointHealth, NotificationKind } from './model.js';

export type { EndpointHealth, EndpointStatus } from './model.js';

export interface HealthPolicy {
  /** "Repeated failures": consecutive failed attempts after which owners are notified. */
  notifyAfterFailures: number;
  /** Owners are notified again for the same streak at most this often. */
  renotifyAfterMs: number;
  /** "Sustained failures": consecutive failed attempts ... */
  pauseAfterFailures: number;
  /** ... spanning at least this long, pause the endpoint ... */
  pauseMinStreakMs: number;
  /** ... for this cooldown. */
  cooldownMs: number;
}

export const DEFAULT_HEALTH_POLICY: HealthPolicy = {
  notifyAfterFailures: 5,
  renotifyAfterMs: 24 * 3600_000,
  pauseAfterFailures: 20,
  pauseMinStreakMs: 3600_000,
  cooldownMs: 3600_000,
};

export interface HealthTransition {
  health: EndpointHealth;
  /** Notify the merchant's owners, with this kind. */
  notify: 'failing' | 'paused' | 'disabled' | null;
  /** Drop the endpoint's pending deliveries (paused or disabled). */
  dropPending: boolean;
}

const iso = (d: Date) => d.toISOString();

/** spec 3: a delivery failed (non-2xx status or connection failure). */
export function afterFailure(health: EndpointHealth, now: Date, policy: HealthPolicy): HealthTransition {
  const next: EndpointHealth = {
    ...health,
    consecutive_failures: health.consecutive_failures + 1,
    failure_streak_started_at: health.failure_streak_started_at ?? iso(now),
    last_failure_at: iso(now),
  };
  let notify: HealthTransition['notify'] = null;
  let dropPending = false;
  const streakMs = now.getTime() - Date.parse(next.failure_streak_started_at!);
  if (next.status === 'active' && next.consecutive_failures >= policy.pauseAfterFailures && streakMs >= policy.pauseMinStreakMs) {
    next.status = 'paused';
    next.paused_until = iso(new Date(now.getTime() + policy.cooldownMs));
    notify = 'paused';
    dropPending = true;
  } else if (next.consecutive_failures >= policy.notifyAfterFailures) {
    const last = next.owners_notified_at ? Date.parse(next.owners_notified_at) : null;
    const notifiedThisStreak = last !== null && last >= Date.parse(next.failure_streak_started_at!);
    if (!notifiedThisStreak || now.getTime() - last >= policy.renotifyAfterMs) notify = 'failing';
  }
  if (notify) next.owners_notified_at = iso(now);
  return { health: next, notify, dropPending };
}

/** The receiver answered 410 Gone: it asks for no more deliveries. */
export function afterGone(health: EndpointHealth, now: Date): HealthTransition {
  // Attempts in flight when the endpoint was disabled may answer 410 too: the owners hear it once.
  const alreadyDisabled = health.status === 'disabled';
  return {
    health: {
      ...health,
      status: 'disabled',
      disabled_reason: 'gone',
      paused_until: null,
      last_failure_at: iso(now),
      consecutive_failures: health.consecutive_failures + 1,
      owners_notified_at: alreadyDisabled ? health.owners_notified_at : iso(now),
      failure_streak_started_at: health.failure_streak_started_at ?? iso(now),
    },
    notify: alreadyDisabled ? null : 'disabled',
    dropPending: !alreadyDisabled,
  };
}

/** spec 3: one successful delivery (2xx) resets the count and clears any pause. */
export function afterSuccess(health: EndpointHealth, now: Date): EndpointHealth {
  // Disabled (410) and paused by hand (no cooldown: paused_until null) stay so until re-enabled.
  const keep = health.status === 'disabled' || (health.status === 'paused' && health.paused_until === null);
  return {
    ...health,
    status: keep ? health.status : 'active',
    consecutive_failures: 0,
    failure_streak_started_at: null,
    paused_until: null,
    last_success_at: iso(now),
  };
}

/** spec 3: once the cooldown has lifted, the next change resumes deliveries. */
export function onChange(health: EndpointHealth, now: Date): { health: EndpointHealth; deliver: boolean } {
  if (health.status === 'disabled') return { health, deliver: false };
  if (health.status === 'paused') {
    if (health.paused_until && now.getTime() >= Date.parse(health.paused_until)) {
      return { health: { ...health, status: 'active', paused_until: null }, deliver: true };
    }
    return { health, deliver: false };
  }
  return { health, deliver: true };
}

/** What an endpoint's deliveries are doing now (admin WebhookEndpoint `health`), as every view shows it. */
export type EndpointHealthState = 'healthy' | 'failing' | 'paused' | 'disabled';

/**
 * An active endpoint whose last attempts failed is `failing`, not merely active: one
 * failed attempt since the last success (or re-enable) is enough, as the count says how many.
 */
export function healthState(health: Pick<EndpointHealth, 'status' | 'consecutive_failures'>): EndpointHealthState {
  if (health.status !== 'active') return health.status;
  return health.consecutive_failures > 0 ? 'failing' : 'healthy';
}

/**
 * The owners' notifications whose condition a health transition ends: `failing` once the failure
 * count is back to 0, `paused` and `disabled` once the endpoint is no longer so. Only what the
 * transition changed, so a success of a healthy endpoint ends nothing (and writes nothing).
 */
export function conditionsEnded(before: EndpointHealth, after: EndpointHealth): NotificationKind[] {
  const ended: NotificationKind[] = [];
  if (before.consecutive_failures > 0 && after.consecutive_failures === 0) ended.push('failing');
  if (before.status === 'paused' && after.status !== 'paused') ended.push('paused');
  if (before.status === 'disabled' && after.status !== 'disabled') ended.push('disabled');
  return ended;
}
