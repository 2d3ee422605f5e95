// The audit log: every change to a merchant, made through the admin API, the CLI or
// the panel, recorded once, in one naming style (`noun.verb`, as AuditEntry.action documents it),
// with the actor `operator` (admin API, CLI) or the panel user. Over real HTTP, on either engine.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import adminDocument from '../../src/generated/admin-openapi.json' with { type: 'json' };
import { adminOk, importNdjson } from '../support/admin-http.js';
import { runCli } from '../support/cli.js';
import { startTestService, type TestService } from '../support/service.js';

let service: TestService;
let base: string;
let merchantId: number;

beforeAll(async () => {
  service = await startTestService({ config: { webhooks: { allowHosts: ['127.0.0.1'] } } });
});
afterAll(() => service?.close());

/** The audit log, oldest first, as `actor action`. */
async function log(id = merchantId): Promise<{ actor: string; action: string; detail: string }[]> {
  const entries = (await adminOk(service, 'GET', `/admin/v1/merchants/${id}/audit-log?limit=200`)).data as {
    actor: string;
    action: string;
    detail: string;
  }[];
  return entries.reverse();
}

/** Every `noun.verb` the documented table of AuditEntry.action allows. */
function documentedActions(): Set<string> {
  const description = (adminDocument as unknown as Record<string, any>).components.schemas.AuditEntry.properties.action
    .description as string;
  const actions = new Set<string>();
  for (const row of description.split('\n').filter((line) => /^\| `/.test(line))) {
    const [nouns, verbs] = row
      .split('|')
      .slice(1, 3)
      .map((cell) => [...cell.matchAll(/`([a-z_]+)`/g)].map((m) => m[1]!));
    for (const noun of nouns!) for (const verb of verbs!) actions.add(`${noun}.${verb}`);
  }
  return actions;
}

describe('the audit log', () => {
  it('records every admin API change once, by `operator`, each action a documented noun.verb', async () => {
    merchantId = (await adminOk(service, 'POST', '/admin/v1/merchants', { name: 'Audit Outfitters' }, 201)).id;
    base = `/admin/v1/merchants/${merchantId}`;
    await adminOk(service, 'PATCH', base, { sku_pattern: 'AO-{id}' });
    const key = await adminOk(service, 'POST', `${base}/api-keys`, { name: 'shop' }, 201);
    await adminOk(service, 'DELETE', `${base}/api-keys/${key.id}`);
    const store = { name: 'Deutschland', locale: 'de-DE', currency: 'EUR', is_default: true };
    await adminOk(service, 'PUT', `${base}/stores/de`, store);
    await adminOk(service, 'PUT', `${base}/stores/de`, { ...store, name: 'Deutschland DE' });
    await adminOk(service, 'PUT', `${base}/stores/at`, { ...store, name: 'Österreich', is_default: false });
    await adminOk(service, 'DELETE', `${base}/stores/at`);
    const group = await adminOk(service, 'POST', `${base}/customer-groups`, { name: 'retail' }, 201);
    await adminOk(service, 'PUT', `${base}/customer-groups/${group.id}`, { name: 'Retail' });
    await adminOk(service, 'DELETE', `${base}/customer-groups/${group.id}`);
    await adminOk(service, 'PUT', `${base}/exchange-rates/EUR/PLN`, { rate: '4.31' });
    await adminOk(service, 'PUT', `${base}/exchange-rates/EUR/PLN`, { rate: '4.3105' });
    await adminOk(service, 'DELETE', `${base}/exchange-rates/EUR/PLN`);
    const rule = await adminOk(service, 'POST', `${base}/pricing-rules`, { priority: 10, markup_percent: '20' }, 201);
    await adminOk(service, 'PUT', `${base}/pricing-rules/${rule.id}`, { priority: 10, markup_percent: '25' });
    await adminOk(service, 'DELETE', `${base}/pricing-rules/${rule.id}`);
    await adminOk(service, 'PUT', `${base}/suppliers/nordwind`, { name: 'Nordwind' });
    await adminOk(service, 'PUT', `${base}/suppliers/nordwind`, { name: 'Nordwind GmbH' });
    await adminOk(service, 'PUT', `${base}/suppliers/baltic`, { name: 'Baltic' });
    await adminOk(service, 'DELETE', `${base}/suppliers/baltic`);
    await adminOk(service, 'PUT', `${base}/attributes/weight`, { unit: 'kg' });
    await adminOk(service, 'PUT', `${base}/attributes/weight`, { unit: 'g' });
    await adminOk(service, 'DELETE', `${base}/attributes/weight`);
    const product = {
      content: { de: { title: 'Rucksack' } },
      offers: [{ supplier_ref: 'nordwind', quantity: 2, cost: '10.00', currency: 'EUR' }],
    };
    await adminOk(service, 'PUT', `${base}/products/BP-40`, product);
    await adminOk(service, 'PUT', `${base}/products/BP-40`, { ...product, manufacturer: 'Bergfex' });
    await adminOk(service, 'DELETE', `${base}/products/BP-40`);
    // An import is one entry, however many lines it applies.
    const imported = await importNdjson(service, merchantId, [
      { op: 'upsert_product', product: { ref: 'TENT-1', ...product } },
      { op: 'upsert_product', product: { ref: 'TENT-2', ...product } },
    ]);
    expect(imported.status, imported.text).toBe(200);
    await adminOk(service, 'POST', `${base}/images/retry-dead`);
    const endpoint = await adminOk(
      service,
      'POST',
      `${base}/webhook-endpoints`,
      { url: 'https://hooks.outfitters-shop.com/a', events: ['price'] },
      201,
    );
    const hooks = `${base}/webhook-endpoints/${endpoint.id}`;
    await adminOk(service, 'PATCH', hooks, { url: 'https://hooks.outfitters-shop.com/b', store: 'de' });
    await adminOk(service, 'PATCH', hooks, { status: 'paused' });
    await adminOk(service, 'PATCH', hooks, { status: 'active' });
    const test = await adminOk(service, 'POST', `${hooks}/test`, undefined, 202);
    await adminOk(service, 'POST', `${hooks}/deliveries/${test.id}/resend`, undefined, 202);
    await adminOk(service, 'POST', `${hooks}/recover`, { since: '2020-01-01T00:00:00Z' }, 202);
    await adminOk(service, 'POST', `${hooks}/rotate-secret`);
    await adminOk(service, 'POST', `${hooks}/confirm-secret`);
    await adminOk(service, 'DELETE', hooks);
    const invited = await adminOk(service, 'POST', `${base}/invitations`, { email: 'buyer@audit.example', role: 'member' }, 201);
    const user = await service.service.accounts.acceptInvitation(
      new URL(invited.link).pathname.split('/').pop()!,
      'a password long enough',
    );
    await adminOk(service, 'DELETE', `${base}/users/${user.id}`);

    const entries = await log();
    expect(entries.map((e) => `${e.actor} ${e.action}`)).toEqual(
      [
        'merchant.create',
        'merchant.update',
        'api_key.create',
        'api_key.revoke',
        'store.create',
        'store.update',
        'store.create',
        'store.delete',
        'customer_group.create',
        'customer_group.update',
        'customer_group.delete',
        'exchange_rate.create',
        'exchange_rate.update',
        'exchange_rate.delete',
        'pricing_rule.create',
        'pricing_rule.update',
        'pricing_rule.delete',
        'supplier.create',
        'supplier.update',
        'supplier.create',
        'supplier.delete',
        'attribute.create',
        'attribute.update',
        'attribute.delete',
        'product.create',
        'product.update',
        'product.delete',
        'import.start',
        'image.retry_dead',
        'endpoint.create',
        'endpoint.update',
        'endpoint.pause',
        'endpoint.enable',
        'endpoint.send_test',
        'endpoint.resend',
        'endpoint.recover',
        'endpoint.rotate_secret',
        'endpoint.confirm_secret',
        'endpoint.delete',
        'user.invite',
        'user.set_password',
        'user.remove',
      ].map((action) => `${action === 'user.set_password' ? 'buyer@audit.example' : 'operator'} ${action}`),
    );
    const documented = documentedActions();
    for (const { action } of entries) expect(documented, action).toContain(action);
    // What it was done to, in words, never a secret.
    expect(entries.find((e) => e.action === 'exchange_rate.update')!.detail).toBe('EUR/PLN = 4.3105');
    expect(entries.find((e) => e.action === 'product.update')!.detail).toMatch(/^product "BP-40" \(id \d+\)$/);
    expect(entries.find((e) => e.action === 'endpoint.update')!.detail).toBe(
      `endpoint ${endpoint.id} URL https://hooks.outfitters-shop.com/b; store de`,
    );
    expect(entries.find((e) => e.action === 'import.start')!.detail).toMatch(/^import \d+ \(admin API\)$/);
    expect(JSON.stringify(entries)).not.toContain(endpoint.secret);
    expect(JSON.stringify(entries)).not.toContain(key.key);
  });

  it('records nothing for a refused change', async () => {
    const before = (await log()).length;
    expect((await service.adminApi('PUT', `${base}/exchange-rates/EUR/EUR`, { rate: '1' })).status).toBe(400);
    expect((await service.adminApi('DELETE', `${base}/stores/de`)).status).toBe(409);
    expect((await service.adminApi('DELETE', `${base}/suppliers/nobody`)).status).toBe(404);
    expect((await log()).length).toBe(before);
  });

  it("records a panel user's invitation and removal once each, by the user", async () => {
    const owner = await service.service.accounts.invite({ kind: 'operator' }, merchantId, { email: 'owner@audit.example', role: 'owner' });
    await service.service.accounts.acceptInvitation(owner.token, 'another long password');
    const signIn = await fetch(`${service.url}/panel/login`, {
      method: 'POST',
      redirect: 'manual',
      headers: { Origin: service.url, 'Content-Type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ email: 'owner@audit.example', password: 'another long password' }),
    });
    expect(signIn.status).toBe(303);
    const cookie = signIn.headers.get('set-cookie')!.split(';')[0]!;
    const usersPage = `${service.url}/panel/merchants/${merchantId}/users`;
    const csrf = /name="_csrf" value="([^"]+)"/.exec(await (await fetch(usersPage, { headers: { Cookie: cookie } })).text())![1]!;
    const post = (url: string, form: Record<string, string>) =>
      fetch(url, {
        method: 'POST',
        redirect: 'manual',
        body: new URLSearchParams({ _csrf: csrf, ...form }),
        headers: { Cookie: cookie, Origin: service.url, 'Content-Type': 'application/x-www-form-urlencoded' },
      });
    const before = (await log()).length;
    expect((await post(usersPage, { email: 'member@audit.example', role: 'member' })).status).toBeLessThan(400);
    const invitation = await service.service.accounts.invite({ kind: 'operator' }, merchantId, {
      email: 'member@audit.example',
      role: 'member',
    });
    const member = await service.service.accounts.acceptInvitation(invitation.token, 'a third long password');
    expect((await post(`${usersPage}/${member.id}/remove`, {})).status).toBeLessThan(400);
    const mine = (await log()).slice(before).filter((e) => e.actor === 'owner@audit.example');
    expect(mine.map((e) => e.action)).toEqual(['user.invite', 'user.remove']);
    expect(mine.map((e) => e.detail)).toEqual(['member@audit.example (member)', 'member@audit.example']);
  });

  it('records a CLI change as `operator`', async () => {
    const before = (await log()).length;
    const created = await runCli(['keys', 'create', '--merchant', String(merchantId), '--name', 'from-cli'], {
      ...service.database.env,
      CPS_DEMO_ON_EMPTY: 'false',
    });
    expect(created.code, created.stderr).toBe(0);
    expect((await log()).slice(before).map((e) => `${e.actor} ${e.action} ${e.detail.replace(/\(cps_[^)]*\)/, '(prefix)')}`)).toEqual([
      expect.stringMatching(/^operator api_key\.create key \d+ "from-cli" \(prefix\): catalog:read$/),
    ]);
  });
});
