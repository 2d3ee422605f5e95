// The admin client for merchants' systems over real HTTP, with a merchant key of catalog:write and
// webhooks:write. In front of the service, a gateway on 127.0.0.1 answers the requests a test
// scripts (a 429 or 503, with or without Retry-After, a 500) and forwards the rest, logging every
// request's Idempotency-Key and Content-Type. Waits are injected, so no real time passes; one
// test has the service itself answer 503 at its connection cap. (Here rather than in test/client so
// that it runs on both storage engines.)
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CatalogApiError,
  createAdminClient,
  importProducts,
  unwrap,
  type AdminClient,
  type RetryAfterOptions,
} from '../../src/client/admin.js';
import { adminOk, createMerchant, type MerchantHandle } from '../support/admin-http.js';
import { startTestService, type TestService } from '../support/service.js';
import { issueApiKey } from '../../src/tenancy/api-keys.js';
import { scopeToMerchant } from '../../src/storage/merchant-scope.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

interface Scripted {
  status: number;
  retryAfter?: string;
}

interface Seen {
  method: string;
  path: string;
  idempotencyKey: string | undefined;
  contentType: string | undefined;
  /** 'gateway' when the gateway answered it, else the service's status. */
  answeredBy: 'gateway' | 'service';
  status: number;
}

/** A gateway in front of the service: answers what is scripted, in order, and forwards the rest. */
class Gateway {
  readonly seen: Seen[] = [];
  private script: Scripted[] = [];
  private constructor(
    private readonly server: http.Server,
    readonly url: string,
  ) {}

  static async start(target: TestService): Promise<Gateway> {
    const server = http.createServer((req, res) => gateway.handle(target, req, res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const gateway = new Gateway(server, `http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    return gateway;
  }

  /** The next requests are answered these statuses, in order, by the gateway itself. */
  answer(...script: Scripted[]): this {
    this.script = script;
    this.seen.length = 0;
    return this;
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  private handle(target: TestService, req: http.IncomingMessage, res: http.ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const header = (name: string) => (typeof req.headers[name] === 'string' ? req.headers[name] : undefined);
      const seen: Seen = {
        method: req.method ?? '',
        path: req.url ?? '',
        idempotencyKey: header('idempotency-key'),
        contentType: header('content-type'),
        answeredBy: 'gateway',
        status: 0,
      };
      this.seen.push(seen);
      const scripted = this.script.shift();
      if (scripted) {
        seen.status = scripted.status;
        const code = { 429: 'rate_limited', 503: 'service_unavailable' }[scripted.status] ?? 'internal_error';
        const problem = { type: `urn:problem:catalog:${code}`, title: 'Gateway', status: scripted.status, detail: 'scripted', code };
        res
          .writeHead(scripted.status, {
            'Content-Type': 'application/problem+json',
            ...(scripted.retryAfter === undefined ? {} : { 'Retry-After': scripted.retryAfter }),
          })
          .end(JSON.stringify(problem));
        return;
      }
      const headers = Object.fromEntries(
        Object.entries(req.headers).filter(([name]) => !['host', 'connection', 'content-length'].includes(name)) as [string, string][],
      );
      const body = chunks.length ? Buffer.concat(chunks) : undefined;
      target
        .fetch(`${target.url}${req.url}`, { method: req.method, headers, body })
        .then(async (response) => {
          seen.answeredBy = 'service';
          seen.status = response.status;
          const answer = Buffer.from(await response.arrayBuffer());
          const out: Record<string, string> = {};
          response.headers.forEach((value, name) => {
            if (!['content-length', 'content-encoding', 'transfer-encoding', 'connection'].includes(name)) out[name] = value;
          });
          res.writeHead(response.status, out).end(answer);
        })
        .catch((error: unknown) => res.writeHead(502).end(String(error)));
    });
  }
}

let service: TestService;
let gateway: Gateway;
let merchant: MerchantHandle;
let key: string;
let webhooksOnlyKey: string;

beforeAll(async () => {
  service = await startTestService();
  gateway = await Gateway.start(service);
  merchant = await createMerchant(service, 'Admin Client Outfitters');
  await adminOk(service, 'PUT', `${merchant.base}/stores/de`, { name: 'Deutschland', locale: 'de-DE', currency: 'EUR' });
  await adminOk(service, 'PUT', `${merchant.base}/suppliers/alpine`, { name: 'Alpine Wholesale AG' });
  await adminOk(service, 'PUT', `${merchant.base}/suppliers/baltic`, { name: 'Baltic Outdoor' });
  const issue = async (scopes: string[]) =>
    (await adminOk(service, 'POST', `${merchant.base}/api-keys`, { name: scopes.join(' '), scopes }, 201)).key as string;
  key = await issue(['catalog:write', 'webhooks:write']);
  webhooksOnlyKey = await issue(['webhooks:write']);
}, 60_000);
afterAll(async () => {
  await gateway?.close();
  await service?.close();
});

/** A client through the gateway, whose waits are logged and take no time. */
function client(retry: RetryAfterOptions = {}, clientKey = key): { admin: AdminClient; slept: number[] } {
  const slept: number[] = [];
  const admin = createAdminClient({
    baseUrl: gateway.url,
    key: clientKey,
    retry: {
      ...retry,
      sleep: async (ms) => {
        slept.push(ms);
      },
    },
  });
  return { admin, slept };
}

const productPath = (ref: string) => ({ merchant_id: merchant.id, product_ref: ref });

async function caught(promise: Promise<unknown>): Promise<CatalogApiError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(CatalogApiError);
  return error as CatalogApiError;
}

async function seedProduct(ref: string): Promise<void> {
  await adminOk(service, 'PUT', `${merchant.base}/products/${ref}`, {
    content: { de: { title: `Produkt ${ref}`, description: null } },
    offers: [
      { supplier_ref: 'alpine', quantity: 5, cost: '20.00', currency: 'EUR' },
      { supplier_ref: 'baltic', quantity: 3, cost: '18.50', currency: 'EUR' },
    ],
  });
}

describe('the admin client', () => {
  it('waits out a 429 and a 503 for their Retry-After and sends the same write again, with the same Idempotency-Key', async () => {
    await seedProduct('RETRY-1');
    const { admin, slept } = client();
    gateway.answer({ status: 429, retryAfter: '2' }, { status: 503, retryAfter: '7' });
    const patched = await unwrap(
      admin.PATCH('/admin/v1/merchants/{merchant_id}/products/{product_ref}', {
        params: { path: productPath('RETRY-1') },
        body: { offers: [{ supplier_ref: 'alpine', quantity: 5, cost: '21.00', currency: 'EUR' }] },
      }),
    );
    expect(patched.offers).toEqual([{ supplier_ref: 'alpine', quantity: 5, cost: '21.00', currency: 'EUR' }]);
    expect(slept).toEqual([2000, 7000]);
    expect(gateway.seen.map((s) => [s.answeredBy, s.status])).toEqual([
      ['gateway', 429],
      ['gateway', 503],
      ['service', 200],
    ]);
    const keys = gateway.seen.map((s) => s.idempotencyKey);
    expect(keys[0]).toMatch(UUID);
    expect(new Set(keys)).toEqual(new Set([keys[0]]));
  });

  it("reads a Retry-After given as an HTTP date, counted from the answer's own Date", async () => {
    const { admin, slept } = client();
    // node:http sends a Date with every answer: the wait is counted from it, 5 s (give or take its whole second).
    gateway.answer({ status: 429, retryAfter: new Date(Date.now() + 5_000).toUTCString() });
    await unwrap(admin.GET('/admin/v1/merchants/{merchant_id}/stores', { params: { path: { merchant_id: merchant.id } } }));
    expect(slept).toHaveLength(1);
    expect(slept[0]).toBeGreaterThanOrEqual(4000);
    expect(slept[0]).toBeLessThanOrEqual(6000);
  });

  it('gives every write call an Idempotency-Key of its own (POST, PUT, PATCH, DELETE) and none to a read', async () => {
    const { admin } = client();
    gateway.answer();
    const path = { merchant_id: merchant.id };
    await unwrap(admin.GET('/admin/v1/merchants/{merchant_id}/suppliers', { params: { path } }));
    await unwrap(
      admin.PUT('/admin/v1/merchants/{merchant_id}/suppliers/{supplier_ref}', {
        params: { path: { ...path, supplier_ref: 'keys' } },
        body: { name: 'Keys Ltd' },
      }),
    );
    await unwrap(
      admin.PUT('/admin/v1/merchants/{merchant_id}/suppliers/{supplier_ref}', {
        params: { path: { ...path, supplier_ref: 'keys' } },
        body: { name: 'Keys Ltd' },
      }),
    );
    const group = await unwrap(
      admin.POST('/admin/v1/merchants/{merchant_id}/customer-groups', { params: { path }, body: { name: 'keys' } }),
    );
    await unwrap(
      admin.PATCH('/admin/v1/merchants/{merchant_id}/stores/{slug}', {
        params: { path: { ...path, slug: 'de' } },
        body: { name: 'Deutschland' },
      }),
    );
    await unwrap(
      admin.DELETE('/admin/v1/merchants/{merchant_id}/customer-groups/{group_id}', { params: { path: { ...path, group_id: group.id } } }),
    );
    expect(gateway.seen.map((s) => s.method)).toEqual(['GET', 'PUT', 'PUT', 'POST', 'PATCH', 'DELETE']);
    expect(gateway.seen[0]!.idempotencyKey).toBeUndefined();
    const keys = gateway.seen.slice(1).map((s) => s.idempotencyKey);
    for (const k of keys) expect(k).toMatch(UUID);
    expect(new Set(keys).size).toBe(5);
  });

  it('keeps an Idempotency-Key the call sets itself, on every retry', async () => {
    const { admin, slept } = client();
    gateway.answer({ status: 503, retryAfter: '1' });
    await unwrap(
      admin.PUT('/admin/v1/merchants/{merchant_id}/suppliers/{supplier_ref}', {
        params: { path: { merchant_id: merchant.id, supplier_ref: 'own-key' } },
        body: { name: 'Own Key GmbH' },
        headers: { 'Idempotency-Key': 'erp-sync-2026-03-01-supplier-own-key' },
      }),
    );
    expect(slept).toEqual([1000]);
    expect(gateway.seen.map((s) => s.idempotencyKey)).toEqual([
      'erp-sync-2026-03-01-supplier-own-key',
      'erp-sync-2026-03-01-supplier-own-key',
    ]);
  });

  it('hands back at once a 429 or 503 without Retry-After, one asking for more than maxWaitSeconds, and any other error', async () => {
    const stores = { params: { path: { merchant_id: merchant.id } } } as const;
    for (const [scripted, retry] of [
      [{ status: 503 }, {}],
      [{ status: 429 }, {}],
      [{ status: 429, retryAfter: '120' }, {}],
      [{ status: 503, retryAfter: '3' }, { maxWaitSeconds: 2 }],
      [{ status: 500, retryAfter: '1' }, {}],
      [{ status: 502, retryAfter: '1' }, {}],
    ] as [Scripted, RetryAfterOptions][]) {
      const { admin, slept } = client(retry);
      gateway.answer(scripted);
      const error = await caught(unwrap(admin.GET('/admin/v1/merchants/{merchant_id}/stores', stores)));
      expect(error.status).toBe(scripted.status);
      expect(slept).toEqual([]);
      expect(gateway.seen).toHaveLength(1);
    }
  });

  it('gives up after `retries` waits, handing the last answer back as a CatalogApiError', async () => {
    const { admin, slept } = client({ retries: 2 });
    gateway.answer({ status: 429, retryAfter: '1' }, { status: 429, retryAfter: '1' }, { status: 503, retryAfter: '4' });
    const error = await caught(
      unwrap(
        admin.DELETE('/admin/v1/merchants/{merchant_id}/suppliers/{supplier_ref}', {
          params: { path: { merchant_id: merchant.id, supplier_ref: 'keys' } },
        }),
      ),
    );
    expect(error.status).toBe(503);
    expect(slept).toEqual([1000, 1000]);
    expect(gateway.seen.map((s) => s.answeredBy)).toEqual(['gateway', 'gateway', 'gateway']);
    expect(new Set(gateway.seen.map((s) => s.idempotencyKey)).size).toBe(1);
  });

  it('sends a merge patch as application/merge-patch+json and an import as application/x-ndjson, the media types the document declares', async () => {
    const { admin } = client();
    gateway.answer();
    const imported = await importProducts(admin, merchant.id, [
      {
        op: 'upsert_product',
        product: { ref: 'IMP-1', offers: [{ supplier_ref: 'alpine', quantity: 2, cost: '9.00', currency: 'EUR' }] },
      },
      { op: 'upsert_product', product: { ref: 'IMP-2', content: { de: { title: 'Zwei', description: null } } } },
      { op: 'delete_product', ref: 'IMP-NONE' },
    ]);
    expect(imported).toEqual({ lines: 3, upserted: 2, deleted: 0 });
    await unwrap(
      admin.PATCH('/admin/v1/merchants/{merchant_id}/products/{product_ref}', {
        params: { path: productPath('IMP-2') },
        body: { content: { de: { title: 'Zwei (neu)' } } },
      }),
    );
    const source = await unwrap(
      admin.GET('/admin/v1/merchants/{merchant_id}/products/{product_ref}', { params: { path: productPath('IMP-2') } }),
    );
    expect(source.content).toEqual({ de: { title: 'Zwei (neu)', description: null } });
    expect(gateway.seen.map((s) => [s.method, s.contentType])).toEqual([
      ['POST', 'application/x-ndjson'],
      ['PATCH', 'application/merge-patch+json'],
      ['GET', undefined],
    ]);
  });

  it('surfaces error answers as the read client does: CatalogApiError with the status and the problem', async () => {
    await seedProduct('ERR-1');
    const { admin } = client();
    gateway.answer();
    const invalid = await caught(
      unwrap(
        admin.PATCH('/admin/v1/merchants/{merchant_id}/products/{product_ref}', {
          params: { path: productPath('ERR-1') },
          body: { offers: [{ supplier_ref: 'alpine', quantity: 5, cost: 'cheap', currency: 'EUR' }] },
        }),
      ),
    );
    expect(invalid.status).toBe(400);
    expect(invalid.problem.code).toBe('invalid_body');
    expect(invalid.problem.invalid_params?.map((p) => p.name)).toContain('/offers/0/cost');

    const otherMerchant = await createMerchant(service, 'Someone Else AG');
    const hidden = await caught(
      unwrap(admin.GET('/admin/v1/merchants/{merchant_id}/stores', { params: { path: { merchant_id: otherMerchant.id } } })),
    );
    expect([hidden.status, hidden.problem.code]).toEqual([404, 'not_found']);

    const scoped = await caught(
      unwrap(
        client({}, webhooksOnlyKey).admin.GET('/admin/v1/merchants/{merchant_id}/products/{product_ref}', {
          params: { path: productPath('ERR-1') },
        }),
      ),
    );
    expect([scoped.status, scoped.problem.code]).toEqual([403, 'insufficient_scope']);
    expect(scoped.problem.detail).toContain('catalog:write');

    const unknown = await caught(
      unwrap(
        client({}, 'cps_not_a_key').admin.GET('/admin/v1/merchants/{merchant_id}/stores', {
          params: { path: { merchant_id: merchant.id } },
        }),
      ),
    );
    expect([unknown.status, unknown.problem.code]).toEqual([401, 'unauthorized']);
  });
});

describe('the admin client and a process at its connection cap', () => {
  it("waits out the service's own 503 for its Retry-After, then the write goes through", async () => {
    const capped = await startTestService({ config: { operations: { maxConnections: 1 } } });
    const held = net.connect(capped.server.port, '127.0.0.1');
    const connected = new Promise<void>((resolve) => held.once('connect', () => resolve()));
    try {
      // Set up in process, so that the one place is the held connection's.
      const shop = await capped.admin.createMerchant({ name: 'Capped Outfitters' });
      const erpKey = (await issueApiKey(scopeToMerchant(capped.storage, shop.id), 'erp', new Date(), { scopes: ['catalog:write'] })).key;
      await connected;
      await until(() => capped.server.connections.open === 1);
      const statuses: number[] = [];
      const slept: number[] = [];
      const admin = createAdminClient({
        baseUrl: capped.url,
        key: erpKey,
        fetch: async (request) => {
          const response = await fetch(request);
          statuses.push(response.status);
          return response;
        },
        retry: {
          sleep: async (ms) => {
            slept.push(ms);
            // The place frees while the client waits: the held connection ends (as a long-poll would).
            held.destroy();
            await until(() => capped.server.connections.open === 0);
          },
        },
      });
      const supplier = await unwrap(
        admin.PUT('/admin/v1/merchants/{merchant_id}/suppliers/{supplier_ref}', {
          params: { path: { merchant_id: shop.id, supplier_ref: 'alpine' } },
          body: { name: 'Alpine Wholesale AG' },
        }),
      );
      expect(supplier).toMatchObject({ ref: 'alpine', name: 'Alpine Wholesale AG' });
      expect(statuses).toEqual([503, 200]);
      expect(slept).toEqual([10_000]);
    } finally {
      held.destroy();
      await capped.close();
    }
  }, 60_000);
});

/** Polls (real time, 5 ms) until the condition holds; fails after 5 s. */
async function until(condition: () => boolean): Promise<void> {
  const deadline = Date.now() + 5000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('timed out waiting');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
