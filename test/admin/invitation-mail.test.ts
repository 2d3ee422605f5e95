// Panel invitations are also e-mailed when SMTP is configured (the link is always in the answer
// to whoever invited); an owner's password reset goes to the account's own e-mail only, and a
// password set tells the account — here to a real SMTP server on 127.0.0.1.
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
    const invited = await service.adminApi('POST', `/admin/v1/merchants/${merchant.body.id}/invitations`, {
      email: 'new@mail.test',
      role: 'owner',
    });
    expect(invited.status).toBe(201);
    await vi.waitFor(() => expect(smtp.mails).toHaveLength(1), { timeout: 10_000, interval: 20 });
    expect(smtp.mails[0]!.to).toEqual(['new@mail.test']);
    const text = smtp.mails[0]!.data.replace(/=\r?\n/g, '');
    expect(text).toContain('Subject: Your invitation to the catalog publishing panel');
    expect(text).toContain(invited.body.link);
  });
});

describe('a password reset with SMTP configured', () => {
  const text = (i: number) => smtp.mails[i]!.data.replace(/=\r?\n/g, '');

  it("asked by an owner, goes to the account's own e-mail and never to the owner; setting it tells the account", async () => {
    const { accounts } = service.service;
    const merchant = (await service.adminApi('POST', '/admin/v1/merchants', { name: 'Reset Outfitters' })).body.id;
    const users = [];
    for (const email of ['boss@reset.test', 'colleague@reset.test']) {
      const invitation = await accounts.invite({ kind: 'operator' }, merchant, { email, role: 'owner' });
      users.push(await accounts.acceptInvitation(invitation.token, 'the first password'));
    }
    const [boss, colleague] = users as [(typeof users)[0], (typeof users)[0]];
    await vi.waitFor(() => expect(smtp.mails.length).toBeGreaterThanOrEqual(3), { timeout: 10_000, interval: 20 });
    const before = smtp.mails.length;

    const reset = await accounts.requestPasswordReset({ kind: 'user', user: boss }, merchant, colleague.id);
    expect(reset.token).toBeUndefined();
    await vi.waitFor(() => expect(smtp.mails).toHaveLength(before + 1), { timeout: 10_000, interval: 20 });
    expect(smtp.mails[before]!.to).toEqual(['colleague@reset.test']);
    expect(text(before)).toContain('Subject: Reset your catalog panel password');
    expect(text(before)).toContain('boss@reset.test asked for a new password for your account colleague@reset.test');
    const link = /\/panel\/invitations\/([A-Za-z0-9_-]{43})/.exec(text(before))![1]!;

    const session = await accounts.signIn('colleague@reset.test', 'the first password', '10.9.0.1');
    await accounts.acceptInvitation(link, 'the second password');
    expect(await accounts.session(session.sessionToken)).toBeUndefined();
    await vi.waitFor(() => expect(smtp.mails).toHaveLength(before + 2), { timeout: 10_000, interval: 20 });
    expect(smtp.mails[before + 1]!.to).toEqual(['colleague@reset.test']);
    expect(text(before + 1)).toContain('Subject: Your catalog panel password was changed');
    expect(text(before + 1)).toContain('Every other session of the account was signed out');
  });
});
