// The overview (docs/panel.md#pages, "Overview"): the operator's list of merchants at /panel, and a merchant's
// overview — stores with products per store and the excluded ones by reason, image states,
// endpoints by health, feed lag, the owners' latest notifications — at /panel for a merchant user
// and /panel/merchants/:merchantId for the operator. One domain call (MerchantOverview) per page.
import { Hono } from 'hono';
import type { Service } from '../../service.js';
import type { PanelAccounts, PanelSession } from '../../admin/accounts.js';
import { MerchantOverview, type MerchantOverviewView } from '../../admin/overview.js';
import { merchantOf, sessionOf } from '../handlers.js';
import { NotificationEnded } from '../endpoint-health.js';
import { Layout } from '../layout.js';
import { Time } from '../time.js';
import type { PanelEnv } from '../session.js';

/** The exclusion reasons in the spec's priority order, as the page names them. */
const REASONS = [
  ['manual', 'Excluded manually'],
  ['missing_title', 'Missing title'],
  ['no_offers', 'No offers'],
  ['out_of_stock', 'Out of stock'],
] as const;

/** "3 min", "2 h 5 min": how far webhook dispatch trails the merchant's changes. */
function lagText(seconds: number | null): string {
  if (seconds === null) return 'none: nothing waits to be sent';
  if (seconds < 60) return `${seconds} s`;
  const minutes = Math.floor(seconds / 60);
  return minutes < 60 ? `${minutes} min` : `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}

/** Count tiles; a row's tone (`failing`) marks its tile when the count is not 0 (tile-*: panel.css). */
function Counts(props: { label: string; rows: [string, number, string?][] }) {
  return (
    <dl class="counts" aria-label={props.label}>
      {props.rows.map(([name, n, tone]) => (
        <div class={tone && n > 0 ? `tile-${tone}` : undefined}>
          <dt>{name}</dt>
          <dd>{n}</dd>
        </div>
      ))}
    </dl>
  );
}

function MerchantOverviewPage(props: { session: PanelSession; view: MerchantOverviewView }) {
  const { session, view } = props;
  const merchantId = view.merchant.id;
  const base = `/panel/merchants/${merchantId}`;
  return (
    <Layout title={view.merchant.name} session={session} merchantId={merchantId}>
      <section aria-labelledby="stores">
        <h2 id="stores">Stores</h2>
        {view.stores.length === 0 ? (
          <p>
            No stores yet: the operator creates them (the command line's <code>stores set</code>, or the admin API); then add products on
            the <a href={`${base}/import`}>Import</a> page.
          </p>
        ) : (
          <table class="labelled">
            <thead>
              <tr>
                <th>Store</th>
                <th>Published (incl. excluded)</th>
                {REASONS.map(([, label]) => (
                  <th>{label}</th>
                ))}
              </tr>
            </thead>
            <tbody>
              {view.stores.map(({ store, total, excluded }) => (
                <tr data-store={store.slug}>
                  <td data-label="Store">
                    {store.name}{' '}
                    <span class="muted">
                      {store.slug} · {store.currency}
                      {store.active ? '' : ' · inactive'}
                    </span>
                  </td>
                  <td data-count="total">{total}</td>
                  {REASONS.map(([reason, label]) => (
                    <td data-label={label} data-count={reason}>
                      {excluded[reason]}
                    </td>
                  ))}
                </tr>
              ))}
            </tbody>
          </table>
        )}
        {view.stores.length > 0 && (
          <p class="muted" id="published-note">
            Published counts every product integrators can read in the store, the excluded ones included (they are listed with{' '}
            <code>excluded: true</code>); the other columns count the excluded ones by reason.
          </p>
        )}
      </section>
      <div class="overview-grid">
        <section aria-labelledby="endpoints">
          <h2 id="endpoints">Webhook endpoints</h2>
          <Counts
            label="Endpoints by health"
            rows={[
              ['Healthy', view.endpoints.byHealth.healthy],
              ['Failing', view.endpoints.byHealth.failing, 'failing'],
              ['Paused', view.endpoints.byHealth.paused],
              ['Disabled', view.endpoints.byHealth.disabled],
            ]}
          />
          <p>
            <a href={`${base}/endpoints`}>
              {view.endpoints.total} {view.endpoints.total === 1 ? 'endpoint' : 'endpoints'}
            </a>
          </p>
          <p>
            Feed lag: <strong id="feed-lag">{lagText(view.feedLagSeconds)}</strong>
          </p>
        </section>
        <section aria-labelledby="images">
          <h2 id="images">Images</h2>
          <Counts
            label="Images by mirroring state"
            rows={[
              ['Pending', view.images.pending],
              ['Mirrored', view.images.mirrored],
              ['Dead', view.images.dead],
            ]}
          />
        </section>
      </div>
      <section aria-labelledby="notifications">
        <h2 id="notifications">Recent notifications</h2>
        {view.notifications.length === 0 ? (
          <p>No notifications to the owners: they appear here when a webhook endpoint fails, is paused or is disabled.</p>
        ) : (
          <ul class="notifications">
            {view.notifications.map((n) => (
              <li data-notification={n.id}>
                <span class={`status-${n.kind}`}>{n.kind}</span>{' '}
                {n.endpoint_id === null ? n.subject : <a href={`${base}/endpoints/${n.endpoint_id}`}>{n.subject}</a>}{' '}
                <span class="muted">
                  <Time at={n.created_at} />
                </span>
                {' · '}
                <NotificationEnded notification={n} />
              </li>
            ))}
          </ul>
        )}
      </section>
    </Layout>
  );
}

export function overviewPage(service: Service, accounts: () => PanelAccounts) {
  const pages = new Hono<PanelEnv>();
  const { admin, endpoints } = service;
  const overview = new MerchantOverview(admin, endpoints, service.now);

  pages.get('/', async (c) => {
    const session = sessionOf(c);
    const { principal } = session;
    if (principal.kind === 'user') {
      return c.html(<MerchantOverviewPage session={session} view={await overview.overview(principal.user.merchant_id)} />);
    }
    const merchants = await admin.listMerchants();
    return c.html(
      <Layout title="Merchants" session={session}>
        {merchants.length === 0 ? (
          <p>
            No merchants yet: create one with the command line (<code>merchants create --name N</code>) or the admin API.
          </p>
        ) : (
          <table>
            <thead>
              <tr>
                <th>Merchant</th>
                <th>Created</th>
                <th></th>
              </tr>
            </thead>
            <tbody>
              {merchants.map((m) => (
                <tr>
                  <td>
                    <a href={`/panel/merchants/${m.id}`}>{m.name}</a> <span class="muted">#{m.id}</span>
                  </td>
                  <td>
                    <Time at={m.created_at} />
                  </td>
                  <td>
                    <a href={`/panel/merchants/${m.id}/endpoints`}>Endpoints</a>
                    {' · '}
                    <a href={`/panel/merchants/${m.id}/keys`}>API keys</a>
                    {' · '}
                    <a href={`/panel/merchants/${m.id}/users`}>Users</a>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Layout>,
    );
  });

  pages.get('/merchants/:merchantId', async (c) => {
    const session = sessionOf(c);
    const merchantId = merchantOf(c);
    // Also behind merchantScope(): a merchant user who edits the id gets 404.
    accounts().assertMerchant(session.principal, merchantId);
    return c.html(<MerchantOverviewPage session={session} view={await overview.overview(merchantId)} />);
  });

  return pages;
}
