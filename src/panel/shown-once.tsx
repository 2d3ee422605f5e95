// POST/redirect/GET for secrets shown once: the POST that makes a secret keeps it as a
// one-time message of the session (admin/shown-once.ts: server-side, sealed, consumed on first view)
// and answers 303 to a page that takes it. A reload or a "back" to that page finds nothing and says
// so (410); it never repeats the change, and no URL carries the secret.
//
//   return redirectToShownOnce(c, accounts, `${base}/shown`, { kind: 'api_key', ... });   // in the POST
//   pages.get('/shown/:shownId', async (c) => { const m = await shownOnce(c, accounts, 'api_key'); ... });
import type { PanelAccounts, PanelSession } from '../admin/accounts.js';
import { ProblemError } from '../shared/problem.js';
import { sessionOf, type PanelContext } from './handlers.js';
import { Layout } from './layout.js';

/** Keeps the message for this session and redirects (303) to `${path}/{id}`, where it is shown once. */
export async function redirectToShownOnce<M extends { kind: string }>(
  c: PanelContext,
  accounts: () => PanelAccounts,
  path: string,
  message: M,
): Promise<Response> {
  sessionOf(c);
  const id = await accounts().keepShownOnce(c.get('sessionToken')!, message);
  return c.redirect(`${path}/${id}`, 303);
}

/** The message of the URL's `:shownId`, taken (a second view gets undefined), when it is of this kind. */
export async function shownOnce<M extends { kind: string }>(
  c: PanelContext,
  accounts: () => PanelAccounts,
  kind: M['kind'],
): Promise<M | undefined> {
  sessionOf(c);
  const raw = c.req.param('shownId') ?? '';
  if (!/^[0-9]{1,15}$/.test(raw)) throw new ProblemError('not_found', 'There is nothing to show at this address.');
  const message = (await accounts().takeShownOnce(c.get('sessionToken')!, Number(raw))) as M | undefined;
  return message?.kind === kind ? message : undefined;
}

/** What a reload (or a second view) of a shown-once page gets, with 410. */
export function AlreadyShown(props: {
  session: PanelSession;
  merchantId: number;
  what: string;
  lost: string;
  back: { href: string; label: string };
}) {
  return (
    <Layout title="Shown once already" session={props.session} merchantId={props.merchantId}>
      <p>{props.what} was shown once, on the page this address led to, and is not shown again. Nothing was changed now.</p>
      <p>{props.lost}</p>
      <p>
        <a href={props.back.href}>{props.back.label}</a>
      </p>
    </Layout>
  );
}
