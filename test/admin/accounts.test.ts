// The administration panel's accounts (issue 11): invitations, passwords, sessions with idle and
// absolute expiry, sign-in throttling per account and per address, tenancy and the audit log, on a
// real SQLite file and a fake clock.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Principal } from '../../src/admin/accounts.js';
import { verifyPassword } from '../../src/admin/accounts.js';
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
  service = await startTestService({ now: clock.now });
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
    expect(await verifyPassword('correct horse battery', stored!.password_hash)).toBe(true);

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

  it('reset a lost password with a new invitation; the old password stops working', async () => {
    await invitedUser(acme, 'forgetful@acme.test', 'member', 'the first password');
    await invitedUser(acme, 'forgetful@acme.test', 'member', 'the second password');
    await expect(accounts().signIn('forgetful@acme.test', 'the first password', '10.0.0.2')).rejects.toMatchObject({ code: 'unauthorized' });
    await expect(accounts().signIn('forgetful@acme.test', 'the second password', '10.0.0.2')).resolves.toBeDefined();
  });

  it('refuse an email that already signs in for another merchant', async () => {
    await invitedUser(other, 'taken@other.test', 'owner');
    await expect(accounts().invite(operator, acme, { email: 'taken@other.test', role: 'member' })).rejects.toMatchObject({ code: 'conflict' });
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
  it('answers 429 with Retry-After after 5 failures for an account, from any address, until the window has passed', async () => {
    await invitedUser(acme, 'target@acme.test', 'member', 'the real password');
    for (let i = 0; i < 5; i++) {
      await expect(accounts().signIn('target@acme.test', `guess ${i} guess`, `10.1.0.${i}`)).rejects.toMatchObject({ code: 'unauthorized' });
    }
    const refused = await accounts().signIn('target@acme.test', 'the real password', '10.1.1.1').catch((error: unknown) => error);
    expect(refused).toMatchObject({ code: 'rate_limited', status: 429, headers: { 'Retry-After': String(15 * 60) } });
    clock.advance(15 * MINUTE);
    await expect(accounts().signIn('target@acme.test', 'the real password', '10.1.1.1')).resolves.toBeDefined();
  });

  it('answers 429 to an address that failed 5 times, whatever account it tries next', async () => {
    for (let i = 0; i < 5; i++) {
      await expect(accounts().signIn(`nobody${i}@acme.test`, 'some password here', '10.2.0.1')).rejects.toMatchObject({ code: 'unauthorized' });
    }
    await expect(accounts().signInOperator(ADMIN_TOKEN, '10.2.0.1')).rejects.toMatchObject({ code: 'rate_limited' });
    await expect(accounts().signInOperator(ADMIN_TOKEN, '10.2.0.2')).resolves.toBeDefined();
    clock.advance(15 * MINUTE);
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
