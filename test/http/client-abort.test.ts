// A client that abandons its upload (half a body, then the socket closed) is a client abort, not a
// server error: counted with status 499 in /metrics and the access log, logged at info, never
// "unhandled error" and never a 5xx. Real sockets against the real server on 127.0.0.1.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMerchant, type MerchantHandle } from '../support/admin-http.js';
import { LogCapture } from '../support/logs.js';
import { total } from '../support/metrics.js';
import { ADMIN_TOKEN, startTestService, type TestService } from '../support/service.js';

let service: TestService;
let merchant: MerchantHandle;
let logs: LogCapture;
beforeAll(async () => {
  logs = new LogCapture('debug');
  service = await startTestService({ logger: logs.logger });
  merchant = await createMerchant(service, 'Uploader');
});
afterAll(() => service.close());

/** Sends the head and half of a `declared`-byte body, then closes the socket; resolves once closed. */
function abandonUpload(method: string, path: string, headers: Record<string, string>, declared: number, sent: string): Promise<void> {
  const { port } = new URL(service.url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), '127.0.0.1', () => {
      const head = [
        `${method} ${path} HTTP/1.1`,
        'Host: 127.0.0.1',
        `Content-Length: ${declared}`,
        ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
        '',
        '',
      ].join('\r\n');
      socket.write(head + sent, () => setTimeout(() => socket.destroy(), 50));
    });
    socket.on('error', reject);
    socket.on('close', () => resolve());
  });
}

async function metrics(): Promise<string> {
  return (await fetch(`${service.url}/metrics`)).text();
}

const statusOf = (status: string) => (labels: Record<string, string>) => labels.status === status;

describe('a client that abandons its upload', () => {
  it.each([
    [
      'the admin import (NDJSON, read as it arrives)',
      'POST',
      () => `${merchant.base}/imports`,
      'application/x-ndjson',
      `${JSON.stringify({ ref: 'HALF-1', name: { en: 'Half' } })}\n{"ref":"HALF-2","na`,
    ],
    ['a JSON body (PUT of a product)', 'PUT', () => `${merchant.base}/products/HALF-3`, 'application/json', '{"name":{"en":"Hal'],
  ])('%s is counted as 499 and logged at info, never as a server error', async (_, method, path, type, sent) => {
    const before = await metrics();
    const count = (m: string, status: string) => total(m, 'cps_http_request_duration_seconds_count', statusOf(status));
    for (let i = 0; i < 5; i++) {
      await abandonUpload(
        method,
        path(),
        {
          Authorization: `Bearer ${ADMIN_TOKEN}`,
          'Content-Type': type,
        },
        100_000,
        sent,
      );
    }
    // The server notices the closed socket on its own schedule: wait for the five lines.
    await expect.poll(() => logs.lines.filter((l) => l.msg === 'request' && l.status === 499).length).toBeGreaterThanOrEqual(5);
    const after = await metrics();
    expect(count(after, '499') - count(before, '499')).toBe(5);
    const serverErrors = (m: string) => total(m, 'cps_http_request_duration_seconds_count', (l) => Number(l.status) >= 500);
    expect(serverErrors(after) - serverErrors(before)).toBe(0);
    expect(logs.find('unhandled error')).toEqual([]);
    expect(logs.lines.filter((l) => l.level === 'error' || l.level === 'warn')).toEqual([]);
    expect(logs.lines.filter((l) => l.msg === 'request' && l.status === 499).every((l) => l.level === 'info')).toBe(true);
    expect(logs.find('client closed the request before it was answered').length).toBeGreaterThanOrEqual(5);
  });

  it('applies nothing of an abandoned import, and its job says the upload was interrupted', async () => {
    const { base, id } = merchant;
    await abandonUpload(
      'POST',
      `${base}/imports`,
      { Authorization: `Bearer ${ADMIN_TOKEN}`, 'Content-Type': 'application/x-ndjson' },
      100_000,
      `${JSON.stringify({ ref: 'CUT-1', name: { en: 'Cut' } })}\n{"ref":"CUT-2"`,
    );
    await expect.poll(async () => (await service.service.imports.recent(id, 1))[0]?.state).toBe('failed');
    const [job] = await service.service.imports.recent(id, 1);
    expect(job!.error).toMatch(/^The upload was interrupted: the client closed the connection/);
    expect((await service.adminApi('GET', `${base}/products/CUT-1`)).status).toBe(404);
    // The service goes on answering on new connections.
    expect((await service.adminApi('GET', `${base}/products/CUT-2`)).status).toBe(404);
  });
});
