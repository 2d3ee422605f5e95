// The sign-in throttle behind a proxy (CPS_TRUSTED_PROXIES), over real HTTP: clients on
// loopback addresses of their own reach the service through a real forwarding proxy (127.0.0.3),
// which appends the address it was reached from to X-Forwarded-For, as load balancers do. With the
// proxy trusted, failures from one client never lock out another behind the same proxy, and what a
// client writes in X-Forwarded-For itself changes nothing; without the setting (or from a peer that
// is not a trusted proxy) the header is ignored. No browser: these are status codes.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { clientAddress } from '../../src/http/client-address.js';
import { AddressRanges } from '../../src/shared/address-ranges.js';
import { ADMIN_TOKEN, startTestService, type TestService } from '../support/service.js';

const PROXY = '127.0.0.3';
const ATTACKER = '127.0.0.2';
const OPERATOR = '127.0.0.4';

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
}

/** One POST of a url-encoded form from a chosen loopback address, with the headers a client chooses. */
function post(
  target: string,
  path: string,
  form: Record<string, string>,
  options: { from: string; headers?: Record<string, string> },
): Promise<Answer> {
  const url = new URL(target);
  const body = new URLSearchParams(form).toString();
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: url.hostname,
        port: Number(url.port),
        localAddress: options.from,
        method: 'POST',
        path,
        headers: {
          Origin: target,
          ...options.headers,
          'Content-Type': 'application/x-www-form-urlencoded',
          'Content-Length': String(Buffer.byteLength(body)),
        },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

interface Proxy {
  url: string;
  close(): Promise<void>;
}

/**
 * A forwarding proxy on 127.0.0.1 that connects to the service from PROXY and appends the address
 * each request came from to X-Forwarded-For. The Origin a browser would send names the public
 * address (the proxy's); the service sees its own Host, so the tests send the service's origin.
 */
async function startProxy(service: string): Promise<Proxy> {
  const upstream = new URL(service);
  const server = http.createServer((req, res) => {
    const forwarded = [req.headers['x-forwarded-for'], req.socket.remoteAddress].filter(Boolean).join(', ');
    const out = http.request(
      {
        host: upstream.hostname,
        port: Number(upstream.port),
        localAddress: PROXY,
        method: req.method,
        path: req.url,
        headers: { ...req.headers, host: upstream.host, 'x-forwarded-for': forwarded },
      },
      (answer) => {
        res.writeHead(answer.statusCode!, answer.headers);
        answer.pipe(res);
      },
    );
    out.on('error', () => res.destroy());
    req.pipe(out);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const operatorSignIn = (service: TestService, via: string, token: string, from: string, headers?: Record<string, string>) =>
  post(via, '/panel/login/operator', { admin_token: token }, { from, headers: { ...headers, Origin: service.url } });

/** Five wrong admin tokens from `from`, each answered 401. */
async function fiveFailures(
  service: TestService,
  via: string,
  from: string,
  headers?: (i: number) => Record<string, string>,
): Promise<void> {
  for (let i = 0; i < 5; i++) expect((await operatorSignIn(service, via, `adm_wrong_${i}`, from, headers?.(i))).status).toBe(401);
}

describe('CPS_TRUSTED_PROXIES', () => {
  it('lists IP addresses and CIDR ranges, and refuses anything else at start, naming the variable', () => {
    expect(loadConfig({}).trustedProxies).toEqual([]);
    expect(loadConfig({ CPS_TRUSTED_PROXIES: ' 10.0.0.0/8, 192.0.2.7,2001:db8::/32 ' }).trustedProxies).toEqual([
      '10.0.0.0/8',
      '192.0.2.7',
      '2001:db8::/32',
    ]);
    for (const bad of ['10.0.0.0/33', 'proxy.internal', '10.0.0.0/8/1', '2001:db8::/129', '10.0.0']) {
      expect(() => loadConfig({ CPS_TRUSTED_PROXIES: `127.0.0.1,${bad}` })).toThrow(
        `CPS_TRUSTED_PROXIES must list IP addresses or CIDR ranges (10.0.0.0/8, 2001:db8::/32), got "${bad}"`,
      );
    }
  });

  it('takes the rightmost address that is not a trusted proxy, and only from a trusted proxy', () => {
    const trusted = new AddressRanges(['10.0.0.0/8', '2001:db8::1']);
    expect(clientAddress('10.0.0.5', '198.51.100.7', trusted)).toBe('198.51.100.7');
    // What the client wrote itself is to the left of what its first proxy appended.
    expect(clientAddress('10.0.0.5', '203.0.113.9, 198.51.100.7, 10.0.0.6', trusted)).toBe('198.51.100.7');
    expect(clientAddress('::ffff:10.0.0.5', '[2001:db8::7]:443', trusted)).toBe('2001:db8::7');
    expect(clientAddress('10.0.0.5', '198.51.100.7:5678', trusted)).toBe('198.51.100.7');
    // Every hop trusted: the farthest; a hop that is no address: the proxy that passed it on.
    expect(clientAddress('10.0.0.5', '10.0.0.9, 10.0.0.6', trusted)).toBe('10.0.0.9');
    expect(clientAddress('10.0.0.5', 'unknown, 10.0.0.6', trusted)).toBe('10.0.0.6');
    expect(clientAddress('10.0.0.5', '', trusted)).toBe('10.0.0.5');
    // Not from a trusted proxy, or none trusted: the peer, whatever the header says.
    expect(clientAddress('198.51.100.7', '10.0.0.1', trusted)).toBe('198.51.100.7');
    expect(clientAddress('10.0.0.5', '198.51.100.7', new AddressRanges([]))).toBe('10.0.0.5');
  });
});

describe('sign-in throttling through a trusted proxy', () => {
  let service: TestService;
  let proxy: Proxy;

  beforeAll(async () => {
    service = await startTestService({ config: { trustedProxies: loadConfig({ CPS_TRUSTED_PROXIES: `${PROXY}/32` }).trustedProxies } });
    proxy = await startProxy(service.url);
  });
  afterAll(async () => {
    await proxy?.close();
    await service?.close();
  });

  it('five wrong admin tokens from one client behind the proxy hold back that client only: the operator behind the same proxy signs in', async () => {
    await fiveFailures(service, proxy.url, ATTACKER);
    const held = await operatorSignIn(service, proxy.url, ADMIN_TOKEN, ATTACKER);
    expect(held.status).toBe(429);
    expect(held.headers['retry-after']).toBe('30');
    const operator = await operatorSignIn(service, proxy.url, ADMIN_TOKEN, OPERATOR);
    expect(operator.status).toBe(303);
    expect(operator.headers['set-cookie']![0]).toMatch(/^cps_panel=/);
  });

  it('a client writing X-Forwarded-For itself stays held back: the proxy appends its real address', async () => {
    for (let i = 0; i < 3; i++) {
      const spoofed = await operatorSignIn(service, proxy.url, ADMIN_TOKEN, ATTACKER, { 'X-Forwarded-For': `198.51.100.${i + 1}` });
      expect(spoofed.status).toBe(429);
    }
  });

  it('a peer that is not a trusted proxy is not believed: its X-Forwarded-For is ignored', async () => {
    const direct = '127.0.0.5';
    await fiveFailures(service, service.url, direct, (i) => ({ 'X-Forwarded-For': `203.0.113.${i + 1}` }));
    expect((await operatorSignIn(service, service.url, ADMIN_TOKEN, direct, { 'X-Forwarded-For': '203.0.113.77' })).status).toBe(429);
  });
});

describe('sign-in throttling without CPS_TRUSTED_PROXIES', () => {
  let service: TestService;
  let proxy: Proxy;

  beforeAll(async () => {
    service = await startTestService();
    proxy = await startProxy(service.url);
  });
  afterAll(async () => {
    await proxy?.close();
    await service?.close();
  });

  it('ignores X-Forwarded-For: a client cannot spoof its way out of the throttle', async () => {
    await fiveFailures(service, service.url, ATTACKER, (i) => ({ 'X-Forwarded-For': `198.51.100.${i + 1}` }));
    for (const spoof of ['198.51.100.99', '127.0.0.1', OPERATOR]) {
      expect((await operatorSignIn(service, service.url, ADMIN_TOKEN, ATTACKER, { 'X-Forwarded-For': spoof })).status).toBe(429);
    }
    // Another address is not held back.
    expect((await operatorSignIn(service, service.url, ADMIN_TOKEN, OPERATOR)).status).toBe(303);
  });

  it('behind an untrusted proxy every client is the proxy: what the setting is for', async () => {
    await fiveFailures(service, proxy.url, ATTACKER);
    expect((await operatorSignIn(service, proxy.url, ADMIN_TOKEN, OPERATOR)).status).toBe(429);
  });
});
