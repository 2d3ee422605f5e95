// The guarded outbound client's pools: requests of one key (a webhook endpoint)
// use connections no other key uses, and the time-out of a request counts from its turn in its
// pool, never from a wait behind other requests. Against a real HTTP server on 127.0.0.1.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AddressGuard } from '../../src/outbound/address-guard.js';
import { GuardedHttpClient, type OutboundClientOptions } from '../../src/outbound/client.js';

let server: http.Server;
let origin: string;
let client: GuardedHttpClient | undefined;
/** Requests the server holds open right now, per path. */
const open = new Map<string, number>();

beforeEach(async () => {
  server = http.createServer((req, res) => {
    const path = req.url ?? '/';
    open.set(path, (open.get(path) ?? 0) + 1);
    res.once('close', () => open.set(path, open.get(path)! - 1));
    req.resume();
    req.on('end', () => {
      // /hang never answers; /slow answers after 350 ms; /endless sends a body that never ends;
      // /busy answers 503 with a Retry-After; anything else at once.
      if (path === '/hang') return;
      if (path === '/endless') {
        res.writeHead(200, { 'Content-Type': 'text/plain' });
        const more = () => {
          if (!res.destroyed) res.write('x'.repeat(16_384), () => setImmediate(more));
        };
        return more();
      }
      if (path === '/busy') return res.writeHead(503, { 'Retry-After': '7' }).end('busy');
      setTimeout(() => res.writeHead(204).end(), path === '/slow' ? 350 : 0);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterEach(async () => {
  await client?.close();
  client = undefined;
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  open.clear();
});

const start = (options: OutboundClientOptions) => {
  client = new GuardedHttpClient(new AddressGuard(['127.0.0.1']), options);
  return client;
};
const post = (c: GuardedHttpClient, path: string, pool?: string) =>
  c.exchange(`${origin}${path}`, { method: 'POST', body: '{}', pool }, async (response) => {
    await response.body.dump();
    return response.statusCode;
  });

async function until(condition: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 5000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe("the guarded client's pools", () => {
  it("keeps a key's requests on connections of its own: a key whose receiver hangs holds none of another key's, on the same origin", async () => {
    const c = start({ timeoutMs: 1000, connections: 2 });
    // Four requests of the hanging endpoint: two hang on its two connections, two wait for a turn.
    const hanging = Array.from({ length: 4 }, () => post(c, '/hang', 'webhook-endpoint:1'));
    await until(() => open.get('/hang') === 2, 'two requests hang');
    const started = Date.now();
    const healthy = await post(c, '/ok', 'webhook-endpoint:2');
    expect(healthy).toMatchObject({ ok: true, value: 204 });
    expect(Date.now() - started).toBeLessThan(500);
    // The hanging ones end by their time-out, each counted from its own turn.
    const ended = await Promise.all(hanging);
    expect(ended.map((e) => (e.ok ? 'ok' : e.error))).toEqual(['timeout', 'timeout', 'timeout', 'timeout']);
    await until(() => open.get('/hang') === 0, 'the hanging connections are closed');
  });

  it("counts the time-out from the request's turn: waiting for the pool's connection is not the receiver's time", async () => {
    // One connection; each answer takes 350 ms; the time-out is 600 ms. The second request waits
    // 350 ms for its turn and then gets its answer in 350 ms: 700 ms in all, yet no time-out.
    const c = start({ timeoutMs: 600, connections: 1 });
    const [first, second] = await Promise.all([post(c, '/slow', 'webhook-endpoint:1'), post(c, '/slow', 'webhook-endpoint:1')]);
    expect(first).toMatchObject({ ok: true, value: 204 });
    expect(second).toMatchObject({ ok: true, value: 204 });
    // The latency is the receiver's: from the turn, not from the call.
    expect(second.latencyMs).toBeLessThan(600);
  });

  it('ends the exchanges in flight at once on abortInFlight, as time-outs, and every later one without sending it', async () => {
    const c = start({ timeoutMs: 30_000, connections: 2 });
    const hanging = [post(c, '/hang', 'webhook-endpoint:1'), post(c, '/hang', 'webhook-endpoint:1')];
    await until(() => open.get('/hang') === 2, 'two requests hang');
    const started = Date.now();
    c.abortInFlight();
    const ended = await Promise.all(hanging);
    expect(ended.map((e) => (e.ok ? 'ok' : e.error))).toEqual(['timeout', 'timeout']);
    expect(Date.now() - started).toBeLessThan(1000);
    const later = await post(c, '/ok', 'webhook-endpoint:2');
    expect(later).toMatchObject({ ok: false, error: 'timeout' });
    expect(open.get('/ok')).toBeUndefined();
  });

  it("uses the origin's pool for requests without a key, and forgets a pool idle for idleMs", async () => {
    // Idle long enough that a loaded machine cannot close the first pool before the second request.
    const c = start({ timeoutMs: 1000, connections: 1, idleMs: 1000 });
    expect(await post(c, '/ok')).toMatchObject({ ok: true, value: 204 });
    expect(await post(c, '/ok', 'webhook-endpoint:1')).toMatchObject({ ok: true, value: 204 });
    expect(c.openPools).toBe(2);
    await until(() => c.openPools === 0, 'the idle pools are closed');
    // A pool comes back on the next request.
    expect(await post(c, '/ok', 'webhook-endpoint:1')).toMatchObject({ ok: true, value: 204 });
    expect(c.openPools).toBe(1);
  });
});

describe("the guarded client's POST of a small answer (webhook deliveries)", () => {
  const postSmall = (c: GuardedHttpClient, path: string, snippetBytes = 4096, pool = 'webhook-endpoint:1') =>
    c.post(`${origin}${path}`, { headers: { 'Content-Type': 'application/json' }, body: '{}', pool }, snippetBytes);

  it('keeps the status, the Retry-After and the body up to the bound, and does not read an endless body to its end', async () => {
    const c = start({ timeoutMs: 5000, connections: 2 });
    const busy = await postSmall(c, '/busy');
    expect(busy).toMatchObject({ ok: true, value: { statusCode: 503, retryAfter: '7' } });
    expect(busy.ok && busy.value.snippet.toString()).toBe('busy');
    const started = Date.now();
    const endless = await postSmall(c, '/endless', 100);
    expect(endless).toMatchObject({ ok: true, value: { statusCode: 200, retryAfter: null } });
    expect(endless.ok && endless.value.snippet.toString()).toBe('x'.repeat(100));
    expect(Date.now() - started).toBeLessThan(2000);
    await until(() => open.get('/endless') === 0, 'the endless answer is closed');
    expect(await postSmall(c, '/ok')).toMatchObject({ ok: true, value: { statusCode: 204 } });
  });

  it('ends by its time-out, counted from its turn, and on abortInFlight at once; refuses a blocked IP literal without sending', async () => {
    const c = start({ timeoutMs: 300, connections: 1 });
    const [hung, waited] = await Promise.all([postSmall(c, '/hang'), postSmall(c, '/slow', 4096)]);
    expect(hung).toMatchObject({ ok: false, error: 'timeout' });
    expect(hung.latencyMs).toBeGreaterThanOrEqual(290);
    // Its turn came after the hanging one's time-out; 350 ms is more than its own 300.
    expect(waited).toMatchObject({ ok: false, error: 'timeout' });
    const slow = start({ timeoutMs: 30_000, connections: 2 });
    const hanging = [postSmall(slow, '/hang', 4096, 'webhook-endpoint:2'), postSmall(slow, '/hang', 4096, 'webhook-endpoint:2')];
    await until(() => open.get('/hang') === 2, 'two requests hang');
    const abortedAt = Date.now();
    slow.abortInFlight();
    expect((await Promise.all(hanging)).map((e) => (e.ok ? 'ok' : e.error))).toEqual(['timeout', 'timeout']);
    expect(Date.now() - abortedAt).toBeLessThan(1000);
    await slow.close();
    const guarded = new GuardedHttpClient(new AddressGuard([]), { timeoutMs: 1000, connections: 1 });
    expect(await guarded.post(`${origin}/ok`, { body: '{}' }, 10)).toEqual({ ok: false, error: 'blocked_address', latencyMs: 0 });
    expect(open.get('/ok')).toBeUndefined();
    await guarded.close();
  });
});
