// Panel invitations are also e-mailed when SMTP is configured (the link is always in the answer
// to whoever invited) — here to a real SMTP server on 127.0.0.1.
import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startTestService, type TestService } from '../support/service.js';

interface Mail { to: string[]; data: string }

let service: TestService;
let smtp: SMTPServer;
const mails: Mail[] = [];

beforeAll(async () => {
  smtp = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    onData(stream, session, callback) {
      let data = '';
      stream.on('data', (chunk: Buffer) => { data += chunk.toString('utf8'); });
      stream.on('end', () => {
        mails.push({ to: session.envelope.rcptTo.map((r) => r.address), data });
        callback();
      });
    },
  });
  await new Promise<void>((resolve) => smtp.listen(0, '127.0.0.1', () => resolve()));
  const port = (smtp.server.address() as AddressInfo).port;
  service = await startTestService({ config: { smtp: { url: `smtp://127.0.0.1:${port}`, from: 'panel@catalog.test' } } });
});
afterAll(async () => {
  await service.close();
  await new Promise<void>((resolve) => smtp.close(() => resolve()));
});

describe('an invitation with SMTP configured', () => {
  it('is e-mailed to the invited address with the same single-use link the operator got', async () => {
    const merchant = await service.adminApi('POST', '/admin/v1/merchants', { name: 'Mail Outfitters' });
    const invited = await service.adminApi('POST', `/admin/v1/merchants/${merchant.body.id}/invitations`, { email: 'new@mail.test', role: 'owner' });
    expect(invited.status).toBe(201);
    await vi.waitFor(() => expect(mails).toHaveLength(1), { timeout: 10_000, interval: 20 });
    expect(mails[0]!.to).toEqual(['new@mail.test']);
    const text = mails[0]!.data.replace(/=\r?\n/g, '');
    expect(text).toContain('Subject: Your invitation to the catalog publishing panel');
    expect(text).toContain(invited.body.link);
  });
});
