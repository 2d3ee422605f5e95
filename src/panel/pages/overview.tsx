// The overview (issue 11, "Overview"; this slice: the first rows of it): the operator sees every
// merchant; a merchant user sees their merchant's stores and how many endpoints it has.
import { Hono } from 'hono';
import type { Service } from '../../service.js';
import type { PanelAccounts } from '../../admin/accounts.js';
import { sessionOf } from '../handlers.js';
import { Layout } from '../layout.js';
import type { PanelEnv } from '../session.js';

export function overviewPage(service: Service, _accounts: () => PanelAccounts) {
  const pages = new Hono<PanelEnv>();
  const { admin, endpoints } = service;

  pages.get('/', async (c) => {
    const session = sessionOf(c);
    const { principal } = session;
    if (principal.kind === 'operator') {
      const merchants = await admin.listMerchants();
      return c.html(
        <Layout title="Merchants" session={session}>
          {merchants.length === 0 ? <p>No merchants yet: create one with the admin API or the CLI.</p> : (
            <table>
              <thead><tr><th>Merchant</th><th>Created</th><th></th></tr></thead>
              <tbody>
                {merchants.map((m) => (
                  <tr>
                    <td>{m.name} <span class="muted">#{m.id}</span></td>
                    <td>{m.created_at}</td>
                    <td>
                      <a href={`/panel/merchants/${m.id}/endpoints`}>Endpoints</a>{' · '}
                      <a href={`/panel/merchants/${m.id}/keys`}>API keys</a>{' · '}
                      <a href={`/panel/merchants/${m.id}/users`}>Users</a>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
        </Layout>,
      );
    }
    const merchantId = principal.user.merchant_id;
    const [merchant, stores, endpointList] = await Promise.all([
      admin.merchant(merchantId), admin.listStores(merchantId), endpoints.list(merchantId),
    ]);
    return c.html(
      <Layout title={merchant.name} session={session} merchantId={merchantId}>
        <h2>Stores</h2>
        {stores.length === 0 ? <p>No stores yet.</p> : (
          <table>
            <thead><tr><th>Store</th><th>Currency</th><th>Locale</th><th>Active</th></tr></thead>
            <tbody>{stores.map((s) => <tr><td>{s.name} <span class="muted">{s.slug}</span></td><td>{s.currency}</td><td>{s.locale}</td><td>{s.active ? 'yes' : 'no'}</td></tr>)}</tbody>
          </table>
        )}
        <h2>Webhook endpoints</h2>
        <p><a href={`/panel/merchants/${merchantId}/endpoints`}>{endpointList.length} {endpointList.length === 1 ? 'endpoint' : 'endpoints'}</a></p>
      </Layout>,
    );
  });

  return pages;
}
