// One merchant's many keys cannot exhaust a process: exports in flight and live
// change-feed connections are capped per key, per merchant (all its keys together: 429) and per
// process (503 with Retry-After), so another merchant is still served; HEAD on the export holds no
// export (item 6). Small caps are configured here; real HTTP on 127.0.0.1, on either engine.
import { LIVE_RETRY_AFTER_SECONDS } from '../../src/changes/live.js';
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService } from '../support/service.js';
import { merchantWithTents } from '../support/tent-catalog.js';

/** 300 products of ~48 KB: an export of 14 MB, more than every buffer between server and client, so a client that does not read holds it. */
const PRODUCTS = 300;
const LONG_TEXT = 'Leichtes Trekkingzelt mit zwei Apsiden. '.repeat(1200);

/** A request whose client takes nothing of the body (its response paused): it holds what it opened until `close`. */
function heldRequest(service: TestService, path: string, key: string, headers: Record<string, string> = {}) {
  return new Promise<{ status: number; close: () => void }>((resolve, reject) => {
    const request = http.get(
      `${service.url}${path}`,
      { headers: { Authorization: `Bearer ${key}`, 'Accept-Encoding': 'identity', ...headers } },
      (response) => {
        response.pause();
        response.on('error', () => {});
        resolve({ status: response.statusCode!, close: () => request.destroy() });
      },
    );
    request.on('error', reject);
  });
}

/** A refusal of shared/slots.ts: its Retry-After is spread at random from `retryAfter` to twice it. */
function expectRefusal(response: { status: number; headers: Headers; body: any }, status: 429 | 503, words: string, retryAfter = '1') {
  expect(response.status).toBe(status);
  expect(response.headers.get('content-type')).toContain('application/problem+json');
  const seconds = Number(response.headers.get('retry-after'));
  expect(Number.isInteger(seconds) && seconds >= Number(retryAfter) && seconds <= 2 * Number(retryAfter)).toBe(true);
  expect(response.body.code).toBe(status === 429 ? 'rate_limited' : 'service_unavailable');
  expect(response.body.detail).toContain(words);
}

describe('exports in flight, capped per key, per merchant and per process', () => {
  let service: TestService;
  let a: string[];
  let b: string[];

  beforeAll(async () => {
    service = await startTestService({ config: { exports: { perKey: 1, perMerchant: 2, perProcess: 3, memoryBytes: 64 * 1024 } } });
    const merchantA = await merchantWithTents(service, 'Many Keys Outdoor', PRODUCTS, LONG_TEXT);
    const merchantB = await merchantWithTents(service, 'Other Outdoor', PRODUCTS, LONG_TEXT);
    a = await Promise.all([1, 2, 3].map(() => service.keyFor(merchantA)));
    b = await Promise.all([1, 2].map(() => service.keyFor(merchantB)));
  }, 120_000);
  afterAll(() => service.close());

  const exportWith = (key: string) => service.api('/v1/products/export?store=de', key, { headers: { 'Accept-Encoding': 'identity' } });

  it("answers 429 once a merchant's keys together hold its cap, while another merchant is still served", async () => {
    const held = [await heldRequest(service, '/v1/products/export', a[0]!), await heldRequest(service, '/v1/products/export', a[1]!)];
    try {
      expect(held.map((h) => h.status)).toEqual([200, 200]);
      // a[2] holds nothing itself: the merchant's cap refuses it.
      expectRefusal(await exportWith(a[2]!), 429, 'one merchant');
      const other = await exportWith(b[0]!);
      expect(other.status).toBe(200);
      expect(JSON.parse(other.text.trimEnd().split('\n').at(-1)!)).toMatchObject({ count: PRODUCTS });
    } finally {
      for (const h of held) h.close();
    }
  });

  it('answers 503 with Retry-After once the process holds its cap, whoever asks, and serves again once one ends', async () => {
    const held = [
      await heldRequest(service, '/v1/products/export', a[0]!),
      await heldRequest(service, '/v1/products/export', a[1]!),
      await heldRequest(service, '/v1/products/export', b[0]!),
    ];
    try {
      expect(held.map((h) => h.status)).toEqual([200, 200, 200]);
      expectRefusal(await exportWith(b[1]!), 503, 'This server holds 3 exports in flight');
      held[0]!.close();
      await expect.poll(async () => (await exportWith(b[1]!)).status, { timeout: 10_000, interval: 50 }).toBe(200);
    } finally {
      for (const h of held) h.close();
    }
  });

  it('answers HEAD while the key holds all its exports: a HEAD holds none', async () => {
    const held = await heldRequest(service, '/v1/products/export', a[0]!);
    try {
      expect(held.status).toBe(200);
      expectRefusal(await exportWith(a[0]!), 429, 'This API key holds 1');
      // Plain fetch: the contract harness knows the documented GET only.
      const head = await fetch(`${service.url}/v1/products/export?store=de`, {
        method: 'HEAD',
        headers: { Authorization: `Bearer ${a[0]!}`, 'Accept-Encoding': 'identity' },
      });
      expect(head.status).toBe(200);
      expect(head.headers.get('etag')).toMatch(/^"/);
    } finally {
      held.close();
    }
  });
});

describe('live change-feed connections, capped per key, per merchant and per process', () => {
  let service: TestService;
  let a: string[];
  let b: string[];

  beforeAll(async () => {
    service = await startTestService({ config: { changes: { livePerKey: 1, livePerMerchant: 2, livePerProcess: 3 } } });
    const merchantA = await merchantWithTents(service, 'Many Keys Outdoor', 0, LONG_TEXT);
    const merchantB = await merchantWithTents(service, 'Other Outdoor', 0, LONG_TEXT);
    a = await Promise.all([1, 2, 3].map(() => service.keyFor(merchantA)));
    b = await Promise.all([1, 2].map(() => service.keyFor(merchantB)));
  });
  afterAll(() => service.close());

  const stream = (key: string) => heldRequest(service, '/v1/changes', key, { Accept: 'text/event-stream' });
  const longPoll = (key: string) => service.api('/v1/changes?wait=30', key);

  it("refuses a merchant's stream or long-poll with 429 once its keys hold its cap, and serves another merchant", async () => {
    const held = [await stream(a[0]!), await stream(a[1]!)];
    try {
      expect(held.map((h) => h.status)).toEqual([200, 200]);
      expectRefusal(
        await service.api('/v1/changes', a[2]!, { headers: { Accept: 'text/event-stream' } }),
        429,
        'one merchant',
        String(LIVE_RETRY_AFTER_SECONDS),
      );
      expectRefusal(await longPoll(a[2]!), 429, 'one merchant', String(LIVE_RETRY_AFTER_SECONDS));
      const other = await stream(b[0]!);
      expect(other.status).toBe(200);
      other.close();
    } finally {
      for (const h of held) h.close();
    }
  });

  it('refuses a stream or long-poll with 503 and Retry-After once the process holds its cap', async () => {
    const held = [await stream(a[0]!), await stream(a[1]!), await stream(b[0]!)];
    try {
      expect(held.map((h) => h.status)).toEqual([200, 200, 200]);
      expectRefusal(await longPoll(b[1]!), 503, 'This server holds 3 live connections', String(LIVE_RETRY_AFTER_SECONDS));
      expectRefusal(
        await service.api('/v1/changes', b[1]!, { headers: { Accept: 'text/event-stream' } }),
        503,
        'This server holds 3',
        String(LIVE_RETRY_AFTER_SECONDS),
      );
      held[0]!.close();
      await expect.poll(() => service.service.liveFeed.connections, { timeout: 5000, interval: 20 }).toBe(2);
      const waited = service.api('/v1/changes?wait=1', b[1]!);
      expect((await waited).status).toBe(200);
    } finally {
      for (const h of held) h.close();
    }
  });
});
