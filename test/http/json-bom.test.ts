// A JSON body that starts with a byte order mark (EF BB BF) is refused, the same for every
// operation that takes one (RFC 8259 section 8.1: senders MUST NOT add it, parsers MAY ignore it;
// the service picks one behaviour): 400 invalid_body naming the mark, nothing written. It used to
// be dropped silently by one decoder. The same body without the mark is accepted.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_ROUTE_FACTS } from '../../src/generated/admin-route-facts.js';
import { adminOk, createMerchant, type MerchantHandle } from '../support/admin-http.js';
import { ADMIN_TOKEN, startTestService, type TestService } from '../support/service.js';

let service: TestService;
let merchant: MerchantHandle;
let endpointId: number;

beforeAll(async () => {
  service = await startTestService();
  merchant = await createMerchant(service, 'Marked Outfitters');
  endpointId = (await adminOk(service, 'POST', `${merchant.base}/webhook-endpoints`, { url: 'https://hooks.outfitters-shop.com/a' }, 201))
    .id;
});
afterAll(() => service.close());

const BOM = Buffer.from([0xef, 0xbb, 0xbf]);
const JSON_OPERATIONS = ADMIN_ROUTE_FACTS.filter((operation) => operation.body === 'json');

/** The operation's path with this test's merchant and endpoint, and 1 for any other id. */
function pathOf(template: string): string {
  return template
    .replace('{merchant_id}', String(merchant.id))
    .replace('{endpoint_id}', String(endpointId))
    .replace(/\{[a-z_]+\}/g, (name) => (name === '{product_ref}' ? 'BOM-1' : name === '{store}' ? 'de' : '1'));
}

/** What any refused request could have written, read back over the admin API. */
async function stored(): Promise<unknown> {
  const parts = ['', '/api-keys', '/stores', '/suppliers', '/products', '/webhook-endpoints', '/audit-log', '/users'];
  const state: Record<string, unknown> = { merchants: (await service.adminApi('GET', '/admin/v1/merchants')).body };
  for (const part of parts) state[part || 'merchant'] = (await service.adminApi('GET', `${merchant.base}${part}`)).body;
  return state;
}

/** A request with these exact body bytes (through the contract harness); the JSON answer parsed. */
async function send(
  method: string,
  path: string,
  body: Buffer,
  contentType = 'application/json',
): Promise<{ status: number; headers: Headers; body: any; text: string }> {
  const response = await service.fetch(`${service.url}${path}`, {
    method,
    body: new Uint8Array(body),
    headers: { Authorization: `Bearer ${ADMIN_TOKEN}`, 'Content-Type': contentType },
  });
  const text = await response.text();
  return { status: response.status, headers: response.headers, body: text ? JSON.parse(text) : undefined, text };
}

describe('a JSON body starting with a byte order mark', () => {
  it('is a body of every JSON operation of the admin API', () => {
    expect(JSON_OPERATIONS.map((o) => o.operationId)).toEqual(
      expect.arrayContaining(['createMerchant', 'updateWebhookEndpoint', 'upsertProduct']),
    );
  });

  it.each(JSON_OPERATIONS.map((o) => [o.operationId, o] as const))(
    '%s: 400 invalid_body naming the mark, nothing written',
    async (_, operation) => {
      const before = await stored();
      // Sent as the operation's own JSON media type (a merge patch's, for a PATCH that takes one).
      const response = await send(
        operation.method,
        pathOf(operation.path),
        Buffer.concat([BOM, Buffer.from('{}')]),
        operation.mediaTypes[0],
      );
      expect(response.status, response.text).toBe(400);
      expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(response.body).toMatchObject({
        code: 'invalid_body',
        invalid_params: [{ name: '/', in: 'body', reason: expect.stringMatching(/^must not start with a byte order mark \(EF BB BF/) }],
      });
      expect(await stored()).toEqual(before);
    },
  );

  it('is accepted without the mark (the same PATCH and POST bodies)', async () => {
    const patch = Buffer.from(JSON.stringify({ max_per_second: 5 }));
    expect((await send('PATCH', `${merchant.base}/webhook-endpoints/${endpointId}`, Buffer.concat([BOM, patch]))).status).toBe(400);
    const patched = await send('PATCH', `${merchant.base}/webhook-endpoints/${endpointId}`, patch);
    expect(patched.status, patched.text).toBe(200);
    expect(patched.body.max_per_second).toBe(5);
    const created = await send('POST', '/admin/v1/merchants', Buffer.from(JSON.stringify({ name: 'Unmarked Outfitters' })));
    expect(created.status, created.text).toBe(201);
  });

  it('is a mark only at the start: U+FEFF inside a string is text like any other', async () => {
    const named = await send('POST', `${merchant.base}/api-keys`, Buffer.from(JSON.stringify({ name: 'ci\ufeffkey' })));
    expect(named.status, named.text).toBe(201);
    expect(named.body.name).toBe('ci\ufeffkey');
  });
});
