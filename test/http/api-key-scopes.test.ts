// Who may call which admin operation, walked over every operation of admin.yaml (the generated
// route facts, so a new operation is walked without touching this file): the operator token, a
// merchant key of each scope, a key of another merchant and a store-restricted key, each answered
// allowed (the request reaches the operation), 403 or 404 as the operation's declared scope says.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_ROUTE_FACTS, type RouteFacts } from '../../src/generated/admin-route-facts.js';
import { grants, SCOPES, type Scope } from '../../src/tenancy/credential.js';
import { adminOk, createMerchant, type MerchantHandle } from '../support/admin-http.js';
import { ADMIN_TOKEN, startTestService, type TestResponse, type TestService } from '../support/service.js';

let service: TestService;
let merchant: MerchantHandle;
let other: MerchantHandle;
/** Keys of the merchant by their one scope, a key of the other merchant, and one restricted to the store `de`. */
const keys = {} as Record<Scope, string> & { otherMerchant: string; storeDe: string };
const MISSING_MERCHANT = 987654321;

const STORE = { name: 'Alpine', locale: 'de-DE', currency: 'EUR' };

async function issue(merchantId: number, scopes: Scope[], stores: string[] | null = null): Promise<string> {
  return (await adminOk(service, 'POST', `/admin/v1/merchants/${merchantId}/api-keys`, { name: scopes.join('+'), scopes, stores }, 201))
    .key;
}

beforeAll(async () => {
  service = await startTestService();
  merchant = await createMerchant(service, 'Alpine Outfitters');
  other = await createMerchant(service, 'Baltic Gear');
  for (const handle of [merchant, other]) {
    await adminOk(service, 'PUT', `${handle.base}/stores/de`, STORE);
    await adminOk(service, 'PUT', `${handle.base}/stores/pl`, { ...STORE, locale: 'pl-PL', currency: 'PLN' });
  }
  for (const scope of SCOPES) keys[scope] = await issue(merchant.id, [scope]);
  keys.otherMerchant = await issue(other.id, ['catalog:write', 'webhooks:write']);
  keys.storeDe = await issue(merchant.id, ['catalog:read', 'webhooks:write'], ['de']);
});

afterAll(async () => {
  await service?.close();
});

/** Path parameters other than the merchant: resources that do not exist, so nothing is changed by an allowed request. */
const PARAMETERS: Record<string, string> = {
  key_id: '999999',
  user_id: '999999',
  invitation_id: '999999',
  slug: 'no-such-store',
  group_id: '999999',
  base: 'EUR',
  quote: 'XTS',
  rule_id: '999999',
  supplier_ref: 'no-such-supplier',
  key: 'no_such_attribute',
  product_ref: 'NO-SUCH-PRODUCT',
  import_id: '999999',
  endpoint_id: '999999',
  delivery_id: '999999',
};

/** One request of the operation for a merchant: a body the operation refuses (400) after authorization, so nothing is written. */
function probe(operation: RouteFacts, merchantId: number, token: string): Promise<TestResponse> {
  const path = operation.path.replace(/\{([^}]+)\}/g, (_, name: string) => {
    if (name === 'merchant_id') return String(merchantId);
    if (!(name in PARAMETERS)) throw new Error(`${operation.operationId}: give the test a value for {${name}}`);
    return PARAMETERS[name]!;
  });
  const headers: Record<string, string> = { Authorization: `Bearer ${token}` };
  let body: string | undefined;
  if (operation.body === 'json') {
    headers['Content-Type'] = 'application/json';
    body = JSON.stringify({ not_a_member: true });
  } else if (operation.body === 'ndjson') {
    headers['Content-Type'] = 'application/x-ndjson';
    body = '{"op":"not_an_operation"}\n';
  }
  return service.adminApi(operation.method, path, undefined, { headers, body });
}

const merchantMissing = (response: TestResponse, merchantId: number) =>
  response.status === 404 && response.body?.detail === `Merchant ${merchantId} does not exist.`;

/** The request reached the operation: neither refused for its credential nor told the merchant does not exist. */
function expectAllowed(response: TestResponse, what: string) {
  expect(response.status, `${what}: ${response.text}`).not.toBe(401);
  expect(response.status, `${what}: ${response.text}`).not.toBe(403);
  expect(merchantMissing(response, merchant.id), `${what}: ${response.text}`).toBe(false);
}

function expectRefused(response: TestResponse, operation: RouteFacts, held: readonly Scope[], what: string) {
  expect(response.status, `${what}: ${response.text}`).toBe(403);
  if (operation.scope === null) {
    expect(response.body.code, what).toBe('forbidden');
    return;
  }
  expect(grants(held, operation.scope), what).toBe(false);
  expect(response.body.code, what).toBe('insufficient_scope');
  expect(response.body.detail, what).toContain(operation.scope);
  expect(response.headers.get('content-type'), what).toBe('application/problem+json');
  expect(response.headers.get('www-authenticate'), what).toBe(`Bearer error="insufficient_scope", scope="${operation.scope}"`);
}

describe('admin operations by credential', () => {
  it('walks every operation of admin.yaml, each naming a scope a key can hold or none (the operator alone)', () => {
    expect(ADMIN_ROUTE_FACTS.length).toBeGreaterThanOrEqual(56);
    for (const operation of ADMIN_ROUTE_FACTS) {
      if (operation.scope !== null) expect(operation.path, operation.operationId).toMatch(/^\/admin\/v1\/merchants\/\{merchant_id\}\//);
    }
    const operatorOnly = ADMIN_ROUTE_FACTS.filter((o) => o.scope === null).map((o) => o.operationId);
    expect(operatorOnly.sort()).toEqual(
      [
        'listMerchants',
        'createMerchant',
        'getMerchant',
        'updateMerchant',
        'listApiKeys',
        'createApiKey',
        'updateApiKey',
        'revokeApiKey',
        'rollApiKey',
        'listPanelUsers',
        'removePanelUser',
        'resetPanelUserPassword',
        'listPanelInvitations',
        'invitePanelUser',
        'revokePanelInvitation',
      ].sort(),
    );
  });

  it('lets the operator token call every operation', async () => {
    for (const operation of ADMIN_ROUTE_FACTS) {
      expectAllowed(await probe(operation, merchant.id, ADMIN_TOKEN), `operator ${operation.operationId}`);
    }
  });

  it('lets a key of each scope call exactly the operations its scope (or the write scope implying it) grants, 403 otherwise', async () => {
    for (const scope of SCOPES) {
      for (const operation of ADMIN_ROUTE_FACTS) {
        const response = await probe(operation, merchant.id, keys[scope]);
        const what = `${scope} key ${operation.operationId}`;
        if (operation.scope !== null && grants([scope], operation.scope)) expectAllowed(response, what);
        else expectRefused(response, operation, [scope], what);
      }
    }
  });

  it("answers another merchant's key 404 on every merchant operation, as for a merchant that does not exist, and 403 on the operator's", async () => {
    for (const operation of ADMIN_ROUTE_FACTS) {
      const what = `other merchant's key ${operation.operationId}`;
      const response = await probe(operation, merchant.id, keys.otherMerchant);
      if (operation.scope === null) {
        expectRefused(response, operation, ['catalog:write', 'webhooks:write'], what);
        continue;
      }
      expect(response.status, `${what}: ${response.text}`).toBe(404);
      expect(merchantMissing(response, merchant.id), what).toBe(true);
      if (operation.body === 'none') {
        // The operator asking for a merchant that does not exist gets the same answer, but for the id.
        const missing = await probe(operation, MISSING_MERCHANT, ADMIN_TOKEN);
        expect(missing.status, operation.operationId).toBe(404);
        expect({
          ...missing.body,
          detail: missing.body.detail.replace(String(MISSING_MERCHANT), String(merchant.id)),
          instance: undefined,
        }).toEqual({
          ...response.body,
          instance: undefined,
        });
      }
    }
  });

  it('answers a store-restricted key by its scopes on every operation', async () => {
    const held: Scope[] = ['catalog:read', 'webhooks:write'];
    for (const operation of ADMIN_ROUTE_FACTS) {
      const response = await probe(operation, merchant.id, keys.storeDe);
      const what = `store-restricted key ${operation.operationId}`;
      if (operation.scope !== null && grants(held, operation.scope)) expectAllowed(response, what);
      else expectRefused(response, operation, held, what);
    }
  });

  it('answers 401 to an unknown or revoked key, as to a wrong admin token', async () => {
    const revoked = (await adminOk(service, 'POST', `${merchant.base}/api-keys`, { name: 'gone', scopes: ['catalog:write'] }, 201)) as {
      id: number;
      key: string;
    };
    await adminOk(service, 'DELETE', `${merchant.base}/api-keys/${revoked.id}`);
    for (const token of [revoked.key, `cps_${'A'.repeat(43)}`, 'not-the-admin-token']) {
      const response = await service.adminApi('GET', `${merchant.base}/stores`, undefined, {
        headers: { Authorization: `Bearer ${token}` },
      });
      expect(response.status).toBe(401);
      expect(response.headers.get('www-authenticate')).toBe('Bearer realm="admin", error="invalid_token"');
    }
  });
});
