// The live change feed in `serve` as deployed: the workers run in threads of their own
// (CPS_WORKERS=thread, the default), so the changes of a merchant-wide re-pricing are recorded by
// the publishing thread, while the feed's clients wait in the serving thread. The thread's commits
// must wake them (SQLite: the thread tells the serving thread; PostgreSQL: its NOTIFY), well before
// the fallback poll, which is a minute here. On SIGTERM a waiting long-poll answers at once, a
// stream ends, and serve exits 0 long before its grace period. One `serve` in a child process, on
// the project's engine.
import { afterAll, expect } from 'vitest';
import { freePort, ServiceProcess, until } from '../faults/harness.js';
import { onTestDatabase, scenarioIt } from '../faults/test-database.js';
import { contractFetch } from '../support/contract.js';
import { sample } from '../support/metrics.js';

const ADMIN_TOKEN = 'adm_live_serve_test_token_01234';
const GRACE_MS = 30_000;

interface ChangePage {
  changes: { product_id: number; change_type: string }[];
  next_since: string;
  next_id: number;
  store: string;
}

let serve: ServiceProcess | undefined;
afterAll(async () => {
  await serve?.stop('SIGKILL');
});

const fetchChecked = contractFetch();

scenarioIt(
  "a re-pricing in the publishing thread wakes the serving thread's waiting clients; SIGTERM answers and ends them at once and exits 0",
  async () => {
    await onTestDatabase(async (database) => {
      const port = await freePort();
      const base = `http://127.0.0.1:${port}`;
      serve = await ServiceProcess.start({
        CPS_DATABASE_URL: '',
        ...database.env,
        CPS_PORT: String(port),
        CPS_HOST: '127.0.0.1',
        CPS_ADMIN_TOKEN: ADMIN_TOKEN,
        CPS_DEMO_ON_EMPTY: 'false',
        CPS_IMAGE_MIRRORING: 'false',
        // Only a wake-up from the commit answers within the test: the fallback poll is a minute away.
        CPS_FEED_LIVE_POLL_MS: '60000',
        CPS_FEED_MAX_WAIT_SECONDS: '120',
        CPS_SHUTDOWN_GRACE_MS: String(GRACE_MS),
      });
      await until(
        () => serve!.output.includes('"msg":"listening"'),
        10_000,
        () => serve!.output,
      );
      const admin = async (method: string, pathname: string, body?: unknown) => {
        const response = await fetchChecked(`${base}/admin/v1${pathname}`, {
          method,
          headers: { Authorization: `Bearer ${ADMIN_TOKEN}`, 'Content-Type': 'application/json' },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
        if (!response.ok) throw new Error(`${method} ${pathname}: ${response.status} ${await response.text()}`);
        return response.status === 204 ? undefined : response.json();
      };
      const merchant = await admin('POST', '/merchants', { name: 'Threaded Outfitters' });
      const path = `/merchants/${merchant.id}`;
      await admin('PUT', `${path}/stores/de`, { name: 'DE', locale: 'de-DE', currency: 'EUR' });
      await admin('POST', `${path}/customer-groups`, { name: 'retail' });
      await admin('PUT', `${path}/suppliers/baltic`, { name: 'Baltic' });
      await admin('PUT', `${path}/exchange-rates/USD/EUR`, { rate: '0.90' });
      for (const ref of ['tent', 'stove', 'lamp']) {
        await admin('PUT', `${path}/products/${ref}`, {
          content: { de: { title: ref } },
          offers: [{ supplier_ref: 'baltic', quantity: 3, cost: '10.00', currency: 'USD' }],
        });
      }
      const key = (await admin('POST', `${path}/api-keys`, { name: 'live' })).key as string;
      const auth = { Authorization: `Bearer ${key}` };
      const feed = async (query: string) =>
        (await (await fetchChecked(`${base}/v1/changes?store=de&${query}`, { headers: auth })).json()) as ChangePage;
      let cursor = await feed('');
      while (cursor.changes.length > 0) cursor = await feed(`since=${cursor.next_since}&since_id=${cursor.next_id}`);
      const at = (page: ChangePage) => `since=${encodeURIComponent(page.next_since)}&since_id=${page.next_id}`;
      const liveConnections = async () => sample(await (await fetch(`${base}/metrics`)).text(), 'cps_feed_live_connections');

      // A long-poll and a stream wait in the serving thread.
      const longPoll = fetchChecked(`${base}/v1/changes?store=de&${at(cursor)}&wait=120`, { headers: auth }).then(
        (r) => r.json() as Promise<ChangePage>,
      );
      const stream = await fetch(`${base}/v1/changes?store=de&${at(cursor)}`, { headers: { ...auth, Accept: 'text/event-stream' } });
      expect(stream.headers.get('content-type')).toBe('text/event-stream');
      const events = stream.body!.pipeThrough(new TextDecoderStream()).getReader();
      let received = '';
      const nextEvent = async () => {
        for (;;) {
          const match = /(?:^|\n\n)(id: [^\n]*\ndata: [^\n]*)\n\n/.exec(received);
          if (match) {
            received = received.slice(match.index + match[0].length);
            return JSON.parse(match[1]!.split('\ndata: ')[1]!) as ChangePage;
          }
          const { done, value } = await events.read();
          if (done) return undefined;
          received += value;
        }
      };
      await expect.poll(liveConnections, { timeout: 5000 }).toBe(2);

      // A merchant-wide re-pricing: serve hands its publish run to the publishing thread, which records the changes.
      const started = Date.now();
      await admin('PUT', `${path}/exchange-rates/USD/EUR`, { rate: '0.95' });
      const answered = await longPoll;
      expect(Date.now() - started).toBeLessThan(10_000);
      const repriced = { changes: expect.arrayContaining([expect.objectContaining({ change_type: 'price' })]), store: 'de' };
      expect(answered).toMatchObject(repriced);
      expect(answered.changes).toHaveLength(3);
      expect(answered).toEqual(await feed(at(cursor)));
      expect(await nextEvent()).toEqual(answered);

      // SIGTERM: the waiting long-poll answers its empty window, the stream ends, serve exits 0, all long before the grace period.
      const waitingPoll = fetchChecked(`${base}/v1/changes?store=de&${at(answered)}&wait=120`, { headers: auth }).then(
        (r) => r.json() as Promise<ChangePage>,
      );
      await expect.poll(liveConnections, { timeout: 5000 }).toBe(2);
      const stopping = Date.now();
      const exited = serve.stop('SIGTERM');
      expect(await waitingPoll).toEqual({ changes: [], next_since: answered.next_since, next_id: answered.next_id, store: 'de' });
      expect(await nextEvent()).toBeUndefined();
      await exited;
      expect(serve.child.exitCode).toBe(0);
      expect(Date.now() - stopping).toBeLessThan(5000);
      expect(serve.output).toContain('stopped cleanly');
    });
  },
  90_000,
);
