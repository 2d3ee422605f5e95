// A client that does not read gets nothing more queued: once the bytes waiting
// in the process for its connection, and the next event, would pass CPS_UNSENT_BYTES_MAX, its
// change-feed stream is closed (the connection reset) and its live place given back, rather than
// a window after window queued for it. A real server and a real socket client that never reads.
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { ChangePage } from '../../src/changes/feed.js';
import type { LiveStream } from '../../src/changes/live.js';
import { changeEventStream } from '../../src/http/live-feed.js';

/** Less than one window: the first window the kernel cannot take whole closes the connection. */
const MAX = 32 * 1024;

/** Windows of 1,000 changes (~70 KB as an event), as many as are asked for, as a re-pricing would give a stream. */
function busyStream() {
  let windows = 0;
  let closed = false;
  const stream = {
    store: { id: 1 },
    next: async (): Promise<ChangePage> => {
      windows++;
      await new Promise((resolve) => setImmediate(resolve));
      const at = new Date(Date.UTC(2025, 2, 14, 9, 0, windows)).toISOString().replace('.000Z', 'Z');
      return {
        changes: Array.from({ length: 1000 }, (_, i) => ({ product_id: windows * 1000 + i, change_type: 'price', created_at: at })),
        next_since: at,
        next_id: windows * 1000,
        store: 'de',
      };
    },
    close: () => {
      closed = true;
    },
  };
  return { stream: stream as unknown as LiveStream, windows: () => windows, closed: () => closed };
}

/** A server answering every request with the busy stream's events, pumped as @hono/node-server pumps a body. */
function streamingServer(busy: ReturnType<typeof busyStream>, unsent: { max: number; stallMs?: number }) {
  const sockets: net.Socket[] = [];
  const server = http.createServer((_request, response) => {
    response.writeHead(200, { 'Content-Type': 'text/event-stream' });
    const reader = changeEventStream(busy.stream, { keyId: 1, unsent: { outgoing: response, ...unsent } }).getReader();
    const pump = async (): Promise<void> => {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return void response.end();
        if (!response.write(value)) await new Promise((resolve) => response.once('drain', resolve));
      }
    };
    response.on('close', () => void reader.cancel().catch(() => {}));
    void pump().catch(() => {});
  });
  server.on('connection', (socket) => sockets.push(socket));
  return { server, sockets };
}

/** Sends its request, then never reads: its receive window fills, then the server's send buffer. */
function nonReader(port: number): net.Socket {
  const client = net.connect(port, '127.0.0.1');
  client.on('error', () => {});
  client.pause();
  client.write('GET /v1/changes HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n');
  return client;
}

describe('a change-feed stream whose client does not read', () => {
  let server: http.Server | undefined;
  afterEach(() => new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve())));

  it('is closed once it has taken none of its waiting bytes for the stall time, though they stay under the unsent limit', async () => {
    const busy = busyStream();
    const started = streamingServer(busy, { max: 1024 * 1024 * 1024, stallMs: 300 });
    server = started.server;
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    const client = nonReader((server.address() as AddressInfo).port);
    // The kernel's buffers fill, then bytes wait in the process: well under 1 GiB, so only the stall closes it.
    await expect.poll(() => started.sockets[0]?.destroyed, { timeout: 20_000, interval: 20 }).toBe(true);
    expect(busy.closed()).toBe(true);
    client.destroy();
  });

  it('is closed once its unsent bytes pass the limit, and its stream closed (its live place freed)', async () => {
    const busy = busyStream();
    let serverSocket!: net.Socket;
    let maxUnsent = 0;
    server = http.createServer((request, response) => {
      response.writeHead(200, { 'Content-Type': 'text/event-stream' });
      const body = changeEventStream(busy.stream, { keyId: 1, unsent: { outgoing: response, max: MAX } });
      const reader = body.getReader();
      // What @hono/node-server does with a body: write each chunk, wait for drain when the socket is full.
      const pump = async (): Promise<void> => {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) return void response.end();
          maxUnsent = Math.max(maxUnsent, response.writableLength);
          if (!response.write(value)) await new Promise((resolve) => response.once('drain', resolve));
        }
      };
      response.on('close', () => void reader.cancel().catch(() => {}));
      void pump().catch(() => {});
    });
    server.on('connection', (socket) => (serverSocket = socket));
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;

    // Sends its request, then never reads: its receive window fills, then the server's send buffer.
    const client = net.connect(port, '127.0.0.1');
    client.on('error', () => {});
    client.pause();
    client.write('GET /v1/changes HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n');

    await expect.poll(() => serverSocket?.destroyed, { timeout: 20_000, interval: 20 }).toBe(true);
    expect(busy.closed()).toBe(true);
    // Never more than the limit and one window waited in the process, and nothing more is pulled.
    expect(maxUnsent).toBeLessThanOrEqual(MAX + 80 * 1024);
    const pulled = busy.windows();
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(busy.windows()).toBe(pulled);
    client.destroy();
  });
});
