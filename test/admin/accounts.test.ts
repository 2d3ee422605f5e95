// The administration panel's accounts: invitations, passwords, sessions with idle and
// absolute expiry, sign-in throttling per account and address together, password
// resets and changes (22.4), pending links (22.3), the last owner (22.2), secrets shown once (22.1),
// tenancy and the audit log, on a real SQLite file and a fake clock.
import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Principal } from '../../src/admin/accounts.js';
import { PasswordHasher } from '../../src/admin/password-hashing.js';
import { SignInThrottle } from '../../src/admin/sign-in-throttle.js';
import { fakeClock } from '../support/clock.js';
import { ADMIN_TOKEN, startTestService, type TestService } from '../support/service.js';

const clock = fakeClock('2026-11-26T08:00:00Z');
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const operator: Principal = { kind: 'operator' };
let service: TestService;
let acme: number;
let other: number;

beforeAll(async () => {
  // Six failures per address across accounts (20 by default) keep the spraying case short: each costs a scrypt.
  service = await startTestService({ now: clock.now, config: { panel: { signInAddressMaxFailures: 6 } } });
  acme = (await service.admin.createMerchant({ name: 'Acme' })).id;
  other = (await service.admin.createMerchant({ name: 'Other' })).id;
});
afterAll(() => service.close());

const accounts = () => service.service.accounts;

async function invitedUser(merchantId: number, email: string, role: 'owner' | 'member', password = 'correct horse battery') {
  const invitation = await accounts().invite(operator, merchantId, { email, role });
  const user = await accounts().acceptInvitation(invitation.token, password);
  return { invitation, user };
}

describe('invitations', () => {
  it('let the invited user set a password once, then sign in with it (stored as scrypt, not the password)', async () => {
    const { invitation, user } = await invitedUser(acme, 'Owner@Acme.test', 'owner');
    expect(user).toMatchObject({ merchant_id: acme, email: 'owner@acme.test', role: 'owner' });
    expect(Date.parse(invitation.expires_at) - clock.ms).toBe(72 * HOUR);
    await expect(accounts().acceptInvitation(invitation.token, 'another good password')).rejects.toMatchObject({ code: 'not_found' });
    expect(await accounts().invitation(invitation.token)).toBeUndefined();

    const stored = await service.storage.panelUserByEmail('owner@acme.test');
    expect(stored!.password_hash).toMatch(/^scrypt\$32768\$8\$1\$/);
    expect(stored!.password_hash).not.toContain('correct horse');
    expect(await new PasswordHasher(() => ({ atOnce: 1, queue: 0 })).verify('correct horse battery', stored!.password_hash)).toBe(true);

    const signedIn = await accounts().signIn('owner@acme.test', 'correct horse battery', '10.0.0.1');
    const session = await accounts().session(signedIn.sessionToken);
    expect(session?.principal).toMatchObject({ kind: 'user', user: { email: 'owner@acme.test', merchant_id: acme } });
    expect(session?.csrfToken).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });

  it('expire after 72 hours, and refuse short passwords', async () => {
    const invitation = await accounts().invite(operator, acme, { email: 'late@acme.test', role: 'member' });
    await expect(accounts().acceptInvitation(invitation.token, 'short')).rejects.toMatchObject({ code: 'invalid_body' });
    clock.advance(72 * HOUR);
    expect(await accounts().invitation(invitation.token)).toBeUndefined();
    await expect(accounts().acceptInvitation(invitation.token, 'a long enough password')).rejects.toMatchObject({ code: 'not_found' });
  });

  it('never reset an existing account: inviting its e-mail again is refused, by the operator as by an owner', async () => {
    const { user: owner } = await invitedUser(acme, 'first-owner@acme.test', 'owner', 'the owner password');
    await invitedUser(acme, 'victim@acme.test', 'owner', 'the victim password');
    const asOwner: Principal = { kind: 'user', user: owner };
    for (const actor of [asOwner, operator]) {
      await expect(accounts().invite(actor, acme, { email: 'Victim@Acme.test', role: 'owner' })).rejects.toMatchObject({
        code: 'conflict',
        status: 409,
      });
    }
    expect((await accounts().listPendingLinks(operator, acme)).filter((l) => l.email === 'victim@acme.test')).toEqual([]);
    await expect(accounts().signIn('victim@acme.test', 'the victim password', '10.0.0.2')).resolves.toBeDefined();
  });

  it("reset a lost password with the operator's reset link: the old password stops working and every session of the account ends", async () => {
    await invitedUser(acme, 'forgetful@acme.test', 'member', 'the first password');
    const sessions = [
      await accounts().signIn('forgetful@acme.test', 'the first password', '10.0.0.2'),
      await accounts().signIn('forgetful@acme.test', 'the first password', '10.0.0.3'),
    ];
    const user = (await accounts().listUsers(operator, acme)).find((u) => u.email === 'forgetful@acme.test')!;
    const reset = await accounts().requestPasswordReset(operator, acme, user.id);
    expect(reset).toMatchObject({ email: 'forgetful@acme.test', role: 'member', token: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/) });
    // The current password works until the link is used.
    await expect(accounts().signIn('forgetful@acme.test', 'the first password', '10.0.0.2')).resolves.toBeDefined();
    expect(await accounts().invitation(reset.token!)).toMatchObject({ purpose: 'reset', email: 'forgetful@acme.test' });
    expect(await accounts().acceptInvitation(reset.token!, 'the second password')).toMatchObject({ id: user.id, role: 'member' });
    for (const { sessionToken } of sessions) expect(await accounts().session(sessionToken)).toBeUndefined();
    await expect(accounts().signIn('forgetful@acme.test', 'the first password', '10.0.0.2')).rejects.toMatchObject({
      code: 'unauthorized',
    });
    await expect(accounts().signIn('forgetful@acme.test', 'the second password', '10.0.0.2')).resolves.toBeDefined();
    await expect(accounts().acceptInvitation(reset.token!, 'a third password!')).rejects.toMatchObject({ code: 'not_found' });
    const log = await accounts().auditLog(operator, acme, 2);
    expect(log.map((e) => [e.actor, e.action])).toEqual([
      ['forgetful@acme.test', 'user.reset_password'],
      ['operator', 'user.send_reset'],
    ]);
  });

  it('give an owner no reset link: without e-mail the owner is sent to the operator (409), and a member may not ask (403)', async () => {
    const { user: owner } = await invitedUser(acme, 'resetting-owner@acme.test', 'owner');
    const { user: member } = await invitedUser(acme, 'reset-me@acme.test', 'member');
    await expect(accounts().requestPasswordReset({ kind: 'user', user: owner }, acme, member.id)).rejects.toMatchObject({
      code: 'conflict',
    });
    await expect(accounts().requestPasswordReset({ kind: 'user', user: member }, acme, owner.id)).rejects.toMatchObject({
      code: 'forbidden',
    });
    expect((await accounts().listPendingLinks(operator, acme)).filter((l) => l.purpose === 'reset')).toEqual([]);
  });

  it('revoke the earlier links of an e-mail when it is invited again, list the pending ones, and revoke one by hand', async () => {
    const a = await accounts().invite(operator, acme, { email: 'twice@acme.test', role: 'owner' });
    const b = await accounts().invite(operator, acme, { email: 'twice@acme.test', role: 'owner' });
    expect(await accounts().invitation(a.token)).toBeUndefined();
    await expect(accounts().acceptInvitation(a.token, 'a long enough password')).rejects.toMatchObject({ code: 'not_found' });
    const c = await accounts().invite(operator, acme, { email: 'other@acme.test', role: 'member' });
    const pending = await accounts().listPendingLinks(operator, acme);
    expect(pending.filter((l) => ['twice@acme.test', 'other@acme.test'].includes(l.email))).toEqual([
      { id: b.id, email: 'twice@acme.test', role: 'owner', purpose: 'invitation', created_at: clock.iso, expires_at: b.expires_at },
      { id: c.id, email: 'other@acme.test', role: 'member', purpose: 'invitation', created_at: clock.iso, expires_at: c.expires_at },
    ]);
    expect(JSON.stringify(pending)).not.toContain(b.token);
    await accounts().revokeLink(operator, acme, c.id);
    await expect(accounts().revokeLink(operator, acme, c.id)).rejects.toMatchObject({ code: 'not_found' });
    await expect(accounts().revokeLink(operator, other, b.id)).rejects.toMatchObject({ code: 'not_found' });
    await expect(accounts().acceptInvitation(c.token, 'a long enough password')).rejects.toMatchObject({ code: 'not_found' });
    await expect(accounts().acceptInvitation(b.token, 'a long enough password')).resolves.toMatchObject({ email: 'twice@acme.test' });
  });

  it("revoke a user's pending links when the user is removed: a reset link made before the removal no longer brings them back", async () => {
    const { user } = await invitedUser(acme, 'removed@acme.test', 'owner');
    const reset = await accounts().requestPasswordReset(operator, acme, user.id);
    await accounts().removeUser(operator, acme, user.id);
    await expect(accounts().acceptInvitation(reset.token!, 'back again as owner')).rejects.toMatchObject({ code: 'not_found' });
    expect((await accounts().listUsers(operator, acme)).map((u) => u.email)).not.toContain('removed@acme.test');
    expect((await accounts().auditLog(operator, acme, 1))[0]).toMatchObject({
      action: 'user.remove',
      detail: 'removed@acme.test; 1 pending link(s) revoked',
    });
  });

  it('refuse an email that already signs in for another merchant', async () => {
    await invitedUser(other, 'taken@other.test', 'owner');
    await expect(accounts().invite(operator, acme, { email: 'taken@other.test', role: 'member' })).rejects.toMatchObject({
      code: 'conflict',
    });
  });
});

describe('sessions', () => {
  it('end after the idle time without a request, and after the absolute time in any case', async () => {
    await invitedUser(acme, 'idle@acme.test', 'member');
    const idle = await accounts().signIn('idle@acme.test', 'correct horse battery', '10.0.0.3');
    clock.advance(59 * MINUTE);
    expect(await accounts().session(idle.sessionToken)).toBeDefined();
    clock.advance(59 * MINUTE);
    expect(await accounts().session(idle.sessionToken)).toBeDefined();
    clock.advance(60 * MINUTE);
    expect(await accounts().session(idle.sessionToken)).toBeUndefined();

    const busy = await accounts().signIn('idle@acme.test', 'correct horse battery', '10.0.0.3');
    for (let hours = 0; hours < 11; hours++) {
      clock.advance(HOUR - MINUTE);
      expect(await accounts().session(busy.sessionToken)).toBeDefined();
    }
    clock.advance(2 * HOUR);
    expect(await accounts().session(busy.sessionToken)).toBeUndefined();
  });

  it('end on sign-out; the operator signs in with the admin token only', async () => {
    const signedIn = await accounts().signInOperator(ADMIN_TOKEN, '10.0.0.4');
    expect((await accounts().session(signedIn.sessionToken))?.principal).toEqual({ kind: 'operator' });
    await accounts().signOut(signedIn.sessionToken);
    expect(await accounts().session(signedIn.sessionToken)).toBeUndefined();
    await expect(accounts().signInOperator('adm_wrong', '10.0.0.4')).rejects.toMatchObject({ code: 'unauthorized' });
  });
});

describe('sign-in throttling', () => {
  it('never locks the operator out from another address: wrong admin tokens from one address hold back that address only', async () => {
    for (let i = 0; i < 5; i++) {
      await expect(accounts().signInOperator(`adm_wrong_${i}`, '10.1.0.1')).rejects.toMatchObject({ code: 'unauthorized' });
    }
    await expect(accounts().signInOperator(ADMIN_TOKEN, '10.1.0.1')).rejects.toMatchObject({ code: 'rate_limited', status: 429 });
    await expect(accounts().signInOperator(ADMIN_TOKEN, '10.1.9.9')).resolves.toBeDefined();
    clock.advance(15 * MINUTE);
  });

  it('never locks a known e-mail out from another address, and succeeding there forgets nothing of the attacker', async () => {
    await invitedUser(acme, 'target@acme.test', 'member', 'the real password');
    for (let i = 0; i < 5; i++) {
      await expect(accounts().signIn('target@acme.test', `guess ${i} guess`, '10.1.1.1')).rejects.toMatchObject({ code: 'unauthorized' });
    }
    await expect(accounts().signIn('target@acme.test', 'the real password', '10.1.1.1')).rejects.toMatchObject({ code: 'rate_limited' });
    await expect(accounts().signIn('target@acme.test', 'the real password', '10.1.2.2')).resolves.toBeDefined();
    await expect(accounts().signIn('target@acme.test', 'a guess guess', '10.1.1.1')).rejects.toMatchObject({ code: 'rate_limited' });
    clock.advance(15 * MINUTE);
  });

  it('makes each attempt past the fifth failure wait longer: 30 s, then 60 s, then 120 s, at most the window', async () => {
    const retryAfter = async (address: string) => {
      const refused = await accounts()
        .signInOperator(ADMIN_TOKEN, address)
        .catch((error: unknown) => error);
      expect(refused).toMatchObject({ code: 'rate_limited', status: 429 });
      return Number((refused as { headers: Record<string, string> }).headers['Retry-After']);
    };
    const fail = () => expect(accounts().signInOperator('adm_wrong', '10.1.3.3')).rejects.toMatchObject({ code: 'unauthorized' });
    for (let i = 0; i < 5; i++) await fail();
    expect(await retryAfter('10.1.3.3')).toBe(30);
    clock.advance(30_000);
    await fail();
    expect(await retryAfter('10.1.3.3')).toBe(60);
    clock.advance(60_000);
    await fail();
    expect(await retryAfter('10.1.3.3')).toBe(120);
    // The failures leave the window: the pair is free again.
    clock.advance(15 * MINUTE);
    await expect(accounts().signInOperator(ADMIN_TOKEN, '10.1.3.3')).resolves.toBeDefined();

    // However many failures, the wait is at most the window (15 minutes).
    const throttle = new SignInThrottle(service.storage, () => service.config.panel, clock.now);
    const at = clock.now().toISOString();
    for (let i = 0; i < 15; i++) await service.storage.recordSignInFailure(['account+address:operator 10.1.4.4', 'address:10.1.4.4'], at);
    await expect(throttle.reserve('operator', '10.1.4.4')).rejects.toMatchObject({ headers: { 'Retry-After': String(15 * 60) } });
    clock.advance(15 * MINUTE);
  });

  it('holds back an address that fails across accounts (here 6: CPS_PANEL_SIGN_IN_ADDRESS_MAX_FAILURES), whatever account it tries next, and no other address', async () => {
    for (let i = 0; i < 6; i++) {
      await expect(accounts().signIn(`nobody${i}@acme.test`, 'some password here', '10.2.0.1')).rejects.toMatchObject({
        code: 'unauthorized',
      });
    }
    await expect(accounts().signInOperator(ADMIN_TOKEN, '10.2.0.1')).rejects.toMatchObject({
      code: 'rate_limited',
      headers: { 'Retry-After': '30' },
    });
    await expect(accounts().signInOperator(ADMIN_TOKEN, '10.2.0.2')).resolves.toBeDefined();
    clock.advance(15 * MINUTE);
  });
});

describe('passwords', () => {
  it('change with the current password: every other session of the account ends, this one stays', async () => {
    const { user } = await invitedUser(acme, 'changer@acme.test', 'member', 'the old password');
    const here = await accounts().signIn('changer@acme.test', 'the old password', '10.3.0.1');
    const elsewhere = await accounts().signIn('changer@acme.test', 'the old password', '10.3.0.2');
    const asUser: Principal = { kind: 'user', user };
    await expect(
      accounts().changePassword(asUser, here.sessionToken, 'not the password', 'the new password', '10.3.0.1'),
    ).rejects.toMatchObject({ code: 'invalid_body', invalidParams: [expect.objectContaining({ name: '/current_password' })] });
    await expect(accounts().changePassword(asUser, here.sessionToken, 'the old password', 'short', '10.3.0.1')).rejects.toMatchObject({
      code: 'invalid_body',
    });
    expect(await accounts().changePassword(asUser, here.sessionToken, 'the old password', 'the new password', '10.3.0.1')).toBe(1);
    expect(await accounts().session(here.sessionToken)).toBeDefined();
    expect(await accounts().session(elsewhere.sessionToken)).toBeUndefined();
    await expect(accounts().signIn('changer@acme.test', 'the old password', '10.3.0.3')).rejects.toMatchObject({ code: 'unauthorized' });
    await expect(accounts().signIn('changer@acme.test', 'the new password', '10.3.0.3')).resolves.toBeDefined();
    await expect(accounts().changePassword(operator, here.sessionToken, 'x', 'the new password', '10.3.0.1')).rejects.toMatchObject({
      code: 'forbidden',
    });
  });
});

describe('secrets shown once', () => {
  it('are taken once, by their own session only, before they expire, and are stored sealed', async () => {
    const mine = (await accounts().signInOperator(ADMIN_TOKEN, '10.4.0.1')).sessionToken;
    const theirs = (await accounts().signInOperator(ADMIN_TOKEN, '10.4.0.2')).sessionToken;
    const message = { kind: 'api_key', key: 'cps_secret_shown_once_0123456789' };
    const id = await accounts().keepShownOnce(mine, message);
    expect(await accounts().takeShownOnce(theirs, id)).toBeUndefined();
    expect(await accounts().takeShownOnce(mine, id)).toEqual(message);
    expect(await accounts().takeShownOnce(mine, id)).toBeUndefined();

    const stale = await accounts().keepShownOnce(mine, message);
    clock.advance(10 * MINUTE);
    expect(await accounts().takeShownOnce(mine, stale)).toBeUndefined();

    await accounts().keepShownOnce(mine, message);
    const file = fs.readFileSync(service.config.databasePath);
    expect(file.includes(Buffer.from('cps_secret_shown_once'))).toBe(false);
  });
});

describe('tenancy and roles', () => {
  it('keeps a user inside their merchant (404 elsewhere), and leaves users and the audit log to owners and the operator', async () => {
    const { user: member } = await invitedUser(acme, 'member@acme.test', 'member');
    const { user: owner } = await invitedUser(acme, 'boss@acme.test', 'owner');
    const asMember: Principal = { kind: 'user', user: member };
    const asOwner: Principal = { kind: 'user', user: owner };
    expect(() => accounts().assertMerchant(asMember, other)).toThrow(expect.objectContaining({ code: 'not_found' }));
    expect(() => accounts().assertMerchant(asMember, acme)).not.toThrow();
    await expect(accounts().listUsers(asMember, acme)).rejects.toMatchObject({ code: 'forbidden' });
    await expect(accounts().listUsers(asOwner, other)).rejects.toMatchObject({ code: 'not_found' });
    expect((await accounts().listUsers(asOwner, acme)).map((u) => u.email)).toContain('member@acme.test');

    await accounts().record(asOwner, acme, 'endpoint.create', 'https://hooks.acme.test/catalog');
    await accounts().removeUser(asOwner, acme, member.id);
    await expect(accounts().removeUser(asOwner, acme, member.id)).rejects.toMatchObject({ code: 'not_found' });
    const log = await accounts().auditLog(operator, acme, 5);
    expect(log.slice(0, 2).map(({ actor, action, detail }) => ({ actor, action, detail }))).toEqual([
      { actor: 'boss@acme.test', action: 'user.remove', detail: 'member@acme.test' },
      { actor: 'boss@acme.test', action: 'endpoint.create', detail: 'https://hooks.acme.test/catalog' },
    ]);
    expect(await accounts().auditLog(operator, other, 50)).not.toContainEqual(expect.objectContaining({ detail: 'member@acme.test' }));
  });
});

describe('the last owner', () => {
  it('cannot be removed, by the operator or by herself; once another owner exists, she can', async () => {
    const merchant = (await service.admin.createMerchant({ name: 'Solo' })).id;
    const { user: sole } = await invitedUser(merchant, 'sole@solo.test', 'owner');
    const { user: member } = await invitedUser(merchant, 'member@solo.test', 'member');
    for (const actor of [operator, { kind: 'user', user: sole } as Principal]) {
      await expect(accounts().removeUser(actor, merchant, sole.id)).rejects.toMatchObject({ code: 'conflict', status: 409 });
    }
    expect((await accounts().listUsers(operator, merchant)).map((u) => u.email)).toEqual(['sole@solo.test', 'member@solo.test']);
    await accounts().removeUser({ kind: 'user', user: sole }, merchant, member.id);
    await invitedUser(merchant, 'second@solo.test', 'owner');
    await accounts().removeUser({ kind: 'user', user: sole }, merchant, sole.id);
    expect((await accounts().listUsers(operator, merchant)).map((u) => u.email)).toEqual(['second@solo.test']);
  });
});
