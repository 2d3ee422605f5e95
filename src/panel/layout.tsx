// The page frame and the small pieces every page shares: navigation, the CSRF field, messages.
import { tryGetContext } from 'hono/context-storage';
import { raw } from 'hono/html';
import type { Child, JSXNode } from 'hono/jsx';
import { principalName, type PanelSession } from '../admin/accounts.js';
import type { InvalidParam } from '../shared/problem.js';
import { fieldSentence, type FieldLabels } from './plain-words.js';
import { labelTableCells } from './table-labels.js';

/**
 * A navigation link, marked as the current page (aria-current="page") on its own page and as
 * current (aria-current="true") on the pages under it, unless `exact`. The path is the request's
 * (the panel runs hono's contextStorage(): index.tsx).
 */
function NavLink(props: { href: string; exact?: boolean; children?: Child }) {
  const path = tryGetContext()?.req.path;
  const current = path === props.href ? 'page' : !props.exact && path?.startsWith(`${props.href}/`) ? 'true' : undefined;
  return (
    <a href={props.href} aria-current={current}>
      {props.children}
    </a>
  );
}

/** The page's content, every table cell labelled with its column's heading for phone width (table-labels.ts). */
async function LabelledTables(props: { children?: Child }) {
  // hono's JSX types call an element a string; at run time it is a JSXNode, whose toString() is a
  // promise when a child component is async.
  const content = (<>{props.children}</>) as unknown as JSXNode;
  return raw(labelTableCells(await content.toString()));
}

export function Layout(props: {
  title: string;
  session?: PanelSession | undefined;
  merchantId?: number;
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
          <script src="/panel/assets/local-time.js" defer></script>
        </head>
        <body>
          <header>
            <a class="brand" href="/panel">
              Catalog panel
            </a>
            {session && merchantId !== undefined && (
              <nav aria-label="Merchant">
                <NavLink href={session.principal.kind === 'operator' ? `/panel/merchants/${merchantId}` : '/panel'} exact>
                  Overview
                </NavLink>
                <NavLink href={`/panel/merchants/${merchantId}/endpoints`}>Webhook endpoints</NavLink>
                <NavLink href={`/panel/merchants/${merchantId}/keys`}>API keys</NavLink>
                <NavLink href={`/panel/merchants/${merchantId}/users`}>Users</NavLink>
                <NavLink href={`/panel/merchants/${merchantId}/catalog`}>Catalog</NavLink>
                <NavLink href={`/panel/merchants/${merchantId}/import`}>Import</NavLink>
                <NavLink href={`/panel/merchants/${merchantId}/images`}>Images</NavLink>
              </nav>
            )}
            {session && (
              <form class="inline" method="post" action="/panel/logout">
                <CsrfField session={session} />
                <span class="muted">{principalName(session.principal)} </span>
                {session.principal.kind === 'user' && (
                  <>
                    <a href="/panel/account">Your account</a>{' '}
                  </>
                )}
                <button type="submit">Sign out</button>
              </form>
            )}
          </header>
          <main>
            <h1>{props.title}</h1>
            <LabelledTables>{props.children}</LabelledTables>
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

/** What an error message shows: a problem's detail, and the fields it found invalid. */
export interface ShownError {
  detail: string;
  invalidParams?: readonly InvalidParam[] | undefined;
}

/**
 * A domain error, shown beside the action that caused it, in plain words: each invalid field by
 * the label the form gives it (`labels`, by field name), not by its JSON Pointer (plain-words.ts).
 */
export function ErrorMessage(props: { error?: ShownError | undefined; labels?: FieldLabels }) {
  const { error } = props;
  if (!error) return null;
  const fields = (error.invalidParams ?? []).map((param) => fieldSentence(param, props.labels));
  if (fields.length === 0)
    return (
      <p class="error" role="alert">
        {error.detail}
      </p>
    );
  if (fields.length === 1)
    return (
      <p class="error" role="alert">
        {fields[0]}
      </p>
    );
  return (
    <div class="error" role="alert">
      <ul>
        {fields.map((sentence) => (
          <li>{sentence}</li>
        ))}
      </ul>
    </div>
  );
}

export function Notice(props: { text?: string | undefined }) {
  return props.text ? (
    <p class="notice" role="status">
      {props.text}
    </p>
  ) : null;
}

/** A secret shown once: selectable text, and a copy button that panel.js reveals. */
export function ShownOnce(props: { label: string; secret: string }) {
  return (
    <section aria-labelledby="shown-once">
      <h2 id="shown-once">{props.label}</h2>
      <p>Copy it now: it is shown this once and cannot be displayed again.</p>
      <code class="secret" id="secret">
        {props.secret}
      </code>
      <p>
        <button type="button" data-copy="#secret" hidden>
          Copy
        </button>
      </p>
    </section>
  );
}

export function ErrorPage(props: {
  status: number;
  title: string;
  detail: string;
  invalidParams?: ShownError['invalidParams'];
  session?: PanelSession | undefined;
}) {
  return (
    <Layout title={props.title} session={props.session}>
      <ErrorMessage error={{ detail: props.detail, invalidParams: props.invalidParams }} />
      <p>
        <a href="/panel">Back to the overview</a>
      </p>
    </Layout>
  );
}
