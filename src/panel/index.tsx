// The administration panel, mounted at /panel by createApp: server-rendered pages over
// the same domain services as the admin API. Order of the middlewares: security headers on every
// response, then the refusal of an address holding U+0000, then the session (from the cookie),
// then CSRF on every POST (it needs the session's token), then sign-in and tenant checks per route
// group.
import { Hono, type MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { contextStorage } from 'hono/context-storage';
import { requestLog } from '../http/access-log.js';
import { clientAddressReader } from '../http/client-address.js';
import type { Service } from '../service.js';
import { ProblemError } from '../shared/problem.js';
import { panelAssets } from './assets.js';
import { csrf } from './csrf.js';
import { ErrorPage } from './layout.js';
import { merchantScope } from './merchant-scope.js';
import { nulFreeAddress } from './nul-free-address.js';
import { endpointDetailPages } from './pages/endpoint-detail.js';
import { endpointEditPages } from './pages/endpoint-edit.js';
import { catalogPages } from './pages/catalog.js';
import { endpointPages } from './pages/endpoints.js';
import { imagePages } from './pages/images.js';
import { importPages } from './pages/import.js';
import { keyPages } from './pages/keys.js';
import { overviewPage } from './pages/overview.js';
import { signInPages } from './pages/sign-in.js';
import { userPages } from './pages/users.js';
import { accountPages } from './pages/account.js';
import { securityHeaders } from './security-headers.js';
import { panelSession, sessionCookie, signedIn, type PanelEnv } from './session.js';

const TITLES: Record<number, string> = {
  400: 'Invalid input',
  403: 'Forbidden',
  404: 'Not found',
  409: 'Conflict',
  413: 'Too large',
  429: 'Too many requests',
  503: 'Busy',
};

export function panelApp(service: Service): Hono<PanelEnv> {
  const accounts = () => service.accounts;
  const cookie = sessionCookie(service.config.publicBaseUrl);
  // The sign-in throttle's address: the TCP peer's, or the forwarded one from a trusted proxy.
  const addressOf = clientAddressReader(service.config.trustedProxies);
  const panel = new Hono<PanelEnv>();

  panel.use('*', securityHeaders());
  // The request, for the layout's navigation: it marks the current page (layout.tsx).
  panel.use('*', contextStorage());
  panel.route('/assets', panelAssets());
  panel.use('*', nulFreeAddress());
  panel.use('*', panelSession(accounts, cookie));
  // Forms are read whole (csrf() reads them): the import upload may be as large as the admin API's
  // import body, every other form as large as an admin JSON body. The limits run before csrf().
  const { importBodyBytes, adminBodyBytes } = service.config.limits;
  const limit = (maxSize: number) =>
    bodyLimit({
      maxSize,
      onError: () => {
        throw new ProblemError('payload_too_large', `The form is larger than ${maxSize} bytes.`);
      },
    });
  const importLimit = limit(importBodyBytes);
  const formLimit = limit(adminBodyBytes);
  const formBodyLimit: MiddlewareHandler<PanelEnv> = (c, next) =>
    (/^\/panel\/merchants\/[^/]+\/import$/.test(c.req.path) ? importLimit : formLimit)(c, next);
  panel.use('*', formBodyLimit);
  panel.use('*', csrf(service.config.publicBaseUrl, service.config.publicBaseUrlConfigured));

  panel.route('/', signInPages(accounts, cookie, addressOf));
  panel.use('/merchants/:merchantId/*', merchantScope(accounts));
  panel.route('/merchants/:merchantId/endpoints', endpointPages(service, accounts));
  panel.route('/merchants/:merchantId/endpoints/:endpointId', endpointDetailPages(service, accounts));
  panel.route('/merchants/:merchantId/endpoints/:endpointId/edit', endpointEditPages(service, accounts));
  panel.route('/merchants/:merchantId/keys', keyPages(service, accounts));
  panel.route('/merchants/:merchantId/users', userPages(service, accounts));
  panel.route('/merchants/:merchantId/import', importPages(service, accounts));
  panel.route('/merchants/:merchantId/images', imagePages(service));
  panel.route('/merchants/:merchantId/catalog', catalogPages(service, accounts));
  panel.use('/account', signedIn());
  panel.use('/account/*', signedIn());
  panel.route('/account', accountPages(accounts, addressOf));
  panel.use('/', signedIn());
  panel.route('/', overviewPage(service, accounts));
  panel.all('*', (c) => {
    throw new ProblemError('not_found', `There is no panel page at ${new URL(c.req.url).pathname}.`);
  });

  // Domain errors become pages with the same status; a lost session leads back to the sign-in page.
  panel.onError((error, c) => {
    const session = c.get('session');
    if (error instanceof ProblemError) {
      if (error.status === 401) return c.redirect('/panel/login', 303);
      // Retry-After of a 429 or 503.
      for (const [name, value] of Object.entries(error.headers)) c.header(name, value);
      return c.html(
        <ErrorPage
          status={error.status}
          title={TITLES[error.status] ?? 'Error'}
          detail={error.detail}
          invalidParams={error.invalidParams}
          session={session}
        />,
        error.status as 404,
      );
    }
    requestLog(c)?.error({ err: error, method: c.req.method, path: new URL(c.req.url).pathname }, 'unhandled panel error');
    return c.html(<ErrorPage status={500} title="Something went wrong" detail="An unexpected error occurred." session={session} />, 500);
  });
  return panel;
}
