// Webhook endpoints of a merchant (docs/panel.md#pages, "Webhook endpoints"): the list with health, create
// (the signing secret shown once), rotate the secret (the new one shown once; the old one signs
// through a grace period: docs/webhooks.md#rotating-a-signing-secret), send a test, pause, re-enable, delete. Rotating and deleting
// have a confirmation step; a secret is shown once after a redirect (shown-once.tsx).
// Every change is one call of service.endpoints, then the audit log.
import { Hono } from 'hono';
import { WebhookEndpointInputSchema } from '../../generated/admin-routes.js';
import type { components } from '../../generated/admin-api.js';
import type { Service } from '../../service.js';
import type { StoreRecord } from '../../catalog/model.js';
import { EVENTS } from '../../webhooks/endpoints.js';
import { principalName, type PanelAccounts, type PanelSession } from '../../admin/accounts.js';
import { field, fields, formOf, validated } from '../form.js';
import { formAction, idParam, merchantOf, sessionOf } from '../handlers.js';
import { Health } from '../endpoint-health.js';
import { CsrfField, ErrorMessage, Layout, Notice, ShownOnce, type ShownError } from '../layout.js';
import { ConfirmPage } from '../confirm.js';
import { noticeFor } from '../notices.js';
import { redirectRefused, refusalOf } from '../refusals.js';
import type { PanelEnv } from '../session.js';
import { AlreadyShown, redirectToShownOnce, shownOnce } from '../shown-once.js';
import { Time } from '../time.js';
import { ENDPOINT_FIELD_LABELS as FIELD_LABELS, EndpointFields, endpointOptions, type EndpointFormInput } from './endpoint-form.js';

/** A new secret, between the POST that made it and the one page that shows it. */
type ShownSecret =
  | { kind: 'endpoint_secret'; created: true; url: string; events: string[]; store: string | null; secret: string }
  | {
      kind: 'endpoint_secret';
      created: false;
      url: string;
      endpointId: number;
      secret: string;
      oldPrefix: string;
      pendingUntil: string | null;
    };

type Endpoint = components['schemas']['WebhookEndpoint'];

const DONE: Record<string, string> = {
  test: 'A test delivery is queued.',
  enabled: 'The endpoint is active again.',
  paused: 'The endpoint is paused: nothing is sent until you enable it.',
  deleted: 'The endpoint is deleted.',
};

/** The secret that signs now, and a pending rotation: the new secret's prefix and until when the old one signs. */
export function SecretState(props: { endpoint: Endpoint }) {
  const { secret_prefix: signing, secret_rotation: rotation } = props.endpoint;
  return (
    <>
      <code>{signing}…</code> signs
      {rotation && (
        <div class="muted secret-rotation">
          rotation pending: <code>{rotation.new_secret_prefix}…</code> signs from <Time at={rotation.pending_until} />, or once confirmed
        </div>
      )}
    </>
  );
}

/** Ends a pending rotation now, after a confirmation (GET, then POST .../confirm-secret, endpoint-detail.tsx). */
export function ConfirmSecretButton(props: { session: PanelSession; base: string }) {
  return <a href={`${props.base}/confirm-secret`}>Sign with the new secret now…</a>;
}

function EndpointsPage(props: {
  session: PanelSession;
  merchantId: number;
  endpoints: Endpoint[];
  stores: StoreRecord[];
  notice?: string | undefined;
  error?: ShownError | undefined;
  input?: EndpointFormInput | undefined;
  /** The action the error comes from, where the page shows it: the registration form unless a row's `test:<id>`. */
  errorAt?: string | undefined;
}) {
  const { session, merchantId } = props;
  const base = `/panel/merchants/${merchantId}/endpoints`;
  const input = props.input ?? { url: '', store: '', events: [...EVENTS], standardWebhooks: false, fullPayload: false, maxPerSecond: '' };
  return (
    <Layout title="Webhook endpoints" session={session} merchantId={merchantId}>
      <Notice text={props.notice} />
      {props.endpoints.length === 0 ? (
        <p>No endpoints yet: register your receiver's URL below, and every change of the catalog is sent to it, signed.</p>
      ) : (
        <table>
          <thead>
            <tr>
              <th>URL</th>
              <th>Store</th>
              <th>Events</th>
              <th>Health</th>
              <th>Secret</th>
              <th>Actions</th>
            </tr>
          </thead>
          <tbody>
            {props.endpoints.map((e) => (
              <tr>
                <td>
                  <a href={`${base}/${e.id}`}>{e.url}</a>
                </td>
                <td>{e.store ?? 'all stores'}</td>
                <td>{e.events.join(', ')}</td>
                <td>
                  <Health endpoint={e} />
                </td>
                <td>
                  <SecretState endpoint={e} />
                </td>
                <td>
                  <form class="inline" method="post" action={`${base}/${e.id}/test`}>
                    <CsrfField session={session} />
                    <button type="submit">Send test</button>
                  </form>{' '}
                  <a href={`${base}/${e.id}/rotate`}>Rotate secret…</a>{' '}
                  {e.secret_rotation && (
                    <>
                      <ConfirmSecretButton session={session} base={`${base}/${e.id}`} />{' '}
                    </>
                  )}
                  {e.status !== 'active' && (
                    <form class="inline" method="post" action={`${base}/${e.id}/enable`}>
                      <CsrfField session={session} />
                      <button type="submit">Enable</button>
                    </form>
                  )}
                  {e.status === 'active' && (
                    <form class="inline" method="post" action={`${base}/${e.id}/pause`}>
                      <CsrfField session={session} />
                      <button type="submit">Pause</button>
                    </form>
                  )}{' '}
                  <a href={`${base}/${e.id}/edit`}>Edit…</a> <a href={`${base}/${e.id}/delete`}>Delete…</a>
                  {props.errorAt === `test:${e.id}` && <ErrorMessage error={props.error} />}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <h2>Register an endpoint</h2>
      {props.errorAt === undefined && <ErrorMessage error={props.error} labels={FIELD_LABELS} />}
      <form class="stacked" method="post" action={base}>
        <CsrfField session={session} />
        <EndpointFields input={input} stores={props.stores} />
        <button type="submit">Register</button>
      </form>
    </Layout>
  );
}

export function endpointPages(service: Service, accounts: () => PanelAccounts) {
  const pages = new Hono<PanelEnv>();
  const { endpoints, admin } = service;

  const listing = async (merchantId: number) => {
    const [list, stores] = await Promise.all([endpoints.list(merchantId), admin.listStores(merchantId)]);
    return { endpoints: list, stores };
  };

  // The list, with a refused registration or "Send test" beside its form (refusals.ts).
  pages.get('/', async (c) => {
    const merchantId = merchantOf(c);
    const refused = await refusalOf<EndpointFormInput>(c, accounts);
    return c.html(
      <EndpointsPage
        session={sessionOf(c)}
        merchantId={merchantId}
        {...(await listing(merchantId))}
        notice={noticeFor(DONE, c.req.query('done'))}
        error={refused?.error}
        errorAt={refused?.at}
        input={refused?.input}
      />,
    );
  });

  pages.post('/', async (c) => {
    const session = sessionOf(c);
    const merchantId = merchantOf(c);
    const form = await formOf(c);
    const input = {
      url: field(form, 'url'),
      store: field(form, 'store'),
      events: fields(form, 'events'),
      standardWebhooks: field(form, 'standard_webhooks') === 'on',
      fullPayload: field(form, 'full_payload') === 'on',
      maxPerSecond: field(form, 'max_per_second'),
    };
    const outcome = await formAction(() =>
      endpoints.create(
        merchantId,
        validated(WebhookEndpointInputSchema, {
          url: input.url,
          store: input.store || null,
          events: input.events,
          ...endpointOptions(input),
        }),
        principalName(session.principal),
      ),
    );
    if (outcome.error) return redirectRefused(c, accounts, `/panel/merchants/${merchantId}/endpoints`, outcome.error, { input });
    const created = outcome.ok;
    return redirectToShownOnce(c, accounts, `/panel/merchants/${merchantId}/endpoints/shown`, {
      kind: 'endpoint_secret',
      created: true,
      url: created.url,
      events: created.events,
      store: created.store,
      secret: created.secret,
    } satisfies ShownSecret);
  });

  // The one page that shows a new secret (after registering or rotating); a reload gets 410.
  pages.get('/shown/:shownId', async (c) => {
    const session = sessionOf(c);
    const merchantId = merchantOf(c);
    const list = `/panel/merchants/${merchantId}/endpoints`;
    const shown = await shownOnce<ShownSecret>(c, accounts, 'endpoint_secret');
    if (!shown) {
      return c.html(
        <AlreadyShown
          session={session}
          merchantId={merchantId}
          what="The signing secret"
          back={{ href: list, label: 'Back to the endpoints' }}
          lost="If it was not copied, rotate the endpoint's secret again."
        />,
        410,
      );
    }
    if (shown.created) {
      return c.html(
        <Layout title="Endpoint registered" session={session} merchantId={merchantId}>
          <p>
            {shown.url} receives {shown.events.join(', ')} for {shown.store ?? 'all stores'}.
          </p>
          <ShownOnce label="Signing secret" secret={shown.secret} />
          <p>
            <a href={list}>Done: back to the endpoints</a>
          </p>
        </Layout>,
      );
    }
    const detail = `${list}/${shown.endpointId}`;
    return c.html(
      <Layout title="Secret rotated" session={session} merchantId={merchantId}>
        {shown.pendingUntil ? (
          <>
            <p>
              The old secret (<code>{shown.oldPrefix}…</code>) of {shown.url} keeps signing deliveries until{' '}
              <Time at={shown.pendingUntil} />; from then on the new one does.
            </p>
            <ShownOnce label="New signing secret" secret={shown.secret} />
            <p>
              Install the new secret on the receiver beside the old one (verifying with either), then sign with the new secret now on the{' '}
              <a href={detail}>endpoint's page</a>, or let the grace period end.
            </p>
          </>
        ) : (
          <>
            <p>The new secret signs every delivery to {shown.url} from now on; the old one no longer does.</p>
            <ShownOnce label="New signing secret" secret={shown.secret} />
          </>
        )}
        <p>
          <a href={list}>Done: back to the endpoints</a>
        </p>
      </Layout>,
    );
  });

  // The confirmation step: rotating is a POST from this page only.
  pages.get('/:endpointId/rotate', async (c) => {
    const session = sessionOf(c);
    const merchantId = merchantOf(c);
    const endpoint = await endpoints.endpoint(merchantId, idParam(c, 'endpointId', 'Webhook endpoint'));
    const base = `/panel/merchants/${merchantId}/endpoints`;
    const grace = service.config.webhooks.secretGraceHours;
    return c.html(
      <ConfirmPage
        session={session}
        merchantId={merchantId}
        title="Rotate the signing secret?"
        action={`${base}/${endpoint.id}/rotate`}
        button="Rotate the secret"
        cancel={c.req.query('from') === 'detail' ? `${base}/${endpoint.id}` : base}
        danger={false}
      >
        <p>A new signing secret is made for {endpoint.url} and shown once on the next page.</p>
        {grace > 0 ? (
          <p>
            The current secret (<code>{endpoint.secret_prefix}…</code>) keeps signing for {grace} hours, or until you sign with the new one,
            so that the receiver can install it first.
          </p>
        ) : (
          <p>The new secret signs every delivery from now on: the receiver must be changed at once.</p>
        )}
        {endpoint.secret_rotation && (
          <p>
            The rotation pending now (<code>{endpoint.secret_rotation.new_secret_prefix}…</code>) is replaced: its secret will never sign.
          </p>
        )}
      </ConfirmPage>,
    );
  });

  pages.post('/:endpointId/rotate', async (c) => {
    const session = sessionOf(c);
    const merchantId = merchantOf(c);
    // Recorded in the audit log by the domain, in the rotation's transaction.
    const rotated = await endpoints.rotateSecret(
      merchantId,
      idParam(c, 'endpointId', 'Webhook endpoint'),
      principalName(session.principal),
    );
    return redirectToShownOnce(c, accounts, `/panel/merchants/${merchantId}/endpoints/shown`, {
      kind: 'endpoint_secret',
      created: false,
      url: rotated.url,
      endpointId: rotated.id,
      secret: rotated.secret,
      oldPrefix: rotated.secret_prefix,
      pendingUntil: rotated.secret_rotation?.pending_until ?? null,
    } satisfies ShownSecret);
  });

  pages.post('/:endpointId/test', async (c) => {
    const session = sessionOf(c);
    const merchantId = merchantOf(c);
    const endpointId = idParam(c, 'endpointId', 'Webhook endpoint');
    const outcome = await formAction(() => endpoints.sendTest(merchantId, endpointId, principalName(session.principal)));
    if (outcome.error)
      return redirectRefused(c, accounts, `/panel/merchants/${merchantId}/endpoints`, outcome.error, { at: `test:${endpointId}` });
    return c.redirect(`/panel/merchants/${merchantId}/endpoints?done=test`, 303);
  });

  // Enable and pause: one status change each, recorded, back to the list with a notice.
  for (const [action, status, done] of [
    ['enable', 'active', 'enabled'],
    ['pause', 'paused', 'paused'],
  ] as const) {
    pages.post(`/:endpointId/${action}`, async (c) => {
      const session = sessionOf(c);
      const merchantId = merchantOf(c);
      await endpoints.update(merchantId, idParam(c, 'endpointId', 'Webhook endpoint'), { status }, principalName(session.principal));
      return c.redirect(`/panel/merchants/${merchantId}/endpoints?done=${done}`, 303);
    });
  }

  // The confirmation step: deleting is a POST from this page only.
  pages.get('/:endpointId/delete', async (c) => {
    const session = sessionOf(c);
    const merchantId = merchantOf(c);
    const endpoint = await endpoints.endpoint(merchantId, idParam(c, 'endpointId', 'Webhook endpoint'));
    return c.html(
      <Layout title="Delete the endpoint?" session={session} merchantId={merchantId}>
        <p>{endpoint.url} will receive no more deliveries.</p>
        <form method="post" action={`/panel/merchants/${merchantId}/endpoints/${endpoint.id}/delete`}>
          <CsrfField session={session} />
          <button type="submit" class="danger">
            Delete the endpoint
          </button>{' '}
          <a href={`/panel/merchants/${merchantId}/endpoints`}>Cancel</a>
        </form>
      </Layout>,
    );
  });

  pages.post('/:endpointId/delete', async (c) => {
    const session = sessionOf(c);
    const merchantId = merchantOf(c);
    const endpointId = idParam(c, 'endpointId', 'Webhook endpoint');
    await endpoints.delete(merchantId, endpointId, principalName(session.principal));
    return c.redirect(`/panel/merchants/${merchantId}/endpoints?done=deleted`, 303);
  });

  return pages;
}
