// Panel forms are UTF-8, as the admin API's JSON bodies are (shared/json-text.ts): a field whose
// bytes are not (`%FF`, an encoded lone surrogate `%ED%A0%80`, a cut-off sequence, raw bytes, a
// multipart part or file name) is refused with the panel's 400 error page naming the field and
// the bytes, and nothing is stored (it used to be stored with U+FFFD: keys and endpoints were created).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminOk, createMerchant, simpleProduct, type MerchantHandle } from '../support/admin-http.js';
import { startTestService, type TestService } from '../support/service.js';
import { operatorCookie } from '../panel/sign-in.js';

let service: TestService;
let merchant: MerchantHandle;
let cookie: string;
let csrf: string;

beforeAll(async () => {
  service = await startTestService();
  merchant = await createMerchant(service, 'Bytes Outfitters');
  await adminOk(service, 'PUT', `${merchant.base}/stores/de`, { name: 'DE', locale: 'de-DE', currency: 'EUR' });
  await adminOk(service, 'PUT', `${merchant.base}/suppliers/alpine`, { name: 'Alpine' });
  cookie = await operatorCookie(service.url);
  const html = await (await fetch(`${service.url}/panel/merchants/${merchant.id}/keys`, { headers: { Cookie: cookie } })).text();
  csrf = /name="_csrf" value="([^"]+)"/.exec(html)![1]!;
});
afterAll(() => service.close());

/** What a refused form could have written, read back over the admin API. */
async function stored(): Promise<unknown> {
  const state: Record<string, unknown> = {};
  for (const part of ['/api-keys', '/users', '/webhook-endpoints', '/audit-log']) {
    state[part] = (await service.adminApi('GET', `${merchant.base}${part}`)).body;
  }
  state.imports = (await service.service.imports.recent(merchant.id, 100)).length;
  return state;
}

const post = (path: string, body: string | Uint8Array, contentType = 'application/x-www-form-urlencoded') =>
  fetch(`${service.url}${path}`, {
    method: 'POST',
    redirect: 'manual',
    body: body as BodyInit,
    headers: { Cookie: cookie, Origin: service.url, 'Content-Type': contentType },
  });

const m = () => `/panel/merchants/${merchant.id}`;
const urlEncoded = (fields: string) => `_csrf=${encodeURIComponent(csrf)}&${fields}`;

describe('the panel refuses form fields that are not UTF-8, nothing stored', () => {
  it.each<{ what: string; path: () => string; fields: string; name: string; bytes: RegExp }>([
    {
      what: 'an API key name with an encoded surrogate',
      path: () => `${m()}/keys`,
      fields: 'name=ci%ED%A0%80',
      name: 'name',
      bytes: /ED A0 80/,
    },
    { what: 'an API key name with %FF', path: () => `${m()}/keys`, fields: 'name=ci%FF', name: 'name', bytes: /FF/ },
    {
      what: 'an endpoint URL with a cut-off sequence',
      path: () => `${m()}/endpoints`,
      fields: `url=${encodeURIComponent('http://127.0.0.1:9/hook')}%E2%82&events=product.price_changed`,
      name: 'url',
      bytes: /E2 82/,
    },
    {
      what: 'an endpoint URL with an encoded surrogate',
      path: () => `${m()}/endpoints`,
      fields: `url=${encodeURIComponent('http://127.0.0.1:9/')}%ED%A0%80&events=product.price_changed`,
      name: 'url',
      bytes: /ED A0 80/,
    },
    {
      what: 'an invitation e-mail',
      path: () => `${m()}/users`,
      fields: 'email=new%C0%AF@bytes.test&role=member',
      name: 'email',
      bytes: /C0/,
    },
    { what: 'a field name', path: () => `${m()}/keys`, fields: 'name=ci&x%ED%A0%80=1', name: 'x\ufffd\ufffd\ufffd', bytes: /ED A0 80/ },
  ])('$what: 400 naming the field and its bytes', async ({ path, fields, name, bytes }) => {
    const before = await stored();
    const response = await post(path(), urlEncoded(fields));
    const page = await response.text();
    expect(response.status, page).toBe(400);
    expect(response.headers.get('content-type')).toMatch(/^text\/html/);
    expect(page).toContain('is not valid UTF-8');
    expect(page).toMatch(bytes);
    expect(page.toLowerCase()).toContain(name.toLowerCase());
    expect(await stored()).toEqual(before);
  });

  it('refuses raw bytes that are not UTF-8 in an urlencoded body', async () => {
    const before = await stored();
    const body = Buffer.concat([Buffer.from(urlEncoded('name=ci')), Buffer.from([0xff, 0xfe])]);
    const response = await post(`${m()}/keys`, body);
    expect(response.status).toBe(400);
    expect(await response.text()).toContain('is not valid UTF-8');
    expect(await stored()).toEqual(before);
  });

  it('refuses a multipart upload whose file name or text part is not UTF-8, before any import starts', async () => {
    const before = await stored();
    const boundary = 'cps-boundary-7d1';
    const line = `${JSON.stringify(simpleProduct('UTF-1'))}\n`;
    const part = (head: Buffer, content: Buffer) =>
      Buffer.concat([Buffer.from(`--${boundary}\r\n`), head, Buffer.from('\r\n\r\n'), content, Buffer.from('\r\n')]);
    const bodies = [
      // The file's name holds ED A0 80 (a surrogate, encoded).
      Buffer.concat([
        part(Buffer.from('Content-Disposition: form-data; name="_csrf"'), Buffer.from(csrf)),
        part(
          Buffer.concat([
            Buffer.from('Content-Disposition: form-data; name="file"; filename="a'),
            Buffer.from([0xed, 0xa0, 0x80]),
            Buffer.from('.ndjson"\r\nContent-Type: application/x-ndjson'),
          ]),
          Buffer.from(line),
        ),
        Buffer.from(`--${boundary}--\r\n`),
      ]),
      // A text part (not a file) holding FF.
      Buffer.concat([
        part(Buffer.from('Content-Disposition: form-data; name="_csrf"'), Buffer.from(csrf)),
        part(Buffer.from('Content-Disposition: form-data; name="note"'), Buffer.from([0x61, 0xff])),
        part(
          Buffer.from('Content-Disposition: form-data; name="file"; filename="a.ndjson"\r\nContent-Type: application/x-ndjson'),
          Buffer.from(line),
        ),
        Buffer.from(`--${boundary}--\r\n`),
      ]),
    ];
    for (const body of bodies) {
      const response = await post(`${m()}/import`, body, `multipart/form-data; boundary=${boundary}`);
      const page = await response.text();
      expect(response.status, page).toBe(400);
      expect(page).toContain('is not valid UTF-8');
    }
    await service.service.imports.drain();
    expect(await stored()).toEqual(before);
  });

  it('still takes well-formed text beyond ASCII', async () => {
    const created = await post(`${m()}/keys`, urlEncoded(`name=${encodeURIComponent('Kasse Zürich 🏔')}&scopes=catalog%3Aread`));
    expect(created.status).toBe(303);
    const keys = (await service.adminApi('GET', `${merchant.base}/api-keys`)).body;
    expect(JSON.stringify(keys)).toContain('Kasse Zürich 🏔');
  });
});
