// API keys of a merchant (docs/panel.md#pages, "API keys"): list, create (the key shown once, after a
// redirect: shown-once.tsx), revoke with a confirmation step. Every change is one call of
// service.admin, then the audit log.
import { Hono } from 'hono';
import { CreateApiKeyInputSchema } from '../../generated/admin-routes.js';
import type { Service } from '../../service.js';
import type { ApiKeyRecord } from '../../tenancy/model.js';
import { principalName, type PanelAccounts, type PanelSession } from '../../admin/accounts.js';
import { field, formOf, validated } from '../form.js';
import { formAction, idParam, merchantOf, sessionOf } from '../handlers.js';
import { CsrfField, ErrorMessage, Layout, Notice, ShownOnce, type ShownError } from '../layout.js';
import { redirectRefused, refusalOf } from '../refusals.js';
import type { PanelEnv } from '../session.js';
import { AlreadyShown, redirectToShownOnce, shownOnce } from '../shown-once.js';
import { Time } from '../time.js';

/** A created key, between the POST and the one page that shows it. */
interface CreatedKey {
  kind: 'api_key';
  name: string;
  key: string;
}

function KeysPage(props: {
  session: PanelSession;
  merchantId: number;
  keys: ApiKeyRecord[];
  lastUsedSeconds: number;
  notice?: string | undefined;
  error?: ShownError | undefined;
  /** The name as typed, after a refusal. */
  name?: string | undefined;
}) {
  const { session, merchantId } = props;
  return (
    <Layout title="API keys" session={session} merchantId={merchantId}>
      <Notice text={props.notice} />
      {props.keys.length === 0 ? (
        <p>No API keys yet: create one below for each integration that reads the catalog.</p>
      ) : (
        <table>
          <thead>
            <tr>
              <th>Name</th>
              <th>Prefix</th>
              <th>Created</th>
              <th>Last used</th>
              <th>Revoked</th>
              <th></th>
            </tr>
          </thead>
          <tbody>
            {props.keys.map((k) => (
              <tr data-key={k.id}>
                <td>{k.name}</td>
                <td>
                  <code>{k.prefix}…</code>
                </td>
                <td>
                  <Time at={k.created_at} />
                </td>
                <td class="key-last-used">
                  <Time at={k.last_used_at} none="never" />
                </td>
                <td>
                  <Time at={k.revoked_at} />
                </td>
                <td>{!k.revoked_at && <a href={`/panel/merchants/${merchantId}/keys/${k.id}/revoke`}>Revoke…</a>}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {props.keys.length > 0 && (
        <p class="muted">
          A key's last use is written at most once every {props.lastUsedSeconds} s, not on every request: the time shown can lag by about
          that much.
        </p>
      )}
      <h2>Create a key</h2>
      <ErrorMessage error={props.error} labels={{ name: 'Name' }} />
      <form class="stacked" method="post" action={`/panel/merchants/${merchantId}/keys`}>
        <CsrfField session={session} />
        <label>
          Name (the integration that uses it)
          <input name="name" required maxlength={200} value={props.name ?? ''} />
        </label>
        <button type="submit">Create key</button>
      </form>
    </Layout>
  );
}

export function keyPages(service: Service, accounts: () => PanelAccounts) {
  const pages = new Hono<PanelEnv>();
  const { admin } = service;
  const lastUsedSeconds = service.config.apiKeyLastUsedSeconds;

  pages.get('/', async (c) => {
    const merchantId = merchantOf(c);
    const notice = c.req.query('done') === 'revoked' ? 'The key is revoked.' : undefined;
    // A refused name, beside the form, as typed (refusals.ts).
    const refused = await refusalOf<{ name: string }>(c, accounts);
    return c.html(
      <KeysPage
        session={sessionOf(c)}
        merchantId={merchantId}
        keys={await admin.listApiKeys(merchantId)}
        lastUsedSeconds={lastUsedSeconds}
        notice={notice}
        error={refused?.error}
        name={refused?.input?.name}
      />,
    );
  });

  pages.post('/', async (c) => {
    const session = sessionOf(c);
    const merchantId = merchantOf(c);
    const form = await formOf(c);
    const name = field(form, 'name');
    const outcome = await formAction(() =>
      admin.createApiKey(merchantId, validated(CreateApiKeyInputSchema, { name }).name, principalName(session.principal)),
    );
    if (outcome.error) return redirectRefused(c, accounts, `/panel/merchants/${merchantId}/keys`, outcome.error, { input: { name } });
    const created = outcome.ok;
    return redirectToShownOnce(c, accounts, `/panel/merchants/${merchantId}/keys/shown`, {
      kind: 'api_key',
      name: created.name,
      key: created.key,
    } satisfies CreatedKey);
  });

  pages.get('/shown/:shownId', async (c) => {
    const session = sessionOf(c);
    const merchantId = merchantOf(c);
    const back = { href: `/panel/merchants/${merchantId}/keys`, label: 'Back to the keys' };
    const created = await shownOnce<CreatedKey>(c, accounts, 'api_key');
    if (!created) {
      return c.html(
        <AlreadyShown
          session={session}
          merchantId={merchantId}
          what="The new API key"
          back={back}
          lost="If it was not copied, revoke that key and create another."
        />,
        410,
      );
    }
    return c.html(
      <Layout title="API key created" session={session} merchantId={merchantId}>
        <ShownOnce label={`API key "${created.name}"`} secret={created.key} />
        <p>
          <a href={back.href}>Done: back to the keys</a>
        </p>
      </Layout>,
    );
  });

  pages.get('/:keyId/revoke', async (c) => {
    const session = sessionOf(c);
    const merchantId = merchantOf(c);
    const keyId = idParam(c, 'keyId', 'API key');
    const key = (await admin.listApiKeys(merchantId)).find((k) => k.id === keyId && !k.revoked_at);
    if (!key) return c.redirect(`/panel/merchants/${merchantId}/keys`, 303);
    return c.html(
      <Layout title="Revoke the key?" session={session} merchantId={merchantId}>
        <p>
          Requests with "{key.name}" (<code>{key.prefix}…</code>) are refused from now on. This cannot be undone.
        </p>
        <form method="post" action={`/panel/merchants/${merchantId}/keys/${key.id}/revoke`}>
          <CsrfField session={session} />
          <button type="submit" class="danger">
            Revoke the key
          </button>{' '}
          <a href={`/panel/merchants/${merchantId}/keys`}>Cancel</a>
        </form>
      </Layout>,
    );
  });

  pages.post('/:keyId/revoke', async (c) => {
    const session = sessionOf(c);
    const merchantId = merchantOf(c);
    const keyId = idParam(c, 'keyId', 'API key');
    await admin.revokeApiKey(merchantId, keyId, principalName(session.principal));
    return c.redirect(`/panel/merchants/${merchantId}/keys?done=revoked`, 303);
  });

  return pages;
}
