// The cap on connections below the file descriptor limit: `serve` in a child
// process under `ulimit -n 200`, on the project's engine, with more event streams opened at once
// than the cap (200 minus the default reserve of 128: 72). Every surplus connection is answered
// 503 with Retry-After (none 500, none reset), /readyz, /healthz and /metrics still answer on a
// new connection and show the limit and the cap, and an ordinary read succeeds once the streams
// are released. Each request here has a connection of its own (agent: false), as a crowd of clients would.
import http from 'node:http';
import { afterAll, expect } from 'vitest';
import { freePort, ServiceProcess } from '../faults/harness.js';
import { onTestDatabase, scenarioIt } from '../faults/test-database.js';
import { sample } from '../support/metrics.js';
import { adminCalls } from '../support/admin-calls.js';

const ADMIN_TOKEN = 'adm_connection_cap_test_token_01';
const DESCRIPTOR_LIMIT = 200;
const RESERVE = 128;
const CAP = DESCRIPTOR_LIMIT - RESERVE;
const STREAMS = 130;
const MERCHANTS = 5;
/** Streams opened at once: fewer than the reserve's share for answering past the cap (a quarter: 32). */
const WAVE = 20;

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  /** The whole body, or for an event stream left open, nothing (read it with `release`). */
  body: string;
  /** Closes the connection (an event stream the client lets go of). */
  release(): void;
}

/** One request on a connection of its own; an event stream stays open until released. */
function request(url: string, headers: Record<string, string> = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { agent: false, headers }, (res) => {
      const release = () => req.destroy();
      if (res.headers['content-type'] === 'text/event-stream')
        return resolve({ status: res.statusCode!, headers: res.headers, body: '', release });
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body, release }));
      res.on('error', reject);
    });
    req.on('error', reject);
  });
}

let serve: ServiceProcess | undefined;
afterAll(async () => {
  await serve?.stop('SIGKILL');
});

scenarioIt(
  'past the cap below the descriptor limit every new connection is answered 503 with Retry-After; the probes still answer and reads resume once streams close',
  async () => {
    await onTestDatabase(async (database) => {
      const port = await freePort();
      const base = `http://127.0.0.1:${port}`;
      serve = await ServiceProcess.start(
        {
          CPS_DATABASE_URL: '',
          ...database.env,
          CPS_PORT: String(port),
          CPS_HOST: '127.0.0.1',
          CPS_ADMIN_TOKEN: ADMIN_TOKEN,
          CPS_DEMO_ON_EMPTY: 'false',
          CPS_IMAGE_MIRRORING: 'false',
          CPS_ACCESS_LOG: 'false',
          // The per-key cap on live connections is not what this test is about.
          CPS_FEED_LIVE_PER_KEY: '100',
        },
        30_000,
        'serve',
        { descriptorLimit: DESCRIPTOR_LIMIT },
      );
      const admin = adminCalls(`${base}/admin/v1`, ADMIN_TOKEN);
      // A few merchants share the streams, so no cap per key or merchant is reached before the connection cap.
      const keys: string[] = [];
      for (let i = 0; i < MERCHANTS; i++) {
        const merchant = await admin('POST', '/merchants', { name: `Crowded ${i}` });
        await admin('PUT', `/merchants/${merchant.id}/stores/de`, { name: 'DE', locale: 'de-DE', currency: 'EUR' });
        keys.push((await admin('POST', `/merchants/${merchant.id}/api-keys`, { name: 'streams' })).key as string);
      }

      // The start-up log line shows the limit, the reserve and the cap.
      const listening = serve.output.split('\n').find((line) => line.includes('"msg":"listening"'));
      expect(JSON.parse(listening!)).toMatchObject({
        descriptor_limit: DESCRIPTOR_LIMIT,
        descriptor_reserve: RESERVE,
        max_connections: CAP,
      });

      const streamHeaders = (i: number) => ({ Authorization: `Bearer ${keys[i % MERCHANTS]}`, Accept: 'text/event-stream' });
      const attempts = [];
      for (let i = 0; i < STREAMS; i += WAVE) {
        const wave = Array.from({ length: Math.min(WAVE, STREAMS - i) }, (_, j) =>
          request(`${base}/v1/changes?store=de`, streamHeaders(i + j)),
        );
        attempts.push(...(await Promise.allSettled(wave)));
      }
      const answers = attempts.map((attempt) => (attempt.status === 'fulfilled' ? attempt.value : undefined));
      const failures = attempts.flatMap((attempt) => (attempt.status === 'rejected' ? [String(attempt.reason)] : []));
      // None reset, none a 500: each is a stream or a refusal.
      expect(failures).toEqual([]);
      const statuses = answers.map((answer) => answer!.status);
      expect(new Set(statuses)).toEqual(new Set([200, 503]));
      const streams = answers.filter((answer) => answer!.status === 200);
      const refused = answers.filter((answer) => answer!.status === 503);
      // The admin calls' keep-alive connections may still hold a few places.
      expect(streams.length).toBeLessThanOrEqual(CAP);
      expect(streams.length).toBeGreaterThan(CAP - 10);
      expect(refused.length).toBe(STREAMS - streams.length);
      for (const answer of refused) {
        expect(answer!.headers['retry-after']).toBe('10');
        expect(answer!.headers['content-type']).toBe('application/problem+json');
        expect(answer!.headers['x-request-id']).toBeTruthy();
        expect(JSON.parse(answer!.body)).toMatchObject({
          type: 'urn:problem:catalog:service_unavailable',
          status: 503,
          code: 'service_unavailable',
          instance: '/v1/changes',
        });
      }

      // Full: an ordinary read on a new connection is refused the same way; the probes and the scrape answer.
      const readWhileFull = await request(`${base}/v1/products?store=de`, { Authorization: `Bearer ${keys[0]}` });
      expect(readWhileFull.status).toBe(503);
      expect(readWhileFull.headers['retry-after']).toBe('10');
      expect((await request(`${base}/healthz`)).status).toBe(200);
      const ready = await request(`${base}/readyz`);
      expect(ready.status).toBe(200);
      expect(ready.headers.connection).toBe('close');
      expect(JSON.parse(ready.body)).toMatchObject({
        status: 'ready',
        connections: { descriptor_limit: DESCRIPTOR_LIMIT, descriptor_reserve: RESERVE, max_connections: CAP },
      });
      const metrics = await request(`${base}/metrics`);
      expect(metrics.status).toBe(200);
      expect(sample(metrics.body, 'cps_http_connections')).toBeGreaterThanOrEqual(CAP);
      expect(sample(metrics.body, 'cps_http_connections_refused_total')).toBeGreaterThanOrEqual(refused.length + 1);

      // The streams let go: reads are answered again, and /readyz counts the connections down.
      for (const stream of streams) stream!.release();
      await expect
        .poll(async () => JSON.parse((await request(`${base}/readyz`)).body).connections.open as number, { timeout: 10_000 })
        .toBeLessThan(10);
      const read = await request(`${base}/v1/products?store=de`, { Authorization: `Bearer ${keys[0]}` });
      expect(read.status).toBe(200);
      expect(JSON.parse(read.body)).toMatchObject({ data: [] });
      expect(serve.output).not.toContain('unable to open database file');
    });
  },
  90_000,
);
