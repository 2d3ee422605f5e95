// Panel users over the admin API (openapi/admin.yaml, tag "Panel users"): the operator invites,
// lists and removes a merchant's panel users and reads its audit log. Every response passes the
// contract harness.
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
    expect(invited.body).toMatchObject({ email: 'buyer@acme.test', role: 'member' });
    const link = new URL(invited.body.link);
    expect(`${link.protocol}//${link.host}`).toBe(service.config.publicBaseUrl);
    expect(link.pathname).toMatch(/^\/panel\/invitations\/[A-Za-z0-9_-]{43}$/);

    expect((await service.adminApi('GET', `/admin/v1/merchants/${acme}/users`)).body.data).toEqual([]);
    await service.service.accounts.acceptInvitation(link.pathname.split('/').pop()!, 'a password long enough');
    const users = await service.adminApi('GET', `/admin/v1/merchants/${acme}/users`);
    expect(users.status).toBe(200);
    expect(users.body.data).toEqual([expect.objectContaining({ email: 'buyer@acme.test', role: 'member' })]);

    const log = await service.adminApi('GET', `/admin/v1/merchants/${acme}/audit-log?limit=10`);
    expect(log.body.data.map((e: { actor: string; action: string }) => `${e.actor} ${e.action}`))
      .toEqual(['buyer@acme.test user.set_password', 'operator user.invite', 'operator merchant.create']);

    const removed = await service.adminApi('DELETE', `/admin/v1/merchants/${acme}/users/${users.body.data[0].id}`);
    expect(removed.status).toBe(204);
    expect((await service.adminApi('GET', `/admin/v1/merchants/${acme}/users`)).body.data).toEqual([]);
    expect((await service.adminApi('DELETE', `/admin/v1/merchants/${acme}/users/${users.body.data[0].id}`)).status).toBe(404);
  });

  it('answers 400 for a bad email or role, 404 for an unknown merchant, 409 for an email of another merchant', async () => {
    const bad = await service.adminApi('POST', `/admin/v1/merchants/${acme}/invitations`, { email: 'not an email', role: 'member' });
    expect(bad.status).toBe(400);
    expect(bad.body.invalid_params).toEqual([expect.objectContaining({ name: '/email' })]);
    expect((await service.adminApi('POST', `/admin/v1/merchants/${acme}/invitations`, { email: 'x@acme.test', role: 'admin' })).status).toBe(400);
    expect((await service.adminApi('POST', '/admin/v1/merchants/999/invitations', { email: 'x@acme.test', role: 'member' })).status).toBe(404);
    expect((await service.adminApi('GET', '/admin/v1/merchants/999/users')).status).toBe(404);
    expect((await service.adminApi('GET', '/admin/v1/merchants/999/audit-log')).status).toBe(404);

    const invited = await service.adminApi('POST', `/admin/v1/merchants/${other}/invitations`, { email: 'shared@example.test', role: 'owner' });
    await service.service.accounts.acceptInvitation(new URL(invited.body.link).pathname.split('/').pop()!, 'a password long enough');
    const conflict = await service.adminApi('POST', `/admin/v1/merchants/${acme}/invitations`, { email: 'shared@example.test', role: 'member' });
    expect(conflict.status).toBe(409);
    expect(conflict.body.code).toBe('conflict');
  });
});
