// Panel sessions: the cookie carries an opaque token; the session itself lives in the
// database behind service.accounts, so every process of the deployment shares it. The cookie is
// HttpOnly and SameSite=Strict, with the `__Host-` prefix and Secure when the public base URL is
// https (a plain-http deployment cannot set a `__Host-` cookie).
//
//   panel.use('*', panelSession(accounts, config.publicBaseUrl));   // sets c.var.session when signed in
//   panel.use('/merchants/*', signedIn());                          // otherwise: to the sign-in page
import type { Context, MiddlewareHandler } from 'hono';
import { deleteCookie, getCookie, setCookie } from 'hono/cookie';
import type { PanelAccounts, PanelSession } from '../admin/accounts.js';
import type { Credential } from '../tenancy/credential.js';

export interface PanelEnv {
  Variables: {
    /** The signed-in session, when there is one. */
    session?: PanelSession;
    sessionToken?: string;
    /** Who the signed-in request acts as (tenancy/credential.ts): the operator or a panel user. */
    credential?: Credential;
  };
}

export interface SessionCookie {
  name: string;
  secure: boolean;
}

export function sessionCookie(publicBaseUrl: string): SessionCookie {
  const secure = new URL(publicBaseUrl).protocol === 'https:';
  return { name: secure ? '__Host-cps_panel' : 'cps_panel', secure };
}

export function panelSession(accounts: () => PanelAccounts, cookie: SessionCookie): MiddlewareHandler<PanelEnv> {
  return async (c, next) => {
    const token = getCookie(c, cookie.name);
    const session = token ? await accounts().session(token) : undefined;
    if (token && session) {
      c.set('session', session);
      c.set('sessionToken', token);
      const { principal } = session;
      c.set(
        'credential',
        principal.kind === 'operator'
          ? { kind: 'operator' }
          : { kind: 'user', userId: principal.user.id, email: principal.user.email, merchantId: principal.user.merchant_id },
      );
    }
    await next();
  };
}

/** Sends a visitor without a session to the sign-in page (303: a form's POST becomes a GET). */
export function signedIn(): MiddlewareHandler<PanelEnv> {
  return async (c, next) => {
    if (!c.get('session')) return c.redirect('/panel/login', 303);
    await next();
  };
}

export function startSession(c: Context, cookie: SessionCookie, sessionToken: string): void {
  setCookie(c, cookie.name, sessionToken, { httpOnly: true, sameSite: 'Strict', secure: cookie.secure, path: '/' });
}

export function endSession(c: Context, cookie: SessionCookie): void {
  deleteCookie(c, cookie.name, { httpOnly: true, sameSite: 'Strict', secure: cookie.secure, path: '/' });
}
