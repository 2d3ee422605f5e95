// The live change feed (openapi/paths/v1_changes.yaml, "Waiting for the next change"):
// `wait=N` long-polls and `Accept: text/event-stream` streams, over real HTTP on the project's
// engine. Every window a waiting client gets is compared with what a plain poll from the same cursor
// answers. The fallback poll (3 s) is slower than any wake-up the tests wait for and faster than the
// longest wait (5 s); the feed's clock is a fake one (so rate-limit buckets only refill when a test
// moves it), and a few waits of 1-5 s are real: the time-outs under test.
import http from 'node:http';
import zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ProductSourceInput } from '../../src/catalog/product-sources.js';
import { pruneExpiredChanges } from '../../src/changes/retention.js';
import { LIVE_RETRY_AFTER_SECONDS } from '../../src/changes/live.js';
import { loadConfig } from '../../src/config.js';
import { createService } from '../../src/service.js';
import { fakeClock, type FakeClock } from '../support/clock.js';
import { publicContract } from '../support/contract.js';
import { severalConnections } from '../support/engine.js';
import { sample } from '../support/metrics.js';
import { startTestService, type TestService } from '../support/service.js';

interface ChangePage {
  changes: { product_id: number; change_type: string; created_at: string }[];
  next_since: string;
  next_id: number;
  store: string;
}

const MAX_WAIT_SECONDS = 5;
const POLL_INTERVAL_MS = 3000;
const BURST = 30;

const source = (cost: string): ProductSourceInput => ({
  content: { de: { title: 'Zelt', description: null } },
  offers: [{ supplier_ref: 'alpine', quantity: 4, cost, currency: 'EUR' }],
});

let clock: FakeClock;
let service: TestService;

beforeAll(async () => {
  clock = fakeClock();
  service = await startTestService({
    now: clock.now,
    config: {
      // Windows of 2 changes: a stream that is behind sends several.
      changes: {
        ...loadConfig({}).changes,
        feedWindow: 2,
        maxWaitSeconds: MAX_WAIT_SECONDS,
        heartbeatSeconds: 1,
        livePollIntervalMs: POLL_INTERVAL_MS,
      },
      // The clock stands still: each key has BURST requests until a test moves it.
      rateLimit: { burst: BURST, perSecond: 1 },
      // A window of one change is coded too, so long-polls' coded answers are exercised.
      compressionMinBytes: 64,
    },
  });
});
afterAll(() => service?.close());

/** A merchant with one store `de` and one product; each `change()` re-prices it: one `price` change. */
async function shop(name: string) {
  const { admin } = service;
  const merchant = await admin.createMerchant({ name });
  await admin.upsertStore(merchant.id, 'de', {
    name: 'DE',
    locale: 'de-DE',
    currency: 'EUR',
    is_default: true,
    active: true,
    exclude_out_of_stock: false,
  });
  await admin.upsertSupplier(merchant.id, 'alpine', 'Alpine');
  await admin.createCustomerGroup(merchant.id, 'retail');
  let cost = 10;
  const product = await admin.upsertProduct(merchant.id, 'tent', source(`${cost}.00`));
  return {
    id: merchant.id,
    productId: product.id,
    key: await service.keyFor(merchant.id),
    change: async () => {
      await admin.upsertProduct(merchant.id, 'tent', source(`${++cost}.00`));
    },
  };
}

const cursorQuery = (page: Pick<ChangePage, 'next_since' | 'next_id'>) =>
  `since=${encodeURIComponent(page.next_since)}&since_id=${page.next_id}`;

/** The feed as a plain poll answers it now (the model every live answer is compared with). */
async function poll(key: string, query: string): Promise<ChangePage> {
  const response = await service.api(`/v1/changes?store=de${query ? `&${query}` : ''}`, key);
  expect(response.status, response.text).toBe(200);
  return response.body as ChangePage;
}

/** Polls from the beginning until caught up: the cursor after the last change. */
async function caughtUp(key: string): Promise<ChangePage> {
  let page = await poll(key, '');
  while (page.changes.length > 0) page = await poll(key, cursorQuery(page));
  return page;
}

/**
 * Tests that need the commit's wake-up: on PostgreSQL it comes through a listening connection of
 * its own (LISTEN/NOTIFY), which the embedded pglite does not have; there only the fallback poll answers.
 */
const wokenByCommits = severalConnections;

/** Resolves once `count` clients wait in the service's live feed. */
const waiting = (count: number) => expect.poll(() => service.service.liveFeed.waitingClients, { timeout: 5000 }).toBe(count);

/** A stream's events as they arrive: comments (`: …`) and events (`id`, `data`). */
class EventReader {
  private buffer = '';
  private streamReader: ReadableStreamDefaultReader<Uint8Array> | undefined;
  private readonly decoder = new TextDecoder();

  constructor(
    readonly response: Response,
    readonly controller: AbortController,
  ) {}

  private get reader(): ReadableStreamDefaultReader<Uint8Array> {
    this.streamReader ??= this.response.body!.getReader();
    return this.streamReader;
  }

  /** The next block (up to a blank line), or undefined when the stream ended. */
  async next(): Promise<{ comment?: string; id?: string; data?: string } | undefined> {
    for (;;) {
      const end = this.buffer.indexOf('\n\n');
      if (end >= 0) {
        const block = this.buffer.slice(0, end);
        this.buffer = this.buffer.slice(end + 2);
        const event: { comment?: string; id?: string; data?: string } = {};
        for (const line of block.split('\n')) {
          if (line.startsWith(':')) event.comment = line.slice(1).trim();
          else if (line.startsWith('id: ')) event.id = line.slice(4);
          else if (line.startsWith('data: ')) event.data = line.slice(6);
        }
        return event;
      }
      const { done, value } = await this.reader.read();
      if (done) return undefined;
      this.buffer += this.decoder.decode(value, { stream: true });
    }
  }

  /** The next event that carries a window (skipping comments). */
  async nextWindow(): Promise<{ id: string; page: ChangePage }> {
    for (;;) {
      const event = await this.next();
      if (!event) throw new Error('the stream ended');
      if (event.data) return { id: event.id!, page: JSON.parse(event.data) as ChangePage };
    }
  }

  close(): void {
    this.controller.abort();
  }
}

/** Opens a stream of the feed; its status, type and headers pass the contract harness. */
async function openStream(key: string, query: string, headers: Record<string, string> = {}): Promise<EventReader> {
  const controller = new AbortController();
  const url = `${service.url}/v1/changes?store=de${query ? `&${query}` : ''}`;
  const response = await fetch(url, {
    headers: { Authorization: `Bearer ${key}`, Accept: 'text/event-stream', ...headers },
    signal: controller.signal,
  });
  // The body never ends: the harness checks the status, content type and headers it documents.
  publicContract.validateResponse(
    'GET',
    url,
    response.status,
    response.headers,
    response.status === 200 ? '' : await response.clone().text(),
  );
  return new EventReader(response, controller);
}

/** The service's own count of statement runs by name (/metrics, cps_db_statement_duration_seconds). */
async function statementRuns(name: string): Promise<number> {
  return (await statementsRun(name))[0]!;
}

/** The counts of several statements from one scrape. */
async function statementsRun(...names: string[]): Promise<number[]> {
  const exposition = await (await service.fetch(`${service.url}/metrics`)).text();
  const { engine } = service.database;
  return names.map((statement) => sample(exposition, 'cps_db_statement_duration_seconds_count', { engine, statement }) ?? 0);
}

/**
 * Once the listening connection is up and the looks its first wake-up made (one at every waiting
 * store) are done: the window reads' count stands still for 250 ms.
 */
async function readsSettled(): Promise<void> {
  await expect.poll(() => service.storage.wakeupsLive?.() ?? true).toBe(true);
  for (let last = -1; ; ) {
    const now = await statementRuns('changes.changesAfter');
    if (now === last) return;
    last = now;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** What RateLimit says is left in the key's bucket after one more request. */
async function tokensLeft(key: string): Promise<number> {
  const response = await service.api('/v1/stores', key);
  return Number(/r=([0-9]+)/.exec(response.headers.get('RateLimit') ?? '')?.[1]);
}

/** A GET as it arrives on the wire: the status, the raw header fields and the body bytes (still coded). */
function rawGet(
  pathAndQuery: string,
  headers: Record<string, string>,
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }> {
  return new Promise((resolve, reject) => {
    http
      .get(`${service.url}${pathAndQuery}`, { headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
        res.on('error', reject);
      })
      .on('error', reject);
  });
}

describe('long-poll: GET /v1/changes?wait=N', () => {
  wokenByCommits.it('answers as soon as a change is recorded for the store, with the window a poll from the cursor gets', async () => {
    const merchant = await shop('Long-poll Outfitters');
    const cursor = await caughtUp(merchant.key);
    const started = Date.now();
    const answer = service.api(`/v1/changes?store=de&${cursorQuery(cursor)}&wait=30`, merchant.key);
    await waiting(1);
    await merchant.change();
    const response = await answer;
    // Not the time-out (5 s, the configured maximum), not the fallback poll (3 s after it began waiting): the commit woke it.
    expect(Date.now() - started).toBeLessThan(POLL_INTERVAL_MS - 1000);
    expect(response.status).toBe(200);
    const page = response.body as ChangePage;
    expect(page.changes).toEqual([{ product_id: merchant.productId, change_type: 'price', created_at: expect.any(String) }]);
    expect(page).toEqual(await poll(merchant.key, cursorQuery(cursor)));
  });

  wokenByCommits.it(
    "writes a woken long-poll's answer with the headers of a poll's answer, name for name, coded as asked, and logs and counts it",
    async () => {
      const merchant = await shop('Header Outfitters');
      const cursor = await caughtUp(merchant.key);
      const answered = () =>
        sample(exposition, 'cps_http_request_duration_seconds_count', { method: 'GET', route: '/v1/changes', status: '200' }) ?? 0;
      let exposition = await (await service.fetch(`${service.url}/metrics`)).text();
      let answeredBefore = answered();
      for (const coding of ['identity', 'gzip', 'br']) {
        const path = `/v1/changes?store=de&${cursorQuery(cursor)}`;
        const sent = { Authorization: `Bearer ${merchant.key}`, 'Accept-Encoding': coding, 'X-Request-Id': `live-${coding}` };
        const answer = rawGet(`${path}&wait=30`, sent);
        await waiting(1);
        await merchant.change();
        const live = await answer;
        const polled = await rawGet(path, sent);
        expect(live.status).toBe(200);
        // The same header names (Date, X-Request-Id, RateLimit, RateLimit-Policy, Vary, Content-Type, Content-Length, Content-Encoding when coded).
        expect(Object.keys(live.headers).sort()).toEqual(Object.keys(polled.headers).sort());
        for (const name of ['content-type', 'vary', 'ratelimit-policy', 'content-encoding', 'x-request-id', 'connection', 'keep-alive']) {
          expect(live.headers[name], name).toEqual(polled.headers[name]);
        }
        expect(live.headers['x-request-id']).toBe(`live-${coding}`);
        expect(live.headers['content-encoding']).toBe(coding === 'identity' ? undefined : coding);
        expect(Number(live.headers['content-length'])).toBe(live.body.length);
        expect(new Date(live.headers.date!).getTime()).not.toBeNaN();
        expect(live.headers.ratelimit).toMatch(/^"default";r=[0-9]+;t=[0-9]+$/);
        const decoded = coding === 'gzip' ? zlib.gunzipSync(live.body) : coding === 'br' ? zlib.brotliDecompressSync(live.body) : live.body;
        const page = JSON.parse(decoded.toString('utf8')) as ChangePage;
        expect(page.changes).toEqual([{ product_id: merchant.productId, change_type: 'price', created_at: expect.any(String) }]);
        expect(page).toEqual(await poll(merchant.key, `${cursorQuery(cursor)}`));
        publicContract.validateResponse(
          'GET',
          `${service.url}${path}&wait=30`,
          live.status,
          new Headers(live.headers as Record<string, string>),
          decoded.toString('utf8'),
        );
        // Counted once as a 200 of /v1/changes (the long-poll, the poll beside it, the poll just above).
        exposition = await (await service.fetch(`${service.url}/metrics`)).text();
        expect(answered() - answeredBefore).toBe(3);
        answeredBefore = answered();
        cursor.next_since = page.next_since;
        cursor.next_id = page.next_id;
      }
    },
  );

  it('answers at once, as a poll does, when changes already follow the cursor', async () => {
    const merchant = await shop('Behind Outfitters');
    const cursor = await caughtUp(merchant.key);
    await merchant.change();
    const started = Date.now();
    const response = await service.api(`/v1/changes?store=de&${cursorQuery(cursor)}&wait=30`, merchant.key);
    expect(Date.now() - started).toBeLessThan(1000);
    expect(response.body).toEqual(await poll(merchant.key, cursorQuery(cursor)));
    expect((response.body as ChangePage).changes).toHaveLength(1);
  });

  it('answers the empty window with the cursor it was sent once wait seconds passed, the wait clamped to the configured maximum', async () => {
    const merchant = await shop('Quiet Outfitters');
    const cursor = await caughtUp(merchant.key);
    for (const [wait, seconds] of [
      [1, 1],
      [300, MAX_WAIT_SECONDS],
    ] as const) {
      const started = Date.now();
      const response = await service.api(`/v1/changes?store=de&${cursorQuery(cursor)}&wait=${wait}`, merchant.key);
      const elapsed = Date.now() - started;
      expect(elapsed).toBeGreaterThanOrEqual(seconds * 1000 - 50);
      expect(elapsed).toBeLessThan(seconds * 1000 + 1500);
      expect(response.body).toEqual({ changes: [], next_since: cursor.next_since, next_id: cursor.next_id, store: 'de' });
    }
  });

  it('refuses a wait that is not a non-negative integer with 400 naming it', async () => {
    const merchant = await shop('Bad Wait Outfitters');
    for (const wait of ['-1', 'soon', '2.5']) {
      const response = await service.api(`/v1/changes?store=de&wait=${wait}`, merchant.key);
      expect(response.status).toBe(400);
      expect(response.body.invalid_params).toEqual([expect.objectContaining({ name: 'wait', in: 'query' })]);
    }
  });

  wokenByCommits.it(
    'looks once per store per wake-up, however many clients wait (long-polls and streams), and wakes only the store that changed',
    async () => {
      const busy = await shop('Busy Outfitters');
      const calm = await shop('Calm Outfitters');
      const busyCursor = await caughtUp(busy.key);
      const calmCursor = await caughtUp(calm.key);
      // 30 long-polls and 10 streams on the busy store (two keys: the per-key cap is 20), 5 long-polls on the calm one.
      const keys = [busy.key, await service.keyFor(busy.id)];
      const busyAnswers = Array.from({ length: 30 }, (_, i) =>
        service.api(`/v1/changes?store=de&${cursorQuery(busyCursor)}&wait=30`, keys[i < 20 ? 0 : 1]!),
      );
      const streams = await Promise.all(Array.from({ length: 10 }, () => openStream(keys[1]!, cursorQuery(busyCursor))));
      const calmAnswers = Array.from({ length: 5 }, () => service.api(`/v1/changes?store=de&${cursorQuery(calmCursor)}&wait=30`, calm.key));
      await waiting(45);
      await readsSettled();
      const [windowsBefore = 0, horizonsBefore = 0] = await statementsRun('changes.changesAfter', 'changes.changeHorizon');
      await busy.change();
      const answers = await Promise.all(busyAnswers);
      const events = await Promise.all(streams.map((stream) => stream.nextWindow()));
      // The streams, caught up by that window, wait again without a read of their own.
      await waiting(15);
      // One window read for the 40 (and its horizon), not 40; and the fallback poll's look at each
      // of the two stores, when its timer (every POLL_INTERVAL_MS) ran meanwhile (at most once: this takes less).
      const [windows = 0, horizons = 0] = await statementsRun('changes.changesAfter', 'changes.changeHorizon');
      for (const reads of [windows - windowsBefore, horizons - horizonsBefore]) {
        expect(reads).toBeGreaterThanOrEqual(1);
        expect(reads).toBeLessThanOrEqual(3);
      }
      const expected = await poll(busy.key, cursorQuery(busyCursor));
      expect(expected.changes).toHaveLength(1);
      for (const answer of answers) expect(answer.body).toEqual(expected);
      for (const event of events) expect(event.page).toEqual(expected);
      for (const stream of streams) stream.close();
      await waiting(5);
      // The calm store's clients still wait, until their own store changes.
      expect(service.service.liveFeed.waitingClients).toBe(5);
      await calm.change();
      const calmExpected = await poll(calm.key, cursorQuery(calmCursor));
      expect(calmExpected.changes).toHaveLength(1);
      for (const answer of await Promise.all(calmAnswers)) expect(answer.body).toEqual(calmExpected);
    },
  );

  it('holds at most the configured number of live connections per key: one more answers 429 with Retry-After and costs no request', async () => {
    const merchant = await shop('Capped Outfitters');
    const cursor = await caughtUp(merchant.key);
    const key = await service.keyFor(merchant.id);
    const cap = service.config.changes.livePerKey;
    const controllers = Array.from({ length: cap }, () => new AbortController());
    const held = controllers.map((controller) =>
      fetch(`${service.url}/v1/changes?store=de&${cursorQuery(cursor)}&wait=30`, {
        headers: { Authorization: `Bearer ${key}` },
        signal: controller.signal,
      }).catch(() => undefined),
    );
    await waiting(cap);
    const refused = await service.api(`/v1/changes?store=de&${cursorQuery(cursor)}&wait=30`, key);
    expect(refused.status).toBe(429);
    expect(refused.body.code).toBe('rate_limited');
    // Spread at random from LIVE_RETRY_AFTER_SECONDS to twice it (shared/slots.ts).
    const retryAfter = Number(refused.headers.get('Retry-After'));
    expect(retryAfter).toBeGreaterThanOrEqual(LIVE_RETRY_AFTER_SECONDS);
    expect(retryAfter).toBeLessThanOrEqual(2 * LIVE_RETRY_AFTER_SECONDS);
    const stream = await openStream(key, cursorQuery(cursor));
    expect(stream.response.status).toBe(429);
    // The cap's refusals took nothing: the bucket lost the `cap` waiting polls and this request only.
    expect(await tokensLeft(key)).toBe(BURST - cap - 1);
    // Another key of the same merchant is not affected; a client that goes away frees its place.
    expect((await service.api(`/v1/changes?store=de&${cursorQuery(cursor)}`, merchant.key)).status).toBe(200);
    controllers[0]!.abort();
    await waiting(cap - 1);
    const admitted = service.api(`/v1/changes?store=de&${cursorQuery(cursor)}&wait=1`, key);
    await waiting(cap);
    expect((await admitted).status).toBe(200);
    await merchant.change();
    await Promise.all(held);
    await waiting(0);
  });

  severalConnections.it('answers a change another process recorded: by NOTIFY on PostgreSQL, by the fallback poll on SQLite', async () => {
    const merchant = await shop('Elsewhere Outfitters');
    const cursor = await caughtUp(merchant.key);
    // A second storage on the same database is what another process's writes look like to this one.
    const other = createService(service.config, { storage: await service.database.open() });
    try {
      const started = Date.now();
      const answer = service.api(`/v1/changes?store=de&${cursorQuery(cursor)}&wait=30`, merchant.key);
      await waiting(1);
      await other.admin.upsertProduct(merchant.id, 'tent', source('99.00'));
      const page = (await answer).body as ChangePage;
      expect(page.changes.map((c) => c.product_id)).toEqual([merchant.productId]);
      // PostgreSQL: the other storage's NOTIFY reaches this process at its COMMIT. SQLite: the
      // other storage tells only its own listeners, and this process reads the store on its poll
      // (within 3 s: before the 5 s wait is over, or the answer would be empty).
      if (service.database.engine === 'postgres') expect(Date.now() - started).toBeLessThan(POLL_INTERVAL_MS - 1000);
    } finally {
      await other.close();
    }
  });
});

describe('stream: Accept: text/event-stream', () => {
  wokenByCommits.it(
    'streams each non-empty window as an event whose id is the cursor after it, behind or live, as polls from the same cursors answer',
    async () => {
      const merchant = await shop('Stream Outfitters');
      const start = await caughtUp(merchant.key);
      for (let i = 0; i < 3; i++) await merchant.change(); // 3 changes: windows of 2 and 1
      const stream = await openStream(merchant.key, cursorQuery(start));
      expect(stream.response.headers.get('content-type')).toBe('text/event-stream');
      expect(await stream.next()).toEqual({ comment: 'connected' });
      const first = await stream.nextWindow();
      const second = await stream.nextWindow();
      const polled = [await poll(merchant.key, cursorQuery(start))];
      polled.push(await poll(merchant.key, cursorQuery(polled[0]!)));
      expect([first.page, second.page]).toEqual(polled);
      expect([first.id, second.id]).toEqual(polled.map((page) => `${page.next_since}/${page.next_id}`));
      // Caught up: it waits with the store's other clients, and sends the next change when it is recorded.
      await waiting(1);
      await merchant.change();
      const live = await stream.nextWindow();
      expect(live.page).toEqual(await poll(merchant.key, cursorQuery(second.page)));
      expect(live.page.changes).toHaveLength(1);
      stream.close();
      await waiting(0);
    },
  );

  it('resumes exactly after the window Last-Event-ID names, whatever since says', async () => {
    const merchant = await shop('Resume Outfitters');
    const start = await caughtUp(merchant.key);
    for (let i = 0; i < 4; i++) await merchant.change();
    const first = await poll(merchant.key, cursorQuery(start));
    // Reconnecting with the URL it was opened with (here: from the start of the history), as EventSource does.
    const stream = await openStream(merchant.key, '', { 'Last-Event-ID': `${first.next_since}/${first.next_id}` });
    expect(stream.response.status).toBe(200);
    const resumed = await stream.nextWindow();
    expect(resumed.page).toEqual(await poll(merchant.key, cursorQuery(first)));
    stream.close();
  });

  it('sends a heartbeat comment when it has had nothing to send for the heartbeat interval', async () => {
    const merchant = await shop('Heartbeat Outfitters');
    const stream = await openStream(merchant.key, cursorQuery(await caughtUp(merchant.key)));
    expect(await stream.next()).toEqual({ comment: 'connected' });
    const started = Date.now();
    expect(await stream.next()).toEqual({ comment: 'heartbeat' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    expect(await stream.next()).toEqual({ comment: 'heartbeat' });
    stream.close();
  });

  it('streams only for an Accept that prefers text/event-stream: one listing JSON alike gets the JSON window', async () => {
    const merchant = await shop('Negotiating Outfitters');
    const cursor = await caughtUp(merchant.key);
    for (const accept of ['application/json, text/event-stream', 'text/event-stream;q=0.5, */*', '*/*']) {
      const response = await service.api(`/v1/changes?store=de&${cursorQuery(cursor)}`, merchant.key, { headers: { Accept: accept } });
      expect(response.headers.get('content-type'), accept).toBe('application/json');
      expect(response.body).toEqual({ ...cursor, store: 'de' });
    }
    const stream = await openStream(merchant.key, cursorQuery(cursor), { Accept: 'application/json;q=0.9, text/event-stream' });
    expect(stream.response.headers.get('content-type')).toBe('text/event-stream');
    stream.close();
  });

  it('answers a malformed Last-Event-ID, an unknown store and an expired cursor with their errors before any stream', async () => {
    const merchant = await shop('Refused Stream Outfitters');
    const malformed = await openStream(merchant.key, '', { 'Last-Event-ID': '48213' });
    expect(malformed.response.status).toBe(400);
    expect((await malformed.response.json()).invalid_params).toEqual([expect.objectContaining({ name: 'last-event-id', in: 'header' })]);
    const response = await fetch(`${service.url}/v1/changes?store=zz`, {
      headers: { Authorization: `Bearer ${merchant.key}`, Accept: 'text/event-stream' },
    });
    publicContract.validateResponse(
      'GET',
      `${service.url}/v1/changes?store=zz`,
      response.status,
      response.headers,
      await response.clone().text(),
    );
    expect(response.status).toBe(404);
    expect((await response.json()).code).toBe('store_not_found');
    // Retention deletes every change recorded so far (as 31 days later): a cursor before them expired.
    await pruneExpiredChanges(service.storage, new Date(clock.ms + 31 * 24 * 3600 * 1000), 30);
    const expired = await openStream(merchant.key, 'since=2025-01-01T00:00:00Z&since_id=0');
    expect(expired.response.status).toBe(410);
    expect((await expired.response.json()).code).toBe('cursor_expired');
  });

  wokenByCommits.it(
    "takes a request from the key's bucket for every event after the first, and holds the next event while the bucket is empty",
    async () => {
      const merchant = await shop('Metered Outfitters');
      const key = await service.keyFor(merchant.id);
      const stream = await openStream(key, cursorQuery(await caughtUp(merchant.key))); // 1 request
      await waiting(1);
      for (let i = 0; i < 3; i++) {
        await merchant.change();
        await stream.nextWindow(); // the first comes with the stream's request; the next two take one each
        await waiting(1);
      }
      expect(await tokensLeft(key)).toBe(BURST - 1 - 2 - 1);
      let left = BURST - 4;
      while (left > 0) left = await tokensLeft(key);
      await merchant.change();
      const held = stream.nextWindow();
      let sent = false;
      void held.then(() => {
        sent = true;
      });
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(sent).toBe(false);
      clock.advance(1000); // one request back in the bucket (1 per second)
      const event = await held;
      expect(event.page.changes).toHaveLength(1);
      // The event took the request that came back: the bucket is empty again.
      expect((await service.api('/v1/stores', key)).status).toBe(429);
      stream.close();
    },
  );
});
