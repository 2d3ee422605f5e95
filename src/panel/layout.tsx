// The page frame and the small pieces every page shares: navigation, the CSRF field, messages.
import { raw } from 'hono/html';
import type { Child } from 'hono/jsx';
import { principalName, type PanelSession } from '../admin/accounts.js';

export function Layout(props: {
  title: string; session?: PanelSession | undefined; merchantId?: number;
  /** Reloads the page this often (a page that shows work in progress); a meta refresh, as the CSP allows no inline script. */
  refreshSeconds?: number | undefined;
  children?: Child;
}) {
  const { session, merchantId } = props;
  return (
    <>
      {raw('<!doctype html>')}
      <html lang="en">
        <head>
          <meta charset="utf-8" />
          <meta name="viewport" content="width=device-width, initial-scale=1" />
          {props.refreshSeconds !== undefined && <meta http-equiv="refresh" content={String(props.refreshSeconds)} />}
          <title>{`${props.title} · Catalog panel`}</title>
          <link rel="stylesheet" href="/panel/assets/panel.css" />
          <script src="/panel/assets/panel.js" defer></script>
        </head>
        <body>
          <header>
            <a class="brand" href="/panel">Catalog panel</a>
            {session && merchantId !== undefined && (
              <nav aria-label="Merchant">
                <a href={session.principal.kind === 'operator' ? `/panel/merchants/${merchantId}` : '/panel'}>Overview</a>
                <a href={`/panel/merchants/${merchantId}/endpoints`}>Webhook endpoints</a>
                <a href={`/panel/merchants/${merchantId}/keys`}>API keys</a>
                <a href={`/panel/merchants/${merchantId}/users`}>Users</a>
                <a href={`/panel/merchants/${merchantId}/catalog`}>Catalog</a>
                <a href={`/panel/merchants/${merchantId}/import`}>Import</a>
                <a href={`/panel/merchants/${merchantId}/images`}>Images</a>
              </nav>
            )}
            {session && (
              <form class="inline" method="post" action="/panel/logout">
                <CsrfField session={session} />
                <span class="muted">{principalName(session.principal)} </span>
                {session.principal.kind === 'user' && <><a href="/panel/account">Your account</a>{' '}</>}
                <button type="submit">Sign out</button>
              </form>
            )}
          </header>
          <main>
            <h1>{props.title}</h1>
            {props.children}
          </main>
          <footer>
            <nav aria-label="API documentation">
              <a href="/docs">Public API docs</a>
              <a href="/admin/docs">Admin API docs</a>
              <a href="/operations/docs">Operations API docs</a>
            </nav>
          </footer>
        </body>
      </html>
    </>
  );
}

export function CsrfField(props: { session: PanelSession }) {
  return <input type="hidden" name="_csrf" value={props.session.csrfToken} />;
}

/** A domain error shown on the form that caused it. */
export function ErrorMessage(props: { error?: { detail: string } | undefined }) {
  return props.error ? <p class="error" role="alert">{props.error.detail}</p> : null;
}

export function Notice(props: { text?: string | undefined }) {
  return props.text ? <p class="notice" role="status">{props.text}</p> : null;
}

/** A secret shown once: selectable text, and a copy button that panel.js reveals. */
export function ShownOnce(props: { label: string; secret: string }) {
  return (
    <section aria-labelledby="shown-once">
      <h2 id="shown-once">{props.label}</h2>
      <p>Copy it now: it is shown this once and cannot be displayed again.</p>
      <code class="secret" id="secret">{props.secret}</code>
      <p><button type="button" data-copy="#secret" hidden>Copy</button></p>
    </section>
  );
}

export function ErrorPage(props: { status: number; title: string; detail: string; session?: PanelSession | undefined }) {
  return (
    <Layout title={props.title} session={props.session}>
      <p class="error">{props.detail}</p>
      <p><a href="/panel">Back to the overview</a></p>
    </Layout>
  );
}
