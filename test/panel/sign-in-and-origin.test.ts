// Panel sign-in throttling and the form origin over real HTTP: failures from
// one source address (127.0.0.2, still loopback) never lock the operator or a user out at another
// (127.0.0.1); with CPS_PUBLIC_BASE_URL set, a form is accepted from that origin only, whatever
// Host the request names; X-Frame-Options beside frame-ancestors; `?done=` notices never read
// Object's prototype. One service, no browser: these are headers and status codes.
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_TOKEN, startTestService, type TestService } from '../support/service.js';

const PUBLIC = 'http://panel.example.test:8080';
const ATTACKER = '127.0.0.2';
let service: TestService;
let merchantId: number;
let endpointId: number;

beforeAll(async () => {
  service = await startTestService({
    config: { publicBaseUrl: PUBLIC, publicBaseUrlConfigured: true, webhooks: { allowHosts: ['127.0.0.1'] } },
  });
  merchantId = (await service.admin.createMerchant({ name: 'Alpine Outfitters' })).id;
  endpointId = (await service.service.endpoints.create(merchantId, { url: 'https://127.0.0.1/hooks' })).id;
  const invitation = await service.service.accounts.invite({ kind: 'operator' }, merchantId, {
    email: 'owner@alpine.example',
    role: 'owner',
  });
  await service.service.accounts.acceptInvitation(invitation.token, 'the real password');
});
afterAll(() => service?.close());

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** A request from a chosen loopback source address, with the Host and Origin a client chooses. */
function request(
  method: 'GET' | 'POST',
  path: string,
  options: { from?: string; host?: string; origin?: string; cookie?: string; form?: Record<string, string> } = {},
): Promise<Answer> {
  const { port } = new URL(service.url);
  const body = options.form ? new URLSearchParams(options.form).toString() : undefined;
  const headers: Record<string, string> = { Host: options.host ?? `127.0.0.1:${port}` };
  if (options.origin) headers.Origin = options.origin;
  if (options.cookie) headers.Cookie = options.cookie;
  if (body !== undefined)
    Object.assign(headers, { 'Content-Type': 'application/x-www-form-urlencoded', 'Content-Length': String(Buffer.byteLength(body)) });
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port: Number(port), localAddress: options.from ?? '127.0.0.1', method, path, headers },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          text += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const operatorSignIn = (token: string, from?: string) =>
  request('POST', '/panel/login/operator', { from, origin: PUBLIC, form: { admin_token: token } });
const userSignIn = (password: string, from?: string) =>
  request('POST', '/panel/login', { from, origin: PUBLIC, form: { email: 'owner@alpine.example', password } });
const cookieOf = (answer: Answer) => answer.headers['set-cookie']![0]!.split(';')[0]!;

describe('sign-in throttling per account and address', () => {
  it('five wrong admin tokens from one address make that address wait (Retry-After), while the right token signs in from another', async () => {
    for (let i = 0; i < 5; i++) expect((await operatorSignIn(`adm_wrong_${i}`, ATTACKER)).status).toBe(401);
    const held = await operatorSignIn(ADMIN_TOKEN, ATTACKER);
    expect(held.status).toBe(429);
    expect(held.headers['retry-after']).toBe('30');
    // The operator, elsewhere, is not locked out.
    const operator = await operatorSignIn(ADMIN_TOKEN);
    expect(operator.status).toBe(303);
    expect(operator.headers.location).toBe('/panel');
    expect(cookieOf(operator)).toMatch(/^cps_panel=/);
    expect((await operatorSignIn(ADMIN_TOKEN, ATTACKER)).status).toBe(429);
  });

  it('the same for a known e-mail: wrong passwords from one address never lock its owner out at another', async () => {
    for (let i = 0; i < 5; i++) expect((await userSignIn(`a wrong guess ${i}`, ATTACKER)).status).toBe(401);
    expect((await userSignIn('the real password', ATTACKER)).status).toBe(429);
    const owner = await userSignIn('the real password');
    expect(owner.status).toBe(303);
    expect(cookieOf(owner)).toMatch(/^cps_panel=/);
  });
});

describe('the form origin, framing and notices', () => {
  it('accepts a form only from CPS_PUBLIC_BASE_URL when it is set: a Host the attacker names is not trusted', async () => {
    const attacker = 'attacker.example:8080';
    const forged = await request('POST', '/panel/login/operator', {
      host: attacker,
      origin: `http://${attacker}`,
      form: { admin_token: ADMIN_TOKEN },
    });
    expect(forged.status).toBe(403);
    expect(forged.headers['set-cookie']).toBeUndefined();

    const cookie = cookieOf(await operatorSignIn(ADMIN_TOKEN));
    const keys = await request('GET', `/panel/merchants/${merchantId}/keys`, { cookie });
    const csrf = /name="_csrf" value="([^"]+)"/.exec(keys.body)![1]!;
    const before = await service.admin.listApiKeys(merchantId);
    const planted = await request('POST', `/panel/merchants/${merchantId}/keys`, {
      host: attacker,
      origin: `http://${attacker}`,
      cookie,
      form: { _csrf: csrf, name: 'planted' },
    });
    expect(planted.status).toBe(403);
    expect(await service.admin.listApiKeys(merchantId)).toEqual(before);
    // From the configured origin, the same form goes through (to the page that shows the key once).
    const created = await request('POST', `/panel/merchants/${merchantId}/keys`, {
      origin: PUBLIC,
      cookie,
      form: { _csrf: csrf, name: 'genuine', scopes: 'catalog:read' },
    });
    expect(created.status).toBe(303);
    expect((await service.admin.listApiKeys(merchantId)).map((k) => k.name)).toEqual([...before.map((k) => k.name), 'genuine']);
  });

  it('sends X-Frame-Options: DENY beside frame-ancestors on every panel page', async () => {
    const cookie = cookieOf(await operatorSignIn(ADMIN_TOKEN));
    for (const [path, withCookie] of [
      ['/panel/login', false],
      [`/panel/merchants/${merchantId}/users`, true],
      ['/panel/no-such-page', false],
    ] as const) {
      const answer = await request('GET', path, withCookie ? { cookie } : {});
      expect(answer.headers['x-frame-options'], path).toBe('DENY');
      expect(answer.headers['content-security-policy'], path).toContain("frame-ancestors 'none'");
    }
  });

  it('shows no notice for ?done= naming a property of Object (constructor, __proto__, toString), and the notice for a real one', async () => {
    const cookie = cookieOf(await operatorSignIn(ADMIN_TOKEN));
    const list = `/panel/merchants/${merchantId}/endpoints`;
    for (const base of [list, `${list}/${endpointId}`]) {
      for (const done of ['constructor', '__proto__', 'toString', 'hasOwnProperty']) {
        const page = await request('GET', `${base}?done=${done}`, { cookie });
        expect(page.status, `${base}?done=${done}`).toBe(200);
        expect(page.body, `${base}?done=${done}`).not.toContain('role="status"');
      }
    }
    expect((await request('GET', `${list}?done=deleted`, { cookie })).body).toContain(
      '<p class="notice" role="status">The endpoint is deleted.</p>',
    );
  });
});
