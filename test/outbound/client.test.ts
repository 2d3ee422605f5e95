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
      // /hang never answers; /slow answers after 350 ms; anything else at once.
      if (path === '/hang') return;
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
    const c = start({ timeoutMs: 1000, connections: 1, idleMs: 50 });
    expect(await post(c, '/ok')).toMatchObject({ ok: true, value: 204 });
    expect(await post(c, '/ok', 'webhook-endpoint:1')).toMatchObject({ ok: true, value: 204 });
    expect(c.openPools).toBe(2);
    await until(() => c.openPools === 0, 'the idle pools are closed');
    // A pool comes back on the next request.
    expect(await post(c, '/ok', 'webhook-endpoint:1')).toMatchObject({ ok: true, value: 204 });
    expect(c.openPools).toBe(1);
  });
});
