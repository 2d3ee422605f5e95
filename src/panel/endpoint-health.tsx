// An endpoint's health wherever the panel shows it: the endpoint list, the endpoint
// page and the overview's notifications. `failing` (amber) is an active endpoint whose last
// attempts failed, with how many since when and the last success; paused and disabled are red.
import type { components } from '../generated/admin-api.js';
import { Time } from './time.js';

type Schemas = components['schemas'];
type Endpoint = Schemas['WebhookEndpoint'];
type Notification = Schemas['Notification'];

/** A moment in the viewer's local time (time.tsx); "never" when there is none. */
function At(props: { at: string | null }) {
  return <Time at={props.at} none="never" />;
}

/** The state as a word in its colour (classes health-*: panel.css). */
export function HealthBadge(props: { health: Endpoint['health'] }) {
  return <span class={`health health-${props.health}`}>{props.health}</span>;
}

export function Health(props: { endpoint: Endpoint }) {
  const e = props.endpoint;
  const failures = `${e.consecutive_failures} consecutive ${e.consecutive_failures === 1 ? 'failure' : 'failures'}`;
  return (
    <>
      <HealthBadge health={e.health} />
      {e.paused_until && (
        <div class="muted">
          paused until <At at={e.paused_until} />
        </div>
      )}
      {e.disabled_reason && <div class="muted">{e.disabled_reason}</div>}
      {e.failing_since ? (
        <div class="health-count">
          {failures} since <At at={e.failing_since} />
        </div>
      ) : (
        <div class="muted">{failures}</div>
      )}
      <div class={e.health === 'healthy' ? 'muted' : undefined}>
        last success <At at={e.last_success_at} />
      </div>
      <div class="muted">
        last failure <At at={e.last_failure_at} />
      </div>
    </>
  );
}

/** A notification's condition: when it ended, or that it lasts. */
export function NotificationEnded(props: { notification: Notification }) {
  const { ended_at: ended, endpoint_id: endpointId } = props.notification;
  if (ended)
    return (
      <span class="notification-ended">
        ended <Time at={ended} />
      </span>
    );
  if (endpointId === null) return <span class="muted">endpoint deleted</span>;
  return <span class="notification-ongoing">ongoing</span>;
}
