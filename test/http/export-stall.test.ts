// A client that stops reading an export is cut off after CPS_EXPORT_STALL_TIMEOUT_MS
// (1 s here): its connection is closed without the trailer line, and what it held (the spool's
// memory and temporary file, the key's export slot) is freed. Otherwise a stalled connection would
// hold them as long as it lives. Real HTTP on 127.0.0.1, on either engine.
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService } from '../support/service.js';
import { merchantWithTents } from '../support/tent-catalog.js';

/** 300 products of ~48 KB in `de`: an export of 14 MB, more than every buffer between server and client. */
const PRODUCTS = 300;
const LONG_TEXT = 'Leichtes Trekkingzelt mit zwei Apsiden. '.repeat(1200);

describe('an export whose client stops reading', () => {
  let service: TestService;
  let key: string;

  beforeAll(async () => {
    service = await startTestService({ config: { exports: { stallTimeoutMs: 1000, perKey: 1, memoryBytes: 64 * 1024 } } });
    const id = await merchantWithTents(service, 'Stalled Outdoor', PRODUCTS, LONG_TEXT);
    key = await service.keyFor(id);
  }, 60_000);
  afterAll(() => service.close());

  /** An export read to its end by a client that reads as fast as it can: its last line. */
  async function lastLineOfExport(): Promise<{ status: number; last: string }> {
    const response = await fetch(`${service.url}/v1/products/export?store=de`, {
      headers: { Authorization: `Bearer ${key}`, 'Accept-Encoding': 'identity' },
    });
    const text = await response.text();
    return { status: response.status, last: text.trimEnd().split('\n').at(-1)! };
  }

  it('is cut off after the stall time-out, without its trailer, and its key exports again at once', async () => {
    // A client that takes nothing (its socket paused: its receive window fills, then the server's send buffer).
    let read = 0;
    let closed!: Promise<boolean>;
    const held = await new Promise<http.IncomingMessage>((resolve, reject) => {
      const request = http.get(
        `${service.url}/v1/products/export?store=de`,
        { headers: { Authorization: `Bearer ${key}`, 'Accept-Encoding': 'identity' } },
        (response) => {
          response.pause();
          response.on('data', (chunk: Buffer) => {
            read += chunk.length;
          });
          response.on('error', () => {});
          // Whether the body was complete when the connection closed (a reset may close it while paused).
          closed = new Promise((done) => response.on('close', () => done(response.complete)));
          resolve(response);
        },
      );
      request.on('error', reject);
    });
    expect(held.statusCode).toBe(200);
    // With CPS_EXPORTS_PER_KEY at 1, the key's next export waits for the first one to end: after the
    // stall time-out the service gives up on it, and the next one goes through.
    const refused = await service.api('/v1/products/export?store=de', key, { headers: { 'Accept-Encoding': 'identity' } });
    expect(refused.status).toBe(429);
    await expect.poll(async () => (await lastLineOfExport()).status, { timeout: 10_000, interval: 100 }).toBe(200);
    expect(JSON.parse((await lastLineOfExport()).last)).toMatchObject({ store: 'de', count: PRODUCTS });

    // The held client, reading at last, gets what had been sent before the close, and no trailer.
    held.resume();
    expect(await closed).toBe(false);
    expect(read).toBeLessThan(PRODUCTS * LONG_TEXT.length);
  });
});
