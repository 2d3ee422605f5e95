// Panel invitations are also e-mailed when SMTP is configured (the link is always in the answer
// to whoever invited) — here to a real SMTP server on 127.0.0.1.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startTestService, type TestService } from '../support/service.js';
import { startSmtpCapture, type SmtpCapture } from '../support/smtp.js';

let service: TestService;
let smtp: SmtpCapture;

beforeAll(async () => {
  smtp = await startSmtpCapture();
  service = await startTestService({ config: { smtp: { url: smtp.url, from: 'panel@catalog.test' } } });
});
afterAll(async () => {
  await service.close();
  await smtp.close();
});

describe('an invitation with SMTP configured', () => {
  it('is e-mailed to the invited address with the same single-use link the operator got', async () => {
    const merchant = await service.adminApi('POST', '/admin/v1/merchants', { name: 'Mail Outfitters' });
    const invited = await service.adminApi('POST', `/admin/v1/merchants/${merchant.body.id}/invitations`, { email: 'new@mail.test', role: 'owner' });
    expect(invited.status).toBe(201);
    await vi.waitFor(() => expect(smtp.mails).toHaveLength(1), { timeout: 10_000, interval: 20 });
    expect(smtp.mails[0]!.to).toEqual(['new@mail.test']);
    const text = smtp.mails[0]!.data.replace(/=\r?\n/g, '');
    expect(text).toContain('Subject: Your invitation to the catalog publishing panel');
    expect(text).toContain(invited.body.link);
  });
});
