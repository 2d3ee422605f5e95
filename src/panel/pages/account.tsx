// The signed-in user's own account: change the password with the current one. Every
// other session of the account ends (this one stays), and the account is told by e-mail when the
// deployment sends e-mail. The operator has no password here (it signs in with the admin token).
import { Hono } from 'hono';
import type { PanelAccounts, PanelSession } from '../../admin/accounts.js';
import { field, formOf } from '../form.js';
import { formAction, sessionOf } from '../handlers.js';
import { CsrfField, ErrorMessage, Layout, Notice, type ShownError } from '../layout.js';
import { redirectRefused, refusalOf } from '../refusals.js';
import { Time } from '../time.js';
import type { PanelEnv } from '../session.js';
import type { AddressOf } from './sign-in.js';

function AccountPage(props: { session: PanelSession; notice?: string | undefined; error?: ShownError | undefined }) {
  const { session } = props;
  const user = session.principal.kind === 'user' ? session.principal.user : undefined;
  return (
    <Layout title="Your account" session={session} {...(user ? { merchantId: user.merchant_id } : {})}>
      <Notice text={props.notice} />
      {!user ? (
        <p>
          The operator signs in with the admin token (<code>CPS_ADMIN_TOKEN</code>) and has no password to change here.
        </p>
      ) : (
        <>
          <p>
            {user.email}, {user.role} since <Time at={user.created_at} />.
          </p>
          <h2>Change your password</h2>
          <p class="muted">Every other session of your account is signed out; this one stays.</p>
          <ErrorMessage error={props.error} labels={{ current_password: 'Current password', new_password: 'New password' }} />
          <form class="stacked" method="post" action="/panel/account/password">
            <CsrfField session={session} />
            <input type="text" name="username" autocomplete="username" value={user.email} hidden readonly />
            <label>
              Current password
              <input type="password" name="current_password" autocomplete="current-password" required />
            </label>
            <label>
              New password
              <input type="password" name="new_password" autocomplete="new-password" minlength={12} required />
            </label>
            <button type="submit">Change password</button>
          </form>
        </>
      )}
    </Layout>
  );
}

export function accountPages(accounts: () => PanelAccounts, addressOf: AddressOf) {
  const pages = new Hono<PanelEnv>();

  pages.get('/', async (c) => {
    const ended = c.req.query('ended');
    const notice =
      ended === undefined
        ? undefined
        : `Your password is changed; ${/^[0-9]{1,6}$/.test(ended) ? ended : 'every'} other session(s) of your account signed out.`;
    // A refused change, above the form (refusals.ts); the passwords typed are never kept.
    const refused = await refusalOf(c, accounts);
    return c.html(<AccountPage session={sessionOf(c)} notice={notice} error={refused?.error} />);
  });

  pages.post('/password', async (c) => {
    const session = sessionOf(c);
    const form = await formOf(c);
    const outcome = await formAction(() =>
      accounts().changePassword(
        session.principal,
        c.get('sessionToken')!,
        field(form, 'current_password'),
        field(form, 'new_password'),
        addressOf(c),
      ),
    );
    if (outcome.error) return redirectRefused(c, accounts, '/panel/account', outcome.error);
    return c.redirect(`/panel/account?ended=${outcome.ok}`, 303);
  });

  return pages;
}
