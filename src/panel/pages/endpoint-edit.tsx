// Editing a webhook endpoint: its receiver URL, store and events, through the same
// domain call as the admin API's PATCH (service.endpoints.update, validated by its generated
// schema, audited by the domain as `endpoint.update`). The secret and the health stay as they are.
import { Hono } from 'hono';
import { WebhookEndpointUpdateSchema } from '../../generated/admin-routes.js';
import { principalName, type PanelAccounts, type PanelSession } from '../../admin/accounts.js';
import type { Service } from '../../service.js';
import type { StoreRecord } from '../../catalog/model.js';
import { field, fields, formOf, validated } from '../form.js';
import { formAction, idParam, merchantOf, sessionOf } from '../handlers.js';
import { CsrfField, ErrorMessage, Layout, type ShownError } from '../layout.js';
import { redirectRefused, refusalOf } from '../refusals.js';
import type { PanelEnv } from '../session.js';
import { ENDPOINT_FIELD_LABELS, EndpointFields, endpointOptions, formOptionsOf, type EndpointFormInput } from './endpoint-form.js';

function EditEndpointPage(props: {
  session: PanelSession;
  merchantId: number;
  endpointId: number;
  stores: StoreRecord[];
  input: EndpointFormInput;
  error?: ShownError | undefined;
}) {
  const { session, merchantId, endpointId } = props;
  const detail = `/panel/merchants/${merchantId}/endpoints/${endpointId}`;
  return (
    <Layout title={`Edit endpoint #${endpointId}`} session={session} merchantId={merchantId}>
      <p>
        <a href={detail}>Back to endpoint #{endpointId}</a>
      </p>
      <p>
        The signing secret and the endpoint's health stay as they are. Deliveries already queued go to the new URL from their next attempt;
        a change of store or events applies to changes recorded from now on.
      </p>
      <ErrorMessage error={props.error} labels={ENDPOINT_FIELD_LABELS} />
      <form class="stacked" method="post" action={`${detail}/edit`}>
        <CsrfField session={session} />
        <EndpointFields input={props.input} stores={props.stores} />
        <button type="submit">Save</button> <a href={detail}>Cancel</a>
      </form>
    </Layout>
  );
}

export function endpointEditPages(service: Service, accounts: () => PanelAccounts) {
  const pages = new Hono<PanelEnv>();
  const { endpoints, admin } = service;

  pages.get('/', async (c) => {
    const merchantId = merchantOf(c);
    // The endpoint first: another merchant's id is a 404 before anything else is read.
    const endpoint = await endpoints.endpoint(merchantId, idParam(c, 'endpointId', 'Webhook endpoint'));
    // After a refused save: the form as typed, with the reason (refusals.ts).
    const refused = await refusalOf<EndpointFormInput>(c, accounts);
    const input = refused?.input ?? { url: endpoint.url, store: endpoint.store ?? '', events: endpoint.events, ...formOptionsOf(endpoint) };
    return c.html(
      <EditEndpointPage
        session={sessionOf(c)}
        merchantId={merchantId}
        endpointId={endpoint.id}
        stores={await admin.listStores(merchantId)}
        input={input}
        error={refused?.error}
      />,
    );
  });

  pages.post('/', async (c) => {
    const session = sessionOf(c);
    const merchantId = merchantOf(c);
    // Another merchant's endpoint is a 404, whatever the form holds.
    const endpointId = (await endpoints.endpoint(merchantId, idParam(c, 'endpointId', 'Webhook endpoint'))).id;
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
      endpoints.update(
        merchantId,
        endpointId,
        validated(WebhookEndpointUpdateSchema, {
          url: input.url,
          store: input.store || null,
          events: input.events,
          ...endpointOptions(input),
        }),
        principalName(session.principal),
      ),
    );
    if (outcome.error)
      return redirectRefused(c, accounts, `/panel/merchants/${merchantId}/endpoints/${endpointId}/edit`, outcome.error, { input });
    return c.redirect(`/panel/merchants/${merchantId}/endpoints/${endpointId}?done=updated`, 303);
  });

  return pages;
}
