// Signing in and out (docs/panel.md#accounts-sessions-and-safety): the operator with the admin token, a merchant
// user with e-mail and password; accepting an invitation sets the password. Throttling (429 with
// Retry-After), the bound on password hashing (503 with Retry-After) and the checks are the
// accounts domain's; the pages show its answer.
import { Hono } from 'hono';
import type { PanelAccounts, PanelLinkPurpose, SignedIn } from '../../admin/accounts.js';
import { field, formOf } from '../form.js';
import { sessionOf, type PanelContext } from '../handlers.js';
import { ErrorMessage, Layout, Notice } from '../layout.js';
import { endSession, startSession, type PanelEnv, type SessionCookie } from '../session.js';
import { ProblemError } from '../../shared/problem.js';

function LoginPage(props: {
  error?: { detail: string } | undefined;
  notice?: string | undefined;
  email?: string;
  /** Which form failed: its error is shown above it. */
  errorAt?: 'user' | 'operator';
}) {
  return (
    <Layout title="Sign in">
      <Notice text={props.notice} />
      <h2>Merchant user</h2>
      {props.errorAt === 'user' && <ErrorMessage error={props.error} />}
      <form class="stacked" method="post" action="/panel/login">
        <label>
          E-mail
          <input type="email" name="email" autocomplete="username" required value={props.email ?? ''} />
        </label>
        <label>
          Password
          <input type="password" name="password" autocomplete="current-password" required />
        </label>
        <button type="submit">Sign in</button>
      </form>
      <h2>Operator</h2>
      {props.errorAt === 'operator' && <ErrorMessage error={props.error} />}
      <form class="stacked" method="post" action="/panel/login/operator">
        <label>
          Admin token
          <input type="password" name="admin_token" autocomplete="off" required />
        </label>
        <button type="submit">Sign in as operator</button>
      </form>
    </Layout>
  );
}

function InvitationPage(props: { token: string; email: string; purpose: PanelLinkPurpose; error?: { detail: string } | undefined }) {
  return (
    <Layout title={props.purpose === 'reset' ? 'Set a new password' : 'Set your password'}>
      {props.purpose === 'reset' ? (
        <p>Choose a new password of at least 12 characters for {props.email}. Every session of the account is then signed out.</p>
      ) : (
        <p>Welcome, {props.email}. Choose a password of at least 12 characters to finish your account.</p>
      )}
      <ErrorMessage error={props.error} labels={{ password: 'New password' }} />
      <form class="stacked" method="post" action={`/panel/invitations/${encodeURIComponent(props.token)}`}>
        <input type="text" name="username" autocomplete="username" value={props.email} hidden readonly />
        <label>
          New password
          <input type="password" name="password" autocomplete="new-password" minlength={12} required />
        </label>
        <button type="submit">Set password</button>
      </form>
    </Layout>
  );
}

/** The client's address of a request (http/client-address.ts), a key of the sign-in throttle (with the account). */
export type AddressOf = (c: PanelContext) => string;

export function signInPages(accounts: () => PanelAccounts, cookie: SessionCookie, addressOf: AddressOf) {
  const pages = new Hono<PanelEnv>();

  pages.get('/login', (c) => {
    if (c.get('session')) return c.redirect('/panel', 303);
    const notice = c.req.query('welcome')
      ? 'Your password is set: sign in.'
      : c.req.query('reset')
        ? 'Your new password is set and every session of the account is signed out: sign in.'
        : undefined;
    return c.html(<LoginPage notice={notice} />);
  });

  const signInWith = async (c: PanelContext, attempt: () => Promise<SignedIn>, email?: string) => {
    try {
      const signedIn = await attempt();
      startSession(c, cookie, signedIn.sessionToken);
      return c.redirect('/panel', 303);
    } catch (error) {
      // Wrong (401), throttled (429), or not checked while the server checks as many passwords as it can (503).
      if (!(error instanceof ProblemError) || ![401, 429, 503].includes(error.status)) throw error;
      for (const [name, value] of Object.entries(error.headers)) c.header(name, value);
      // Only the merchant user's form has an e-mail.
      return c.html(
        <LoginPage error={error} errorAt={email === undefined ? 'operator' : 'user'} {...(email ? { email } : {})} />,
        error.status as 401 | 429 | 503,
      );
    }
  };

  pages.post('/login', async (c) => {
    const form = await formOf(c);
    const email = field(form, 'email');
    return signInWith(c, () => accounts().signIn(email, field(form, 'password'), addressOf(c)), email);
  });

  pages.post('/login/operator', async (c) => {
    const form = await formOf(c);
    return signInWith(c, () => accounts().signInOperator(field(form, 'admin_token'), addressOf(c)));
  });

  pages.post('/logout', async (c) => {
    sessionOf(c);
    await accounts().signOut(c.get('sessionToken')!);
    endSession(c, cookie);
    return c.redirect('/panel/login', 303);
  });

  pages.get('/invitations/:token', async (c) => {
    const token = c.req.param('token');
    const invitation = await accounts().invitation(token);
    if (!invitation) throw new ProblemError('not_found', 'This link is unknown, already used, revoked or expired: ask for a new one.');
    return c.html(<InvitationPage token={token} email={invitation.email} purpose={invitation.purpose} />);
  });

  pages.post('/invitations/:token', async (c) => {
    const token = c.req.param('token');
    const form = await formOf(c);
    const invitation = await accounts().invitation(token);
    try {
      await accounts().acceptInvitation(token, field(form, 'password'));
    } catch (error) {
      if (!(error instanceof ProblemError) || error.status !== 400 || !invitation) throw error;
      return c.html(<InvitationPage token={token} email={invitation.email} purpose={invitation.purpose} error={error} />, 400);
    }
    return c.redirect(invitation?.purpose === 'reset' ? '/panel/login?reset=1' : '/panel/login?welcome=1', 303);
  });

  return pages;
}
