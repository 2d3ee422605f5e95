// API keys of a merchant (docs/panel.md#pages, "API keys"): list with their scopes and stores,
// create (the operator and the merchant's owners, choosing scopes and stores; the key shown once,
// after a redirect: shown-once.tsx), revoke with a confirmation step. Every change is one call of
// service.admin, then the audit log.
import { Hono } from 'hono';
import { CreateApiKeyInputSchema } from '../../generated/admin-routes.js';
import type { Service } from '../../service.js';
import type { ApiKeyRecord } from '../../tenancy/model.js';
import { principalName, type PanelAccounts, type PanelSession } from '../../admin/accounts.js';
import { field, fields, formOf, validated } from '../form.js';
import { formAction, idParam, merchantOf, sessionOf } from '../handlers.js';
import { CsrfField, ErrorMessage, Layout, Notice, ShownOnce, type ShownError } from '../layout.js';
import { redirectRefused, refusalOf } from '../refusals.js';
import type { PanelEnv } from '../session.js';
import { AlreadyShown, redirectToShownOnce, shownOnce } from '../shown-once.js';
import { Time } from '../time.js';
import { SCOPES, type Scope } from '../../tenancy/credential.js';
import { ProblemError } from '../../shared/problem.js';
import type { StoreRecord } from '../../catalog/model.js';

/** What each scope lets a key do, as the form explains it. */
const SCOPE_HELP: Record<Scope, string> = {
  'catalog:read': 'read the published catalog (the public /v1 API)',
  'catalog:write': 'write the catalog through the admin API (stores, pricing, products, imports); reads it too',
  'webhooks:read': 'read the webhook endpoints, their deliveries and the notifications',
  'webhooks:write': 'create, edit and delete webhook endpoints, rotate secrets, test and resend; reads them too',
};

/** Issuing a key: the operator, or one of the merchant's owners (a member cannot). */
const issuesKeys = (session: PanelSession) => session.principal.kind === 'operator' || session.principal.user.role === 'owner';

/** The key form's fields, as typed. */
interface KeyInput {
  name: string;
  scopes: string[];
  stores: string[];
}

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
  stores: StoreRecord[];
  lastUsedSeconds: number;
  notice?: string | undefined;
  error?: ShownError | undefined;
  /** The form as filled in, after a refusal. */
  input?: KeyInput | undefined;
}) {
  const input = props.input ?? { name: '', scopes: ['catalog:read'], stores: [] };
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
              <th>Scopes</th>
              <th>Stores</th>
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
                <td class="key-scopes">{k.scopes.join(', ')}</td>
                <td class="key-stores">{k.stores ? k.stores.join(', ') : 'all'}</td>
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
      {issuesKeys(session) ? (
        <>
          <h2>Create a key</h2>
          <ErrorMessage error={props.error} labels={{ name: 'Name', scopes: 'Scopes', stores: 'Stores' }} />
          <form class="stacked" method="post" action={`/panel/merchants/${merchantId}/keys`}>
            <CsrfField session={session} />
            <label>
              Name (the integration that uses it)
              <input name="name" required maxlength={200} value={input.name} />
            </label>
            <fieldset class="key-scopes">
              <legend>Scopes (what the key may do; at least one)</legend>
              {SCOPES.map((scope) => (
                <label>
                  <input type="checkbox" name="scopes" value={scope} checked={input.scopes.includes(scope)} /> <code>{scope}</code>:{' '}
                  {SCOPE_HELP[scope]}
                </label>
              ))}
            </fieldset>
            {props.stores.length > 0 && (
              <fieldset class="key-stores">
                <legend>Stores (none ticked: every store; a key restricted to stores cannot hold catalog:write)</legend>
                {props.stores.map((store) => (
                  <label>
                    <input type="checkbox" name="stores" value={store.slug} checked={input.stores.includes(store.slug)} /> {store.name} (
                    <code>{store.slug}</code>)
                  </label>
                ))}
              </fieldset>
            )}
            <button type="submit">Create key</button>
          </form>
        </>
      ) : (
        <p class="muted">Keys are issued by the merchant's owners and the operator.</p>
      )}
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
    // A refused form, beside the form, as typed (refusals.ts).
    const refused = await refusalOf<KeyInput>(c, accounts);
    return c.html(
      <KeysPage
        session={sessionOf(c)}
        merchantId={merchantId}
        keys={await admin.listApiKeys(merchantId)}
        stores={await admin.listStores(merchantId)}
        lastUsedSeconds={lastUsedSeconds}
        notice={notice}
        error={refused?.error}
        input={refused?.input}
      />,
    );
  });

  pages.post('/', async (c) => {
    const session = sessionOf(c);
    const merchantId = merchantOf(c);
    if (!issuesKeys(session)) throw new ProblemError('forbidden', "Keys are issued by the merchant's owners and the operator.");
    const form = await formOf(c);
    const input: KeyInput = { name: field(form, 'name'), scopes: fields(form, 'scopes'), stores: fields(form, 'stores') };
    const outcome = await formAction(() => {
      // No store ticked: every store (the schema's null).
      const { name, scopes, stores } = validated(CreateApiKeyInputSchema, {
        name: input.name,
        scopes: input.scopes,
        stores: input.stores.length ? input.stores : null,
      });
      return admin.createApiKey(merchantId, name, principalName(session.principal), { scopes, stores });
    });
    if (outcome.error) return redirectRefused(c, accounts, `/panel/merchants/${merchantId}/keys`, outcome.error, { input });
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
