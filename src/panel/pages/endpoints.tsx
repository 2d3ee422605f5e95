// Webhook endpoints of a merchant (issue 11, "Webhook endpoints"): the list with health, create
// (the signing secret shown once), rotate the secret (the new one shown once; the old one signs
// through a grace period: issue 21.4), send a test, pause, re-enable, delete
// with a confirmation step. Every change is one call of service.endpoints, then the audit log.
import { Hono } from 'hono';
import { WebhookEndpointInputSchema } from '../../generated/admin-routes.js';
import type { components } from '../../generated/admin-api.js';
import type { Service } from '../../service.js';
import type { StoreRecord } from '../../storage/records.js';
import { EVENTS } from '../../webhooks/endpoints.js';
import { principalName, type PanelAccounts, type PanelSession } from '../../admin/accounts.js';
import { field, fields, formOf, validated } from '../form.js';
import { formAction, idParam, merchantOf, sessionOf } from '../handlers.js';
import { Health } from '../endpoint-health.js';
import { CsrfField, ErrorMessage, Layout, Notice, ShownOnce, type ShownError } from '../layout.js';
import type { PanelEnv } from '../session.js';
import { Time } from '../time.js';

/** The registration form's labels, for its errors (plain-words.ts). */
const FIELD_LABELS = { url: 'Receiver URL', store: 'Store', events: 'Events' };

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
          rotation pending: <code>{rotation.new_secret_prefix}…</code> signs from{' '}
          <Time at={rotation.pending_until} />, or once confirmed
        </div>
      )}
    </>
  );
}

/** Ends a pending rotation now (POST .../confirm-secret, endpoint-detail.tsx). */
export function ConfirmSecretButton(props: { session: PanelSession; base: string }) {
  return (
    <form class="inline" method="post" action={`${props.base}/confirm-secret`}>
      <CsrfField session={props.session} /><button type="submit">Sign with the new secret now</button>
    </form>
  );
}

function EndpointsPage(props: {
  session: PanelSession; merchantId: number; endpoints: Endpoint[]; stores: StoreRecord[];
  notice?: string | undefined; error?: ShownError | undefined; input?: { url: string; store: string; events: string[] };
  /** The action the error comes from, where the page shows it: the registration form unless a row's `test:<id>`. */
  errorAt?: string;
}) {
  const { session, merchantId } = props;
  const base = `/panel/merchants/${merchantId}/endpoints`;
  const input = props.input ?? { url: '', store: '', events: [...EVENTS] };
  return (
    <Layout title="Webhook endpoints" session={session} merchantId={merchantId}>
      <Notice text={props.notice} />
      {props.endpoints.length === 0 ? <p>No endpoints yet: register your receiver's URL below, and every change of the catalog is sent to it, signed.</p> : (
        <table>
          <thead><tr><th>URL</th><th>Store</th><th>Events</th><th>Health</th><th>Secret</th><th>Actions</th></tr></thead>
          <tbody>
            {props.endpoints.map((e) => (
              <tr>
                <td><a href={`${base}/${e.id}`}>{e.url}</a></td>
                <td>{e.store ?? 'all stores'}</td>
                <td>{e.events.join(', ')}</td>
                <td><Health endpoint={e} /></td>
                <td><SecretState endpoint={e} /></td>
                <td>
                  <form class="inline" method="post" action={`${base}/${e.id}/test`}><CsrfField session={session} /><button type="submit">Send test</button></form>{' '}
                  <form class="inline" method="post" action={`${base}/${e.id}/rotate`}><CsrfField session={session} /><button type="submit">Rotate secret</button></form>{' '}
                  {e.secret_rotation && <><ConfirmSecretButton session={session} base={`${base}/${e.id}`} />{' '}</>}
                  {e.status !== 'active' && (
                    <form class="inline" method="post" action={`${base}/${e.id}/enable`}><CsrfField session={session} /><button type="submit">Enable</button></form>
                  )}
                  {e.status === 'active' && (
                    <form class="inline" method="post" action={`${base}/${e.id}/pause`}><CsrfField session={session} /><button type="submit">Pause</button></form>
                  )}{' '}
                  <a href={`${base}/${e.id}/delete`}>Delete…</a>
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
        <label>Receiver URL<input type="url" name="url" required value={input.url} /></label>
        <label>Store
          <select name="store">
            <option value="" selected={input.store === ''}>All stores</option>
            {props.stores.map((s) => <option value={s.slug} selected={input.store === s.slug}>{s.name} ({s.slug})</option>)}
          </select>
        </label>
        <fieldset>
          <legend>Events</legend>
          {EVENTS.map((event) => <label><input type="checkbox" name="events" value={event} checked={input.events.includes(event)} /> {event}</label>)}
        </fieldset>
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

  pages.get('/', async (c) => {
    const merchantId = merchantOf(c);
    return c.html(<EndpointsPage session={sessionOf(c)} merchantId={merchantId} {...await listing(merchantId)} notice={DONE[c.req.query('done') ?? '']} />);
  });

  pages.post('/', async (c) => {
    const session = sessionOf(c);
    const merchantId = merchantOf(c);
    const form = await formOf(c);
    const input = { url: field(form, 'url'), store: field(form, 'store'), events: fields(form, 'events') };
    const outcome = await formAction(() => endpoints.create(merchantId, validated(WebhookEndpointInputSchema, {
      url: input.url, store: input.store || null, events: input.events,
    })));
    if (outcome.error) {
      return c.html(<EndpointsPage session={session} merchantId={merchantId} {...await listing(merchantId)} error={outcome.error} input={input} />, outcome.error.status as 400);
    }
    const created = outcome.ok;
    await accounts().record(session.principal, merchantId, 'endpoint.create', `endpoint ${created.id} ${created.url}`);
    // The secret is in this response and nowhere else: no redirect could carry it without storing it.
    return c.html(
      <Layout title="Endpoint registered" session={session} merchantId={merchantId}>
        <p>{created.url} receives {created.events.join(', ')} for {created.store ?? 'all stores'}.</p>
        <ShownOnce label="Signing secret" secret={created.secret} />
        <p><a href={`/panel/merchants/${merchantId}/endpoints`}>Done: back to the endpoints</a></p>
      </Layout>,
      201,
    );
  });

  pages.post('/:endpointId/rotate', async (c) => {
    const session = sessionOf(c);
    const merchantId = merchantOf(c);
    // Recorded in the audit log by the domain, in the rotation's transaction.
    const rotated = await endpoints.rotateSecret(merchantId, idParam(c, 'endpointId', 'Webhook endpoint'), principalName(session.principal));
    const rotation = rotated.secret_rotation;
    const detail = `/panel/merchants/${merchantId}/endpoints/${rotated.id}`;
    return c.html(
      <Layout title="Secret rotated" session={session} merchantId={merchantId}>
        {rotation ? (
          <>
            <p>
              The old secret (<code>{rotated.secret_prefix}…</code>) of {rotated.url} keeps signing deliveries
              until <Time at={rotation.pending_until} />; from then on the new one does.
            </p>
            <ShownOnce label="New signing secret" secret={rotated.secret} />
            <p>
              Install the new secret on the receiver beside the old one (verifying with either), then sign with the
              new secret now on the <a href={detail}>endpoint's page</a>, or let the grace period end.
            </p>
          </>
        ) : (
          <>
            <p>The new secret signs every delivery to {rotated.url} from now on; the old one no longer does.</p>
            <ShownOnce label="New signing secret" secret={rotated.secret} />
          </>
        )}
        <p><a href={`/panel/merchants/${merchantId}/endpoints`}>Done: back to the endpoints</a></p>
      </Layout>,
    );
  });

  pages.post('/:endpointId/test', async (c) => {
    const session = sessionOf(c);
    const merchantId = merchantOf(c);
    const endpointId = idParam(c, 'endpointId', 'Webhook endpoint');
    const outcome = await formAction(() => endpoints.sendTest(merchantId, endpointId));
    if (outcome.error) {
      return c.html(<EndpointsPage session={session} merchantId={merchantId} {...await listing(merchantId)} error={outcome.error} errorAt={`test:${endpointId}`} />, outcome.error.status as 409);
    }
    await accounts().record(session.principal, merchantId, 'endpoint.send_test', `endpoint ${endpointId}: delivery ${outcome.ok.id}`);
    return c.redirect(`/panel/merchants/${merchantId}/endpoints?done=test`, 303);
  });

  // Enable and pause: one status change each, recorded, back to the list with a notice.
  for (const [action, status, done] of [['enable', 'active', 'enabled'], ['pause', 'paused', 'paused']] as const) {
    pages.post(`/:endpointId/${action}`, async (c) => {
      const session = sessionOf(c);
      const merchantId = merchantOf(c);
      const changed = await endpoints.update(merchantId, idParam(c, 'endpointId', 'Webhook endpoint'), { status });
      await accounts().record(session.principal, merchantId, `endpoint.${action}`, `endpoint ${changed.id} ${changed.url}`);
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
          <button type="submit" class="danger">Delete the endpoint</button>{' '}
          <a href={`/panel/merchants/${merchantId}/endpoints`}>Cancel</a>
        </form>
      </Layout>,
    );
  });

  pages.post('/:endpointId/delete', async (c) => {
    const session = sessionOf(c);
    const merchantId = merchantOf(c);
    const endpointId = idParam(c, 'endpointId', 'Webhook endpoint');
    await endpoints.delete(merchantId, endpointId);
    await accounts().record(session.principal, merchantId, 'endpoint.delete', `endpoint ${endpointId}`);
    return c.redirect(`/panel/merchants/${merchantId}/endpoints?done=deleted`, 303);
  });

  return pages;
}
