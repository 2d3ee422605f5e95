// Refused forms are POST/redirect/GET too: a form the domain refuses (400, 409) keeps
// its error, where the page shows it, and the fields as typed (never a password, a token or a file)
// as a one-time message of the session (admin/shown-once.ts: server-side, sealed, taken on first
// view), and answers 303 to the form's page with `?refused={id}`. That page takes the message and
// shows the error beside the action, as before. A reload (or "back") is a GET that posts nothing:
// the message is taken, so it shows the form as it is now, never the refusal twice, and a form
// refused then (a "Send test" of a paused endpoint) is not sent again once it would be accepted.
//
//   if (outcome.error) return redirectRefused(c, accounts, base, outcome.error, { at: `test:${id}` });   // in the POST
//   const refused = await refusalOf<EndpointFormInput>(c, accounts);                                     // in the form's GET
//   … error={refused?.error} errorAt={refused?.at} input={refused?.input}
import type { PanelAccounts } from '../admin/accounts.js';
import type { ProblemError } from '../shared/problem.js';
import { sessionOf, type PanelContext } from './handlers.js';
import type { ShownError } from './layout.js';

/** A refusal, between the POST that was refused and the page of its form. */
export interface Refusal<Input = never> {
  kind: 'refused_form';
  /** The page it is shown on (a path): any other page that takes it shows nothing. */
  page: string;
  error: ShownError;
  /** Which action of the page was refused, where the page has several (a row's "Send test"). */
  at?: string;
  /** The fields as the user typed them, to fill the form again: never a secret. */
  input?: Input;
}

/** Keeps the refusal for this session and redirects (303) to `page?refused={id}`, which shows it once. */
export async function redirectRefused<Input = never>(
  c: PanelContext,
  accounts: () => PanelAccounts,
  page: string,
  error: ProblemError,
  options: { at?: string; input?: Input } = {},
): Promise<Response> {
  sessionOf(c);
  const refusal: Refusal<Input> = {
    kind: 'refused_form',
    page,
    error: { detail: error.detail, invalidParams: error.invalidParams },
    ...options,
  };
  const id = await accounts().keepShownOnce(c.get('sessionToken')!, refusal);
  return c.redirect(`${page}?refused=${id}`, 303);
}

/** The refusal the URL's `?refused=` names for this page, taken (a reload finds none); undefined otherwise. */
export async function refusalOf<Input = never>(c: PanelContext, accounts: () => PanelAccounts): Promise<Refusal<Input> | undefined> {
  const raw = c.req.query('refused');
  if (raw === undefined || !/^[0-9]{1,15}$/.test(raw) || !c.get('sessionToken')) return undefined;
  const message = (await accounts().takeShownOnce(c.get('sessionToken')!, Number(raw))) as Refusal<Input> | undefined;
  return message?.kind === 'refused_form' && message.page === c.req.path ? message : undefined;
}
