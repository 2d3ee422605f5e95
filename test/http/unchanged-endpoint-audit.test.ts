// The audit log records what changed: a PATCH of a webhook endpoint that changes nothing (an empty
// one, one sending the values the endpoint already has, re-enabling an active endpoint) writes no
// entry, over the admin API and from the panel's edit form alike (it used to write "endpoint N
// unchanged"); a PATCH that changes something is still recorded once.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminOk, createMerchant, type MerchantHandle } from '../support/admin-http.js';
import { startTestService, type TestService } from '../support/service.js';
import { operatorCookie } from '../panel/sign-in.js';

let service: TestService;
let merchant: MerchantHandle;
let hooks: string;
let endpointId: number;
const URL_A = 'https://hooks.outfitters-shop.com/a';

beforeAll(async () => {
  service = await startTestService();
  merchant = await createMerchant(service, 'Quiet Audit Outfitters');
  await adminOk(service, 'PUT', `${merchant.base}/stores/de`, { name: 'DE', locale: 'de-DE', currency: 'EUR' });
  endpointId = (await adminOk(service, 'POST', `${merchant.base}/webhook-endpoints`, { url: URL_A, events: ['price'] }, 201)).id;
  hooks = `${merchant.base}/webhook-endpoints/${endpointId}`;
});
afterAll(() => service.close());

const auditEntries = async (): Promise<{ action: string; detail: string }[]> =>
  (await adminOk(service, 'GET', `${merchant.base}/audit-log`)).data;

describe('a PATCH that changes nothing is not audited', () => {
  it.each<[string, Record<string, unknown>]>([
    ['an empty PATCH', {}],
    ['the URL it has', { url: URL_A }],
    ['every field as it is', { url: URL_A, store: null, events: ['price'], standard_webhooks: false, max_per_second: null }],
    ['re-enabling an active endpoint', { status: 'active' }],
  ])('%s: 200 with the endpoint as it was, and no audit entry', async (_, patch) => {
    const before = await auditEntries();
    const shown = await adminOk(service, 'GET', hooks);
    const patched = await adminOk(service, 'PATCH', hooks, patch);
    expect(patched).toEqual(shown);
    expect(await auditEntries()).toEqual(before);
    expect(JSON.stringify(await auditEntries())).not.toContain('unchanged');
  });

  it('the panel edit form sent back as it is writes no entry; a change is still recorded once', async () => {
    const cookie = await operatorCookie(service.url);
    const editUrl = `${service.url}/panel/merchants/${merchant.id}/endpoints/${endpointId}/edit`;
    const html = await (await fetch(editUrl, { headers: { Cookie: cookie } })).text();
    const csrf = /name="_csrf" value="([^"]+)"/.exec(html)![1]!;
    const submit = (url: string) =>
      fetch(editUrl, {
        method: 'POST',
        redirect: 'manual',
        body: new URLSearchParams({ _csrf: csrf, url, store: '', events: 'price', max_per_second: '' }),
        headers: { Cookie: cookie, Origin: service.url, 'Content-Type': 'application/x-www-form-urlencoded' },
      });
    const before = await auditEntries();
    const same = await submit(URL_A);
    expect(same.status).toBe(303);
    expect(same.headers.get('location')).toMatch(/done=updated$/);
    expect(await auditEntries()).toEqual(before);

    const changed = await submit('https://hooks.outfitters-shop.com/b');
    expect(changed.status).toBe(303);
    const after = await auditEntries();
    expect(after.length).toBe(before.length + 1);
    expect(after).toContainEqual(
      expect.objectContaining({ action: 'endpoint.update', detail: `endpoint ${endpointId} URL https://hooks.outfitters-shop.com/b` }),
    );
  });
});
