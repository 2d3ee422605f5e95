// The fields of an endpoint's form, for registering one (endpoints.tsx) and editing one
// (endpoint-edit.tsx): the receiver URL, the store, and the events, each with its summary, what
// it means and a sample payload, all from the public document's `webhooks:` section
// (src/generated/public-webhook-events.ts): nothing here restates the document.
import type { Child } from 'hono/jsx';
import { WEBHOOK_EVENT_DOCS } from '../../generated/public-webhook-events.js';
import type { StoreRecord } from '../../catalog/model.js';
import { EVENTS } from '../../webhooks/endpoints.js';

/** The form's labels, by field name: its errors name the fields by them (plain-words.ts). */
export const ENDPOINT_FIELD_LABELS = {
  url: 'Receiver URL',
  store: 'Store',
  events: 'Events',
  standard_webhooks: 'Standard Webhooks headers',
  payload: 'Deliveries carry the changed products',
  max_per_second: 'Deliveries a second at most',
} as const;

/** What the form holds: as typed, so that a refused form shows it again. */
export interface EndpointFormInput {
  url: string;
  /** A store's slug, or '' for all stores. */
  store: string;
  events: string[];
  /** The checkbox: also send the Standard Webhooks headers. */
  standardWebhooks: boolean;
  /** The checkbox: deliveries also carry the changed products (`payload: full`). */
  fullPayload: boolean;
  /** As typed: a whole number, or '' for no limit. */
  maxPerSecond: string;
}

/** The form's input as the admin document's endpoint input takes it. */
export function endpointOptions(input: EndpointFormInput): {
  standard_webhooks: boolean;
  payload: 'thin' | 'full';
  max_per_second: number | null;
} {
  const typed = input.maxPerSecond.trim();
  // A number the schema then bounds; anything else is sent as typed so that the schema names it.
  const maxPerSecond = typed === '' ? null : /^[0-9]+$/.test(typed) ? Number(typed) : (typed as unknown as number);
  return { standard_webhooks: input.standardWebhooks, payload: input.fullPayload ? 'full' : 'thin', max_per_second: maxPerSecond };
}

/** The form's input from an endpoint as it is. */
export function formOptionsOf(endpoint: {
  standard_webhooks: boolean;
  payload: 'thin' | 'full';
  max_per_second: number | null;
}): Pick<EndpointFormInput, 'standardWebhooks' | 'fullPayload' | 'maxPerSecond'> {
  return {
    standardWebhooks: endpoint.standard_webhooks,
    fullPayload: endpoint.payload === 'full',
    maxPerSecond: endpoint.max_per_second === null ? '' : String(endpoint.max_per_second),
  };
}

/** A description's `code` spans as <code>; the rest as text (the document's Markdown is no richer here). */
export function withCode(text: string): Child[] {
  return text.split(/`([^`]+)`/).map((part, i) => (i % 2 === 1 ? <code>{part}</code> : part));
}

/** The sample payload of an event, as the receiver gets it (pretty-printed for reading). */
export function samplePayload(event: keyof typeof WEBHOOK_EVENT_DOCS): string {
  return JSON.stringify(WEBHOOK_EVENT_DOCS[event].sample.payload, null, 2);
}

export function EndpointFields(props: { input: EndpointFormInput; stores: StoreRecord[] }) {
  const { input } = props;
  return (
    <>
      <label>
        Receiver URL
        <input type="url" name="url" required value={input.url} />
      </label>
      <label>
        Store
        <select name="store">
          <option value="" selected={input.store === ''}>
            All stores
          </option>
          {props.stores.map((s) => (
            <option value={s.slug} selected={input.store === s.slug}>
              {s.name} ({s.slug})
            </option>
          ))}
        </select>
      </label>
      <fieldset class="events">
        <legend>Events</legend>
        {EVENTS.map((event) => {
          const doc = WEBHOOK_EVENT_DOCS[event];
          return (
            <div class="event" id={`event-${event}`}>
              <label>
                <input
                  type="checkbox"
                  name="events"
                  value={event}
                  checked={input.events.includes(event)}
                  aria-describedby={`event-${event}-lead`}
                />{' '}
                <strong>{event}</strong>: {doc.summary}
              </label>
              <p class="muted" id={`event-${event}-lead`}>
                {withCode(doc.lead)}
              </p>
              <details>
                <summary>Sample payload ({withCode(doc.sample.summary)})</summary>
                <pre class="payload">{samplePayload(event)}</pre>
              </details>
            </div>
          );
        })}
      </fieldset>
      <fieldset class="delivery-options">
        <legend>Delivery</legend>
        <label>
          <input
            type="checkbox"
            name="standard_webhooks"
            value="on"
            checked={input.standardWebhooks}
            aria-describedby="standard-webhooks-help"
          />{' '}
          Also send the Standard Webhooks headers
        </label>
        <p class="muted" id="standard-webhooks-help">
          <code>webhook-timestamp</code> and <code>webhook-signature</code>, beside the service's own headers, so the receiver can verify
          deliveries with a Standard Webhooks library. Every delivery carries <code>webhook-id</code>, the same on each retry.
        </p>
        <label>
          <input type="checkbox" name="full_payload" value="on" checked={input.fullPayload} aria-describedby="full-payload-help" />{' '}
          Deliveries carry the changed products
        </label>
        <p class="muted" id="full-payload-help">
          <code>payload: full</code>: a <code>content</code> or <code>price</code> delivery also carries the products as the store publishes
          them when it is sent (<code>products</code>), up to the deployment's size bound; those left out are listed in{' '}
          <code>products_omitted</code>. A <code>removed</code> delivery carries ids only. Unchecked: the spec's payload alone.
        </p>
        <label>
          Deliveries a second at most
          <input
            type="number"
            name="max_per_second"
            min="1"
            max="1000"
            step="1"
            inputmode="numeric"
            value={input.maxPerSecond}
            aria-describedby="max-per-second-help"
          />
        </label>
        <p class="muted" id="max-per-second-help">
          Empty: no limit. With a limit, changes that arrive while deliveries wait for their turn fill them up to 100 products each.
        </p>
      </fieldset>
    </>
  );
}
