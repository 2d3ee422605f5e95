// NDJSON import of a merchant's products (issue 11, "Import"): upload a file, which goes to the
// same importNdjson as the admin API's importProducts. Bad lines are listed with their numbers and
// reasons, and nothing is applied; a valid file is applied chunk by chunk before the page answers.
import { Hono } from 'hono';
import { importNdjson, type ImportResult } from '../../admin/import.js';
import type { Service } from '../../service.js';
import type { PanelAccounts, PanelSession } from '../../admin/accounts.js';
import { ProblemError } from '../../shared/problem.js';
import { formOf } from '../form.js';
import { formAction, merchantOf, sessionOf } from '../handlers.js';
import { CsrfField, ErrorMessage, Layout, Notice } from '../layout.js';
import type { PanelEnv } from '../session.js';

function ImportPage(props: {
  session: PanelSession; merchantId: number; result?: ImportResult & { file: string }; error?: ProblemError | undefined;
}) {
  const { session, merchantId, result, error } = props;
  return (
    <Layout title="Import products" session={session} merchantId={merchantId}>
      {result && (
        <>
          <Notice text={`"${result.file}" is imported.`} />
          <table aria-label="Import result">
            <thead><tr><th>Lines</th><th>Upserted</th><th>Deleted</th></tr></thead>
            <tbody><tr><td>{result.lines}</td><td>{result.upserted}</td><td>{result.deleted}</td></tr></tbody>
          </table>
        </>
      )}
      <ErrorMessage error={error} />
      {error?.invalidParams && error.invalidParams.length > 0 && (
        <table aria-label="Invalid lines">
          <thead><tr><th>Line</th><th>Reason</th></tr></thead>
          <tbody>{error.invalidParams.map((p) => <tr><td>{p.name}</td><td>{p.reason}</td></tr>)}</tbody>
        </table>
      )}
      <h2>Upload an NDJSON file</h2>
      <p>
        One operation per line: <code>{'{"op":"upsert_product","product":{…}}'}</code> or{' '}
        <code>{'{"op":"delete_product","ref":"…"}'}</code>, as the admin API's import takes them. The whole file is
        checked first: one bad line and nothing is applied.
      </p>
      <form class="stacked" method="post" enctype="multipart/form-data" action={`/panel/merchants/${merchantId}/import`}>
        <CsrfField session={session} />
        <label>NDJSON file<input type="file" name="file" required accept=".ndjson,.jsonl,application/x-ndjson,text/plain" /></label>
        <button type="submit">Import</button>
      </form>
      <p class="muted">The import runs while you wait: this page answers when every chunk is committed.</p>
    </Layout>
  );
}

export function importPages(service: Service, accounts: () => PanelAccounts) {
  const pages = new Hono<PanelEnv>();
  const { admin, config } = service;

  pages.get('/', (c) => c.html(<ImportPage session={sessionOf(c)} merchantId={merchantOf(c)} />));

  pages.post('/', async (c) => {
    const session = sessionOf(c);
    const merchantId = merchantOf(c);
    const file = (await formOf(c))['file'];
    if (!(file instanceof File) || file.size === 0) {
      const error = new ProblemError('invalid_body', 'Choose a non-empty NDJSON file to import.', [{ name: 'file', in: 'body', reason: 'is required' }]);
      return c.html(<ImportPage session={session} merchantId={merchantId} error={error} />, 400);
    }
    const bytes = file.stream() as unknown as AsyncIterable<Uint8Array>;
    const outcome = await formAction(() => importNdjson(admin, merchantId, bytes, {
      chunkSize: config.limits.publishChunk, maxJsonDepth: config.limits.maxJsonDepth,
    }));
    if (outcome.error) {
      return c.html(<ImportPage session={session} merchantId={merchantId} error={outcome.error} />, outcome.error.status as 400);
    }
    const result = outcome.ok;
    await accounts().record(session.principal, merchantId, 'catalog.import',
      `"${file.name}": ${result.lines} lines, ${result.upserted} upserted, ${result.deleted} deleted`);
    return c.html(<ImportPage session={session} merchantId={merchantId} result={{ ...result, file: file.name }} />);
  });

  return pages;
}
