// NDJSON import of a merchant's products (docs/panel.md#pages, "Import"): upload a file, which starts an import
// job (admin/import-jobs.ts, the same as the admin API's importProducts: checked, then applied by a run) and leads to
// the job's page. That page shows the progress while the import runs, reloading itself (a meta
// refresh: the CSP allows no inline script), and the outcome when it is done: the counts, or each bad
// line's number and reason with nothing applied. Progress lives in the database, so any process
// behind a load balancer shows it. The import page lists the merchant's recent imports, the admin
// API's included.
import { Hono } from 'hono';
import type { Service } from '../../service.js';
import type { PanelAccounts, PanelSession } from '../../admin/accounts.js';
import { principalName } from '../../admin/accounts.js';
import type { ImportJobs } from '../../admin/import-jobs.js';
import { requestLog } from '../../http/access-log.js';
import { ProblemError } from '../../shared/problem.js';
import type { ImportJobRecord } from '../../admin/model.js';
import { formOf } from '../form.js';
import { idParam, merchantOf, sessionOf } from '../handlers.js';
import { CsrfField, ErrorMessage, Layout, type ShownError } from '../layout.js';
import { redirectRefused, refusalOf } from '../refusals.js';
import type { PanelEnv } from '../session.js';
import { Time } from '../time.js';

/** How often a running import's page reloads itself. */
export const IMPORT_REFRESH_SECONDS = 1;
/** Imports listed on the import page. */
export const RECENT_IMPORTS = 20;

const jobUrl = (merchantId: number, id: number) => `/panel/merchants/${merchantId}/import/jobs/${id}`;

function stateText(job: ImportJobRecord, stalled: boolean): string {
  if (stalled) return 'stalled';
  // Its process stopped while it checked the file: nothing of it was applied.
  if (job.state === 'failed' && job.error_code === 'interrupted') return 'interrupted';
  return job.state;
}

function progressText(job: ImportJobRecord): string {
  if (job.operations === null) return `${job.lines_read} lines read`;
  return `${job.products_applied} of ${job.operations} applied`;
}

function RecentImports(props: { merchantId: number; jobs: ImportJobRecord[]; imports: ImportJobs }) {
  if (props.jobs.length === 0) return <p>No imports yet: upload a file above to add, change or delete products.</p>;
  return (
    <table aria-label="Recent imports" class="labelled">
      <thead>
        <tr>
          <th>Import</th>
          <th>File</th>
          <th>Started by</th>
          <th>Started</th>
          <th>State</th>
          <th>Progress</th>
        </tr>
      </thead>
      <tbody>
        {props.jobs.map((job) => (
          <tr data-job={job.id}>
            <td data-label="Import">
              <a href={jobUrl(props.merchantId, job.id)}>{job.id}</a>
            </td>
            <td data-label="File">{job.file_name ?? <span class="muted">request body</span>}</td>
            <td data-label="Started by">{job.started_by}</td>
            <td data-label="Started">
              <Time at={job.started_at} />
            </td>
            <td data-label="State">{stateText(job, props.imports.stalled(job))}</td>
            <td data-label="Progress">
              {job.state === 'failed' && job.problems.length > 0
                ? `${new Set(job.problems.map((p) => p.name)).size} bad lines`
                : progressText(job)}
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function ImportPage(props: {
  session: PanelSession;
  merchantId: number;
  jobs: ImportJobRecord[];
  imports: ImportJobs;
  error?: ShownError | undefined;
}) {
  const { session, merchantId, error } = props;
  return (
    <Layout title="Import products" session={session} merchantId={merchantId}>
      <h2>Upload an NDJSON file</h2>
      <p>
        One operation per line: <code>{'{"op":"upsert_product","product":{…}}'}</code> or <code>{'{"op":"delete_product","ref":"…"}'}</code>
        , as the admin API's import takes them. The whole file is checked first: one bad line and nothing is applied.
      </p>
      <ErrorMessage error={error} labels={{ file: 'NDJSON file' }} />
      <form class="stacked" method="post" enctype="multipart/form-data" action={`/panel/merchants/${merchantId}/import`}>
        <CsrfField session={session} />
        <label>
          NDJSON file
          <input type="file" name="file" required accept=".ndjson,.jsonl,application/x-ndjson,text/plain" />
        </label>
        <button type="submit">Import</button>
      </form>
      <p class="muted">The import starts at once and its page shows the progress: lines read, then products applied, chunk by chunk.</p>
      <h2>Recent imports</h2>
      <RecentImports merchantId={merchantId} jobs={props.jobs} imports={props.imports} />
    </Layout>
  );
}

function JobPage(props: { session: PanelSession; merchantId: number; job: ImportJobRecord; stalled: boolean }) {
  const { session, merchantId, job, stalled } = props;
  const running = job.state === 'running' && !stalled;
  const badLines = new Set(job.problems.map((p) => p.name)).size;
  return (
    <Layout
      title={`Import ${job.id}`}
      session={session}
      merchantId={merchantId}
      refreshSeconds={running ? IMPORT_REFRESH_SECONDS : undefined}
    >
      <dl class="facts" aria-label="Import">
        <dt>File</dt>
        <dd>{job.file_name ?? 'request body (admin API)'}</dd>
        <dt>Started by</dt>
        <dd>{job.started_by}</dd>
        <dt>Started</dt>
        <dd>
          <Time at={job.started_at} />
        </dd>
        <dt>State</dt>
        <dd id="import-state">{stateText(job, stalled)}</dd>
        <dt>Lines read</dt>
        <dd id="lines-read">{job.lines_read}</dd>
        <dt>Products applied</dt>
        <dd id="products-applied">
          {job.operations === null ? 'none yet: the lines are checked first' : `${job.products_applied} of ${job.operations}`}
          {job.operations !== null && job.operations > 0 && (
            <>
              {' '}
              <progress max={job.operations} value={job.products_applied}>
                {job.products_applied} of {job.operations}
              </progress>
            </>
          )}
        </dd>
        {job.finished_at && (
          <>
            <dt>Finished</dt>
            <dd>
              <Time at={job.finished_at} />
            </dd>
          </>
        )}
      </dl>
      {running && (
        <p role="status" class="notice">
          Running: this page reloads itself every second until the import ends.
        </p>
      )}
      {stalled && (
        <p role="alert" class="error">
          No progress since <Time at={job.updated_at} />: the process checking this file has stopped, and nothing of it was applied. The
          service marks it interrupted shortly; upload the file again.
        </p>
      )}
      {job.state === 'succeeded' && (
        <>
          <p role="status" class="notice">
            {job.file_name ? `"${job.file_name}" is imported.` : 'The import is done.'}
          </p>
          <table aria-label="Import result">
            <thead>
              <tr>
                <th>Lines</th>
                <th>Upserted</th>
                <th>Deleted</th>
              </tr>
            </thead>
            <tbody>
              <tr>
                <td>{job.operations ?? 0}</td>
                <td>{job.upserted}</td>
                <td>{job.deleted}</td>
              </tr>
            </tbody>
          </table>
        </>
      )}
      {job.state === 'failed' && (
        <p role="alert" class="error">
          {job.error}
        </p>
      )}
      {badLines > 0 && (
        <table aria-label="Invalid lines">
          <thead>
            <tr>
              <th>Line</th>
              <th>Reason</th>
            </tr>
          </thead>
          <tbody>
            {job.problems.map((p) => (
              <tr>
                <td>{p.name}</td>
                <td class="wrap">{p.reason}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <p>
        <a href={`/panel/merchants/${merchantId}/import`}>Import another file</a>
      </p>
    </Layout>
  );
}

export function importPages(service: Service, accounts: () => PanelAccounts) {
  const pages = new Hono<PanelEnv>();
  const { imports } = service;

  pages.get('/', async (c) => {
    const merchantId = merchantOf(c);
    const jobs = await imports.recent(merchantId, RECENT_IMPORTS);
    // An upload refused before any import started, above the form (refusals.ts); a file is never kept.
    const refused = await refusalOf(c, accounts);
    return c.html(<ImportPage session={sessionOf(c)} merchantId={merchantId} jobs={jobs} imports={imports} error={refused?.error} />);
  });

  pages.post('/', async (c) => {
    const session = sessionOf(c);
    const merchantId = merchantOf(c);
    const file = (await formOf(c))['file'];
    if (!(file instanceof File) || file.size === 0) {
      const error = new ProblemError('invalid_body', 'Choose a non-empty NDJSON file to import.', [
        { name: 'file', in: 'body', reason: 'is required' },
      ]);
      return redirectRefused(c, accounts, `/panel/merchants/${merchantId}/import`, error);
    }
    // The form is read whole (csrf() read it): the import runs on after this answer, from the file's bytes.
    const actor = principalName(session.principal);
    const { job, done } = await imports.start(merchantId, actor, file.name, file.stream(), actor);
    const log = requestLog(c);
    // The job records the outcome; only an unexpected failure is worth a log line.
    done.catch((error: unknown) => {
      if (!(error instanceof ProblemError)) log?.error({ err: error, importJob: job.id }, 'panel import failed');
    });
    return c.redirect(jobUrl(merchantId, job.id), 303);
  });

  pages.get('/jobs/:jobId', async (c) => {
    const merchantId = merchantOf(c);
    const job = await imports.job(merchantId, idParam(c, 'jobId', 'Import'));
    return c.html(<JobPage session={sessionOf(c)} merchantId={merchantId} job={job} stalled={imports.stalled(job)} />);
  });

  return pages;
}
