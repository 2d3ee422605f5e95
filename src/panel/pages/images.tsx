// Image mirroring of a merchant (docs/panel.md#pages, "Images"): how many source images are pending, mirrored
// and dead, its origins with their state (up, or down and only probed), the dead ones with their last error, and a retry of the dead ones (CatalogAdmin, as the
// admin API's getImageMirroring and retryDeadImages).
import { Hono } from 'hono';
import type { Service } from '../../service.js';
import { principalName, type PanelSession } from '../../admin/accounts.js';
import type { CatalogAdmin } from '../../admin/catalog-admin.js';
import { merchantOf, sessionOf } from '../handlers.js';
import { CsrfField, Layout, Notice } from '../layout.js';
import type { PanelEnv } from '../session.js';
import { Time } from '../time.js';
import { ORIGIN_PENDING_COUNT_MAX } from '../../images/retry.js';

type ImageMirroring = Awaited<ReturnType<CatalogAdmin['imageMirroring']>>;

function ImagesPage(props: {
  session: PanelSession;
  merchantId: number;
  mirroring: ImageMirroring;
  failuresToDown: number;
  notice?: string | undefined;
}) {
  const { session, merchantId, mirroring, failuresToDown } = props;
  return (
    <Layout title="Images" session={session} merchantId={merchantId}>
      <Notice text={props.notice} />
      <table aria-label="Images per state">
        <thead>
          <tr>
            <th>Pending</th>
            <th>Mirrored</th>
            <th>Dead</th>
          </tr>
        </thead>
        <tbody>
          <tr>
            <td>{mirroring.pending}</td>
            <td>{mirroring.mirrored}</td>
            <td>{mirroring.dead}</td>
          </tr>
        </tbody>
      </table>
      {mirroring.pending + mirroring.mirrored + mirroring.dead === 0 && (
        <p>No images yet: the images of the products you import are mirrored here, from their source URLs.</p>
      )}
      <h2>Origins</h2>
      {mirroring.origins.length === 0 ? (
        <p>No origin has pending images or failed its last fetch.</p>
      ) : (
        <>
          <table aria-label="Image origins">
            <thead>
              <tr>
                <th>Origin</th>
                <th>State</th>
                <th>Failures in a row</th>
                <th>Down since</th>
                <th>Next probe</th>
                <th>Last error</th>
                <th>Pending images</th>
              </tr>
            </thead>
            <tbody>
              {mirroring.origins.map((origin) => (
                <tr>
                  <td class="wrap">{origin.origin}</td>
                  <td>{origin.state}</td>
                  <td>{origin.failures}</td>
                  <td>
                    <Time at={origin.down_since} />
                  </td>
                  <td>
                    <Time at={origin.next_probe_at} />
                  </td>
                  <td>{origin.last_error ?? '—'}</td>
                  <td>{origin.pending >= ORIGIN_PENDING_COUNT_MAX ? `${ORIGIN_PENDING_COUNT_MAX}+` : origin.pending}</td>
                </tr>
              ))}
            </tbody>
          </table>
          <p class="muted">
            A down origin failed {failuresToDown} fetches in a row: its images wait, keeping their supplier URLs, and one of them is tried
            per probe interval until one succeeds; each still becomes dead once its own dead-after period is up.
          </p>
        </>
      )}
      <h2>Dead images</h2>
      {mirroring.dead_images.length === 0 ? (
        <p>No dead images: none to retry.</p>
      ) : (
        <>
          <table aria-label="Dead images">
            <thead>
              <tr>
                <th>Source URL</th>
                <th>Last error</th>
                <th>First failure</th>
                <th>Last updated</th>
              </tr>
            </thead>
            <tbody>
              {mirroring.dead_images.map((image) => (
                <tr>
                  <td class="wrap">{image.url}</td>
                  <td>{image.last_error ?? '—'}</td>
                  <td>
                    <Time at={image.first_failure_at} />
                  </td>
                  <td>
                    <Time at={image.updated_at} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
          {mirroring.dead > mirroring.dead_images.length && (
            <p class="muted">
              The newest {mirroring.dead_images.length} of {mirroring.dead} are listed.
            </p>
          )}
          <form method="post" action={`/panel/merchants/${merchantId}/images/retry-dead`}>
            <CsrfField session={session} />
            <button type="submit">Retry dead images</button>
          </form>
          <p class="muted">They go back to pending and are fetched again; products list their supplier URLs until they are mirrored.</p>
        </>
      )}
    </Layout>
  );
}

export function imagePages(service: Service) {
  const pages = new Hono<PanelEnv>();
  const { admin } = service;

  pages.get('/', async (c) => {
    const merchantId = merchantOf(c);
    const retried = c.req.query('retried');
    const notice =
      retried !== undefined && /^[0-9]+$/.test(retried)
        ? `${retried} dead ${retried === '1' ? 'image goes' : 'images go'} back to pending.`
        : undefined;
    return c.html(
      <ImagesPage
        session={sessionOf(c)}
        merchantId={merchantId}
        mirroring={await admin.imageMirroring(merchantId)}
        failuresToDown={service.config.images.originFailures}
        notice={notice}
      />,
    );
  });

  pages.post('/retry-dead', async (c) => {
    const session = sessionOf(c);
    const merchantId = merchantOf(c);
    const retried = await admin.retryDeadImages(merchantId, principalName(session.principal));
    return c.redirect(`/panel/merchants/${merchantId}/images?retried=${retried}`, 303);
  });

  return pages;
}
