// Users of a merchant and the audit log (docs/panel.md#pages, "Users"): invite (the link is shown once to the
// operator or owner who invites, after a redirect: shown-once.tsx), list, remove; the pending
// invitation and reset links, each revocable; a password reset (e-mailed to the account
// itself, or shown to the operator). Removing, revoking and resetting have a confirmation step.
// Who may do what is the accounts domain's rule (the last owner cannot be removed).
import { Hono } from 'hono';
import type { Service } from '../../service.js';
import type { AuditEntry, PanelAccounts, PanelRole, PanelSession, PanelUser, PendingLink } from '../../admin/accounts.js';
import { ConfirmPage } from '../confirm.js';
import { field, formOf } from '../form.js';
import { formAction, idParam, merchantOf, sessionOf, type PanelContext } from '../handlers.js';
import { CsrfField, ErrorMessage, Layout, Notice, type ShownError } from '../layout.js';
import { noticeFor } from '../notices.js';
import { redirectRefused, refusalOf } from '../refusals.js';
import type { PanelEnv } from '../session.js';
import { ProblemError } from '../../shared/problem.js';
import { AlreadyShown, redirectToShownOnce, shownOnce } from '../shown-once.js';
import { Time, utcText } from '../time.js';

const AUDIT_ROWS = 100;

const DONE = {
  removed: 'The user is removed; their sessions ended and their pending links no longer work.',
  revoked: 'The link is revoked: it no longer works.',
  reset_sent: "A password reset link is e-mailed to the account's own address. Its current password works until the link is used.",
} as const satisfies Record<string, string>;

/** The invitation form's fields. */
interface InviteInput {
  email: string;
  role: PanelRole;
}

/** An invitation or reset link, between the POST that made it and the one page that shows it. */
interface ShownLink {
  kind: 'panel_link';
  purpose: 'invitation' | 'reset';
  email: string;
  role: PanelRole;
  expires_at: string;
  path: string;
  url: string;
}

function LinkShown(props: { link: ShownLink }) {
  const { link } = props;
  return (
    <section aria-labelledby="invitation">
      <h2 id="invitation">{link.purpose === 'reset' ? 'Password reset link' : 'Invitation link'}</h2>
      <p>
        {link.purpose === 'reset'
          ? `Hand this single-use link to ${link.email} only: whoever opens it sets the account's password. It works until ${utcText(link.expires_at)}.`
          : `Send this single-use link to the new user; it works until ${utcText(link.expires_at)}.`}{' '}
        It is shown this once.
      </p>
      <code class="secret" id="secret">
        <a href={link.path}>{link.url}</a>
      </code>
      <p>
        <button type="button" data-copy="#secret" hidden>
          Copy
        </button>
      </p>
    </section>
  );
}

function UsersPage(props: {
  session: PanelSession;
  merchantId: number;
  users: PanelUser[];
  links: PendingLink[];
  audit: AuditEntry[];
  sendsEmail: boolean;
  notice?: string | undefined;
  error?: ShownError | undefined;
  inviteError?: ShownError | undefined;
  shown?: ShownLink | undefined;
  /** The invitation form as typed, after a refusal. */
  invite?: InviteInput | undefined;
}) {
  const { session, merchantId } = props;
  const base = `/panel/merchants/${merchantId}/users`;
  const resetHelp =
    session.principal.kind === 'operator'
      ? 'A password reset gives you a single-use link for the account (also e-mailed to it when the deployment sends e-mail).'
      : props.sendsEmail
        ? "A password reset e-mails a single-use link to the account's own address; you never see it."
        : 'This deployment sends no e-mail: ask the operator to reset a password.';
  return (
    <Layout title="Users" session={session} merchantId={merchantId}>
      <Notice text={props.notice} />
      {props.shown && <LinkShown link={props.shown} />}
      <ErrorMessage error={props.error} />
      {props.users.length === 0 && <p>No users yet: invite the merchant's people below.</p>}
      <table>
        <thead>
          <tr>
            <th>E-mail</th>
            <th>Role</th>
            <th>Since</th>
            <th>Actions</th>
          </tr>
        </thead>
        <tbody>
          {props.users.map((u) => (
            <tr>
              <td>{u.email}</td>
              <td>{u.role}</td>
              <td>
                <Time at={u.created_at} />
              </td>
              <td>
                {(session.principal.kind === 'operator' || props.sendsEmail) && (
                  <>
                    <a href={`${base}/${u.id}/reset`}>Reset password…</a>{' '}
                  </>
                )}
                <a href={`${base}/${u.id}/remove`}>Remove…</a>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <p class="muted">{resetHelp}</p>
      <h2 id="pending-links">Pending invitations and resets</h2>
      {props.links.length === 0 ? (
        <p>No link is waiting to be used.</p>
      ) : (
        <table aria-labelledby="pending-links">
          <thead>
            <tr>
              <th>E-mail</th>
              <th>For</th>
              <th>Created</th>
              <th>Works until</th>
              <th>Actions</th>
            </tr>
          </thead>
          <tbody>
            {props.links.map((l) => (
              <tr data-link={l.id}>
                <td>{l.email}</td>
                <td>{l.purpose === 'reset' ? 'password reset' : `invitation as ${l.role}`}</td>
                <td>
                  <Time at={l.created_at} />
                </td>
                <td>
                  <Time at={l.expires_at} />
                </td>
                <td>
                  <a href={`${base}/links/${l.id}/revoke`}>Revoke…</a>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <h2>Invite a user</h2>
      <ErrorMessage error={props.inviteError} labels={{ email: 'E-mail', role: 'Role' }} />
      <p class="muted">
        A new invitation for an e-mail revokes its earlier links. An e-mail that already has an account cannot be invited again: reset its
        password instead.
      </p>
      <form class="stacked" method="post" action={base}>
        <CsrfField session={session} />
        <label>
          E-mail
          <input type="email" name="email" required value={props.invite?.email ?? ''} />
        </label>
        <label>
          Role
          <select name="role">
            <option value="member">member</option>
            <option value="owner" selected={props.invite?.role === 'owner'}>
              owner (can invite and remove users)
            </option>
          </select>
        </label>
        <button type="submit">Invite</button>
      </form>
      <h2>Audit log</h2>
      {props.audit.length === 0 && <p>Nothing recorded yet: every change made in the panel is listed here, with who made it and when.</p>}
      <table>
        <thead>
          <tr>
            <th>When</th>
            <th>Who</th>
            <th>What</th>
            <th>Detail</th>
          </tr>
        </thead>
        <tbody>
          {props.audit.map((a) => (
            <tr data-credential={a.credential} data-api-key={a.api_key?.id}>
              <td>
                <Time at={a.at} />
              </td>
              <td>{a.actor}</td>
              <td>{a.action}</td>
              <td>{a.detail}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </Layout>
  );
}

export function userPages(_service: Service, accounts: () => PanelAccounts) {
  const pages = new Hono<PanelEnv>();
  const listing = async (session: PanelSession, merchantId: number) => {
    const [users, links, audit] = await Promise.all([
      accounts().listUsers(session.principal, merchantId),
      accounts().listPendingLinks(session.principal, merchantId),
      accounts().auditLog(session.principal, merchantId, AUDIT_ROWS),
    ]);
    return { users, links, audit, sendsEmail: accounts().sendsEmail };
  };
  const page = async (
    c: PanelContext,
    extra: {
      notice?: string | undefined;
      error?: ShownError | undefined;
      inviteError?: ShownError | undefined;
      invite?: InviteInput | undefined;
      shown?: ShownLink;
    },
  ) => {
    const session = sessionOf(c);
    const merchantId = merchantOf(c);
    return c.html(<UsersPage session={session} merchantId={merchantId} {...(await listing(session, merchantId))} {...extra} />);
  };
  const usersUrl = (c: PanelContext) => `/panel/merchants/${merchantOf(c)}/users`;
  const shownLink = (c: PanelContext, link: Omit<ShownLink, 'kind' | 'path' | 'url'> & { token: string }) => {
    const { token, ...rest } = link;
    const path = `/panel/invitations/${encodeURIComponent(token)}`;
    return redirectToShownOnce(c, accounts, `${usersUrl(c)}/shown`, {
      kind: 'panel_link',
      ...rest,
      path,
      url: accounts().linkUrl(token),
    } satisfies ShownLink);
  };

  // The list, with a refused invitation beside its form, a refused removal or reset above (refusals.ts).
  pages.get('/', async (c) => {
    const refused = await refusalOf<InviteInput>(c, accounts);
    const invite = refused?.at === 'invite';
    return page(c, {
      notice: noticeFor(DONE, c.req.query('done')),
      error: invite ? undefined : refused?.error,
      inviteError: invite ? refused.error : undefined,
      invite: refused?.input,
    });
  });

  pages.post('/', async (c) => {
    const session = sessionOf(c);
    const merchantId = merchantOf(c);
    const form = await formOf(c);
    const input: InviteInput = { email: field(form, 'email'), role: field(form, 'role') === 'owner' ? 'owner' : 'member' };
    const outcome = await formAction(() => accounts().invite(session.principal, merchantId, input));
    if (outcome.error) return redirectRefused(c, accounts, usersUrl(c), outcome.error, { at: 'invite', input });
    return shownLink(c, { purpose: 'invitation', ...outcome.ok });
  });

  // The one page that shows a new link; a reload gets 410.
  pages.get('/shown/:shownId', async (c) => {
    const shown = await shownOnce<ShownLink>(c, accounts, 'panel_link');
    if (!shown) {
      return c.html(
        <AlreadyShown
          session={sessionOf(c)}
          merchantId={merchantOf(c)}
          what="The link"
          back={{ href: usersUrl(c), label: 'Back to the users' }}
          lost="If it was not copied, revoke it in the pending links and make a new one."
        />,
        410,
      );
    }
    const notice =
      shown.purpose === 'reset'
        ? `A password reset link for ${shown.email} works until ${utcText(shown.expires_at)}.`
        : `${shown.email} is invited as ${shown.role} until ${utcText(shown.expires_at)}.`;
    return page(c, { notice, shown });
  });

  pages.get('/:userId/remove', async (c) => {
    const session = sessionOf(c);
    const merchantId = merchantOf(c);
    const user = await userOf(c, session, merchantId);
    const self = session.principal.kind === 'user' && session.principal.user.id === user.id;
    return c.html(
      <ConfirmPage
        session={session}
        merchantId={merchantId}
        title="Remove the user?"
        action={`${usersUrl(c)}/${user.id}/remove`}
        button="Remove the user"
        cancel={usersUrl(c)}
      >
        <p>
          {self ? 'You' : user.email} ({user.role}) will no longer sign in for this merchant: every session of the account ends at once, and
          its pending links stop working.{self ? ' You are signed out.' : ''}
        </p>
      </ConfirmPage>,
    );
  });

  pages.post('/:userId/remove', async (c) => {
    const session = sessionOf(c);
    const merchantId = merchantOf(c);
    const outcome = await formAction(() => accounts().removeUser(session.principal, merchantId, idParam(c, 'userId', 'User')));
    if (outcome.error) return redirectRefused(c, accounts, usersUrl(c), outcome.error);
    return c.redirect(`${usersUrl(c)}?done=removed`, 303);
  });

  pages.get('/:userId/reset', async (c) => {
    const session = sessionOf(c);
    const merchantId = merchantOf(c);
    const user = await userOf(c, session, merchantId);
    const operator = session.principal.kind === 'operator';
    return c.html(
      <ConfirmPage
        session={session}
        merchantId={merchantId}
        title="Reset the password?"
        action={`${usersUrl(c)}/${user.id}/reset`}
        button={operator ? 'Make a reset link' : 'E-mail a reset link'}
        cancel={usersUrl(c)}
        danger={false}
      >
        <p>
          {operator
            ? `A single-use link that sets a new password for ${user.email} is shown to you once${accounts().sendsEmail ? ', and e-mailed to the account' : ''}.`
            : `A single-use link that sets a new password is e-mailed to ${user.email} itself.`}{' '}
          The current password keeps working until the link is used; then every session of the account ends. Earlier links for {user.email}{' '}
          stop working.
        </p>
      </ConfirmPage>,
    );
  });

  pages.post('/:userId/reset', async (c) => {
    const session = sessionOf(c);
    const merchantId = merchantOf(c);
    const outcome = await formAction(() => accounts().requestPasswordReset(session.principal, merchantId, idParam(c, 'userId', 'User')));
    if (outcome.error) return redirectRefused(c, accounts, usersUrl(c), outcome.error);
    const { token, email, role, expires_at } = outcome.ok;
    // An owner's reset went to the account's own e-mail: there is nothing to show.
    if (!token) return c.redirect(`${usersUrl(c)}?done=reset_sent`, 303);
    return shownLink(c, { purpose: 'reset', email, role, expires_at, token });
  });

  pages.get('/links/:linkId/revoke', async (c) => {
    const session = sessionOf(c);
    const merchantId = merchantOf(c);
    const linkId = idParam(c, 'linkId', 'Invitation');
    const link = (await accounts().listPendingLinks(session.principal, merchantId)).find((l) => l.id === linkId);
    if (!link) return c.redirect(usersUrl(c), 303);
    return c.html(
      <ConfirmPage
        session={session}
        merchantId={merchantId}
        title="Revoke the link?"
        action={`${usersUrl(c)}/links/${link.id}/revoke`}
        button="Revoke the link"
        cancel={usersUrl(c)}
      >
        <p>
          The {link.purpose === 'reset' ? 'password reset' : 'invitation'} link for {link.email} stops working at once.
        </p>
      </ConfirmPage>,
    );
  });

  pages.post('/links/:linkId/revoke', async (c) => {
    const session = sessionOf(c);
    await accounts().revokeLink(session.principal, merchantOf(c), idParam(c, 'linkId', 'Invitation'));
    return c.redirect(`${usersUrl(c)}?done=revoked`, 303);
  });

  /** The user of the URL, for a confirmation page (the list is the owners' and the operator's). */
  async function userOf(c: PanelContext, session: PanelSession, merchantId: number): Promise<PanelUser> {
    const userId = idParam(c, 'userId', 'User');
    const user = (await accounts().listUsers(session.principal, merchantId)).find((u) => u.id === userId);
    if (!user) throw new ProblemError('not_found', `User ${userId} does not exist.`);
    return user;
  }

  return pages;
}
