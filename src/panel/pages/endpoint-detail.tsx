// One webhook endpoint of a merchant (docs/panel.md#pages, "Endpoint detail"): its health, the delivery log
// filtered by status and paged by before_id (with each delivery's store, products linked to the
// catalog, tests and resends marked), a delivery's page with the exact request each
// attempt sent and the answer it got, resend one, recover the failed ones since a time, sign with
// a rotated secret now, and the notifications the owners got about it. Reads go to
// service.endpoints; every change is one call of it, which records it in the audit log.
// Another merchant's endpoint or delivery is the domain's not_found (404).
import { Hono } from 'hono';
import { RecoverDeliveriesInputSchema, routes } from '../../generated/admin-routes.js';
import type { components } from '../../generated/admin-api.js';
import { principalName, type PanelAccounts, type PanelSession } from '../../admin/accounts.js';
import type { Service } from '../../service.js';
import { invalidInput } from '../../shared/problem.js';
import type { DeliveryStatus } from '../../webhooks/model.js';
import type { AttemptWindow } from '../../webhooks/attempt-stats.js';
import { field, formOf, validated } from '../form.js';
import { formAction, idParam, merchantOf, sessionOf, type PanelContext } from '../handlers.js';
import { CsrfField, ErrorMessage, Layout, Notice, type ShownError } from '../layout.js';
import { ConfirmPage } from '../confirm.js';
import { noticeFor } from '../notices.js';
import { redirectRefused, refusalOf } from '../refusals.js';
import { plainReason } from '../plain-words.js';
import type { PanelEnv } from '../session.js';
import { Health, NotificationEnded } from '../endpoint-health.js';
import { SuccessCharts } from '../success-chart.js';
import { Time } from '../time.js';
import { VisibleText } from '../visible-text.js';
import {
  DeliveryKind,
  ProductLinks,
  RequestAsSent,
  StoreSlug,
  replacedOutcome,
  resendOutcome,
  storesById,
  type StoresById,
} from './delivery-parts.js';
import { ConfirmSecretButton, SecretState } from './endpoints.js';

type Schemas = components['schemas'];
type Endpoint = Schemas['WebhookEndpoint'];
type Delivery = Schemas['Delivery'];
type Notification = Schemas['Notification'];

const STATUSES: readonly DeliveryStatus[] = ['pending', 'succeeded', 'failed', 'given_up', 'dropped'];
/** Deliveries per page of the log; the "Older" link continues before the last one shown. */
const PAGE_SIZE = 25;
/** How far back the owners' notifications are read (the merchant's, then this endpoint's). */
const NOTIFICATIONS_READ = 100;

interface LogFilter {
  status?: DeliveryStatus | undefined;
  beforeId?: number | undefined;
  /** The one delivery a receiver got with this `webhook-id`. */
  webhookId?: string | undefined;
}
/** Where the page shows a failed action's error: beside the buttons of the secret, the deliveries' resend, the recovery form. */
type ErrorAt = 'secret' | 'deliveries' | 'recover';
const ERROR_AT: readonly string[] = ['secret', 'deliveries', 'recover'] satisfies ErrorAt[];
const errorAtOf = (at: string | undefined): ErrorAt | undefined =>
  at !== undefined && ERROR_AT.includes(at) ? (at as ErrorAt) : undefined;
const detailPath = (merchantId: number, endpointId: number) => `/panel/merchants/${merchantId}/endpoints/${endpointId}`;

/** The log's query, checked by the admin API's own query schema (status, before_id, webhook_id); '' means "any". */
function logFilter(c: PanelContext): LogFilter {
  const query: Record<string, string> = {};
  for (const name of ['status', 'before_id', 'webhook_id']) {
    const value = c.req.query(name);
    if (value) query[name] = value;
  }
  const result = routes.listWebhookDeliveries.request.query.safeParse(query);
  if (!result.success) {
    throw invalidInput(
      'query',
      result.error.issues.map((issue) => ({ name: issue.path.map(String).join('.'), in: 'query', reason: plainReason(issue) })),
    );
  }
  return { status: result.data.status, beforeId: result.data.before_id, webhookId: result.data.webhook_id };
}

/** A datetime-local value (no zone: the form says UTC) as the schema's date-time with offset. */
function sinceOf(value: string): string {
  const local = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?$/.exec(value);
  if (!local) return value;
  return `${value}${local[1] ? '' : ':00'}Z`;
}

const DONE: Record<string, string> = {
  secret_confirmed: 'The new secret signs every delivery from now on; the old one no longer does.',
  updated: 'The endpoint is saved.',
};

function When(props: { at: string | null | undefined; none?: string }) {
  return <Time at={props.at} none={props.none} />;
}

function DeliveryLog(props: {
  base: string;
  merchantId: number;
  deliveries: Delivery[];
  stores: StoresById;
  filter: LogFilter;
  session: PanelSession;
  active: boolean;
  error?: ShownError | undefined;
  errorAt?: ErrorAt | undefined;
}) {
  const { base, deliveries, filter, session } = props;
  const older =
    deliveries.length === PAGE_SIZE
      ? `${base}?${new URLSearchParams({ ...(filter.status ? { status: filter.status } : {}), before_id: String(deliveries[deliveries.length - 1]!.id) })}`
      : null;
  return (
    <section aria-labelledby="deliveries">
      <h2 id="deliveries">Deliveries</h2>
      <form class="inline" method="get" action={base}>
        <label>
          Status
          <select name="status">
            <option value="" selected={!filter.status}>
              Any status
            </option>
            {STATUSES.map((s) => (
              <option value={s} selected={filter.status === s}>
                {s}
              </option>
            ))}
          </select>
        </label>{' '}
        <label>
          webhook-id
          <input name="webhook_id" value={filter.webhookId ?? ''} placeholder="dlv_…" size={38} />
        </label>{' '}
        <button type="submit">Filter</button>
      </form>
      {props.errorAt === 'deliveries' && <ErrorMessage error={props.error} />}
      {deliveries.length === 0 ? (
        <p>
          No deliveries{filter.status ? ` with status ${filter.status}` : ''}
          {filter.webhookId ? ` with webhook-id ${filter.webhookId}` : ''}
          {filter.beforeId ? ' before these' : ''}
          {filter.status || filter.beforeId || filter.webhookId
            ? '.'
            : ' yet: one is sent when a product the endpoint follows changes; "Send test" on the endpoints page sends one now.'}
        </p>
      ) : (
        <table>
          <thead>
            <tr>
              <th>Delivery</th>
              <th>Event</th>
              <th>Store</th>
              <th>Products</th>
              <th>Status</th>
              <th>Attempts</th>
              <th>Created</th>
              <th>Next attempt</th>
              <th>Actions</th>
            </tr>
          </thead>
          <tbody>
            {deliveries.map((d) => (
              <tr data-delivery={d.id}>
                <td>
                  <a href={`${base}/deliveries/${d.id}`}>#{d.id}</a> <code class="muted wrap webhook-id">{d.webhook_id}</code>
                  <DeliveryKind base={base} delivery={d} />
                </td>
                <td>{d.event}</td>
                <td class="delivery-store">
                  <StoreSlug storeId={d.store_id} stores={props.stores} />
                </td>
                <td>
                  <ProductLinks merchantId={props.merchantId} delivery={d} stores={props.stores} limit={5} />
                </td>
                <td>
                  <span class={`delivery-${d.status}`}>{d.status}</span>
                </td>
                <td>{d.attempts}</td>
                <td>
                  <When at={d.created_at} />
                </td>
                <td>
                  <When at={d.next_attempt_at} />
                </td>
                <td>
                  {props.active && (
                    <form class="inline" method="post" action={`${base}/deliveries/${d.id}/resend`}>
                      <CsrfField session={session} />
                      <button type="submit" aria-label={`Resend delivery ${d.id}`}>
                        Resend
                      </button>
                    </form>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <p>
        {filter.beforeId !== undefined && (
          <>
            <a href={filter.status ? `${base}?status=${filter.status}` : base}>Newest</a>{' '}
          </>
        )}
        {older && (
          <a href={older} rel="next">
            Older deliveries
          </a>
        )}
      </p>
    </section>
  );
}

function Notifications(props: { notifications: Notification[] }) {
  return (
    <section aria-labelledby="notifications">
      <h2 id="notifications">Notifications to the owners</h2>
      {props.notifications.length === 0 ? (
        <p>No notifications about this endpoint.</p>
      ) : (
        <table>
          <thead>
            <tr>
              <th>When</th>
              <th>Kind</th>
              <th>Message</th>
              <th>E-mailed</th>
              <th>Condition</th>
            </tr>
          </thead>
          <tbody>
            {props.notifications.map((n) => (
              <tr data-notification={n.id}>
                <td>
                  <When at={n.created_at} />
                </td>
                <td>
                  <span class={`status-${n.kind}`}>{n.kind}</span>
                </td>
                <td>
                  <strong>{n.subject}</strong>
                  <div class="muted">{n.body}</div>
                </td>
                <td>
                  <When at={n.emailed_at} none="not e-mailed" />
                </td>
                <td>
                  <NotificationEnded notification={n} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

function EndpointDetailPage(props: {
  session: PanelSession;
  merchantId: number;
  endpoint: Endpoint;
  deliveries: Delivery[];
  stores: StoresById;
  notifications: Notification[];
  filter: LogFilter;
  stats: AttemptWindow[];
  notice?: string | undefined;
  error?: ShownError | undefined;
  errorAt?: ErrorAt;
  since?: string;
}) {
  const { session, merchantId, endpoint } = props;
  const list = `/panel/merchants/${merchantId}/endpoints`;
  const base = `${list}/${endpoint.id}`;
  const active = endpoint.status === 'active';
  return (
    <Layout title={`Endpoint #${endpoint.id}`} session={session} merchantId={merchantId}>
      <p>
        <a href={list}>All endpoints</a>
      </p>
      <Notice text={props.notice} />
      {props.errorAt === undefined && <ErrorMessage error={props.error} />}
      <section aria-labelledby="health">
        <h2 id="health">Health</h2>
        <dl>
          <dt>URL</dt>
          <dd>{endpoint.url}</dd>
          <dt>Store</dt>
          <dd>{endpoint.store ?? 'all stores'}</dd>
          <dt>Events</dt>
          <dd>{endpoint.events.join(', ')}</dd>
          <dt>Headers</dt>
          <dd id="endpoint-headers">
            {endpoint.standard_webhooks ? (
              <>
                The service's and the Standard Webhooks headers (<code>webhook-signature</code>)
              </>
            ) : (
              <>
                The service's (<code>X-Service-Signature</code>, <code>webhook-id</code>)
              </>
            )}
          </dd>
          <dt>Payload</dt>
          <dd id="endpoint-payload">
            {endpoint.payload === 'full' ? (
              <>
                Full: <code>content</code> and <code>price</code> deliveries also carry the changed products (<code>products</code>)
              </>
            ) : (
              <>Thin: the spec's payload (product ids; the receiver fetches the products)</>
            )}
          </dd>
          <dt>Rate</dt>
          <dd id="endpoint-rate">
            {endpoint.max_per_second === null ? 'No limit' : `At most ${endpoint.max_per_second} deliveries a second`}
          </dd>
          <dt>Secret</dt>
          <dd id="endpoint-secret">
            <SecretState endpoint={endpoint} />
          </dd>
          <dt>Health</dt>
          <dd id="endpoint-health">
            <Health endpoint={endpoint} />
          </dd>
        </dl>
        <a href={`${base}/edit`}>Edit URL, store and events…</a> <a href={`${base}/rotate?from=detail`}>Rotate secret…</a>{' '}
        {endpoint.secret_rotation && (
          <>
            <ConfirmSecretButton session={session} base={base} />{' '}
          </>
        )}
        {!active && (
          <form class="inline" method="post" action={`${base}/enable`}>
            <CsrfField session={session} />
            <button type="submit">Enable</button>
          </form>
        )}
        {props.errorAt === 'secret' && <ErrorMessage error={props.error} />}
      </section>
      <SuccessCharts windows={props.stats} />
      <DeliveryLog
        base={base}
        merchantId={merchantId}
        deliveries={props.deliveries}
        stores={props.stores}
        filter={props.filter}
        session={session}
        active={active}
        error={props.error}
        errorAt={props.errorAt}
      />
      <section aria-labelledby="recover">
        <h2 id="recover">Recover failed deliveries</h2>
        {props.errorAt === 'recover' && <ErrorMessage error={props.error} labels={{ since: 'Recover failed deliveries since' }} />}
        {active ? (
          <form class="stacked" method="post" action={`${base}/recover`}>
            <CsrfField session={session} />
            <label>
              Recover failed deliveries since (UTC)
              <input type="datetime-local" name="since" step="1" required value={props.since ?? ''} />
            </label>
            <button type="submit">Recover</button>
          </form>
        ) : (
          <p>The endpoint is {endpoint.status}: enable it to resend or recover deliveries.</p>
        )}
      </section>
      <Notifications notifications={props.notifications} />
    </Layout>
  );
}

function DeliveryPage(props: {
  session: PanelSession;
  merchantId: number;
  endpointId: number;
  delivery: Schemas['DeliveryDetail'];
  stores: StoresById;
  /** The delivery a resend replaces, as it is now. */
  original?: Pick<Delivery, 'id' | 'status'> | undefined;
  notice?: string | undefined;
}) {
  const { session, merchantId, endpointId, delivery, original } = props;
  const base = `/panel/merchants/${merchantId}/endpoints/${endpointId}`;
  const bodyBytes = delivery.body === null ? null : Buffer.byteLength(delivery.body);
  return (
    <Layout title={`Delivery #${delivery.id}`} session={session} merchantId={merchantId}>
      <p>
        <a href={base}>Back to endpoint #{endpointId}</a>
      </p>
      <Notice text={props.notice} />
      <dl class="facts" id="delivery-facts">
        <dt>Delivery id</dt>
        <dd>
          {delivery.id}{' '}
          <span class="muted">
            (<code class="wrap">webhook-id: {delivery.webhook_id}</code>, the same in each retry; a resend is a new delivery with its own
            id)
          </span>
        </dd>
        <dt>Status</dt>
        <dd>
          <span class={`delivery-${delivery.status}`}>{delivery.status}</span>
        </dd>
        {delivery.test && (
          <>
            <dt>Test</dt>
            <dd id="delivery-test">
              <span class="tag tag-test">test</span> Sent with “Send test”: its product is a sample and nothing changed (the receiver gets
              it with <code>X-Service-Test: true</code>).
            </dd>
          </>
        )}
        {delivery.replaces !== null && (
          <>
            <dt>Replaces</dt>
            <dd id="delivery-replaces">
              Re-sends <a href={`${base}/deliveries/${delivery.replaces}`}>#{delivery.replaces}</a>.{' '}
              {original ? resendOutcome(original) : ''}
              <span class="muted">
                {' '}
                (<code class="wrap">X-Service-Replaces: {delivery.replaces_webhook_id}</code>)
              </span>
            </dd>
          </>
        )}
        {delivery.replaced_by !== null && (
          <>
            <dt>Replaced by</dt>
            <dd id="delivery-replaced-by">
              <a href={`${base}/deliveries/${delivery.replaced_by}`}>#{delivery.replaced_by}</a>. {replacedOutcome(delivery)}
            </dd>
          </>
        )}
        <dt>Event</dt>
        <dd>{delivery.event}</dd>
        <dt>Store</dt>
        <dd>
          <StoreSlug storeId={delivery.store_id} stores={props.stores} />
          {delivery.store_id !== null && <span class="muted"> (store_id {delivery.store_id})</span>}
        </dd>
        <dt>Products</dt>
        <dd>
          <ProductLinks merchantId={merchantId} delivery={delivery} stores={props.stores} />
        </dd>
        <dt>Created</dt>
        <dd>
          <When at={delivery.created_at} />
        </dd>
        <dt>Occurred at</dt>
        <dd>
          <When at={delivery.occurred_at} none="not sent yet" />
        </dd>
        <dt>Next attempt</dt>
        <dd>
          <When at={delivery.next_attempt_at} none="none" />
        </dd>
      </dl>
      <form class="inline" method="post" action={`${base}/deliveries/${delivery.id}/resend`}>
        <CsrfField session={session} />
        <button type="submit">Resend</button>
      </form>
      <section aria-labelledby="request">
        <h2 id="request">Request body</h2>
        {delivery.body === null ? (
          <p>
            Nothing sent yet: the body is fixed at the first attempt (its <code>occurred_at</code>).
          </p>
        ) : (
          <>
            <p>Every attempt sends these exact bytes ({bodyBytes} bytes), signed anew: each attempt's timestamp and signature are below.</p>
            <pre class="payload" id="request-body">
              {delivery.body}
            </pre>
          </>
        )}
      </section>
      <section aria-labelledby="attempts">
        <h2 id="attempts">Attempts</h2>
        {delivery.attempts.length === 0 ? (
          <p>No attempts yet: the delivery is sent at its next attempt time, above.</p>
        ) : (
          <table>
            <thead>
              <tr>
                <th>Time</th>
                <th>Request sent</th>
                <th>Status code</th>
                <th>Error</th>
                <th>Latency</th>
                <th>Response</th>
              </tr>
            </thead>
            <tbody>
              {delivery.attempts.map((a) => (
                <tr class="attempt">
                  <td>
                    <When at={a.at} />
                  </td>
                  <td>
                    <RequestAsSent attempt={a} bodyBytes={bodyBytes} />
                  </td>
                  <td>{a.status_code ?? <span class="muted">no response</span>}</td>
                  <td>{a.error === null ? <span class="muted">none</span> : <VisibleText text={a.error} />}</td>
                  <td>{a.latency_ms} ms</td>
                  <td>
                    {a.response_snippet ? (
                      <code class="snippet">
                        <VisibleText text={a.response_snippet} />
                      </code>
                    ) : (
                      <span class="muted">empty</span>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </section>
    </Layout>
  );
}

export function endpointDetailPages(service: Service, accounts: () => PanelAccounts) {
  const pages = new Hono<PanelEnv>();
  const { endpoints } = service;

  const detail = async (merchantId: number, endpointId: number, filter: LogFilter) => {
    // The endpoint first: another merchant's id is a 404 before anything else is read.
    const endpoint = await endpoints.endpoint(merchantId, endpointId);
    const [deliveries, notifications, stats, stores] = await Promise.all([
      endpoints.deliveries(merchantId, endpointId, { ...filter, limit: PAGE_SIZE }),
      endpoints.notifications(merchantId, NOTIFICATIONS_READ),
      endpoints.attemptStats(merchantId, endpointId),
      service.admin.listStores(merchantId),
    ]);
    return {
      endpoint,
      deliveries,
      filter,
      stats,
      stores: storesById(stores),
      notifications: notifications.filter((n) => n.endpoint_id === endpointId).map(({ merchant_id: _, ...n }) => n),
    };
  };

  pages.get('/', async (c) => {
    const merchantId = merchantOf(c);
    const endpointId = idParam(c, 'endpointId', 'Webhook endpoint');
    const done = c.req.query('done');
    const notice =
      done === 'recovered' ? `${Number(c.req.query('count') ?? 0)} failed deliveries are queued again.` : noticeFor(DONE, done);
    // A refused resend, "Sign with the new secret now" or recovery, beside its action (refusals.ts).
    const refused = await refusalOf<{ since: string }>(c, accounts);
    return c.html(
      <EndpointDetailPage
        session={sessionOf(c)}
        merchantId={merchantId}
        {...(await detail(merchantId, endpointId, logFilter(c)))}
        notice={notice}
        error={refused?.error}
        errorAt={errorAtOf(refused?.at)}
        since={refused?.input?.since}
      />,
    );
  });

  pages.get('/deliveries/:deliveryId', async (c) => {
    const merchantId = merchantOf(c);
    const endpointId = idParam(c, 'endpointId', 'Webhook endpoint');
    const delivery = await endpoints.delivery(merchantId, endpointId, idParam(c, 'deliveryId', 'Delivery'));
    const [stores, original] = await Promise.all([
      service.admin.listStores(merchantId),
      delivery.replaces === null ? undefined : endpoints.delivery(merchantId, endpointId, delivery.replaces).catch(() => undefined),
    ]);
    const notice =
      c.req.query('done') === 'resent' && delivery.replaces !== null
        ? `Delivery #${delivery.id} is queued again as a new delivery: it re-sends #${delivery.replaces}.`
        : undefined;
    return c.html(
      <DeliveryPage
        session={sessionOf(c)}
        merchantId={merchantId}
        endpointId={endpointId}
        delivery={delivery}
        stores={storesById(stores)}
        original={original}
        notice={notice}
      />,
    );
  });

  pages.post('/deliveries/:deliveryId/resend', async (c) => {
    const session = sessionOf(c);
    const merchantId = merchantOf(c);
    const endpointId = idParam(c, 'endpointId', 'Webhook endpoint');
    const deliveryId = idParam(c, 'deliveryId', 'Delivery');
    const outcome = await formAction(() => endpoints.resend(merchantId, endpointId, deliveryId, principalName(session.principal)));
    if (outcome.error)
      return redirectRefused(c, accounts, detailPath(merchantId, endpointId), outcome.error, { at: 'deliveries' satisfies ErrorAt });
    // To the resend's own page: it says which delivery it replaces, and whether the receiver gets the payload once or twice.
    return c.redirect(`/panel/merchants/${merchantId}/endpoints/${endpointId}/deliveries/${outcome.ok.id}?done=resent`, 303);
  });

  // The confirmation step: the old secret stops signing at once.
  pages.get('/confirm-secret', async (c) => {
    const session = sessionOf(c);
    const merchantId = merchantOf(c);
    const endpoint = await endpoints.endpoint(merchantId, idParam(c, 'endpointId', 'Webhook endpoint'));
    const detailUrl = `/panel/merchants/${merchantId}/endpoints/${endpoint.id}`;
    if (!endpoint.secret_rotation) return c.redirect(detailUrl, 303);
    return c.html(
      <ConfirmPage
        session={session}
        merchantId={merchantId}
        title="Sign with the new secret now?"
        action={`${detailUrl}/confirm-secret`}
        button="Sign with the new secret now"
        cancel={detailUrl}
        danger={false}
      >
        <p>
          Every delivery to {endpoint.url} is signed with the new secret (<code>{endpoint.secret_rotation.new_secret_prefix}…</code>) from
          now on; the old one (<code>{endpoint.secret_prefix}…</code>) no longer verifies. Install the new secret on the receiver first.
        </p>
      </ConfirmPage>,
    );
  });

  // "Sign with the new secret now": ends a pending rotation (audited by the domain); 409 on the page when none is pending.
  pages.post('/confirm-secret', async (c) => {
    const session = sessionOf(c);
    const merchantId = merchantOf(c);
    const endpointId = idParam(c, 'endpointId', 'Webhook endpoint');
    const outcome = await formAction(() => endpoints.confirmSecret(merchantId, endpointId, principalName(session.principal)));
    if (outcome.error)
      return redirectRefused(c, accounts, detailPath(merchantId, endpointId), outcome.error, { at: 'secret' satisfies ErrorAt });
    return c.redirect(`/panel/merchants/${merchantId}/endpoints/${endpointId}?done=secret_confirmed`, 303);
  });

  pages.post('/recover', async (c) => {
    const session = sessionOf(c);
    const merchantId = merchantOf(c);
    const endpointId = idParam(c, 'endpointId', 'Webhook endpoint');
    const since = field(await formOf(c), 'since');
    const outcome = await formAction(() =>
      endpoints.recover(
        merchantId,
        endpointId,
        validated(RecoverDeliveriesInputSchema, { since: sinceOf(since) }).since,
        principalName(session.principal),
      ),
    );
    if (outcome.error)
      return redirectRefused(c, accounts, detailPath(merchantId, endpointId), outcome.error, {
        at: 'recover' satisfies ErrorAt,
        input: { since },
      });
    return c.redirect(`/panel/merchants/${merchantId}/endpoints/${endpointId}?done=recovered&count=${outcome.ok}`, 303);
  });

  return pages;
}
