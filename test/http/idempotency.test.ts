// Idempotency-Key on the admin API's writes, over real HTTP on either engine: a retry replays the
// first answer without doing the work again, a different request with the key is refused (422), one
// that comes while the first runs is told so (409), and a key is forgotten (and pruned) after
// CPS_IDEMPOTENCY_HOURS, on the service's injected clock.
import { createHash } from 'node:crypto';
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pruneExpiredIdempotencyKeys } from '../../src/admin/idempotency-keys.js';
import { adminOk, createMerchant, type MerchantHandle } from '../support/admin-http.js';
import { fakeClock, HOUR, SECOND } from '../support/clock.js';
import { ADMIN_TOKEN, startTestService, type TestService } from '../support/service.js';

const clock = fakeClock();
let service: TestService;
let merchant: MerchantHandle;

beforeAll(async () => {
  service = await startTestService({ now: clock.now });
  merchant = await createMerchant(service, 'Idempotent Outfitters');
  await adminOk(service, 'PUT', `${merchant.base}/stores/de`, { name: 'DE', locale: 'de-DE', currency: 'EUR' });
});
afterAll(() => service.close());

let keys = 0;
const newKey = () => `key-${++keys}-${Date.now()}`;
const withKey = (key: string) => ({ headers: { 'Idempotency-Key': key } });
const endpointCount = async () => (await adminOk(service, 'GET', `${merchant.base}/webhook-endpoints`)).data.length as number;
const auditActions = async (action: string) =>
  ((await adminOk(service, 'GET', `${merchant.base}/audit-log?limit=200`)).data as { action: string }[]).filter((e) => e.action === action)
    .length;

describe('a retry with the same key and request', () => {
  it('replays the first answer (status, body, headers) with Idempotent-Replayed: true, and creates one endpoint only', async () => {
    const key = newKey();
    const before = await endpointCount();
    const audited = await auditActions('endpoint.create');
    const body = { url: 'https://hooks.idempotent-shop.com/catalog', events: ['price'] };
    const first = await service.adminApi('POST', `${merchant.base}/webhook-endpoints`, body, withKey(key));
    expect(first.status).toBe(201);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    const again = await service.adminApi('POST', `${merchant.base}/webhook-endpoints`, body, withKey(key));
    expect(again.status).toBe(201);
    expect(again.text).toBe(first.text);
    expect(again.body.secret).toBe(first.body.secret);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.headers.get('content-type')).toBe(first.headers.get('content-type'));
    expect(await endpointCount()).toBe(before + 1);
    expect(await auditActions('endpoint.create')).toBe(audited + 1);
  });

  it('replays a 204 of a DELETE as a 204, and deletes once', async () => {
    await adminOk(service, 'PUT', `${merchant.base}/suppliers/nordwind`, { name: 'Nordwind' });
    const key = newKey();
    const first = await service.adminApi('DELETE', `${merchant.base}/suppliers/nordwind`, undefined, withKey(key));
    expect(first.status).toBe(204);
    const again = await service.adminApi('DELETE', `${merchant.base}/suppliers/nordwind`, undefined, withKey(key));
    expect(again.status).toBe(204);
    expect(again.text).toBe('');
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    // Without the key, the same DELETE runs again: the supplier is gone.
    expect((await service.adminApi('DELETE', `${merchant.base}/suppliers/nordwind`)).status).toBe(404);
  });

  it('keeps an answer below 500 (a 404): the retry gets the same 404 even once the resource exists', async () => {
    const key = newKey();
    const path = `${merchant.base}/customer-groups/999999`;
    const first = await service.adminApi('PUT', path, { name: 'outlet' }, withKey(key));
    expect(first.status).toBe(404);
    const again = await service.adminApi('PUT', path, { name: 'outlet' }, withKey(key));
    expect(again.status).toBe(404);
    expect(again.body).toEqual(first.body);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
  });
});

describe('keys per credential', () => {
  it("keeps a merchant key's Idempotency-Key apart from the operator's and from another key's: each does its own work once", async () => {
    const issue = async (name: string) =>
      (await adminOk(service, 'POST', `${merchant.base}/api-keys`, { name, scopes: ['catalog:write'] }, 201)).key as string;
    const [erp, pim] = [await issue('ERP'), await issue('PIM')];
    const asKey = (key: string, body: unknown, idempotencyKey: string) =>
      service.adminApi('POST', `${merchant.base}/customer-groups`, body, {
        headers: { Authorization: `Bearer ${key}`, 'Idempotency-Key': idempotencyKey },
      });
    const key = newKey();
    const byOperator = await service.adminApi('POST', `${merchant.base}/customer-groups`, { name: 'operator group' }, withKey(key));
    const byErp = await asKey(erp, { name: 'erp group' }, key);
    const byPim = await asKey(pim, { name: 'pim group' }, key);
    // Three credentials, three different requests under one key: none is a reuse (422), each is done.
    expect([byOperator.status, byErp.status, byPim.status]).toEqual([201, 201, 201]);
    expect(new Set([byOperator.body.id, byErp.body.id, byPim.body.id]).size).toBe(3);
    // Each credential's retry replays its own first answer.
    const erpAgain = await asKey(erp, { name: 'erp group' }, key);
    expect([erpAgain.status, erpAgain.body.id, erpAgain.headers.get('idempotent-replayed')]).toEqual([201, byErp.body.id, 'true']);
    expect((await asKey(pim, { name: 'erp group' }, key)).status).toBe(422);
  });
});

describe('the same key with a different request', () => {
  it('answers 422 idempotency_key_reused for another body, and applies nothing', async () => {
    const key = newKey();
    const created = await service.adminApi('POST', `${merchant.base}/customer-groups`, { name: 'retail' }, withKey(key));
    expect(created.status).toBe(201);
    const groups = (await adminOk(service, 'GET', `${merchant.base}/customer-groups`)).data.length;
    const reused = await service.adminApi('POST', `${merchant.base}/customer-groups`, { name: 'wholesale' }, withKey(key));
    expect(reused.status).toBe(422);
    expect(reused.headers.get('content-type')).toContain('application/problem+json');
    expect(reused.body).toMatchObject({ code: 'idempotency_key_reused', status: 422 });
    expect((await adminOk(service, 'GET', `${merchant.base}/customer-groups`)).data).toHaveLength(groups);
  });

  it('answers 422 for another path or method with the key', async () => {
    const key = newKey();
    expect((await service.adminApi('PUT', `${merchant.base}/suppliers/alpine`, { name: 'Alpine' }, withKey(key))).status).toBe(200);
    expect((await service.adminApi('PUT', `${merchant.base}/suppliers/baltic`, { name: 'Alpine' }, withKey(key))).body.code).toBe(
      'idempotency_key_reused',
    );
    expect((await service.adminApi('DELETE', `${merchant.base}/suppliers/alpine`, undefined, withKey(key))).status).toBe(422);
    expect((await adminOk(service, 'GET', `${merchant.base}/suppliers`)).data.map((s: { ref: string }) => s.ref)).toEqual(['alpine']);
  });
});

describe('the key itself', () => {
  it('answers 400 invalid_parameter for a key longer than 255 characters, and takes one of 255', async () => {
    const long = await service.adminApi('PUT', `${merchant.base}/suppliers/long`, { name: 'Long' }, withKey('k'.repeat(256)));
    expect(long.status).toBe(400);
    expect(long.body).toMatchObject({ code: 'invalid_parameter', invalid_params: [{ name: 'Idempotency-Key', in: 'header' }] });
    expect((await service.adminApi('GET', `${merchant.base}/suppliers`)).body.data.map((s: { ref: string }) => s.ref)).not.toContain(
      'long',
    );
    const fits = await service.adminApi('PUT', `${merchant.base}/suppliers/long`, { name: 'Long' }, withKey('k'.repeat(255)));
    expect(fits.status).toBe(200);
  });
});

describe('while the first request with the key runs', () => {
  it('answers 409 idempotency_key_in_use to a second one; once the first is answered, the retry replays it', async () => {
    const key = newKey();
    const line = (ref: string) => `${JSON.stringify({ op: 'upsert_product', product: { ref, offers: [] } })}\n`;
    // The first: an import whose file (its length announced) arrives in two parts; the second waits for the test.
    const file = line('TENT-1') + line('TENT-2');
    const upload = http.request(`${service.url}${merchant.base}/imports`, {
      method: 'POST',
      headers: {
        Authorization: `Bearer ${ADMIN_TOKEN}`,
        'Content-Type': 'application/x-ndjson',
        'Content-Length': String(Buffer.byteLength(file)),
        'Idempotency-Key': key,
      },
    });
    const first = new Promise<{ status: number; text: string }>((resolve, reject) => {
      upload.on('error', reject);
      upload.on('response', (response) => {
        let text = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (text += chunk));
        response.on('end', () => resolve({ status: response.statusCode!, text }));
      });
    });
    upload.write(line('TENT-1'));
    const sendRest = () => upload.end(line('TENT-2'));
    // The key is the first's once it runs.
    await until(async () => (await service.storage.idempotencyKey('operator', key)) !== undefined);
    const second = await service.adminApi('POST', `${merchant.base}/imports`, line('TENT-1') + line('TENT-2'), {
      headers: { 'Content-Type': 'application/x-ndjson', 'Idempotency-Key': key },
    });
    expect(second.status).toBe(409);
    expect(second.body).toMatchObject({ code: 'idempotency_key_in_use', status: 409 });
    sendRest();
    const answered = await first;
    expect(answered.status).toBe(200);
    const firstBody = answered.text;
    expect(JSON.parse(firstBody)).toMatchObject({ lines: 2, upserted: 2 });
    const retry = await service.adminApi('POST', `${merchant.base}/imports`, line('TENT-1') + line('TENT-2'), {
      headers: { 'Content-Type': 'application/x-ndjson', 'Idempotency-Key': key },
    });
    expect(retry.status).toBe(200);
    expect(retry.text).toBe(firstBody);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    const jobs = (await adminOk(service, 'GET', `${merchant.base}/imports`)).data as unknown[];
    expect(jobs).toHaveLength(1);
    // Another file with the key: 422, once read.
    const other = await service.adminApi('POST', `${merchant.base}/imports`, line('TENT-3'), {
      headers: { 'Content-Type': 'application/x-ndjson', 'Idempotency-Key': key },
    });
    expect(other.status).toBe(422);
  });
});

describe("a key whose first request's process is gone (its lease lapsed)", () => {
  const abandoned = async (key: string, writeCommitted: boolean, hashOf: { method: string; path: string; body: string }) => {
    const at = clock.now();
    await service.storage.claimIdempotencyKey(
      {
        credential: 'operator',
        key,
        request_hash: createHash('sha256').update(`${hashOf.method}\n${hashOf.path}\n`).update(hashOf.body).digest('hex'),
        created_at: at.toISOString(),
        expires_at: new Date(at.getTime() + 24 * HOUR).toISOString(),
        owner: 'a-process-that-was-killed',
        leased_until: new Date(at.getTime() + 30 * SECOND).toISOString(),
      },
      false,
    );
    if (writeCommitted) await service.storage.markIdempotentWrite('operator', key, 'a-process-that-was-killed');
  };

  it('is answered 409 idempotency_key_in_use while the lease runs, then taken by the retry when nothing of the first committed', async () => {
    const key = newKey();
    const path = `${merchant.base}/suppliers/orphan`;
    const body = JSON.stringify({ name: 'Orphan' });
    await abandoned(key, false, { method: 'PUT', path, body });
    const running = await service.adminApi('PUT', path, body, { headers: { 'Content-Type': 'application/json', 'Idempotency-Key': key } });
    expect(running.status).toBe(409);
    expect(running.body.code).toBe('idempotency_key_in_use');
    clock.advance(31 * SECOND);
    const retry = await service.adminApi('PUT', path, body, { headers: { 'Content-Type': 'application/json', 'Idempotency-Key': key } });
    expect(retry.status).toBe(200);
    expect(retry.headers.get('idempotent-replayed')).toBeNull();
    expect(retry.body).toMatchObject({ ref: 'orphan', name: 'Orphan' });
  });

  it('answers 409 conflict, applying nothing, when a write of the first committed but its answer was never kept', async () => {
    const key = newKey();
    const path = `${merchant.base}/customer-groups`;
    const body = JSON.stringify({ name: 'outlet' });
    await abandoned(key, true, { method: 'POST', path, body });
    clock.advance(31 * SECOND);
    const groups = (await adminOk(service, 'GET', path)).data.length;
    const retry = await service.adminApi('POST', path, body, { headers: { 'Content-Type': 'application/json', 'Idempotency-Key': key } });
    expect(retry.status).toBe(409);
    expect(retry.body.code).toBe('conflict');
    expect((await adminOk(service, 'GET', path)).data).toHaveLength(groups);
  });
});

describe('after CPS_IDEMPOTENCY_HOURS', () => {
  it('replays up to the end of the period, then forgets the key: the same request runs again', async () => {
    const key = newKey();
    const body = { url: 'https://hooks.idempotent-shop.com/expiry', events: ['content'] };
    const before = await endpointCount();
    expect((await service.adminApi('POST', `${merchant.base}/webhook-endpoints`, body, withKey(key))).status).toBe(201);
    clock.advance(24 * HOUR - SECOND);
    const replayed = await service.adminApi('POST', `${merchant.base}/webhook-endpoints`, body, withKey(key));
    expect(replayed.headers.get('idempotent-replayed')).toBe('true');
    expect(await endpointCount()).toBe(before + 1);
    clock.advance(SECOND);
    const anew = await service.adminApi('POST', `${merchant.base}/webhook-endpoints`, body, withKey(key));
    expect(anew.status).toBe(201);
    expect(anew.headers.get('idempotent-replayed')).toBeNull();
    expect(await endpointCount()).toBe(before + 2);
  });

  it('is pruned by the retention: expired keys are deleted, the others kept', async () => {
    const old = newKey();
    await adminOk(service, 'PUT', `${merchant.base}/suppliers/old`, { name: 'Old' }, 200);
    expect((await service.adminApi('PUT', `${merchant.base}/suppliers/old`, { name: 'Old' }, withKey(old))).status).toBe(200);
    clock.advance(12 * HOUR);
    const recent = newKey();
    expect((await service.adminApi('PUT', `${merchant.base}/suppliers/old`, { name: 'Old' }, withKey(recent))).status).toBe(200);
    clock.advance(12 * HOUR);
    const deleted = await pruneExpiredIdempotencyKeys(service.storage, clock.now(), 1);
    expect(deleted).toBeGreaterThanOrEqual(1);
    expect(await service.storage.idempotencyKey('operator', old)).toBeUndefined();
    expect(await service.storage.idempotencyKey('operator', recent)).toMatchObject({ answer: { status: 200 } });
  });
});

async function until(condition: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
