// Users of a merchant and the audit log (issue 11, "Users"): invite (the link is shown to the
// operator or owner who invites), list, remove. Who may do it is the accounts domain's rule.
import { Hono } from 'hono';
import type { Service } from '../../service.js';
import type { AuditEntry, PanelAccounts, PanelRole, PanelSession, PanelUser } from '../../admin/accounts.js';
import { field, formOf } from '../form.js';
import { formAction, idParam, merchantOf, sessionOf } from '../handlers.js';
import { CsrfField, ErrorMessage, Layout, Notice } from '../layout.js';
import type { PanelEnv } from '../session.js';
import { Time, utcText } from '../time.js';

const AUDIT_ROWS = 100;

function UsersPage(props: {
  session: PanelSession; merchantId: number; users: PanelUser[]; audit: AuditEntry[];
  notice?: string | undefined; error?: { detail: string } | undefined; invitation?: { path: string; url: string };
}) {
  const { session, merchantId } = props;
  return (
    <Layout title="Users" session={session} merchantId={merchantId}>
      <Notice text={props.notice} />
      {props.invitation && (
        <section aria-labelledby="invitation">
          <h2 id="invitation">Invitation link</h2>
          <p>Send this single-use link to the new user; it is valid for 72 hours.</p>
          <code class="secret" id="secret"><a href={props.invitation.path}>{props.invitation.url}</a></code>
          <p><button type="button" data-copy="#secret" hidden>Copy</button></p>
        </section>
      )}
      {props.users.length === 0 && <p>No users yet: invite the merchant's people below.</p>}
      <table>
        <thead><tr><th>E-mail</th><th>Role</th><th>Since</th><th></th></tr></thead>
        <tbody>
          {props.users.map((u) => (
            <tr>
              <td>{u.email}</td><td>{u.role}</td><td><Time at={u.created_at} /></td>
              <td>
                <form class="inline" method="post" action={`/panel/merchants/${merchantId}/users/${u.id}/remove`}>
                  <CsrfField session={session} /><button type="submit" class="danger">Remove</button>
                </form>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <h2>Invite a user</h2>
      <ErrorMessage error={props.error} labels={{ email: 'E-mail', role: 'Role' }} />
      <form class="stacked" method="post" action={`/panel/merchants/${merchantId}/users`}>
        <CsrfField session={session} />
        <label>E-mail<input type="email" name="email" required /></label>
        <label>Role
          <select name="role"><option value="member">member</option><option value="owner">owner (can invite and remove users)</option></select>
        </label>
        <button type="submit">Invite</button>
      </form>
      <h2>Audit log</h2>
      {props.audit.length === 0 && <p>Nothing recorded yet: every change made in the panel is listed here, with who made it and when.</p>}
      <table>
        <thead><tr><th>When</th><th>Who</th><th>What</th><th>Detail</th></tr></thead>
        <tbody>{props.audit.map((a) => <tr><td><Time at={a.at} /></td><td>{a.actor}</td><td>{a.action}</td><td>{a.detail}</td></tr>)}</tbody>
      </table>
    </Layout>
  );
}

export function userPages(service: Service, accounts: () => PanelAccounts) {
  const pages = new Hono<PanelEnv>();
  const listing = async (session: PanelSession, merchantId: number) => {
    const [users, audit] = await Promise.all([
      accounts().listUsers(session.principal, merchantId), accounts().auditLog(session.principal, merchantId, AUDIT_ROWS),
    ]);
    return { users, audit };
  };

  pages.get('/', async (c) => {
    const session = sessionOf(c);
    const merchantId = merchantOf(c);
    const notice = c.req.query('done') === 'removed' ? 'The user is removed.' : undefined;
    return c.html(<UsersPage session={session} merchantId={merchantId} {...await listing(session, merchantId)} notice={notice} />);
  });

  pages.post('/', async (c) => {
    const session = sessionOf(c);
    const merchantId = merchantOf(c);
    const form = await formOf(c);
    const role = (field(form, 'role') === 'owner' ? 'owner' : 'member') satisfies PanelRole;
    const outcome = await formAction(() => accounts().invite(session.principal, merchantId, { email: field(form, 'email'), role }));
    if (outcome.error) {
      return c.html(<UsersPage session={session} merchantId={merchantId} {...await listing(session, merchantId)} error={outcome.error} />, outcome.error.status as 400);
    }
    await accounts().record(session.principal, merchantId, 'user.invite', `${outcome.ok.email} as ${outcome.ok.role}`);
    const path = `/panel/invitations/${encodeURIComponent(outcome.ok.token)}`;
    return c.html(
      <UsersPage session={session} merchantId={merchantId} {...await listing(session, merchantId)}
        notice={`${outcome.ok.email} is invited as ${outcome.ok.role} until ${utcText(outcome.ok.expires_at)}.`} invitation={{ path, url: `${service.config.publicBaseUrl}${path}` }} />,
      201,
    );
  });

  pages.post('/:userId/remove', async (c) => {
    const session = sessionOf(c);
    const merchantId = merchantOf(c);
    const userId = idParam(c, 'userId', 'User');
    await accounts().removeUser(session.principal, merchantId, userId);
    await accounts().record(session.principal, merchantId, 'user.remove', `user ${userId}`);
    return c.redirect(`/panel/merchants/${merchantId}/users?done=removed`, 303);
  });

  return pages;
}
