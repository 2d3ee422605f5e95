// The confirmation step of a removal or a rotation: a GET page that says what will
// happen and holds the one POST form that does it, with a way back. Without JavaScript, nothing
// destructive is a single click.
//
//   return c.html(<ConfirmPage session={s} merchantId={m} title="Remove the user?" action={url} button="Remove the user" cancel={back}>…</ConfirmPage>);
import type { Child } from 'hono/jsx';
import type { PanelSession } from '../admin/accounts.js';
import { CsrfField, Layout } from './layout.js';

export function ConfirmPage(props: {
  session: PanelSession;
  merchantId: number;
  title: string;
  action: string;
  button: string;
  cancel: string;
  danger?: boolean;
  children?: Child;
}) {
  return (
    <Layout title={props.title} session={props.session} merchantId={props.merchantId}>
      {props.children}
      <form method="post" action={props.action}>
        <CsrfField session={props.session} />
        <button type="submit" class={props.danger === false ? undefined : 'danger'}>
          {props.button}
        </button>{' '}
        <a href={props.cancel}>Cancel</a>
      </form>
    </Layout>
  );
}
