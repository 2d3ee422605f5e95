// The panel's NDJSON upload: a file with a line whose bytes are not UTF-8, or that
// holds a lone surrogate escape, fails as an import job listing those lines, nothing applied;
// the same rules as the admin API's import. Browser-less: the form is posted over HTTP.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { operatorCookie } from './sign-in.js';
import { startTestService, type TestService } from '../support/service.js';

let service: TestService;
let merchantId: number;

beforeAll(async () => {
  service = await startTestService();
  merchantId = (await service.admin.createMerchant({ name: 'Encoding Outfitters' })).id;
});
afterAll(() => service.close());

it('an uploaded file with invalid bytes or a lone surrogate fails naming each such line, applying nothing', async () => {
  const cookie = await operatorCookie(service.url);
  const page = `/panel/merchants/${merchantId}/import`;
  const html = await (await fetch(`${service.url}${page}`, { headers: { Cookie: cookie } })).text();
  const csrf = /name="_csrf" value="([^"]+)"/.exec(html)![1]!;
  const line = (ref: string, title: string | number[]) =>
    Buffer.concat([
      Buffer.from(`{"op": "upsert_product", "product": {"ref": "${ref}", "content": {"de": {"title": "`),
      typeof title === 'string' ? Buffer.from(title) : Buffer.from(title),
      Buffer.from('"}}}}\n'),
    ]);
  const file = Buffer.concat([
    line('OK-1', 'Zelt'),
    line('BAD-1', [0xff, 0xfe]),
    line('BAD-2', [0xed, 0xa0, 0x80]),
    line('BAD-3', '\\ud800'),
  ]);
  const form = new FormData();
  form.set('_csrf', csrf);
  form.set('file', new Blob([file], { type: 'application/x-ndjson' }), 'products.ndjson');
  const response = await fetch(`${service.url}${page}`, {
    method: 'POST',
    body: form,
    redirect: 'manual',
    headers: { Cookie: cookie, Origin: service.url },
  });
  expect(response.status).toBe(303);
  await service.service.imports.drain();

  const [job] = await service.storage.listImportJobs(merchantId, 1);
  expect(job).toMatchObject({ state: 'failed', file_name: 'products.ndjson', products_applied: 0 });
  expect(job!.problems.map((p) => `${p.name}: ${p.reason}`)).toEqual([
    expect.stringMatching(/^line 2: is not valid UTF-8: an invalid byte sequence \(FF\) at byte \d+$/),
    expect.stringMatching(/^line 3: is not valid UTF-8: an encoded UTF-16 surrogate \(ED A0 80\) at byte \d+$/),
    expect.stringMatching(/^line 4: \/product\/content\/de\/title: holds a lone UTF-16 surrogate/),
  ]);
  expect(await service.storage.productsAfter(merchantId, 0, 100)).toEqual([]);
});
