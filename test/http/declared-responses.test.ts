// What the service really answers, against what its served /openapi.json declares: for each public
// operation, over real HTTP, every status the document lists is produced (200, 304 where an ETag can
// produce it, 400, 401, 403, 404, 410, 429, 500 from an injected failure, 503 from a full server and
// during shutdown) and no other; on each answer every header the document declares as required is
// sent, and every header sent (but the framing ones) is declared, so `RateLimit` and
// `RateLimit-Policy` are declared exactly where they come.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDemoCatalog } from '../../src/admin/demo.js';
import { LocalFolderMediaStore } from '../../src/images/media-store.js';
import { issueApiKey, type ApiKeyGrant } from '../../src/tenancy/api-keys.js';
import { scopeToMerchant } from '../../src/storage/merchant-scope.js';
import { publicContract } from '../support/contract.js';
import { startTestService, type TestService } from '../support/service.js';

type Json = Record<string, any>;

/** Sent on any HTTP answer, as HTTP frames it: not part of an operation's contract. */
const FRAMING = new Set(['content-type', 'content-length', 'date', 'connection', 'keep-alive', 'transfer-encoding', 'content-encoding']);

const OPERATIONS = ['listProducts', 'exportProducts', 'getProduct', 'listPrices', 'listStores', 'listChanges', 'getMedia'] as const;
type OperationId = (typeof OPERATIONS)[number];

interface Answer {
  operationId: OperationId;
  /** What produced it, for the failure message. */
  scenario: string;
  status: number;
  headers: Record<string, string>;
}

const answers: Answer[] = [];

/** A GET over its own connection (or the agent's kept-alive one), read to its end. */
function get(
  url: string,
  headers: Record<string, string> = {},
  agent?: http.Agent,
): Promise<{ url: string; status: number; headers: Record<string, string>; body: string }> {
  return new Promise((resolve, reject) => {
    const request = http.get(url, { headers, agent: agent ?? false }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => {
        const flat: Record<string, string> = {};
        for (const [name, value] of Object.entries(response.headers)) flat[name] = Array.isArray(value) ? value.join(', ') : String(value);
        resolve({ url, status: response.statusCode!, headers: flat, body: Buffer.concat(chunks).toString('utf8') });
      });
      response.on('error', reject);
    });
    request.on('error', reject);
  });
}

/** The first bytes of an event stream's answer: its status and headers, then the connection is closed. */
function openStream(
  url: string,
  headers: Record<string, string>,
): Promise<{ status: number; headers: Record<string, string>; close: () => void }> {
  return new Promise((resolve, reject) => {
    const request = http.get(url, { headers: { Accept: 'text/event-stream', ...headers }, agent: false }, (response) => {
      const flat: Record<string, string> = {};
      for (const [name, value] of Object.entries(response.headers)) flat[name] = Array.isArray(value) ? value.join(', ') : String(value);
      response.resume();
      resolve({ status: response.statusCode!, headers: flat, close: () => request.destroy() });
    });
    request.on('error', (error) => (request.destroyed ? undefined : reject(error)));
  });
}

/** Keeps an answer for the comparisons below, once the harness has checked its body and header values. */
function record(
  operationId: OperationId,
  scenario: string,
  answer: { url?: string; status: number; headers: Record<string, string>; body?: string },
): void {
  if (answer.url && answer.body !== undefined)
    publicContract.validateResponse('GET', answer.url, answer.status, new Headers(answer.headers), answer.body);
  answers.push({ operationId, scenario, status: answer.status, headers: answer.headers });
}

/** Every failure of `method` on `target` while `run` runs is an unexpected one (a 500). */
async function failing<T extends object, R>(target: T, method: keyof T & string, run: () => Promise<R>): Promise<R> {
  const original = target[method];
  (target as Record<string, unknown>)[method] = () => Promise.reject(new Error(`injected failure of ${method}`));
  try {
    return await run();
  } finally {
    (target as Record<string, unknown>)[method] = original;
  }
}

let served: Json;
let a: TestService;
let b: TestService;
let bClosed = false;

beforeAll(async () => {
  // Buckets of 6 requests that do not refill within the test: a fresh key per operation, and one
  // more spent to its end for the 429.
  a = await startTestService({ config: { rateLimit: { burst: 6, perSecond: 0.001 } } });
  // The server that is full (no export place, the live places taken) and then shuts down.
  b = await startTestService({ config: { exports: { perProcess: 0 }, changes: { livePerProcess: OPERATIONS.length } } });
  served = (await (await fetch(`${a.url}/openapi.json`)).json()) as Json;
}, 60_000);

afterAll(async () => {
  await a?.close();
  if (b && !bClosed) await b.close();
  else if (b) {
    await b.service.close();
    await b.database.drop();
    fs.rmSync(b.dir, { recursive: true, force: true });
  }
});

describe('the public document declares what the server answers', () => {
  beforeAll(async () => {
    const demoA = await buildDemoCatalog(a.admin, 4);
    const demoB = await buildDemoCatalog(b.admin, 4);
    const keyOf = async (service: TestService, merchantId: number, grant: ApiKeyGrant = {}) =>
      `Bearer ${(await issueApiKey(scopeToMerchant(service.storage, merchantId), 'contract', new Date(), grant)).key}`;
    const productId = (await a.api('/v1/products?per_page=1', demoA.api_key)).body.data[0].id as number;
    const webhooksOnly = await keyOf(a, demoA.merchant_id, { scopes: ['webhooks:read'] });
    // A key restricted to the default store looks that store up first (http/key-stores.ts): the export's and the feed's failing read.
    const deOnly = await keyOf(a, demoA.merchant_id, { stores: ['de'] });

    // A mirrored image, and a key whose file cannot be read (a folder where the file should be).
    const png = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.from('contract image')]);
    const mediaKey = `${createHash('sha256').update(png).digest('hex')}.png`;
    await new LocalFolderMediaStore(a.config.images.mediaDir).put(mediaKey, png);
    const brokenKey = `${'e'.repeat(64)}.png`;
    fs.mkdirSync(path.join(a.config.images.mediaDir, 'ee', brokenKey), { recursive: true });

    const requests: Record<OperationId, { path: string; bad?: string; unknown?: string; etag: boolean; fail?: () => [object, string] }> = {
      listProducts: {
        path: '/v1/products?per_page=2',
        bad: '/v1/products?per_page=ten',
        unknown: '/v1/products?store=nope',
        etag: true,
        fail: () => [a.service.reads, 'productPage'],
      },
      exportProducts: {
        path: '/v1/products/export',
        bad: '/v1/products/export?store=NOT_A_SLUG',
        unknown: '/v1/products/export?store=nope',
        etag: true,
        fail: () => [a.service.reads, 'activeStore'],
      },
      getProduct: {
        path: `/v1/products/${productId}`,
        bad: '/v1/products/abc',
        unknown: '/v1/products/999999999',
        etag: true,
        fail: () => [a.service.reads, 'product'],
      },
      listPrices: {
        path: `/v1/prices?ids=${productId}`,
        bad: '/v1/prices',
        unknown: `/v1/prices?ids=${productId}&store=nope`,
        etag: false,
        fail: () => [a.service.reads, 'pricesByIds'],
      },
      listStores: { path: '/v1/stores', etag: true, fail: () => [a.service.reads, 'activeStores'] },
      listChanges: {
        path: '/v1/changes',
        bad: '/v1/changes?since=yesterday',
        unknown: '/v1/changes?store=nope',
        etag: false,
        fail: () => [a.service.reads, 'activeStore'],
      },
      getMedia: { path: `/media/${mediaKey}`, unknown: `/media/${'0'.repeat(64)}.png`, etag: true },
    };

    for (const operationId of OPERATIONS) {
      const request = requests[operationId];
      const authorized: Record<string, string> = operationId === 'getMedia' ? {} : { Authorization: await keyOf(a, demoA.merchant_id) };
      const ok = await get(`${a.url}${request.path}`, authorized);
      record(operationId, 'a read', ok);
      if (request.etag)
        record(
          operationId,
          'If-None-Match with its ETag',
          await get(`${a.url}${request.path}`, { ...authorized, 'If-None-Match': ok.headers.etag! }),
        );
      if (request.bad) record(operationId, 'a malformed parameter', await get(`${a.url}${request.bad}`, authorized));
      if (request.unknown) record(operationId, 'an unknown store or id', await get(`${a.url}${request.unknown}`, authorized));
      if (request.fail) {
        const [target, method] = request.fail();
        const failingKey = method === 'activeStore' ? deOnly : authorized.Authorization!;
        record(
          operationId,
          `${method} failing`,
          await failing(target, method as never, () => get(`${a.url}${request.path}`, { Authorization: failingKey })),
        );
      } else {
        record(operationId, 'its file unreadable', await get(`${a.url}/media/${brokenKey}`));
      }
      if (operationId === 'getMedia') continue;
      record(operationId, 'no API key', await get(`${a.url}${request.path}`));
      record(operationId, 'a key without catalog:read', await get(`${a.url}${request.path}`, { Authorization: webhooksOnly }));
      // The key's bucket spent to its end: the request after it is throttled.
      const spent = { Authorization: await keyOf(a, demoA.merchant_id) };
      let throttled = await get(`${a.url}${request.path}`, spent);
      while (throttled.status !== 429) throttled = await get(`${a.url}${request.path}`, spent);
      record(operationId, 'its bucket empty', throttled);
    }

    const stream = await openStream(`${a.url}/v1/changes`, { Authorization: await keyOf(a, demoA.merchant_id) });
    record('listChanges', 'Accept: text/event-stream', stream);
    stream.close();
    // A long-poll's answer is written straight to its connection (http/direct-answer.ts), with the same headers.
    const feedKey = { Authorization: await keyOf(a, demoA.merchant_id) };
    const window = JSON.parse((await get(`${a.url}/v1/changes`, feedKey)).body) as { next_since: string; next_id: number };
    record(
      'listChanges',
      'a long-poll',
      await get(`${a.url}/v1/changes?since=${window.next_since}&since_id=${window.next_id}&wait=1`, feedKey),
    );
    // Every change deleted by retention: a cursor from before them has expired.
    await a.storage.pruneChangesBefore('9999-01-01T00:00:00Z', 1_000_000);
    record(
      'listChanges',
      'a cursor older than the retained history',
      await get(`${a.url}/v1/changes?since=2000-01-01T00:00:00Z&since_id=1`, { Authorization: await keyOf(a, demoA.merchant_id) }),
    );

    // The full server: no place for an export, and (once a long-poll holds each live place) none for a stream.
    const keyB = await keyOf(b, demoB.merchant_id);
    record('exportProducts', 'the server holds its exports', await get(`${b.url}/v1/products/export`, { Authorization: keyB }));
    const productB = (await b.api('/v1/products?per_page=1', demoB.api_key)).body.data[0].id as number;
    const caughtUp = (await b.api('/v1/changes', demoB.api_key)).body as { next_since: string; next_id: number };
    const waitPath = `/v1/changes?since=${caughtUp.next_since}&since_id=${caughtUp.next_id}&wait=30`;
    // One kept-alive connection per operation, each busy with a long-poll when the server starts closing.
    const agents = OPERATIONS.map(() => new http.Agent({ keepAlive: true, maxSockets: 1 }));
    const waiting = agents.map((agent) => get(`${b.url}${waitPath}`, { Authorization: keyB }, agent));
    while (b.service.liveFeed.connections < OPERATIONS.length) await new Promise((resolve) => setTimeout(resolve, 10));
    record(
      'listChanges',
      'the server holds its live connections',
      await get(`${b.url}/v1/changes`, { Authorization: keyB, Accept: 'text/event-stream' }),
    );
    const closing = b.server.close(2_000);
    bClosed = true;
    for (const answer of await Promise.all(waiting)) expect(answer.status).toBe(200);
    const paths: Record<OperationId, string> = {
      listProducts: '/v1/products',
      exportProducts: '/v1/products/export',
      getProduct: `/v1/products/${productB}`,
      listPrices: `/v1/prices?ids=${productB}`,
      listStores: '/v1/stores',
      listChanges: '/v1/changes',
      getMedia: `/media/${mediaKey}`,
    };
    for (const [index, operationId] of OPERATIONS.entries()) {
      const refused = await get(`${b.url}${paths[operationId]}`, { Authorization: keyB }, agents[index]);
      expect(refused.headers.connection).toBe('close');
      record(operationId, 'the server shutting down', refused);
    }
    for (const agent of agents) agent.destroy();
    await closing;
  }, 120_000);

  function resolve(value: Json): Json {
    let current = value;
    while (current?.$ref) {
      current = (current.$ref as string)
        .slice(2)
        .split('/')
        .reduce((node: Json, key) => node[key.replace(/~1/g, '/').replace(/~0/g, '~')], served);
    }
    return current;
  }

  function operation(operationId: OperationId): Json {
    for (const item of Object.values(served.paths as Json)) if (item.get?.operationId === operationId) return item.get as Json;
    throw new Error(`${operationId} is not in /openapi.json`);
  }

  it.each(OPERATIONS)('%s: the server answers every status the document lists, and only those', (operationId) => {
    const documented = Object.keys(operation(operationId).responses as Json).sort();
    const answered = [...new Set(answers.filter((x) => x.operationId === operationId).map((x) => String(x.status)))].sort();
    expect(answered).toEqual(documented);
  });

  it.each(OPERATIONS)(
    '%s: each answer sends the headers the document declares for it, and declares the headers it sends',
    (operationId) => {
      const responses = operation(operationId).responses as Json;
      for (const answer of answers.filter((x) => x.operationId === operationId)) {
        const where = `${operationId} ${answer.status} (${answer.scenario})`;
        const declared = Object.fromEntries(
          Object.entries((resolve(responses[String(answer.status)] ?? {}).headers ?? {}) as Json).map(([name, header]) => [
            name.toLowerCase(),
            resolve(header as Json),
          ]),
        );
        for (const [name, header] of Object.entries(declared)) {
          if (header.required) expect(answer.headers, `${where}: declares ${name} required`).toHaveProperty([name]);
        }
        const undeclared = Object.keys(answer.headers).filter((name) => !FRAMING.has(name) && !(name in declared));
        expect(undeclared, `${where}: sends headers the document does not declare`).toEqual([]);
      }
    },
  );

  it.each(OPERATIONS)('%s: every header the document declares is sent by some answer of that status', (operationId) => {
    const responses = operation(operationId).responses as Json;
    for (const [status, response] of Object.entries(responses)) {
      const ofStatus = answers.filter((x) => x.operationId === operationId && String(x.status) === status);
      for (const name of Object.keys((resolve(response as Json).headers ?? {}) as Json)) {
        expect(
          ofStatus.some((x) => name.toLowerCase() in x.headers),
          `${operationId} ${status} declares ${name}, which none of ${ofStatus.map((x) => x.scenario).join(', ')} sent`,
        ).toBe(true);
      }
    }
  });
});
