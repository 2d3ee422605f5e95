// Panel users over the admin API (openapi/admin.yaml, tag "Panel users"): the operator invites,
// lists and removes a merchant's panel users, lists and revokes pending links, makes password
// reset links, and reads its audit log. Every response passes the contract harness.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService } from '../support/service.js';

let service: TestService;
let acme: number;
let other: number;

beforeAll(async () => {
  service = await startTestService();
  acme = (await service.adminApi('POST', '/admin/v1/merchants', { name: 'Acme' })).body.id;
  other = (await service.adminApi('POST', '/admin/v1/merchants', { name: 'Other' })).body.id;
});
afterAll(() => service.close());

describe('panel users over the admin API', () => {
  it('invites with a single-use link, lists the user once the password is set, records it, and removes the user', async () => {
    const invited = await service.adminApi('POST', `/admin/v1/merchants/${acme}/invitations`, { email: 'Buyer@Acme.test', role: 'member' });
    expect(invited.status).toBe(201);
    expect(invited.body).toMatchObject({ id: expect.any(Number), email: 'buyer@acme.test', role: 'member' });
    const link = new URL(invited.body.link);
    expect(`${link.protocol}//${link.host}`).toBe(service.config.publicBaseUrl);
    expect(link.pathname).toMatch(/^\/panel\/invitations\/[A-Za-z0-9_-]{43}$/);

    expect((await service.adminApi('GET', `/admin/v1/merchants/${acme}/users`)).body.data).toEqual([]);
    await service.service.accounts.acceptInvitation(link.pathname.split('/').pop()!, 'a password long enough');
    const users = await service.adminApi('GET', `/admin/v1/merchants/${acme}/users`);
    expect(users.status).toBe(200);
    expect(users.body.data).toEqual([expect.objectContaining({ email: 'buyer@acme.test', role: 'member' })]);

    const log = await service.adminApi('GET', `/admin/v1/merchants/${acme}/audit-log?limit=10`);
    expect(log.body.data.map((e: { actor: string; action: string }) => `${e.actor} ${e.action}`)).toEqual([
      'buyer@acme.test user.set_password',
      'operator user.invite',
      'operator merchant.create',
    ]);

    const removed = await service.adminApi('DELETE', `/admin/v1/merchants/${acme}/users/${users.body.data[0].id}`);
    expect(removed.status).toBe(204);
    expect((await service.adminApi('GET', `/admin/v1/merchants/${acme}/users`)).body.data).toEqual([]);
    expect((await service.adminApi('DELETE', `/admin/v1/merchants/${acme}/users/${users.body.data[0].id}`)).status).toBe(404);
  });

  it('answers 400 for a bad email or role, 404 for an unknown merchant, 409 for an email of another merchant', async () => {
    const bad = await service.adminApi('POST', `/admin/v1/merchants/${acme}/invitations`, { email: 'not an email', role: 'member' });
    expect(bad.status).toBe(400);
    expect(bad.body.invalid_params).toEqual([expect.objectContaining({ name: '/email' })]);
    expect(
      (await service.adminApi('POST', `/admin/v1/merchants/${acme}/invitations`, { email: 'x@acme.test', role: 'admin' })).status,
    ).toBe(400);
    expect((await service.adminApi('POST', '/admin/v1/merchants/999/invitations', { email: 'x@acme.test', role: 'member' })).status).toBe(
      404,
    );
    expect((await service.adminApi('GET', '/admin/v1/merchants/999/users')).status).toBe(404);
    expect((await service.adminApi('GET', '/admin/v1/merchants/999/audit-log')).status).toBe(404);

    const invited = await service.adminApi('POST', `/admin/v1/merchants/${other}/invitations`, {
      email: 'shared@example.test',
      role: 'owner',
    });
    await service.service.accounts.acceptInvitation(new URL(invited.body.link).pathname.split('/').pop()!, 'a password long enough');
    const conflict = await service.adminApi('POST', `/admin/v1/merchants/${acme}/invitations`, {
      email: 'shared@example.test',
      role: 'member',
    });
    expect(conflict.status).toBe(409);
    expect(conflict.body.code).toBe('conflict');
  });

  const secretOf = (link: string) => new URL(link).pathname.split('/').pop()!;
  /** The link's page on this service (the links name the configured public base URL). */
  const open = (link: string) => fetch(`${service.url}${new URL(link).pathname}`);

  it('lists the pending links without their secrets, revokes one (404 after), and a new invitation revokes the earlier link', async () => {
    const merchant = (await service.adminApi('POST', '/admin/v1/merchants', { name: 'Links' })).body.id;
    const first = await service.adminApi('POST', `/admin/v1/merchants/${merchant}/invitations`, {
      email: 'twice@links.test',
      role: 'owner',
    });
    const second = await service.adminApi('POST', `/admin/v1/merchants/${merchant}/invitations`, {
      email: 'twice@links.test',
      role: 'owner',
    });
    const third = await service.adminApi('POST', `/admin/v1/merchants/${merchant}/invitations`, {
      email: 'else@links.test',
      role: 'member',
    });
    const listed = await service.adminApi('GET', `/admin/v1/merchants/${merchant}/invitations`);
    expect(listed.status).toBe(200);
    expect(listed.body.data).toEqual([
      expect.objectContaining({
        id: second.body.id,
        email: 'twice@links.test',
        role: 'owner',
        purpose: 'invitation',
        expires_at: second.body.expires_at,
      }),
      expect.objectContaining({ id: third.body.id, email: 'else@links.test', purpose: 'invitation' }),
    ]);
    expect(listed.text).not.toContain(secretOf(second.body.link));
    expect((await open(first.body.link)).status).toBe(404);

    expect((await service.adminApi('DELETE', `/admin/v1/merchants/${merchant}/invitations/${third.body.id}`)).status).toBe(204);
    expect((await service.adminApi('DELETE', `/admin/v1/merchants/${merchant}/invitations/${third.body.id}`)).status).toBe(404);
    expect((await service.adminApi('DELETE', `/admin/v1/merchants/${acme}/invitations/${second.body.id}`)).status).toBe(404);
    expect((await open(third.body.link)).status).toBe(404);
    expect(
      (await service.adminApi('GET', `/admin/v1/merchants/${merchant}/invitations`)).body.data.map((l: { id: number }) => l.id),
    ).toEqual([second.body.id]);
    expect((await service.adminApi('GET', '/admin/v1/merchants/999/invitations')).status).toBe(404);
  });

  it("refuses to invite an existing account (409), makes the operator a reset link instead, and a removal revokes the user's links", async () => {
    const merchant = (await service.adminApi('POST', '/admin/v1/merchants', { name: 'Resets' })).body.id;
    const invited = await service.adminApi('POST', `/admin/v1/merchants/${merchant}/invitations`, {
      email: 'owner@resets.test',
      role: 'owner',
    });
    await service.service.accounts.acceptInvitation(secretOf(invited.body.link), 'the first password');
    const second = await service.service.accounts.invite({ kind: 'operator' }, merchant, { email: 'second@resets.test', role: 'owner' });
    const secondUser = await service.service.accounts.acceptInvitation(second.token, 'the second password');

    const again = await service.adminApi('POST', `/admin/v1/merchants/${merchant}/invitations`, {
      email: 'owner@resets.test',
      role: 'owner',
    });
    expect(again.status).toBe(409);
    expect(again.body.detail).toContain('already has an account');

    const users = (await service.adminApi('GET', `/admin/v1/merchants/${merchant}/users`)).body.data;
    const owner = users.find((u: { email: string }) => u.email === 'owner@resets.test');
    const reset = await service.adminApi('POST', `/admin/v1/merchants/${merchant}/users/${owner.id}/password-reset`);
    expect(reset.status).toBe(201);
    expect(reset.body).toMatchObject({ id: expect.any(Number), email: 'owner@resets.test' });
    expect((await service.adminApi('GET', `/admin/v1/merchants/${merchant}/invitations`)).body.data).toEqual([
      expect.objectContaining({ id: reset.body.id, purpose: 'reset', email: 'owner@resets.test' }),
    ]);
    expect((await service.adminApi('POST', `/admin/v1/merchants/${merchant}/users/999999/password-reset`)).status).toBe(404);

    // Removed with a reset link pending: the link no longer brings the account back.
    expect((await service.adminApi('DELETE', `/admin/v1/merchants/${merchant}/users/${owner.id}`)).status).toBe(204);
    expect((await open(reset.body.link)).status).toBe(404);
    await expect(service.service.accounts.acceptInvitation(secretOf(reset.body.link), 'back as an owner')).rejects.toMatchObject({
      code: 'not_found',
    });
    expect((await service.adminApi('GET', `/admin/v1/merchants/${merchant}/invitations`)).body.data).toEqual([]);

    // The last owner stays (409), however the removal is asked for.
    const last = await service.adminApi('DELETE', `/admin/v1/merchants/${merchant}/users/${secondUser.id}`);
    expect(last.status).toBe(409);
    expect(last.body.detail).toContain('only owner');
    expect(
      (await service.adminApi('GET', `/admin/v1/merchants/${merchant}/users`)).body.data.map((u: { email: string }) => u.email),
    ).toEqual(['second@resets.test']);
  });

  it('lets only one of two owners removing each other at the same time succeed', async () => {
    const merchant = (await service.adminApi('POST', '/admin/v1/merchants', { name: 'Duel' })).body.id;
    const ids: number[] = [];
    for (const email of ['a@duel.test', 'b@duel.test']) {
      const invitation = await service.service.accounts.invite({ kind: 'operator' }, merchant, { email, role: 'owner' });
      ids.push((await service.service.accounts.acceptInvitation(invitation.token, 'a long enough password')).id);
    }
    const statuses = (await Promise.all(ids.map((id) => service.adminApi('DELETE', `/admin/v1/merchants/${merchant}/users/${id}`)))).map(
      (r) => r.status,
    );
    expect(statuses.sort()).toEqual([204, 409]);
    expect((await service.adminApi('GET', `/admin/v1/merchants/${merchant}/users`)).body.data).toHaveLength(1);
  });
});
