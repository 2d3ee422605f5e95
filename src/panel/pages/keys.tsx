// API keys of a merchant (docs/panel.md#pages, "API keys"): list with their scopes, stores, allowed
// origins, expiry and last use, create (the operator and the merchant's owners, choosing scopes,
// stores, the browser origins and an expiry; the key shown once, after a redirect: shown-once.tsx),
// change a key's allowed origins, roll (the same people: a new key, the old one stopping now or up
// to 7 days later) and revoke with a confirmation step. Every change is one call of service.admin,
// then the audit log.
import { Hono } from 'hono';
import { CreateApiKeyInputSchema, UpdateApiKeyInputSchema } from '../../generated/admin-routes.js';
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

/** The key form's fields, as typed; `expires` one of EXPIRY_CHOICES' values. */
interface KeyInput {
  name: string;
  scopes: string[];
  stores: string[];
  expires?: string;
  /** The allowed origins as typed: one per line (or separated by spaces or commas). */
  origins?: string;
}

/** The origins of the form's text: one per line, or separated by spaces or commas. */
const originsOf = (text: string | undefined): string[] => (text ?? '').split(/[\s,]+/).filter((origin) => origin !== '');

const ORIGINS_HELP =
  "Allowed origins: the web origins whose pages may read the catalog with this key from their visitors' browsers (CORS), one per line, " +
  'exactly as the browser sends them (https://shop.example.com, http://localhost:5173: no path, no trailing slash). None: no browser page may use the key. ' +
  'A key used in a page is visible to whoever opens it: give it catalog:read alone and only the stores the page shows.';

const DAY_MS = 24 * 3600_000;

/** When a new key stops working, as the form offers it: from now, in days ('' never). */
const EXPIRY_CHOICES: readonly { value: string; label: string; days: number | null }[] = [
  { value: '', label: 'never (until revoked)', days: null },
  { value: '7', label: 'in 7 days', days: 7 },
  { value: '30', label: 'in 30 days', days: 30 },
  { value: '90', label: 'in 90 days', days: 90 },
  { value: '365', label: 'in a year', days: 365 },
];

/** When a rolled key's old secret stops, as the roll form offers it: from now, in hours (at most 7 days). */
const ROLL_CHOICES: readonly { value: string; label: string; hours: number }[] = [
  { value: '0', label: 'now', hours: 0 },
  { value: '1', label: 'in 1 hour', hours: 1 },
  { value: '24', label: 'in 24 hours', hours: 24 },
  { value: '72', label: 'in 3 days', hours: 72 },
  { value: '168', label: 'in 7 days', hours: 168 },
];

/** Whether the key still works at `now`: neither revoked nor expired. */
const isActive = (key: ApiKeyRecord, now: Date) => !key.revoked_at && !(key.expires_at && Date.parse(key.expires_at) <= now.getTime());

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
  now: Date;
  notice?: string | undefined;
  error?: ShownError | undefined;
  /** The form as filled in, after a refusal. */
  input?: KeyInput | undefined;
}) {
  const input = props.input ?? { name: '', scopes: ['catalog:read'], stores: [] };
  const { session, merchantId, now } = props;
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
              <th>Allowed origins</th>
              <th>Created</th>
              <th>Expires</th>
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
                <td class="key-origins">
                  {k.allowed_origins.length ? k.allowed_origins.join(', ') : <span class="muted">none</span>}
                  {isActive(k, now) && issuesKeys(session) && (
                    <>
                      {' '}
                      <a href={`/panel/merchants/${merchantId}/keys/${k.id}/origins`}>Change…</a>
                    </>
                  )}
                </td>
                <td>
                  <Time at={k.created_at} />
                </td>
                <td class="key-expires">
                  <Time at={k.expires_at} none="never" />
                  {k.expires_at && !k.revoked_at && Date.parse(k.expires_at) <= now.getTime() && ' (expired)'}
                  {k.rolled_from !== null && <span class="muted"> rolled from key {k.rolled_from}</span>}
                </td>
                <td class="key-last-used">
                  <Time at={k.last_used_at} none="never" />
                </td>
                <td>
                  <Time at={k.revoked_at} />
                </td>
                <td>
                  {isActive(k, now) && issuesKeys(session) && (
                    <>
                      <a href={`/panel/merchants/${merchantId}/keys/${k.id}/roll`}>Roll…</a>{' '}
                    </>
                  )}
                  {!k.revoked_at && <a href={`/panel/merchants/${merchantId}/keys/${k.id}/revoke`}>Revoke…</a>}
                </td>
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
          <ErrorMessage
            error={props.error}
            labels={{ name: 'Name', scopes: 'Scopes', stores: 'Stores', allowed_origins: 'Allowed origins' }}
          />
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
            <label>
              {ORIGINS_HELP}
              <textarea name="origins" rows={2} placeholder="https://shop.example.com">
                {input.origins ?? ''}
              </textarea>
            </label>
            <label>
              Expires
              <select name="expires">
                {EXPIRY_CHOICES.map((choice) => (
                  <option value={choice.value} selected={(input.expires ?? '') === choice.value}>
                    {choice.label}
                  </option>
                ))}
              </select>
            </label>
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
    const done = c.req.query('done');
    const notice = done === 'revoked' ? 'The key is revoked.' : done === 'origins' ? "The key's allowed origins are saved." : undefined;
    // A refused form, beside the form, as typed (refusals.ts).
    const refused = await refusalOf<KeyInput>(c, accounts);
    return c.html(
      <KeysPage
        session={sessionOf(c)}
        merchantId={merchantId}
        keys={await admin.listApiKeys(merchantId)}
        stores={await admin.listStores(merchantId)}
        lastUsedSeconds={lastUsedSeconds}
        now={service.now()}
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
    const input: KeyInput = {
      name: field(form, 'name'),
      scopes: fields(form, 'scopes'),
      stores: fields(form, 'stores'),
      expires: field(form, 'expires'),
      origins: field(form, 'origins'),
    };
    const days = EXPIRY_CHOICES.find((choice) => choice.value === input.expires)?.days ?? null;
    const outcome = await formAction(() => {
      // No store ticked: every store (the schema's null).
      const { name, scopes, stores, expires_at, allowed_origins } = validated(CreateApiKeyInputSchema, {
        name: input.name,
        scopes: input.scopes,
        stores: input.stores.length ? input.stores : null,
        expires_at: days === null ? null : new Date(service.now().getTime() + days * DAY_MS).toISOString(),
        allowed_origins: originsOf(input.origins),
      });
      return admin.createApiKey(merchantId, name, principalName(session.principal), { scopes, stores, expires_at, allowed_origins });
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

  pages.get('/:keyId/roll', async (c) => {
    const session = sessionOf(c);
    const merchantId = merchantOf(c);
    const keyId = idParam(c, 'keyId', 'API key');
    const key = (await admin.listApiKeys(merchantId)).find((k) => k.id === keyId && isActive(k, service.now()));
    if (!key || !issuesKeys(session)) return c.redirect(`/panel/merchants/${merchantId}/keys`, 303);
    return c.html(
      <Layout title="Roll the key?" session={session} merchantId={merchantId}>
        <p>
          A new key "{key.name}" is issued with the same scopes ({key.scopes.join(', ')}) and stores (
          {key.stores ? key.stores.join(', ') : 'all'}), shown once. The old key (<code>{key.prefix}…</code>) keeps working until the time
          chosen here, so the integration can switch to the new one first; then it is refused.
        </p>
        <form class="stacked" method="post" action={`/panel/merchants/${merchantId}/keys/${key.id}/roll`}>
          <CsrfField session={session} />
          <label>
            The old key stops working
            <select name="old_expires">
              {ROLL_CHOICES.map((choice) => (
                <option value={choice.value}>{choice.label}</option>
              ))}
            </select>
          </label>
          <button type="submit">Roll the key</button> <a href={`/panel/merchants/${merchantId}/keys`}>Cancel</a>
        </form>
      </Layout>,
    );
  });

  pages.post('/:keyId/roll', async (c) => {
    const session = sessionOf(c);
    const merchantId = merchantOf(c);
    const keyId = idParam(c, 'keyId', 'API key');
    if (!issuesKeys(session)) throw new ProblemError('forbidden', "Keys are rolled by the merchant's owners and the operator.");
    const form = await formOf(c);
    const hours = ROLL_CHOICES.find((choice) => choice.value === field(form, 'old_expires'))?.hours ?? 0;
    const oldExpiresAt = new Date(service.now().getTime() + hours * 3600_000).toISOString();
    const outcome = await formAction(() => admin.rollApiKey(merchantId, keyId, principalName(session.principal), oldExpiresAt));
    if (outcome.error) return redirectRefused(c, accounts, `/panel/merchants/${merchantId}/keys`, outcome.error, undefined);
    const rolled = outcome.ok;
    return redirectToShownOnce(c, accounts, `/panel/merchants/${merchantId}/keys/shown`, {
      kind: 'api_key',
      name: rolled.name,
      key: rolled.key,
    } satisfies CreatedKey);
  });

  pages.get('/:keyId/origins', async (c) => {
    const session = sessionOf(c);
    const merchantId = merchantOf(c);
    const keyId = idParam(c, 'keyId', 'API key');
    const key = (await admin.listApiKeys(merchantId)).find((k) => k.id === keyId && isActive(k, service.now()));
    if (!key || !issuesKeys(session)) return c.redirect(`/panel/merchants/${merchantId}/keys`, 303);
    const refused = await refusalOf<{ origins: string }>(c, accounts);
    return c.html(
      <Layout title="Allowed origins" session={session} merchantId={merchantId}>
        <p>
          Key "{key.name}" (<code>{key.prefix}…</code>). Its secret, scopes and stores stay as they are.
        </p>
        <ErrorMessage error={refused?.error} labels={{ allowed_origins: 'Allowed origins' }} />
        <form class="stacked" method="post" action={`/panel/merchants/${merchantId}/keys/${key.id}/origins`}>
          <CsrfField session={session} />
          <label>
            {ORIGINS_HELP}
            <textarea name="origins" rows={4} placeholder="https://shop.example.com">
              {refused?.input?.origins ?? key.allowed_origins.join('\n')}
            </textarea>
          </label>
          <button type="submit">Save the origins</button> <a href={`/panel/merchants/${merchantId}/keys`}>Cancel</a>
        </form>
      </Layout>,
    );
  });

  pages.post('/:keyId/origins', async (c) => {
    const session = sessionOf(c);
    const merchantId = merchantOf(c);
    const keyId = idParam(c, 'keyId', 'API key');
    if (!issuesKeys(session)) throw new ProblemError('forbidden', "Keys are changed by the merchant's owners and the operator.");
    const form = await formOf(c);
    const input = { origins: field(form, 'origins') };
    const outcome = await formAction(() => {
      const patch = validated(UpdateApiKeyInputSchema, { allowed_origins: originsOf(input.origins) });
      return admin.updateApiKey(merchantId, keyId, patch, principalName(session.principal));
    });
    const page = `/panel/merchants/${merchantId}/keys/${keyId}/origins`;
    if (outcome.error) return redirectRefused(c, accounts, page, outcome.error, { input });
    return c.redirect(`/panel/merchants/${merchantId}/keys?done=origins`, 303);
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
